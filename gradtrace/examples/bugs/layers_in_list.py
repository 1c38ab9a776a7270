"""Hidden layers kept in a plain Python list (line 15): model.parameters() does not see
them, so the optimizer never updates them although backward gives them gradients.
Expected: not-optimized at line 15. The healthy twin is layers_in_list_fixed.py."""

import torch
import torch.nn as nn

torch.manual_seed(0)


class ResidualMLP(nn.Module):
    def __init__(self, width: int, depth: int) -> None:
        super().__init__()
        self.embed = nn.Linear(6, width)
        self.blocks = [nn.Linear(width, width) for _ in range(depth)]
        self.head = nn.Linear(width, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.embed(x)
        for block in self.blocks:
            h = h + torch.relu(block(h))
        return self.head(h)


model = ResidualMLP(32, 3)
optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
x = torch.randn(128, 6)
y = torch.sin(x).sum(dim=1, keepdim=True)
for _ in range(10):
    optimizer.zero_grad()
    loss = nn.functional.mse_loss(model(x), y)
    loss.backward()
    optimizer.step()
print(f"loss {loss.item():.4f}")
