"""Per-sample clipped gradients by hand (naive DP-SGD)."""
import torch
import torch.nn as nn
import torch.nn.functional as F

torch.manual_seed(0)
model = nn.Linear(10, 2)
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
for _step in range(5):
    x, y = torch.randn(4, 10), torch.randint(0, 2, (4,))
    summed = [torch.zeros_like(p) for p in model.parameters()]
    for i in range(4):
        model.zero_grad()
        F.cross_entropy(model(x[i:i+1]), y[i:i+1]).backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        for s, p in zip(summed, model.parameters(), strict=False):
            s += p.grad
    for s, p in zip(summed, model.parameters(), strict=False):
        p.grad = s / 4
    optimizer.step()
print("ok")
