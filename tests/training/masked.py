"""A causal-mask attention trained, then looked at after training: its -inf is the mask's
(healthy)."""
import torch

torch.manual_seed(0)
w = torch.randn(4, 4, requires_grad=True)
opt = torch.optim.SGD([w], lr=0.1)
x = torch.randn(5, 4)
mask = torch.triu(torch.ones(5, 5, dtype=torch.bool), 1)
for _step in range(5):
    scores = (x @ w @ x.T).masked_fill(mask, float("-inf"))
    loss = scores.softmax(-1).diagonal().sum()
    opt.zero_grad()
    loss.backward()
    opt.step()
# look at the attention after training
scores = (x @ w @ x.T).masked_fill(mask, float("-inf"))
attn = scores.softmax(-1)
print(attn[0])
