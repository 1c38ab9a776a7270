"""Broken: MyPow's backward uses log(input_1 + 1), so d/dq is 223.97, not 201.18."""

import torch


class MyPow(torch.autograd.Function):
    @staticmethod
    def forward(ctx, input_1, input_2):
        ctx.save_for_backward(input_1, input_2)
        result = input_1**input_2
        return result

    @staticmethod
    def backward(ctx, grad_output):
        input_1, input_2 = ctx.saved_tensors
        grad_input_1 = grad_output * input_2 * input_1 ** (input_2 - 1)
        grad_input_2 = grad_output * input_1**input_2 * torch.log(input_1 + 1)
        return grad_input_1, grad_input_2


myPow = MyPow.apply

q = torch.tensor(3.0, dtype=torch.float64, requires_grad=True)
x = torch.tensor(5.0, dtype=torch.float64, requires_grad=True)

print(torch.autograd.gradcheck(myPow, (x, q)))
