"""Masked mean pooling divides 0/0 for a sample with no tokens: NaN born in forward (line 34).

Written for gradtrace (issue 53): a bag-of-tokens classifier trained under bf16 autocast on
the CPU. Its forward pools the token states with a masked mean, sum(h * mask) / mask.sum();
at step 5 a batch holds a sample whose mask is all zeros (every token was padding), and 0/0
is NaN. The loss is NaN, so are the gradients, and AdamW writes NaN into every weight: each
later step is NaN from its parameters. The healthy twin, nan_masked_mean_fixed.py, counts
with clamp(min=1). Expected: nan-value at line 34 (DivBackward0 in model, an unnamed tensor)
at pass 5, the first whose loss is not finite; nan-gradient at pass 5 says that
LogSoftmaxBackward0 carries the forward's NaN (its derivative is not at fault).
"""

import torch
import torch.nn as nn
import torch.nn.functional as F

VOCAB, DIM, CLASSES, STEPS, EMPTY_AT = 50, 16, 3, 30, 5


class MaskedMeanClassifier(nn.Module):
    """Token embeddings, an MLP per token, a masked mean over the tokens, a linear head."""

    def __init__(self) -> None:
        super().__init__()
        self.embed = nn.Embedding(VOCAB, DIM)
        self.mlp = nn.Sequential(nn.Linear(DIM, DIM), nn.GELU(), nn.Linear(DIM, DIM))
        self.head = nn.Linear(DIM, CLASSES)

    def forward(self, tokens: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        h = self.mlp(self.embed(tokens))  # (batch, tokens, dim)
        m = mask.unsqueeze(-1).to(h.dtype)
        total = (h * m).sum(dim=1)
        count = m.sum(dim=1)  # 0 for a sample whose tokens are all padding
        pooled = total / count
        return self.head(pooled)


def batch(step: int, size: int = 8, length: int = 12) -> tuple[torch.Tensor, ...]:
    """Random tokens with a random padding mask; at EMPTY_AT one sample keeps no token."""
    tokens = torch.randint(0, VOCAB, (size, length))
    mask = torch.rand(size, length) > 0.3
    mask[:, 0] = True
    if step == EMPTY_AT:
        mask[3] = False
    labels = torch.randint(0, CLASSES, (size,))
    return tokens, mask, labels


torch.manual_seed(0)
model = MaskedMeanClassifier()
optimizer = torch.optim.AdamW(model.parameters(), lr=1e-2)

for step in range(1, STEPS + 1):
    tokens, mask, labels = batch(step)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        logits = model(tokens, mask)
        loss = F.cross_entropy(logits, labels)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    if step % 10 == 0:
        print(f"step {step:2d}  loss {loss.item():.4f}")
