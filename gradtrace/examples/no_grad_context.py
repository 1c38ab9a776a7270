"""torch.no_grad(): y and z get no grad_fn, so z.backward() raises."""

import torch

with torch.no_grad():
    q = torch.tensor(3.0, requires_grad=True)
    x = torch.tensor(5.0, requires_grad=True)
    y = x**q
    z = torch.log(y)

z.backward()
