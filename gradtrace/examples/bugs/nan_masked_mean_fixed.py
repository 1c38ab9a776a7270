"""The healthy twin of nan_masked_mean.py: the masked mean counts with clamp(min=1) (line 28).

Written for gradtrace (issue 53): the same bag-of-tokens classifier, data and bf16 autocast;
the sample with no tokens now pools to zeros (0 / 1) instead of 0/0, so every loss is
finite. Expected: no warning or error finding.
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
        count = m.sum(dim=1).clamp(min=1)  # a sample whose tokens are all padding: 1
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
