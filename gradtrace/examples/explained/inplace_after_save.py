"""In place after save: sigmoid saves its output b (line 6); b.add_(1) on line 8 changes it."""

import torch

a = torch.randn(3, requires_grad=True)
b = a.sigmoid()
c = b * 2
b.add_(1)
c.sum().backward()
