"""The MLP before a change, for `gradtrace diff`: Linear, ReLU, Linear."""

import torch
from torch import nn

torch.manual_seed(0)
model = nn.Sequential(nn.Linear(3, 4), nn.ReLU(), nn.Linear(4, 1))
x = torch.randn(8, 3)
loss = model(x).pow(2).mean()
loss.backward()
