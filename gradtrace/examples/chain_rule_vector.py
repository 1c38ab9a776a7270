"""Chain rule on a vector: z = (x + y)**2, so x.grad = 2 * (x + y)."""

import torch

torch.manual_seed(0)
x = torch.randn(32, requires_grad=True)
y = torch.randn(32)

t = x + y
z = t**2

z.backward(torch.ones_like(z))
expected = 2 * (x + y).detach()
