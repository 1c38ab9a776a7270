"""Second derivative: backward(create_graph=True), then d2z/dx2 = -0.12."""

import torch

x = torch.tensor(5.0, requires_grad=True)
y = x**3
z = torch.log(y)

z.backward(create_graph=True)
(x_2nd_grad,) = torch.autograd.grad(x.grad, x)
print("x_2nd_grad", x_2nd_grad)
