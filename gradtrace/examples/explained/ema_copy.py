"""An EMA copy of a model, kept in step under no_grad: an info finding, not an unreached leaf.

Source: timm's ModelEmaV2 (timm/utils/model_ema.py, pytorch-image-models), the weight EMA
its training script keeps beside the model. Changes: a small MLP trained for 20 steps on
random data instead of an ImageNet model; decay 0.9. The copy's parameters still require
grad, no output depends on them, and every step changes them without autograd.
"""

from copy import deepcopy

import torch
from torch import nn


class ModelEmaV2(nn.Module):
    def __init__(self, model, decay=0.9999):
        super().__init__()
        self.module = deepcopy(model)  # a copy of the model: its weights' running average
        self.module.eval()
        self.decay = decay

    def _update(self, model, update_fn):
        with torch.no_grad():
            for ema_v, model_v in zip(self.module.state_dict().values(),
                                      model.state_dict().values(), strict=True):
                ema_v.copy_(update_fn(ema_v, model_v))

    def update(self, model):
        self._update(model, update_fn=lambda e, m: self.decay * e + (1.0 - self.decay) * m)


torch.manual_seed(0)
model = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 1))
ema = ModelEmaV2(model, decay=0.9)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
x, y = torch.randn(32, 4), torch.randn(32, 1)
for _ in range(20):
    opt.zero_grad()
    loss = nn.functional.mse_loss(model(x), y)
    loss.backward()
    opt.step()
    ema.update(model)
print(f"loss {loss.item():.4f}, ema loss {nn.functional.mse_loss(ema.module(x), y).item():.4f}")
