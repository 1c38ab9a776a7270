"""A training loop that forgot zero_grad(): every .grad keeps growing, pass after pass.

Written for gradtrace (issue 26): the most common training-loop bug. loss.backward() adds
this pass's gradient to .grad, and nothing ever resets it, so SGD steps with the sum of every
gradient so far. The fix is opt.zero_grad() before loss.backward().
Expected finding: grad-accumulating on every parameter (model.0.weight, model.0.bias,
model.2.weight, model.2.bias) from pass 3: by then .grad has grown over 3 passes, never reset,
with opt.step() between them.
Measured (torch 2.13 CPU), .grad norm after passes 1, 2, 3 … 20, growing at every pass:
model.0.weight 1.79, 3.57, 5.35 … 34.1; model.0.bias 2.07, 4.13, 6.18 … 38.5;
model.2.weight 8.37, 16.7, 25.0 … 137; model.2.bias 5.91, 11.8, 17.6 … 95.6
(loss 11.9 at pass 1, 4.50 at pass 20; the learning rate is small enough that it still falls).
"""

import torch
import torch.nn as nn

torch.manual_seed(0)
model = nn.Sequential(nn.Linear(4, 16), nn.ReLU(), nn.Linear(16, 1))
opt = torch.optim.SGD(model.parameters(), lr=5e-4)
x = torch.randn(32, 4)
y = x.sum(dim=1, keepdim=True) + 3.0

for _ in range(20):
    loss = nn.functional.mse_loss(model(x), y)
    loss.backward()  # no opt.zero_grad() before it: this pass's gradient adds to the last ones
    opt.step()
print(f"loss {loss.item():.4f}")
