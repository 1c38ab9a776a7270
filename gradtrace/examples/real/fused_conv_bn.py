"""Conv2d and BatchNorm fused into one custom Function, trained for one step.

Source: modeled on the PyTorch tutorial "Fusing Convolution and Batch Norm using Custom
Function" (pytorch/tutorials, intermediate_source/custom_function_conv_bn_tutorial.py): a
Conv2D and a BatchNorm Function with @once_differentiable backwards that keep statistics as
ctx attributes, their gradchecks on small double inputs, and a fused Function whose backward
recomputes the convolution (not once_differentiable), used by a two-layer MNIST-style network. Written for gradtrace.
Changes: random 28x28 images (batch 4) instead of MNIST, one training step, the gradient norms
printed as JSON; the backward formulas are written out here, not copied. Conv2D's gradcheck
runs on a 2x3x5x5 batch instead of the tutorial's 10x3x7x7: the same check (every input and
weight entry against every output), at 1/30 of the cost (0.5 s instead of 16 s plain, it
dominated the test suite).
"""

import json

import torch
import torch.nn.functional as F
from torch import nn
from torch.autograd.function import once_differentiable
from torch.nn.grad import conv2d_input, conv2d_weight


def per_channel(t):
    return t[None, :, None, None]


def batch_norm_backward(grad_out, x, total, sqrt_var, n, eps):
    """d/dx of (x - mean) / (sqrt(unbiased var) + eps), per channel."""
    centred = x - per_channel(total / n)
    denom = per_channel(sqrt_var + eps)
    along = (grad_out * centred).sum(dim=(0, 2, 3))
    grad_x = (grad_out - per_channel(grad_out.sum(dim=(0, 2, 3)) / n)) / denom
    return grad_x - centred * per_channel(along / ((sqrt_var + eps) ** 2 * (n - 1) * sqrt_var))


class Conv2D(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, weight):
        ctx.save_for_backward(x, weight)
        return F.conv2d(x, weight)

    @staticmethod
    @once_differentiable
    def backward(ctx, grad_out):
        x, weight = ctx.saved_tensors
        return (conv2d_input(x.shape, weight, grad_out),
                conv2d_weight(x, weight.shape, grad_out))


class BatchNorm(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, eps=1e-3):
        total = x.sum(dim=(0, 2, 3))
        sqrt_var = x.var(dim=(0, 2, 3), unbiased=True).sqrt()
        ctx.save_for_backward(x)
        ctx.eps, ctx.total, ctx.n, ctx.sqrt_var = eps, total, x.numel() / x.size(1), sqrt_var
        return (x - per_channel(total / ctx.n)) / per_channel(sqrt_var + eps)

    @staticmethod
    @once_differentiable
    def backward(ctx, grad_out):
        (x,) = ctx.saved_tensors
        return batch_norm_backward(grad_out, x, ctx.total, ctx.sqrt_var, ctx.n, ctx.eps), None


class FusedConvBN2DFunction(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, weight, eps=1e-3):
        ctx.save_for_backward(x, weight)  # the convolution's output is recomputed in backward
        y = F.conv2d(x, weight)
        total = y.sum(dim=(0, 2, 3))
        sqrt_var = y.var(dim=(0, 2, 3), unbiased=True).sqrt()
        ctx.eps, ctx.total, ctx.n, ctx.sqrt_var = eps, total, y.numel() / y.size(1), sqrt_var
        return (y - per_channel(total / ctx.n)) / per_channel(sqrt_var + eps)

    @staticmethod
    def backward(ctx, grad_out):
        x, weight = ctx.saved_tensors
        y = F.conv2d(x, weight)
        grad_y = batch_norm_backward(grad_out, y, ctx.total, ctx.sqrt_var, ctx.n, ctx.eps)
        return conv2d_input(x.shape, weight, grad_y), conv2d_weight(x, weight.shape, grad_y), None


weight = torch.rand(5, 3, 3, 3, requires_grad=True, dtype=torch.double)
images = torch.rand(2, 3, 5, 5, requires_grad=True, dtype=torch.double)
torch.autograd.gradcheck(Conv2D.apply, (images, weight))
a = torch.rand(1, 2, 3, 4, requires_grad=True, dtype=torch.double)
torch.autograd.gradcheck(BatchNorm.apply, (a,), fast_mode=False)
small = torch.rand(2, 3, 4, 4, requires_grad=True, dtype=torch.double)
torch.autograd.gradcheck(FusedConvBN2DFunction.apply, (small, weight))


class FusedConvBN(nn.Module):
    def __init__(self, in_channels, out_channels, kernel_size, eps=1e-3):
        super().__init__()
        self.weight = nn.Parameter(torch.empty(out_channels, in_channels, kernel_size,
                                               kernel_size))
        nn.init.kaiming_uniform_(self.weight, a=5 ** 0.5)
        self.eps = eps

    def forward(self, x):
        return FusedConvBN2DFunction.apply(x, self.weight, self.eps)


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.convbn1 = FusedConvBN(1, 32, 3)
        self.convbn2 = FusedConvBN(32, 64, 3)
        self.fc1 = nn.Linear(9216, 128)
        self.fc2 = nn.Linear(128, 10)

    def forward(self, x):
        x = F.relu(self.convbn1(x))
        x = F.relu(self.convbn2(x))
        x = F.max_pool2d(x, 2).flatten(1)
        return F.log_softmax(self.fc2(F.relu(self.fc1(x))), dim=1)


torch.manual_seed(123456)
model = Net()
optimizer = torch.optim.Adadelta(model.parameters(), lr=1.0)
data, target = torch.randn(4, 1, 28, 28), torch.randint(0, 10, (4,))
optimizer.zero_grad()
loss = F.nll_loss(model(data), target)
loss.backward()
print(json.dumps({f"model.{name}": p.grad.double().norm().item()
                  for name, p in model.named_parameters()}
                 | {"loss": loss.item()}))
optimizer.step()
