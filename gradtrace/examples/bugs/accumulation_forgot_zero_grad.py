"""An accumulation loop with clipping and bf16 autocast that never resets .grad (the step at
line 30 is not followed by zero_grad()): every step applies the sum of all the gradients so
far, clipped. Expected: grad-accumulating at line 22, the backward that keeps adding up.
The healthy twin is accumulation_forgot_zero_grad_fixed.py."""

import torch
import torch.nn as nn

torch.manual_seed(0)
model = nn.Sequential(nn.Embedding(50, 16), nn.Flatten(), nn.Linear(16 * 6, 32), nn.ReLU(),
                      nn.Linear(32, 2))
optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3, weight_decay=0.01)
accumulation_steps = 2
tokens = torch.randint(0, 50, (24, 4, 6))  # 24 micro-batches of 4 sequences
labels = torch.randint(0, 2, (24, 4))


def train_step(x: torch.Tensor, y: torch.Tensor) -> float:
    with torch.autocast("cpu", dtype=torch.bfloat16):
        logits = model(x)
    loss = nn.functional.cross_entropy(logits.float(), y) / accumulation_steps
    loss.backward()
    return loss.item()


for i, (x, y) in enumerate(zip(tokens, labels, strict=True)):
    train_step(x, y)
    if (i + 1) % accumulation_steps == 0:
        torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm=1.0)
        optimizer.step()
print("done")
