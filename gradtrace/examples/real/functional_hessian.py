"""torch.autograd.functional.hessian and vjp with tuple inputs that require grad.

Source: the hessian and vjp examples of the PyTorch documentation (pow_adder_reducer,
adder). Changes: the inputs are made with requires_grad=True, as scripts often do, though
the functional API differentiates detached copies of them; then a scale is fitted with an
ordinary backward, so the script has a graph of its own. The results printed as JSON.
"""

import json

import torch
from torch.autograd.functional import hessian, vjp


def pow_adder_reducer(x, y):
    return (2 * x.pow(2) + 3 * y.pow(2)).sum()


def adder(x, y):
    return 2 * x + 3 * y


torch.manual_seed(0)
inputs = (torch.rand(2, requires_grad=True), torch.rand(2, requires_grad=True))
hess = hessian(pow_adder_reducer, inputs)
_, pulled = vjp(adder, inputs, torch.ones(2))
scale = torch.tensor(1.0, requires_grad=True)
loss = (scale * hess[0][0].diagonal()).sum()
loss.backward()
print(json.dumps({"hessian": [h.tolist() for row in hess for h in row],
                  "vjp": [p.tolist() for p in pulled], "scale": scale.grad.item()}))
