"""A root without a graph: line 7 re-wraps a Python number, so loss.backward() has nothing."""

import torch

w = torch.tensor([1.0, 2.0], requires_grad=True)
out = (w * 3).sum()
loss = torch.tensor(out.item())
loss.backward()
