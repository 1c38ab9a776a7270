"""The healthy twin of weights_to_double.py: the weights are made in float64 as leaves.
Expected: no warning or error."""

import torch

torch.manual_seed(0)
features = torch.randn(200, 5, dtype=torch.float64)
true_w = torch.tensor([1.5, -2.0, 0.5, 0.0, 1.0], dtype=torch.float64)
labels = (features @ true_w > 0).double()
w = torch.zeros(5, dtype=torch.float64, requires_grad=True)
b = torch.zeros(1, dtype=torch.float64, requires_grad=True)
for _ in range(50):
    logits = features @ w + b
    loss = torch.nn.functional.binary_cross_entropy_with_logits(logits, labels)
    loss.backward()
    with torch.no_grad():
        if w.grad is not None:
            w -= 0.5 * w.grad
            w.grad.zero_()
        b -= 0.5 * b.grad
        b.grad.zero_()
print(f"loss {loss.item():.4f}")
