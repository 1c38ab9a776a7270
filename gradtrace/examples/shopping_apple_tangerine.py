"""Apple and tangerine shopping: apple 2.2, tangerine 3.3, num_apple 110,
num_tangerine 165, ctax 650."""

import torch

apple = torch.tensor([100.0], requires_grad=True)
tangerine = torch.tensor([150.0], requires_grad=True)
num_apple = torch.tensor([2.0], requires_grad=True)
num_tangerine = torch.tensor([3.0], requires_grad=True)
ctax = torch.tensor([1.1], requires_grad=True)

apple_price = apple * num_apple
apple_price.retain_grad()

tangerine_price = tangerine * num_tangerine
tangerine_price.retain_grad()

price = apple_price + tangerine_price
price.retain_grad()

result = price * ctax
result.retain_grad()

result.backward(torch.ones(1))
