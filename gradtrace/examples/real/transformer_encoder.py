"""A 6-layer nn.TransformerEncoder (PyTorch's own modules, as in its docs), one backward."""

import torch
from torch import nn

torch.manual_seed(0)
layer = nn.TransformerEncoderLayer(d_model=32, nhead=4, dim_feedforward=64, dropout=0.0,
                                   batch_first=True)
model = nn.TransformerEncoder(layer, num_layers=6, enable_nested_tensor=False)
x = torch.randn(2, 5, 32)
loss = model(x).pow(2).mean()
loss.backward()
