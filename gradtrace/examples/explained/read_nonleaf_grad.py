"""Reading .grad of a tensor computed from others: backward keeps .grad only for leaves, so
y.grad is None (line 11) unless y.retain_grad() ran before the backward."""

import torch

x = torch.tensor(2.0, requires_grad=True)
y = x**2
z = y * 3
z.backward()
print("x.grad", x.grad)  # dz/dx = 6x = 12
print("y.grad", y.grad)  # None: y is not a leaf
