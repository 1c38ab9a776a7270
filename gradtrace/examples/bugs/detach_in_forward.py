"""A classifier whose forward() detaches the backbone's features (line 34), left in from a
linear probe: only the head learns, the backbone never gets a gradient.
Expected: graph-cut (warning) at line 34, in Classifier.forward of model.model (the module
whose forward holds the line, not its head); `gradtrace dot` draws the cut. The healthy twin
is detach_in_forward_fixed.py."""

import torch
import torch.nn as nn
import torch.nn.functional as F

torch.manual_seed(0)


class Backbone(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.features = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.ReLU(),
                                      nn.Conv2d(8, 16, 3, padding=1), nn.ReLU(),
                                      nn.AdaptiveAvgPool2d(1), nn.Flatten())

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.features(x)


class Classifier(nn.Module):
    def __init__(self, classes: int) -> None:
        super().__init__()
        self.backbone = Backbone()
        self.head = nn.Sequential(nn.Linear(16, 32), nn.ReLU(), nn.Linear(32, classes))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        features = self.backbone(x)
        # left in from a linear probe, which trained the head alone
        return self.head(features.detach())


class Trainer(nn.Module):
    """The model and its loss, as a LightningModule holds them."""

    def __init__(self) -> None:
        super().__init__()
        self.model = Classifier(5)

    def training_step(self, batch: tuple[torch.Tensor, torch.Tensor]) -> torch.Tensor:
        images, labels = batch
        return F.cross_entropy(self.model(images), labels)


model = Trainer()
optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
images = torch.randn(6, 8, 3, 16, 16)
labels = torch.randint(0, 5, (6, 8))
for batch in zip(images, labels, strict=True):
    optimizer.zero_grad()
    loss = model.training_step(batch)
    loss.backward()
    optimizer.step()
print(f"loss {loss.item():.4f}")
