"""Broken: SinhBad keeps exp(x) and exp(-x) as ctx attributes instead of
save_for_backward, so grad_x gets no graph and second derivatives are silently wrong."""

import torch

torch.manual_seed(0)


class SinhBad(torch.autograd.Function):
    # This is an example of what NOT to do!
    @staticmethod
    def forward(ctx, x):
        expx = torch.exp(x)
        expnegx = torch.exp(-x)
        ctx.expx = expx
        ctx.expnegx = expnegx
        return (expx - expnegx) / 2

    @staticmethod
    def backward(ctx, grad_out):
        expx = ctx.expx
        expnegx = ctx.expnegx
        grad_input = grad_out * (expx + expnegx) / 2
        return grad_input


x = torch.rand(3, 3, requires_grad=True, dtype=torch.double)
out = SinhBad.apply(x)
(grad_x,) = torch.autograd.grad(out.sum(), x, create_graph=True)
