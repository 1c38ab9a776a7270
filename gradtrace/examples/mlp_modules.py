"""A small MLP: parameters are named model.0.weight …, and pictures group nodes by module."""

import torch

torch.manual_seed(0)
model = torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.ReLU(), torch.nn.Linear(4, 1))
x = torch.randn(2, 3)
loss = model(x).pow(2).mean()
