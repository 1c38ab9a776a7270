"""The healthy twin of head_after_optimizer.py: the head is replaced before the optimizer is
built. Expected: no warning or error."""

import torch
import torch.nn as nn

torch.manual_seed(0)


class Encoder(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.body = nn.Sequential(nn.Linear(20, 64), nn.ReLU(), nn.Linear(64, 64), nn.ReLU())
        self.head = nn.Linear(64, 10)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.body(x))


model = Encoder()
model.head = nn.Linear(64, 3)  # the task has 3 classes
optimizer = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
x = torch.randn(96, 20)
labels = torch.randint(0, 3, (96,))
for epoch in range(3):
    for batch in range(0, 96, 32):
        optimizer.zero_grad()
        loss = nn.functional.cross_entropy(model(x[batch:batch + 32]), labels[batch:batch + 32])
        loss.backward()
        optimizer.step()
    print(f"epoch {epoch}: loss {loss.item():.4f}")
