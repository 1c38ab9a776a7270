"""In place with +=: x * y saves both; `y += 1` changes y, made by y = w.exp()."""

import torch

w = torch.tensor([0.5, 1.0], requires_grad=True)
x = torch.tensor([2.0, 3.0], requires_grad=True)
y = w.exp()
z = x * y
y += 1
z.sum().backward()
