"""DDP's silent failure: a layer used twice under reentrant activation checkpointing.

Source: the DDP tutorial's ToyModel (pytorch/tutorials, intermediate_source/ddp_tutorial.rst),
with net1 applied twice, each time inside torch.utils.checkpoint(..., use_reentrant=True), the
pattern DDP's documentation warns about (static_graph in torch/nn/parallel/distributed.py:
"reentrant backwards … activation checkpointing"). On torch 2.13 nothing fails: net1's
gradients are computed in the checkpoints' own backward passes, which DDP's reducer does not
wait for, so each rank keeps its own net1 .grad and the replicas drift apart; net2's .grad is
averaged as usual. use_reentrant=False or DDP(..., static_graph=True) fixes it.
Run: torchrun --nproc-per-node 2 ddp_reentrant.py
"""

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.optim as optim
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.checkpoint import checkpoint


class ToyModel(nn.Module):
    def __init__(self):
        super().__init__()
        self.net1 = nn.Linear(10, 10)
        self.relu = nn.ReLU()
        self.net2 = nn.Linear(10, 5)

    def forward(self, x):
        h = checkpoint(self.net1, x, use_reentrant=True)
        h = checkpoint(self.net1, self.relu(h), use_reentrant=True)  # net1 again
        return self.net2(h)


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
    # an input that requires grad: a reentrant checkpoint runs no backward without one
    outputs = ddp_model(torch.randn(20, 10, requires_grad=True))
    labels = torch.randn(20, 5)
    loss_fn(outputs, labels).backward()
    optimizer.step()
print({n: round(p.grad.norm().item(), 6) for n, p in model.named_parameters()})
dist.destroy_process_group()
