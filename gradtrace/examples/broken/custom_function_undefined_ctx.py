"""Broken: MyCustomFunction's backward names its context `cts` but uses `ctx`, and
forward multiplies by the global y instead of its argument t."""

import torch

y = torch.tensor([4.0, 5.0, 6.0], requires_grad=True)  # the notebook's earlier y


class MyCustomFunction(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, t):
        ctx.save_for_backward(x, y)
        return x * y

    @staticmethod
    def backward(cts, grad_output):
        x, y = ctx.saved_tensors  # noqa: F821 - the seed's bug: ctx is undefined here
        return grad_output * y, grad_output * x


custom_op = MyCustomFunction.apply
a = torch.tensor(1.0, requires_grad=True)
b = torch.tensor(2.0, requires_grad=True)
c = custom_op(a, b)
