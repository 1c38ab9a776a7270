"""Tensor flags without requires_grad: every tensor is a leaf with no grad_fn."""

import torch

x = torch.tensor(5.0)
y = x**3
z = torch.log(y)
