"""A requires_grad_(False) left in from an experiment (line 25): the optimizer holds every
parameter, but the convolutional features never get a gradient and never change.
Expected: frozen-in-optimizer (warning) at line 25. The healthy twin is
frozen_layer_left_in_fixed.py; frozen_backbone.py freezes on purpose (info only)."""

import torch
import torch.nn as nn

torch.manual_seed(0)


class SmallCNN(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.features = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.ReLU(),
                                      nn.MaxPool2d(2), nn.Conv2d(8, 16, 3, padding=1),
                                      nn.ReLU(), nn.AdaptiveAvgPool2d(1), nn.Flatten())
        self.classifier = nn.Linear(16, 5)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.classifier(self.features(x))


model = SmallCNN()
model.features.requires_grad_(False)
optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
images = torch.randn(8, 16, 3, 16, 16)
labels = torch.randint(0, 5, (8, 16))
for x, y in zip(images, labels, strict=True):
    optimizer.zero_grad()
    loss = nn.functional.cross_entropy(model(x), y)
    loss.backward()
    optimizer.step()
print(f"loss {loss.item():.4f}")
