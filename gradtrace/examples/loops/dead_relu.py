"""A dead ReLU layer: its bias starts at -10, so it outputs 0 for every input and learns nothing.

Written for gradtrace (issue 26): the "dying ReLU" problem, made certain. The block's
pre-activation is below 0 for every sample, so its ReLU passes back exactly 0 and the block's
weight and bias get a gradient of exactly zero in every pass, although they are on the graph
(their AccumulateGrad nodes run: .grad is a tensor of zeros, not None). The residual
connection keeps the rest of the network training.
Expected finding: dead-parameter on model.block.weight and model.block.bias from pass 1
(all 10 passes); not unreached-leaf, and not on model.fc1 or model.head.
Measured (torch 2.13 CPU): model.block.weight and model.block.bias .grad == 0 exactly in all
10 passes; the block's largest pre-activation is -8.89 at the start and -8.87 at the end;
model.fc1.weight's gradient norm is 1.3 to 1.67, model.head.weight's 1.8 to 2.9; loss
4.95 → 1.15.
"""

import torch
import torch.nn as nn


class ResidualMLP(nn.Module):
    """fc1 → ReLU, then a residual Linear+ReLU block, then the head."""

    def __init__(self) -> None:
        super().__init__()
        self.fc1 = nn.Linear(4, 32)
        self.block = nn.Linear(32, 32)
        self.head = nn.Linear(32, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = torch.relu(self.fc1(x))
        h = h + torch.relu(self.block(h))  # the block's ReLU is 0 everywhere: h passes unchanged
        return self.head(h)


torch.manual_seed(0)
model = ResidualMLP()
with torch.no_grad():
    model.block.bias.fill_(-10.0)  # every pre-activation is below 0: the ReLU is dead
opt = torch.optim.SGD(model.parameters(), lr=0.05)
x = torch.randn(64, 4)
y = x[:, :1] * 2.0 - x[:, 1:2]

for _ in range(10):
    opt.zero_grad()
    loss = nn.functional.mse_loss(model(x), y)
    loss.backward()
    opt.step()
print(f"loss {loss.item():.4f}")
with torch.no_grad():  # still below 0 after training: the block never woke up
    print(f"block pre-activation max {model.block(torch.relu(model.fc1(x))).max().item():.2f}")
