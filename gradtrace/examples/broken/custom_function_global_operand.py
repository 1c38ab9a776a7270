"""Broken: MyCustomFunction's forward multiplies x by the global y, not by its argument
t, so the gradient it returns for t is wrong; the callable wrappers hide it further."""

import torch

y = torch.tensor([4.0, 5.0, 6.0], requires_grad=True)  # the notebook's earlier y


class MyCustomFunction(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, t):
        ctx.save_for_backward(x, y)
        return x * y

    @staticmethod
    def backward(ctx, grad_output):
        x, y = ctx.saved_tensors
        return grad_output * y, grad_output * x


class CustomOp:
    def __call__(self, x, y):
        return MyCustomFunction.apply(x, y)


def custom_op_func(x, y):
    return MyCustomFunction.apply(x, y)


a = torch.tensor(1.0, requires_grad=True)
b = torch.tensor(2.0, requires_grad=True)
custom_op = CustomOp()
result = custom_op(a, b)
result_func = custom_op_func(a, b)
