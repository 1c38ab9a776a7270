"""Double backward through Exp: saving the output with save_for_backward keeps its graph."""

import torch


class Exp(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        result = torch.exp(x)
        # save_for_backward, since the tensor saved is an output
        ctx.save_for_backward(result)
        return result

    @staticmethod
    def backward(ctx, grad_out):
        (result,) = ctx.saved_tensors
        return result * grad_out


x = torch.tensor(1.0, requires_grad=True, dtype=torch.double).clone()
torch.autograd.gradcheck(Exp.apply, x)
torch.autograd.gradgradcheck(Exp.apply, x)

out = Exp.apply(x)
(grad_x,) = torch.autograd.grad(out, x, create_graph=True)
