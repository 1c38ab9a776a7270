"""A tensor hook: the hook doubles dz/dy to 0.016, so x.grad = 1.2."""

import torch

x = torch.tensor(5.0, requires_grad=True)
y = x**3
z = torch.log(y)


def hook_func(grad):
    print("grad", grad)
    return grad * 2


hook = y.register_hook(hook_func)
z.backward()
hook.remove()
