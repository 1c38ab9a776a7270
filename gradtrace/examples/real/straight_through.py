"""Straight-through estimators: binarized and quantized layers whose backward passes the
gradient on as if the forward were the identity.

Source: modeled on the binarized-network pattern of public BinaryNet / XNOR-Net PyTorch code
(a sign forward with an identity backward, a clipped "hardtanh" backward) and on
quantization-aware training's rounding with a straight-through backward. Written for
gradtrace. Changes: three Functions in one small MLP on random data, one training step.
"""

import torch
from torch import nn


class SignSTE(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        return torch.sign(x)

    @staticmethod
    def backward(ctx, grad_output):
        return grad_output  # straight through


class BinarizeClipped(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return torch.where(x >= 0, 1.0, -1.0)

    @staticmethod
    def backward(ctx, grad_output):
        (x,) = ctx.saved_tensors
        grad = grad_output.clone()
        grad[x.abs() > 1] = 0  # the hardtanh's derivative: pass it on inside [-1, 1]
        return grad


class RoundSTE(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, levels):
        return torch.round(x * levels) / levels

    @staticmethod
    def backward(ctx, grad_output):
        return grad_output, None


torch.manual_seed(0)
fc1, fc2 = nn.Linear(16, 32), nn.Linear(32, 4)
x = torch.randn(8, 16)
h = BinarizeClipped.apply(fc1(x))
h = RoundSTE.apply(torch.tanh(h * 0.5), 4)
out = fc2(SignSTE.apply(h))
loss = out.pow(2).mean()
loss.backward()
print(f"fc1.weight.grad norm {fc1.weight.grad.norm():.4f}")
