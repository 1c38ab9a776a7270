"""The healthy twin of check_missing_factor.py: Scale's backward multiplies grad_output by beta,
so it is right at every beta, not only at 1.0. Expected: `gradtrace check` passes it at the
recorded and at random inputs (exit 0)."""

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
        grad_x = grad_output * beta
        grad_beta = (grad_output * x).sum().reshape(beta.shape)
        return grad_x, grad_beta


torch.manual_seed(0)
x = torch.randn(64, 32, requires_grad=True)
beta = nn.Parameter(torch.ones(1))  # a scale starts at 1.0
y = Scale.apply(x, beta)
loss = y.square().mean()
loss.backward()
print(f"loss {loss.item():.4f}")
