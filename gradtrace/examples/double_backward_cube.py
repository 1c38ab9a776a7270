"""Double backward through Cube: CubeBackward is a Function of its own, so the backward
of an opaque backward is spelled out too."""

import torch


def cube_forward(x):
    return x**3


def cube_backward(grad_out, x):
    return grad_out * 3 * x**2


def cube_backward_backward(grad_out, sav_grad_out, x):
    return grad_out * sav_grad_out * 6 * x


def cube_backward_backward_grad_out(grad_out, x):
    return grad_out * 3 * x**2


class Cube(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return cube_forward(x)

    @staticmethod
    def backward(ctx, grad_out):
        (x,) = ctx.saved_tensors
        return CubeBackward.apply(grad_out, x)


class CubeBackward(torch.autograd.Function):
    @staticmethod
    def forward(ctx, grad_out, x):
        ctx.save_for_backward(x, grad_out)
        return cube_backward(grad_out, x)

    @staticmethod
    def backward(ctx, grad_out):
        x, sav_grad_out = ctx.saved_tensors
        dx = cube_backward_backward(grad_out, sav_grad_out, x)
        dgrad_out = cube_backward_backward_grad_out(grad_out, x)
        return dgrad_out, dx


x = torch.tensor(2.0, requires_grad=True, dtype=torch.double)
torch.autograd.gradcheck(Cube.apply, x)
torch.autograd.gradgradcheck(Cube.apply, x)

out = Cube.apply(x)
(grad_x,) = torch.autograd.grad(out, x, create_graph=True)
