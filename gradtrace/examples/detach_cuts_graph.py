"""detach(): w = y.detach() cuts the graph, so z.backward() raises."""

import torch

x = torch.tensor(5.0, requires_grad=True)
y = x * torch.tensor([2.0, 3.0, 5.0])
w = y.detach()
z = w @ torch.tensor([4.0, 7.0, 9.0])

z.backward()
