"""A script that saves the model class it defines with torch.save (pickling __main__.RNNModel).

Source: modeled on pytorch/examples word_language_model (its RNNModel and the
`torch.save(model, f)` after an epoch), written for gradtrace.
Changes: a tiny LSTM on random tokens, one training step, saved to an in-memory buffer.
"""

import io

import torch
import torch.nn as nn


class RNNModel(nn.Module):
    def __init__(self, ntoken, ninp, nhid):
        super().__init__()
        self.encoder = nn.Embedding(ntoken, ninp)
        self.rnn = nn.LSTM(ninp, nhid)
        self.decoder = nn.Linear(nhid, ntoken)

    def forward(self, tokens):
        output, _ = self.rnn(self.encoder(tokens))
        return self.decoder(output)


torch.manual_seed(0)
model = RNNModel(20, 8, 8)
tokens = torch.randint(0, 20, (6, 2))
targets = torch.randint(0, 20, (6, 2))
logits = model(tokens)
loss = nn.functional.cross_entropy(logits.view(-1, 20), targets.view(-1))
loss.backward()
buffer = io.BytesIO()
torch.save(model, buffer)
buffer.seek(0)
restored = torch.load(buffer, weights_only=False)
print("restored", type(restored).__name__, "decoder grad", model.decoder.weight.grad.norm().item())
