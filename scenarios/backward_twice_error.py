"""Backward twice (seed 003, Code 6): the first backward() freed the graph, the second raises."""

import torch

x = torch.tensor(5.0, requires_grad=True)
y = x**3
z = torch.log(y)

z.backward()
z.backward()
