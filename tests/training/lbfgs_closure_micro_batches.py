"""An L-BFGS closure that accumulates two micro-batches on purpose: it resets the gradients
once, then runs a backward for each half of the data (each loss halved)."""
import torch

torch.manual_seed(0)
model = torch.nn.Sequential(torch.nn.Linear(4, 16), torch.nn.Tanh(), torch.nn.Linear(16, 1))
optimizer = torch.optim.LBFGS(model.parameters(), lr=0.5)
x, y = torch.randn(32, 4), torch.randn(32, 1)
for _step in range(2):
    def closure():
        optimizer.zero_grad()
        total = 0.0
        for xb, yb in zip(x.chunk(2), y.chunk(2), strict=True):
            loss = ((model(xb) - yb) ** 2).mean() / 2
            loss.backward()
            total += loss.item()
        return torch.tensor(total)
    optimizer.step(closure)
