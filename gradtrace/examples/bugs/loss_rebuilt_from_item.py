"""A loss rebuilt from its value (line 25) to "make it require grad" after a custom metric
turned it into a number: backward reaches no parameter and the model never trains.
Expected: graph-cut at line 25. The healthy twin is loss_rebuilt_from_item_fixed.py."""

import torch
import torch.nn as nn

torch.manual_seed(0)
model = nn.Sequential(nn.Linear(12, 32), nn.ReLU(), nn.Linear(32, 1))
optimizer = torch.optim.Adam(model.parameters(), lr=1e-2)
x = torch.randn(128, 12)
y = (x[:, :3].sum(dim=1, keepdim=True) > 0).float()


def weighted_bce(logits: torch.Tensor, target: torch.Tensor) -> float:
    weight = torch.tensor(2.0)
    return nn.functional.binary_cross_entropy_with_logits(logits, target,
                                                          pos_weight=weight).item()


for _ in range(15):
    optimizer.zero_grad()
    logits = model(x)
    value = weighted_bce(logits, y)
    loss = torch.tensor(value, requires_grad=True)  # backward() needs a graph
    loss.backward()
    optimizer.step()
print(f"loss {loss.item():.4f}")
