"""A DNI synthetic-gradient updater: backward passes the true gradient through and
sends the synthetic one the MSE gradient 2/batch * (synthetic - true)."""

import torch

torch.manual_seed(0)


class _SyntheticGradientUpdater(torch.autograd.Function):
    # Its backward is an update rule, not the derivative of forward: gradcheck cannot agree.
    gradtrace_skip = "backward sends a synthetic-gradient (MSE) update, not a derivative"

    @staticmethod
    def forward(ctx, trigger, synthetic_gradient):
        (_, needs_synthetic_gradient_grad) = ctx.needs_input_grad
        if not needs_synthetic_gradient_grad:
            raise ValueError("synthetic_gradient should need gradient but is does not")
        ctx.save_for_backward(synthetic_gradient)
        # clone trigger to force creating a new Variable with requires_grad=True
        return trigger.clone()

    @staticmethod
    def backward(ctx, true_gradient):
        (synthetic_gradient,) = ctx.saved_tensors
        # compute MSE gradient manually to avoid dependency on PyTorch internals
        (batch_size, *_) = synthetic_gradient.size()
        grad_synthetic_gradient = 2 / batch_size * (synthetic_gradient - true_gradient)
        return (true_gradient, grad_synthetic_gradient)


hidden = torch.randn(4, 3, requires_grad=True)
synthetic = torch.randn(4, 3, requires_grad=True)
trigger = _SyntheticGradientUpdater.apply(hidden, synthetic)
loss = (trigger * 2).sum()
