"""Trained, then frozen for inference after the last step (healthy)."""
import torch
import torch.nn as nn

torch.manual_seed(0)
model = nn.Sequential(nn.Linear(4, 8), nn.Tanh(), nn.Linear(8, 1))
optimizer = torch.optim.Adam(model.parameters(), lr=1e-2)
x, y = torch.randn(64, 4), torch.randn(64, 1)
for _step in range(30):
    optimizer.zero_grad()
    loss = ((model(x) - y) ** 2).mean()
    loss.backward()
    optimizer.step()
model.requires_grad_(False)
model.eval()
with torch.no_grad():
    pred = model(x)
print(loss.item())
