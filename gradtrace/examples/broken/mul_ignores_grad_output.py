"""Broken: Mul's backward returns (y, x) and ignores grad_output; right only for ones."""

import torch

torch.manual_seed(0)


class Mul(torch.autograd.Function):
    @staticmethod
    def forward(ctx, i, j):
        result = i * j
        ctx.save_for_backward(i, j)
        return result

    @staticmethod
    def backward(ctx, grad_output):
        x, y = ctx.saved_tensors
        return y, x  # should be grad_output * y, grad_output * x


x = torch.randn(32, requires_grad=True)
y2 = torch.randn(32, requires_grad=True)
t = Mul.apply(x, y2)
t.backward(torch.ones_like(t))  # with ones the missing grad_output goes unnoticed
