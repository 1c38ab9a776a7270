"""Two paths to x: 75 * 0.008 + 10 * 0.1, so x.grad = 1.6."""

import torch

x = torch.tensor(5.0, requires_grad=True)
y = x**3
w = x**2
z = torch.log(y) + torch.sqrt(w)

z.backward()
