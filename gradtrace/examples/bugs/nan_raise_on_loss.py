"""A training loop that raises at its first NaN loss: the NaN was born at line 30, 0/0.

Written for gradtrace (issue 53): the masked-mean classifier of nan_masked_mean.py, trained
inside a function that checks its loss before backward, as many scripts do, and raises
ValueError at step 5, where a sample has no tokens and its masked mean divides 0/0. No
backward ran from that loss; gradtrace reads its graph at the stop. Expected: nan-value at
line 30 (DivBackward0 in model, an unnamed tensor), and the tensors of step 5 (loss NaN),
not those of step 4's backward; the script stops there, as under python (exit 2).
"""

import torch
import torch.nn as nn
import torch.nn.functional as F

VOCAB, DIM, CLASSES, STEPS, EMPTY_AT = 50, 16, 3, 30, 5


class MaskedMeanClassifier(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.embed = nn.Embedding(VOCAB, DIM)
        self.mlp = nn.Sequential(nn.Linear(DIM, DIM), nn.GELU(), nn.Linear(DIM, DIM))
        self.head = nn.Linear(DIM, CLASSES)

    def forward(self, tokens: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        h = self.mlp(self.embed(tokens))
        m = mask.unsqueeze(-1).to(h.dtype)
        total = (h * m).sum(dim=1)
        count = m.sum(dim=1)  # 0 for a sample whose tokens are all padding
        pooled = total / count
        return self.head(pooled)


def batch(step: int, size: int = 8, length: int = 12) -> tuple[torch.Tensor, ...]:
    tokens = torch.randint(0, VOCAB, (size, length))
    mask = torch.rand(size, length) > 0.3
    mask[:, 0] = True
    if step == EMPTY_AT:
        mask[3] = False
    return tokens, mask, torch.randint(0, CLASSES, (size,))


def train() -> None:
    torch.manual_seed(0)
    model = MaskedMeanClassifier()
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-2)
    for step in range(1, STEPS + 1):
        tokens, mask, labels = batch(step)
        with torch.autocast("cpu", dtype=torch.bfloat16):
            logits = model(tokens, mask)
            loss = F.cross_entropy(logits, labels)
        if torch.isnan(loss):
            raise ValueError(f"loss is NaN at step {step}")
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()


if __name__ == "__main__":
    train()
