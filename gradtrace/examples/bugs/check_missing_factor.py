"""A custom Function whose backward forgets a factor (line 21): Scale's y = x * beta sends
grad_output to x, not grad_output * beta, which is the same while beta is 1.0 as it starts.
Expected: `gradtrace check` fails it at random inputs (exit 1), naming backward (line 19).
The healthy twin is check_missing_factor_fixed.py."""

import torch
import torch.nn as nn


class Scale(torch.autograd.Function):
    """y = x * beta: a learned scale, one number for the whole tensor."""

    @staticmethod
    def forward(ctx, x, beta):
        ctx.save_for_backward(x, beta)
        return x * beta

    @staticmethod
    def backward(ctx, grad_output):
        x, beta = ctx.saved_tensors
        grad_x = grad_output  # forgets beta: right only while beta is 1.0
        grad_beta = (grad_output * x).sum().reshape(beta.shape)
        return grad_x, grad_beta


torch.manual_seed(0)
x = torch.randn(64, 32, requires_grad=True)
beta = nn.Parameter(torch.ones(1))  # a scale starts at 1.0, where the bug is silent
y = Scale.apply(x, beta)
loss = y.square().mean()
loss.backward()
print(f"loss {loss.item():.4f}")
