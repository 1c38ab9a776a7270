"""Second derivative without create_graph: x.grad has no graph, grad() raises."""

import torch

x = torch.tensor(5.0, requires_grad=True)
y = x**3
z = torch.log(y)

z.backward()
x_2nd_grad = torch.autograd.grad(x.grad, x)
