"""Gradient accumulation done right: 4 micro-batches a step, zero_grad() after each step.

Source: modeled on nanoGPT's train.py (Karpathy): gradient_accumulation_steps micro-batches,
each loss divided by it, then optimizer.step() and optimizer.zero_grad(set_to_none=True).
Changes: a 2-layer MLP on random data instead of a GPT; no GradScaler or clipping; 6 steps.
The healthy counter-example to forgot_zero_grad.py: .grad does grow over 4 passes in a row
(passes 1-4, 5-8, …), but no optimizer step happens inside a window, and after each step
every .grad is reset to None. Expected: NO grad-accumulating finding (24 passes, 6 steps).
Measured (torch 2.13 CPU): opt.step() after passes 4, 8, 12, 16, 20, 24; .grad is None
before passes 1, 5, 9, 13, 17, 21; model.2.weight's .grad norm after passes 1-4:
2.39, 4.38, 6.91, 8.37, then 2.35 after pass 5 (likewise for every parameter).
"""

import torch
import torch.nn as nn

torch.manual_seed(0)
model = nn.Sequential(nn.Linear(4, 16), nn.ReLU(), nn.Linear(16, 1))
opt = torch.optim.AdamW(model.parameters(), lr=1e-2)
gradient_accumulation_steps = 4
x = torch.randn(6 * gradient_accumulation_steps, 8, 4)  # 24 micro-batches of 8 samples
y = x.sum(dim=2, keepdim=True) + 3.0

for step in range(6):
    for micro_step in range(gradient_accumulation_steps):
        batch = step * gradient_accumulation_steps + micro_step
        loss = nn.functional.mse_loss(model(x[batch]), y[batch])
        loss = loss / gradient_accumulation_steps  # the step's gradient is the mean
        loss.backward()  # adds to .grad: the four micro-batches accumulate
    opt.step()
    opt.zero_grad(set_to_none=True)  # reset once per step, as nanoGPT's train.py does
print(f"loss {loss.item() * gradient_accumulation_steps:.4f}")
