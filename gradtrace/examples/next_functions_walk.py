"""next_functions by hand: both paths of z lead back to the same AccumulateGrad of x."""

import torch

x = torch.tensor(5.0, requires_grad=True)
y = x**3
w = x**2
z = torch.log(y) + torch.sqrt(w)

x_1 = z.grad_fn.next_functions[0][0].next_functions[0][0].next_functions[0][0]
x_2 = z.grad_fn.next_functions[1][0].next_functions[0][0].next_functions[0][0]
print("x_1_is_x", x_1.variable is x)
print("x_2_is_x", x_2.variable is x)
print("same node", x_1 is x_2)
