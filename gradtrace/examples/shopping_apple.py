"""Apple shopping: price = apple * num * ctax; apple 2.2, num 110, ctax 200."""

import torch

apple = torch.tensor([100.0], requires_grad=True)
num = torch.tensor([2.0], requires_grad=True)
ctax = torch.tensor([1.1], requires_grad=True)

price = apple * num
price.retain_grad()
result = price * ctax
result.retain_grad()

result.backward(torch.ones(1))
