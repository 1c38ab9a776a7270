"""The healthy twin of zero_grad_before_step.py: zero_grad() before the forward pass.
Expected: no warning or error."""

import torch
import torch.nn as nn

torch.manual_seed(0)
model = nn.Sequential(nn.Conv2d(1, 8, 3, padding=1), nn.ReLU(), nn.AdaptiveAvgPool2d(1),
                      nn.Flatten(), nn.Linear(8, 10))
optimizer = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
images = torch.randn(12, 16, 1, 8, 8)
labels = torch.randint(0, 10, (12, 16))

for epoch in range(2):
    for x, y in zip(images, labels, strict=True):
        optimizer.zero_grad()
        loss = nn.functional.cross_entropy(model(x), y)
        loss.backward()
        optimizer.step()
    print(f"epoch {epoch}: loss {loss.item():.4f}")
