"""An epoch's running loss summed as tensors (line 23): each step's loss joins the sum with
its whole graph, so every step's activations stay in memory until the epoch ends.
Expected: graph-kept at line 23. The healthy twin is running_loss_keeps_graph_fixed.py."""

import torch
import torch.nn as nn

torch.manual_seed(0)
model = nn.Sequential(nn.Conv1d(4, 16, 5, padding=2), nn.ReLU(), nn.Conv1d(16, 16, 5, padding=2),
                      nn.ReLU(), nn.AdaptiveAvgPool1d(1), nn.Flatten(), nn.Linear(16, 3))
optimizer = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
signals = torch.randn(20, 8, 4, 64)
classes = torch.randint(0, 3, (20, 8))


def train_epoch() -> float:
    running_loss = 0.0
    for x, y in zip(signals, classes, strict=True):
        optimizer.zero_grad()
        loss = nn.functional.cross_entropy(model(x), y)
        loss.backward()
        optimizer.step()
        running_loss += loss
    return float(running_loss) / len(signals)


for epoch in range(2):
    print(f"epoch {epoch}: mean loss {train_epoch():.4f}")
