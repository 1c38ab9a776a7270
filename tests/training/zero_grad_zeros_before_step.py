"""zero_grad(set_to_none=False) between backward() and step() (line 13): the optimizer steps
on zeros and never learns."""
import torch
import torch.nn as nn

torch.manual_seed(0)
model = nn.Linear(4, 1)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
x, y = torch.randn(32, 4), torch.randn(32, 1)
for _step in range(10):
    loss = nn.functional.mse_loss(model(x), y)
    loss.backward()
    opt.zero_grad(set_to_none=False)
    opt.step()
print(loss.item())
