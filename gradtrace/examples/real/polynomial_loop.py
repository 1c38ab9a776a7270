"""A 1,000-step training loop: gradtrace records the first passes, then stops it.

Source: modeled on the PyTorch tutorial "Learning PyTorch with Examples" (nn module: fit
sin(x) with a third-order polynomial, Linear(3, 1) + Flatten, MSE loss, manual SGD update).
Changes: 1,000 steps instead of 2,000; a fixed seed; the final gradient norms are printed
as JSON.
"""

import json
import math

import torch

torch.manual_seed(0)
x = torch.linspace(-math.pi, math.pi, 2000)
y = torch.sin(x)
p = torch.tensor([1, 2, 3])
xx = x.unsqueeze(-1).pow(p)

model = torch.nn.Sequential(torch.nn.Linear(3, 1), torch.nn.Flatten(0, 1))
loss_fn = torch.nn.MSELoss(reduction="sum")
learning_rate = 1e-6
for t in range(1000):
    y_pred = model(xx)
    loss = loss_fn(y_pred, y)
    if t % 100 == 99:
        print(t, loss.item())
    model.zero_grad()
    loss.backward()
    with torch.no_grad():
        for param in model.parameters():
            param -= learning_rate * param.grad
print(json.dumps({f"model.{n}": p.grad.norm().item() for n, p in model.named_parameters()}))
