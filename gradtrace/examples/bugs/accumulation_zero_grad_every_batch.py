"""Gradient accumulation that throws 3 of every 4 micro-batches away: zero_grad() at the
top of every micro-batch (line 22), so only the last micro-batch before each step reaches
the optimizer. A bug people make when they add accumulation to a loop that had
zero_grad() first. Expected: grad-discarded at line 22. The healthy twin is
accumulation_zero_grad_every_batch_fixed.py."""

import torch
import torch.nn as nn

torch.manual_seed(0)
model = nn.Sequential(nn.Linear(16, 32), nn.GELU(), nn.Linear(32, 4))
optimizer = torch.optim.AdamW(model.parameters(), lr=3e-3)
loss_fn = nn.CrossEntropyLoss()
accumulation_steps = 4
inputs = torch.randn(32, 8, 16)  # 32 micro-batches of 8 samples
labels = torch.randint(0, 4, (32, 8))

for i, (x, y) in enumerate(zip(inputs, labels, strict=True)):
    # a micro-batch's loss, scaled so the 4 add up to the mean
    loss = loss_fn(model(x), y) / accumulation_steps
    # reset each micro-batch, as the loop did before accumulation
    optimizer.zero_grad()
    loss.backward()
    if (i + 1) % accumulation_steps == 0:
        optimizer.step()
print(f"last loss {loss.item() * accumulation_steps:.4f}")
