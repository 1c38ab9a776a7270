"""zero_grad() between backward() and step() (line 20): every step finds no gradient, the
weights never move and the loss stays flat. Expected: grad-discarded at line 20. The
healthy twin is zero_grad_before_step_fixed.py."""

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
        loss = nn.functional.cross_entropy(model(x), y)
        loss.backward()
        # "clean up" before the step: the gradients are gone
        optimizer.zero_grad()
        optimizer.step()
    print(f"epoch {epoch}: loss {loss.item():.4f}")
