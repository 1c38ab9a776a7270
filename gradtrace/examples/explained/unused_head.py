"""Unused parameters: the model's aux head is computed but never reaches the loss."""

import torch
from torch import nn


class TwoHeads(nn.Module):
    def __init__(self):
        super().__init__()
        self.body = nn.Linear(4, 8)
        self.head = nn.Linear(8, 1)
        self.aux = nn.Sequential(nn.Linear(8, 8), nn.ReLU(), nn.Linear(8, 2))

    def forward(self, x):
        h = torch.relu(self.body(x))
        return self.head(h), self.aux(h)


torch.manual_seed(0)
model = TwoHeads()
out, aux = model(torch.randn(5, 4))
loss = out.pow(2).mean()
loss.backward()
