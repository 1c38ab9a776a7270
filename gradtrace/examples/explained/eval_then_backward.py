"""No graph at all: the loss was computed under torch.no_grad() (line 10), then backward."""

import torch
from torch import nn

torch.manual_seed(0)
model = nn.Linear(3, 1)
x = torch.randn(4, 3)

with torch.no_grad():
    loss = model(x).pow(2).mean()
loss.backward()
