"""Ranks whose graphs differ: rank 1 adds an auxiliary loss the others do not.

Source: the DDP tutorial's ToyModel and training step (pytorch/tutorials,
intermediate_source/ddp_tutorial.rst), with a branch on the rank such as the reports of
mismatched DDP graphs show (a regulariser or a logging path taken on one rank only). DDP still
averages every parameter's gradient; the ranks' graphs are not the same.
Run: torchrun --nproc-per-node 2 ddp_branch.py
"""

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.optim as optim
from torch.nn.parallel import DistributedDataParallel as DDP


class ToyModel(nn.Module):
    def __init__(self):
        super().__init__()
        self.net1 = nn.Linear(10, 10)
        self.relu = nn.ReLU()
        self.net2 = nn.Linear(10, 5)

    def forward(self, x):
        return self.net2(self.relu(self.net1(x)))


dist.init_process_group("gloo")
rank = dist.get_rank()
torch.manual_seed(0)
model = ToyModel()
ddp_model = DDP(model)
loss_fn = nn.MSELoss()
optimizer = optim.SGD(ddp_model.parameters(), lr=0.001)
torch.manual_seed(1 + rank)
optimizer.zero_grad()
outputs = ddp_model(torch.randn(20, 10))
loss = loss_fn(outputs, torch.randn(20, 5))
if rank == 1:
    loss = loss + 0.01 * outputs.abs().mean()  # an auxiliary loss on one rank only
loss.backward()
optimizer.step()
dist.destroy_process_group()
