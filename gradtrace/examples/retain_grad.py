"""retain_grad: non-leaf y and z keep .grad: y.grad = 0.008, z.grad = 1."""

import torch

x = torch.tensor(5.0, requires_grad=True)
y = x**3
z = torch.log(y)

y.retain_grad()
z.retain_grad()
z.backward()
