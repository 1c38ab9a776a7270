"""A linear recurrence h = W h + x whose W has spectral radius 1.1: its gradients explode.

Written for gradtrace (issue 26), after the exploding-gradient analysis of Pascanu,
Mikolov & Bengio (2013): without a squashing nonlinearity, 30 steps of a recurrence whose
eigenvalues are above 1 multiply the gradient by up to 1.1^30 ≈ 17, and the loss is so sharp
in W that SGD with momentum overshoots: the loss falls, then jumps to 1e11, then is nan.
(A gain of 1.5 explodes too, but at once: 1.5^30 ≈ 2e5 and step 2 is already non-finite.)
Expected finding: exploding-gradient on model.rec (and model.inp, model.out): the gradient
norm grows by more than 1e4 at pass 3, and is non-finite (nan) from pass 4 on.
Measured (torch 2.13 CPU), gradient norm per module at passes 1, 2, 3 (pass 4-15: nan):
model.rec 7.76e3, 16.3, 1.04e13 (1.3e9× pass 1's); model.inp 983, 2.20, 7.37e11 (7.5e8×);
model.out 1.76e3, 6.26, 1.54e12 (8.8e8×). Loss 305, 1.42, 2.85e11, then nan.
The pass-3 jump holds for learning rates 5% either side (3e9× to 7e13× pass 2's).
"""

import torch
import torch.nn as nn


class LinearRNN(nn.Module):
    """h_t = rec(h_{t-1}) + inp(x_t) over the sequence, no tanh; the last h is read out."""

    def __init__(self, n_in: int, hidden: int) -> None:
        super().__init__()
        self.inp = nn.Linear(n_in, hidden)
        self.rec = nn.Linear(hidden, hidden, bias=False)
        self.out = nn.Linear(hidden, 1)

    def forward(self, xs: torch.Tensor) -> torch.Tensor:
        h = torch.zeros(xs.shape[0], self.rec.in_features)
        for t in range(xs.shape[1]):
            h = self.rec(h) + self.inp(xs[:, t])
        return self.out(h)


torch.manual_seed(0)
model = LinearRNN(n_in=2, hidden=8)
with torch.no_grad():  # an orthogonal W scaled by 1.1: every eigenvalue has |λ| = 1.1
    nn.init.orthogonal_(model.rec.weight, gain=1.1)
opt = torch.optim.SGD(model.parameters(), lr=2e-4, momentum=0.9)
xs = torch.randn(16, 30, 2)  # 16 sequences of 30 time steps
y = torch.randn(16, 1)

for step in range(15):
    opt.zero_grad()
    loss = nn.functional.mse_loss(model(xs), y)
    loss.backward()
    opt.step()
    print(f"step {step + 1:2d}  loss {loss.item():.4g}")
