"""A residual add written in place on forward's argument (line 33): backward raises.

Written for gradtrace (issue 53): a small ResNet whose blocks add their residual branch
with `x += residual`. x came in as forward's argument: the ReLU(inplace=True) of the
module before (the stem, or the block before) made it and saved it for its backward, and
each block's first conv saved it too, so the first backward raises "one of the variables
needed for gradient computation has been modified by an inplace operation" and the script
stops there, as under python (exit 2). Expected: inplace-modified at line 33, once for that
line however many blocks ran it. The healthy twin is inplace_residual_fixed.py.
"""

import torch
import torch.nn as nn

torch.manual_seed(0)


class BasicBlock(nn.Module):
    def __init__(self, channels: int) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(channels, channels, 3, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(channels)
        self.conv2 = nn.Conv2d(channels, channels, 3, padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(channels)
        self.relu = nn.ReLU(inplace=True)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        residual = self.conv1(x)
        residual = self.bn1(residual)
        residual = self.relu(residual)
        residual = self.conv2(residual)
        residual = self.bn2(residual)
        x += residual  # the skip connection, in place on forward's argument
        return self.relu(x)


class ResNet(nn.Module):
    def __init__(self, classes: int = 10) -> None:
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(3, 16, 3, padding=1, bias=False),
                                  nn.BatchNorm2d(16), nn.ReLU(inplace=True))
        self.layer1 = nn.Sequential(BasicBlock(16), BasicBlock(16), BasicBlock(16))
        self.pool = nn.AdaptiveAvgPool2d(1)
        self.fc = nn.Linear(16, classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.layer1(self.stem(x))
        return self.fc(torch.flatten(self.pool(x), 1))


model = ResNet()
optimizer = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
images, labels = torch.randn(4, 8, 3, 16, 16), torch.randint(0, 10, (4, 8))
for x, y in zip(images, labels, strict=True):
    optimizer.zero_grad()
    loss = nn.functional.cross_entropy(model(x), y)
    loss.backward()
    optimizer.step()
print(f"loss {loss.item():.4f}")
