"""Activation checkpointing: the middle block's activations are recomputed in backward.

Source: modeled on the torch.utils.checkpoint documentation (checkpoint a segment of a
model with use_reentrant=False) and the checkpoint_sequential pattern, written for gradtrace.
Changes: a 3-block MLP on random data; the final gradient norms are printed as JSON.
"""

import json

import torch
import torch.nn as nn
from torch.utils.checkpoint import checkpoint

torch.manual_seed(0)
model = nn.Sequential(
    nn.Sequential(nn.Linear(8, 16), nn.Tanh()),
    nn.Sequential(nn.Linear(16, 16), nn.Tanh(), nn.Linear(16, 16), nn.Tanh()),
    nn.Linear(16, 1),
)
x = torch.randn(4, 8)
h = model[0](x)
h = checkpoint(model[1], h, use_reentrant=False)
loss = model[2](h).pow(2).mean()
loss.backward()
print(json.dumps({f"model.{n}": p.grad.norm().item() for n, p in model.named_parameters()}))
