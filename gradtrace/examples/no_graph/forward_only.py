"""Forward only: nothing requires grad, so autograd records no graph."""

import torch

x = torch.tensor(5.0)
y = x**3
z = torch.log(y)

print("x", x)
print("y", y)
print("z", z)
