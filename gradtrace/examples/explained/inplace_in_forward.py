"""An in-place change inside a module's forward(): the gate's sigmoid saves its result for
backward (line 14), then line 16 halves it in place; backward() at line 26 raises."""

import torch
import torch.nn as nn


class Gate(nn.Module):
    def __init__(self, width):
        super().__init__()
        self.fc = nn.Linear(width, width)

    def forward(self, h):
        g = torch.sigmoid(self.fc(h))
        out = g * h
        g.mul_(0.5)  # meant as a new tensor: g = g * 0.5
        return out


torch.manual_seed(0)
model = nn.Sequential(nn.Linear(4, 8), Gate(8), nn.Linear(8, 1))
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
x = torch.randn(16, 4)
optimizer.zero_grad()
loss = model(x).pow(2).mean()
loss.backward()
optimizer.step()
