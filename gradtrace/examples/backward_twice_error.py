"""Backward twice: the first backward() freed the graph, the second raises."""

import torch

x = torch.tensor(5.0, requires_grad=True)
y = x**3
z = torch.log(y)

z.backward()
z.backward()
