"""Adversarial training (FGSM) with backward() for the input gradient."""
import torch
import torch.nn as nn
import torch.nn.functional as F

torch.manual_seed(0)
model = nn.Sequential(nn.Linear(10, 16), nn.ReLU(), nn.Linear(16, 3))
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
for _step in range(20):
    x = torch.randn(8, 10, requires_grad=True)
    y = torch.randint(0, 3, (8,))
    loss = F.cross_entropy(model(x), y)
    loss.backward()
    x_adv = (x + 0.1 * x.grad.sign()).detach()
    optimizer.zero_grad()
    adv_loss = F.cross_entropy(model(x_adv), y)
    adv_loss.backward()
    optimizer.step()
print(adv_loss.item())
