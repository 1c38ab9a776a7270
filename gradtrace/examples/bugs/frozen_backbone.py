"""A backbone frozen on purpose (line 25, as its comment says), the optimizer given every
parameter anyway: harmless, the frozen ones never change. Expected: frozen-in-optimizer as
info only, at line 25."""

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
# freeze the pretrained backbone: only the classifier is fine-tuned
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
