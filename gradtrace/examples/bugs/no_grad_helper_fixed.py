"""The healthy twin of no_grad_helper.py: the helper keeps the graph (no decorator), so the
encoder learns through it. Expected: no warning or error."""

import torch
import torch.nn as nn

torch.manual_seed(0)
images = torch.randn(10, 16, 3, 8, 8)
labels = torch.randint(0, 4, (10, 16))


def flatten(x: torch.Tensor) -> torch.Tensor:
    return x.flatten(1)


def normalize(features: torch.Tensor) -> torch.Tensor:
    return features / features.norm(dim=1, keepdim=True).clamp(min=1e-6)


class Classifier(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.encoder = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.ReLU(),
                                     nn.AdaptiveAvgPool2d(2))
        self.head = nn.Linear(32, 4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(normalize(flatten(self.encoder(x))))


model = Classifier()
optimizer = torch.optim.Adam(model.parameters(), lr=1e-2)
for x, y in zip(images, labels, strict=True):
    optimizer.zero_grad()
    loss = nn.functional.cross_entropy(model(x), y)
    loss.backward()
    optimizer.step()
print(f"loss {loss.item():.4f}")
