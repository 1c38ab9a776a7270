"""A GAN step whose generated batch feeds both losses: lossD.backward() frees what lossG needs."""

import torch
from torch import nn

torch.manual_seed(0)
G = nn.Sequential(nn.Linear(4, 8), nn.Tanh())
D = nn.Sequential(nn.Linear(8, 1), nn.Sigmoid())
bce = nn.BCELoss()
noise, real = torch.randn(16, 4), torch.randn(16, 8)
fake = G(noise)
lossD = bce(D(real), torch.ones(16, 1)) + bce(D(fake), torch.zeros(16, 1))
lossD.backward()
lossG = bce(D(fake), torch.ones(16, 1))
lossG.backward()
