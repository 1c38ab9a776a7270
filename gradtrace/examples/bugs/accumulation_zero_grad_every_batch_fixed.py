"""The healthy twin of accumulation_zero_grad_every_batch.py: zero_grad() right after each
step, so the 4 micro-batches before it add up in .grad. Expected: no warning or error."""

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
    loss.backward()
    if (i + 1) % accumulation_steps == 0:
        optimizer.step()
        optimizer.zero_grad()
print(f"last loss {loss.item() * accumulation_steps:.4f}")
