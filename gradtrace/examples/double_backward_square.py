"""Double backward through Square: grad_x = 2x is itself a graph of x; gradgradcheck passes."""

import torch

torch.manual_seed(0)


class Square(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        # Because we are saving one of the inputs use `save_for_backward`
        ctx.save_for_backward(x)
        return x**2

    @staticmethod
    def backward(ctx, grad_out):
        # Double backward works because autograd can record what backward computes
        (x,) = ctx.saved_tensors
        return grad_out * 2 * x


# Use double precision because finite differencing method magnifies errors
xs = torch.rand(3, 3, requires_grad=True, dtype=torch.double)
torch.autograd.gradcheck(Square.apply, xs)
torch.autograd.gradgradcheck(Square.apply, xs)

x = torch.tensor(1.0, requires_grad=True).clone()
out = Square.apply(x)
(grad_x,) = torch.autograd.grad(out, x, create_graph=True)
