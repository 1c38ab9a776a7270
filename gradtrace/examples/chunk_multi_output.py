"""A multi-output op: chunk makes one SplitBackward0 reached through outputs 0 and 1."""

import torch

x = torch.tensor([1.0, 2.0, 3.0, 4.0], requires_grad=True)
a, b = torch.chunk(x, 2)
c = a.sum() + b.sum()
