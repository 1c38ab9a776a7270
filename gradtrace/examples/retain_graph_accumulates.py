"""retain_graph: a second backward() adds to x.grad: 0.6, then 1.2."""

import torch

x = torch.tensor(5.0, requires_grad=True)
y = x**3
z = torch.log(y)

z.backward(retain_graph=True)
z.backward()
