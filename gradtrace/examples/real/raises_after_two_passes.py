"""A script that raises after two successful backward passes (exit 2, passes still shown).

Source: modeled on the PyTorch "Automatic Differentiation with torch.autograd" tutorial as a
user reported it: the device picked with torch.accelerator, two backward passes, then a
float assigned to .grad (a TypeError).
Changes: a fixed seed; the gradient after two passes is printed for the tests.
"""

import torch

device = torch.accelerator.current_accelerator().type if torch.accelerator.is_available() else "cpu"
torch.set_default_device(device)
torch.manual_seed(0)

x = torch.ones(5)
y = torch.zeros(3)
w = torch.randn(5, 3, requires_grad=True)
b = torch.randn(3, requires_grad=True)
z = torch.matmul(x, w) + b
loss = torch.nn.functional.binary_cross_entropy_with_logits(z, y)
loss.backward(retain_graph=True)
loss.backward()
print("b.grad", b.grad.tolist())
b.grad = 1.5
