"""Multi-task training: a shared trunk and a head per task, one optimizer each, every
optimizer stepped each step though only one head got a gradient (healthy)."""
import torch
import torch.nn as nn

torch.manual_seed(0)
trunk = nn.Linear(8, 16)
heads = nn.ModuleList(nn.Linear(16, 1) for _ in range(3))
opts = [torch.optim.Adam(trunk.parameters(), 1e-3)]
opts += [torch.optim.Adam(h.parameters(), 1e-3) for h in heads]
for step in range(30):
    task = step % 3
    x, y = torch.randn(8, 8), torch.randn(8, 1)
    for opt in opts:
        opt.zero_grad()
    loss = nn.functional.mse_loss(heads[task](torch.relu(trunk(x))), y)
    loss.backward()
    for opt in opts:
        opt.step()
print(loss.item())
