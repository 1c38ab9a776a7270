"""Truncated backpropagation through time with the hidden state carried over undetached
(line 24): the second chunk's backward goes back into the first chunk's graph, which the
first backward freed, and torch raises. Expected: graph-freed at line 24, naming `hidden`.
The healthy twin is rnn_hidden_not_detached_fixed.py."""

import torch
import torch.nn as nn

torch.manual_seed(0)
vocab, width = 20, 32
embed = nn.Embedding(vocab, 16)
rnn = nn.GRU(16, width, batch_first=True)
head = nn.Linear(width, vocab)
params = [*embed.parameters(), *rnn.parameters(), *head.parameters()]
optimizer = torch.optim.Adam(params, lr=3e-3)
text = torch.randint(0, vocab, (4, 101))  # 4 streams of 101 characters
chunk = 25

hidden = torch.zeros(1, 4, width)
for start in range(0, 100, chunk):
    inputs = text[:, start:start + chunk]
    targets = text[:, start + 1:start + chunk + 1]
    optimizer.zero_grad()
    out, hidden = rnn(embed(inputs), hidden)
    loss = nn.functional.cross_entropy(head(out).reshape(-1, vocab), targets.reshape(-1))
    loss.backward()
    optimizer.step()
print(f"loss {loss.item():.4f}")
