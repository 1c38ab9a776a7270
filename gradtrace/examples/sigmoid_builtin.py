"""requires_grad: x.requires_grad = True, so z.mean().backward() through torch.sigmoid's own
backward fills x.grad = sigmoid'(x) / 10."""

import torch

torch.manual_seed(0)
x = torch.randn(10)
x.requires_grad = True

z = torch.sigmoid(x)
z.mean().backward(retain_graph=True)
