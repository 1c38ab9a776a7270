"""Zeroing .grad between passes: x.grad is 0.6 after each backward()."""

import torch

x = torch.tensor(5.0, requires_grad=True)
y = x**3
z = torch.log(y)

z.backward(retain_graph=True)
x.grad.zero_()
z.backward()
