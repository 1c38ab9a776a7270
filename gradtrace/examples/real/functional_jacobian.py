"""torch.autograd.functional: jacobian (looped and vectorize=True), hessian and vjp.

Source: the examples in the PyTorch documentation of torch.autograd.functional.jacobian,
hessian and vjp (exp_reducer, pow_reducer on a 2x2 input).
Changes: the three calls in one script, jacobian also with vectorize=True (the legacy vmap),
then an ordinary backward of the reduced sum whose gradient is the Jacobian's column sums;
the results printed as JSON.
"""

import json

import torch
from torch.autograd.functional import hessian, jacobian, vjp


def exp_reducer(x):
    return x.exp().sum(dim=1)


def pow_reducer(x):
    return x.pow(3).sum()


torch.manual_seed(0)
inputs = torch.rand(2, 2, requires_grad=True)
looped = jacobian(exp_reducer, inputs)
vectorized = jacobian(exp_reducer, inputs, vectorize=True)
hess = hessian(pow_reducer, inputs)
_, pulled = vjp(exp_reducer, inputs, torch.ones(2))
loss = exp_reducer(inputs).sum()
loss.backward()
print(json.dumps({"inputs": inputs.grad.norm().item(),
                  "same": bool(torch.allclose(looped, vectorized)),
                  "vjp_is_grad": bool(torch.allclose(pulled, inputs.grad)),
                  "hessian": hess.norm().item()}))
