"""The healthy twin of frozen_layer_left_in.py: every layer trains. Expected: no warning or
error."""

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
optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
images = torch.randn(8, 16, 3, 16, 16)
labels = torch.randint(0, 5, (8, 16))
for x, y in zip(images, labels, strict=True):
    optimizer.zero_grad()
    loss = nn.functional.cross_entropy(model(x), y)
    loss.backward()
    optimizer.step()
print(f"loss {loss.item():.4f}")
