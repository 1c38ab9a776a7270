"""The DDP tutorial's torchrun example (elastic_ddp.py), on CPU with gloo.

Source: pytorch/tutorials, intermediate_source/ddp_tutorial.rst ("Initialize DDP with
torch.distributed.run/torchrun": ToyModel and demo_basic). Adapted: the gloo backend and no
device ids (CPU); each rank's input seeded by its rank, so local gradients differ; the
gradients printed as JSON at the end. Run: torchrun --nproc-per-node 2 ddp_train.py
"""

import json

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


def demo_basic():
    dist.init_process_group("gloo")
    rank = dist.get_rank()
    print(f"Start running basic DDP example on rank {rank}.")

    torch.manual_seed(0)  # the same initial model on every rank (DDP broadcasts rank 0's)
    model = ToyModel()
    ddp_model = DDP(model)

    loss_fn = nn.MSELoss()
    optimizer = optim.SGD(ddp_model.parameters(), lr=0.001)

    torch.manual_seed(1 + rank)  # each rank its own batch
    optimizer.zero_grad()
    outputs = ddp_model(torch.randn(20, 10))
    labels = torch.randn(20, 5)
    loss_fn(outputs, labels).backward()
    print(json.dumps({f"model.{n}": p.grad.norm().item() for n, p in model.named_parameters()}))
    optimizer.step()
    dist.destroy_process_group()
    print(f"Finished running basic DDP example on rank {rank}.")


if __name__ == "__main__":
    demo_basic()
