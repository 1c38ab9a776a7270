"""The healthy twin of loss_rebuilt_from_item.py: the metric returns the loss tensor itself.
Expected: no warning or error."""

import torch
import torch.nn as nn

torch.manual_seed(0)
model = nn.Sequential(nn.Linear(12, 32), nn.ReLU(), nn.Linear(32, 1))
optimizer = torch.optim.Adam(model.parameters(), lr=1e-2)
x = torch.randn(128, 12)
y = (x[:, :3].sum(dim=1, keepdim=True) > 0).float()


def weighted_bce(logits: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    weight = torch.tensor(2.0)
    return nn.functional.binary_cross_entropy_with_logits(logits, target,
                                                          pos_weight=weight)


for _ in range(15):
    optimizer.zero_grad()
    logits = model(x)
    loss = weighted_bce(logits, y)
    loss.backward()
    optimizer.step()
print(f"loss {loss.item():.4f}")
