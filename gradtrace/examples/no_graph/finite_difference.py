"""Derivative by finite differences: dz/dx ~ 0.5999, with no autograd at all."""

import torch

x = torch.tensor(5.0)
y = x**3
z = torch.log(y)

x2 = torch.tensor(5.001)
y2 = x2**3
z2 = torch.log(y2)

dz_dx = (z2 - z) / (x2 - x)
print("dz/dx", dz_dx)
