"""Double backward through Sinh: intermediate results are returned as outputs so that
the graph of the gradient is recorded."""

import torch

torch.manual_seed(0)


class Sinh(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        expx = torch.exp(x)
        expnegx = torch.exp(-x)
        ctx.save_for_backward(expx, expnegx)
        # To save intermediate results, return them as outputs too
        return (expx - expnegx) / 2, expx, expnegx

    @staticmethod
    def backward(ctx, grad_out, _grad_out_exp, _grad_out_negexp):
        expx, expnegx = ctx.saved_tensors
        grad_input = grad_out * (expx + expnegx) / 2
        # These cannot be skipped: the second backward uses them
        grad_input += _grad_out_exp * expx
        grad_input -= _grad_out_negexp * expnegx
        return grad_input


def sinh(x):
    # A wrapper that returns only the first output
    return Sinh.apply(x)[0]


x = torch.rand(3, 3, requires_grad=True, dtype=torch.double)
torch.autograd.gradcheck(sinh, x)
torch.autograd.gradgradcheck(sinh, x)

out = sinh(x)
(grad_x,) = torch.autograd.grad(out.sum(), x, create_graph=True)
