"""A loop that skips a batch whose backward raises, as some training scripts do: at step 2 the
loss is left unreduced (line 14), backward() of a non-scalar raises, and the script goes on."""

import torch

torch.manual_seed(0)
w = torch.randn(3, requires_grad=True)
optimizer = torch.optim.SGD([w], lr=0.1)
batches = torch.randn(3, 4, 3)
for step, x in enumerate(batches):
    optimizer.zero_grad()
    loss = ((x @ w - 1.0) ** 2).mean()
    if step == 1:
        loss = (x @ w - 1.0) ** 2  # forgot .mean()
    try:
        loss.backward()
    except RuntimeError as error:
        print(f"step {step}: skipped ({error})")
        continue
    optimizer.step()
