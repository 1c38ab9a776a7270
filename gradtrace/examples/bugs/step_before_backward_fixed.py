"""The healthy twin of step_before_backward.py: backward, then step. Expected: no warning or
error."""

import torch
import torch.nn as nn

torch.manual_seed(0)
model = nn.Sequential(nn.Linear(10, 64), nn.Tanh(), nn.Linear(64, 1))
optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
x = torch.randn(256, 10)
y = x[:, :1] * 2 - x[:, 1:2]

for _ in range(20):
    batch = torch.randint(0, 256, (32,))
    optimizer.zero_grad()
    loss = nn.functional.mse_loss(model(x[batch]), y[batch])
    loss.backward()
    optimizer.step()
print(f"loss {loss.item():.4f}")
