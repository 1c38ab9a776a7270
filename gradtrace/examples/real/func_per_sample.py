"""torch.func: per-sample gradients with vmap(grad(...)), next to an ordinary backward.

Source: modeled on the PyTorch tutorial "Per-sample-gradients" (torch.func.functional_call,
grad and vmap over a small model's parameters), written for gradtrace.
Changes: a 2-layer MLP on random data instead of the tutorial's CNN; an ordinary
loss.backward() at the end, whose gradient equals the mean of the per-sample gradients.
"""

import json

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.func import functional_call, grad, vmap

torch.manual_seed(0)
model = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 3))
data = torch.randn(6, 4)
targets = torch.randint(0, 3, (6,))
params = {k: v.detach() for k, v in model.named_parameters()}


def compute_loss(params, sample, target):
    prediction = functional_call(model, params, (sample.unsqueeze(0),))
    return F.cross_entropy(prediction, target.unsqueeze(0))


per_sample = vmap(grad(compute_loss), in_dims=(None, 0, 0))(params, data, targets)
loss = F.cross_entropy(model(data), targets)
loss.backward()
mean_matches = all(torch.allclose(per_sample[k].mean(0), p.grad, atol=1e-6)
                   for k, p in model.named_parameters())
print(json.dumps({"mean_matches": mean_matches,
                  **{f"model.{n}": p.grad.norm().item() for n, p in model.named_parameters()}}))
