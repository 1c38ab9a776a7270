"""The custom Function template: forward and backward both pass their input through."""

import torch
from torch.autograd import Function


class CustomFunction(Function):
    @staticmethod
    def forward(ctx, input):
        ctx.save_for_backward(input)
        output = input.clone()
        return output

    @staticmethod
    def backward(ctx, grad_output):
        (input,) = ctx.saved_tensors
        grad_input = grad_output.clone()
        return grad_input


a = torch.tensor([1.0, 2.0, 3.0], requires_grad=True)
b = CustomFunction.apply(a)
