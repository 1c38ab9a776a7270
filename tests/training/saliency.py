"""Trained, then saliency maps of inputs after training (healthy)."""
import torch
import torch.nn as nn
import torch.nn.functional as F

torch.manual_seed(0)
model = nn.Sequential(nn.Linear(10, 16), nn.ReLU(), nn.Linear(16, 3))
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
for _step in range(10):
    x, y = torch.randn(8, 10), torch.randint(0, 3, (8,))
    optimizer.zero_grad()
    F.cross_entropy(model(x), y).backward()
    optimizer.step()
# saliency maps for a few inputs
maps = []
for _i in range(15):
    model.zero_grad()
    x = torch.randn(1, 10, requires_grad=True)
    model(x).max().backward()
    maps.append(x.grad.abs())
print(len(maps))
