"""DDP's best-known failure: a parameter that no rank's loss uses.

Source: the DDP tutorial's ToyModel (pytorch/tutorials, intermediate_source/ddp_tutorial.rst)
with a layer added that forward never calls, as in the reports behind DDP's error message
(pytorch/pytorch#43259 and others). Without find_unused_parameters=True, DDP waits for
gradients of net3 that never come, and the second step's forward raises "Expected to have
finished reduction in the prior iteration". Run: torchrun --nproc-per-node 2 ddp_unused.py
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
        self.net3 = nn.Linear(10, 5)  # an auxiliary head, forgotten in forward

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
for _ in range(2):
    optimizer.zero_grad()
    outputs = ddp_model(torch.randn(20, 10))
    labels = torch.randn(20, 5)
    loss_fn(outputs, labels).backward()
    optimizer.step()
dist.destroy_process_group()
