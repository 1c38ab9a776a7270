"""torch.sigmoid's own backward: x.grad = sigmoid'(x) / 10 after z.mean().backward()."""

import torch

torch.manual_seed(0)
x = torch.randn(10)
x.requires_grad = True

z = torch.sigmoid(x)
z.mean().backward(retain_graph=True)
