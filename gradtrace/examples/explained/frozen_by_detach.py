"""A leaf no root reaches: line 10 detaches the features, so the encoder weight never learns."""

import torch

torch.manual_seed(0)
x = torch.randn(4, 3)
w_enc = torch.randn(3, 2, requires_grad=True)
w_head = torch.randn(2, 1, requires_grad=True)
features = torch.tanh(x @ w_enc)
frozen = features.detach()
loss = (frozen @ w_head).pow(2).mean()
loss.backward()
