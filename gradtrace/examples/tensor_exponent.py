"""A tensor exponent: y = x ** q, so q.grad = ln(5) ~ 1.6094, x.grad = 0.6."""

import torch

q = torch.tensor(3.0, requires_grad=True)
x = torch.tensor(5.0, requires_grad=True)
y = x**q
z = torch.log(y)

z.backward()
