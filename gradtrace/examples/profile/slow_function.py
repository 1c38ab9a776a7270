"""A small model whose custom autograd.Function has a deliberately slow backward: a Python
loop over the elements. `gradtrace show scenarios/profile/slow_function.py --profile` names
its node, its module and its line first by backward time.

The Function runs the script's own backward code, so gradtrace does not replay the pass: it
times the loop's own steps instead (profiled and plain in turn).
"""

import torch
import torch.nn as nn


class SlowSquare(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x * x

    @staticmethod
    def backward(ctx, grad):
        (x,) = ctx.saved_tensors
        out = torch.empty_like(x)
        flat_x, flat_g, flat_out = x.reshape(-1), grad.reshape(-1), out.view(-1)
        for i in range(flat_x.numel()):  # element by element, in Python: deliberately slow
            flat_out[i] = 2 * flat_x[i] * flat_g[i]
        return out


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.inp = nn.Linear(16, 32)
        self.out = nn.Linear(32, 1)

    def forward(self, x):
        h = SlowSquare.apply(self.inp(x))
        return self.out(torch.tanh(h))


torch.manual_seed(0)
model = Net()
opt = torch.optim.SGD(model.parameters(), lr=0.01)
data = torch.randn(32, 16)  # 1,024 elements: ~100x any other node, on any core
for _ in range(10):
    opt.zero_grad()
    loss = model(data).pow(2).mean()
    loss.backward()
    opt.step()
print(f"loss {loss.item():.4f}")
