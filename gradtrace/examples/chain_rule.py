"""Chain rule: z = log(x**3), so dz/dx = dy/dx * dz/dy = 75 * 0.008 = 0.6."""

import torch

x = torch.tensor(5.0, requires_grad=True)
y = x**3
z = torch.log(y)

z.backward()
