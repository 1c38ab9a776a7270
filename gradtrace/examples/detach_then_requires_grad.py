"""A detached leaf that requires grad: w.grad = [4, 7, 9], x.grad stays None."""

import torch

x = torch.tensor(5.0, requires_grad=True)
y = x * torch.tensor([2.0, 3.0, 5.0])
w = y.detach()
w.requires_grad_()
z = w @ torch.tensor([4.0, 7.0, 9.0])

z.backward()
