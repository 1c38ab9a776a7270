"""NaN in the forward: log(0) makes -inf on line 8; the mean passes it on, backward makes NaN."""

import torch

x = torch.tensor([1.0, 0.0, 2.0], requires_grad=True)
w = torch.tensor([0.5, 0.5, 0.5], requires_grad=True)
h = x * w
y = torch.log(h)
loss = y.mean()
loss.backward()
