"""The healthy twin of clip_before_backward.py: clip between backward() and step().
Expected: no warning or error."""

import torch
import torch.nn as nn

torch.manual_seed(0)
rnn = nn.GRU(8, 32, batch_first=True)
head = nn.Linear(32, 1)
params = [*rnn.parameters(), *head.parameters()]
optimizer = torch.optim.Adam(params, lr=1e-2)
sequences = torch.randn(10, 16, 20, 8)
targets = sequences.sum(dim=(2, 3)).unsqueeze(-1)

for x, y in zip(sequences, targets, strict=True):
    optimizer.zero_grad()
    out, _ = rnn(x)
    loss = nn.functional.mse_loss(head(out[:, -1]), y)
    loss.backward()
    # keep the recurrent gradients in check
    torch.nn.utils.clip_grad_norm_(params, max_norm=1.0)
    optimizer.step()
print(f"loss {loss.item():.4f}")
