"""The best model reloaded for testing after training, as pytorch/examples'
word_language_model does (`model = torch.load(f)`; a deepcopy here): the name now holds
parameters no backward came after (healthy)."""
import copy

import torch
import torch.nn as nn

torch.manual_seed(0)
model = nn.Sequential(nn.Linear(6, 16), nn.Tanh(), nn.Linear(16, 1))
x, y = torch.randn(64, 6), torch.randn(64, 1)
best, best_loss = None, float("inf")
for _epoch in range(5):
    model.zero_grad()
    loss = nn.functional.mse_loss(model(x), y)
    loss.backward()
    for p in model.parameters():
        p.data.add_(p.grad, alpha=-0.1)
    if loss.item() < best_loss:
        best, best_loss = copy.deepcopy(model.state_dict()), loss.item()
model = copy.deepcopy(model)  # the checkpoint, loaded again
model.load_state_dict(best)
with torch.no_grad():
    print("test loss", nn.functional.mse_loss(model(x), y).item())
