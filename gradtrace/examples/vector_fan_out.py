"""A scalar fanned out to a vector: x.grad = 4*2 + 7*3 + 9*5 = 74."""

import torch

x = torch.tensor(5.0, requires_grad=True)
y = x * torch.tensor([2.0, 3.0, 5.0])
z = y @ torch.tensor([4.0, 7.0, 9.0])

y.retain_grad()
z.retain_grad()
z.backward()
