"""Printing a graph by hand: w = sum(x * y) is SumBackward0 <- MulBackward0 <- two leaves."""

import torch


def print_grad_graph(grad_fn, level=0):
    print(" " * level, type(grad_fn).__name__)
    if hasattr(grad_fn, "next_functions"):
        for next_func in grad_fn.next_functions:
            if next_func[0] is not None:
                print_grad_graph(next_func[0], level + 1)


x = torch.tensor([1.0, 2.0, 3.0], requires_grad=True)
y = torch.tensor([4.0, 5.0, 6.0], requires_grad=True)
z = x * y
w = z.sum()

print_grad_graph(w.grad_fn)
