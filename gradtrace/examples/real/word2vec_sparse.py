"""Skip-gram word2vec with negative sampling: sparse embeddings, SparseAdam, 8 steps.

Source: Andras7/word2vec-pytorch (model.py, SkipGramModel; trainer.py's SparseAdam loop).
Changes: random word ids instead of a corpus and its data reader; a vocabulary of 50 and
16 dimensions; the model is held by a plain object (`w2v.skip_gram_model`), as the trainer
holds it. v_embeddings is used twice a step (context and negative words): the engine sums
two sparse gradients into its .grad. Each step's .grad norms are printed as JSON.
"""

import json

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.nn import init


class SkipGramModel(nn.Module):

    def __init__(self, emb_size, emb_dimension):
        super().__init__()
        self.emb_size = emb_size
        self.emb_dimension = emb_dimension
        self.u_embeddings = nn.Embedding(emb_size, emb_dimension, sparse=True)
        self.v_embeddings = nn.Embedding(emb_size, emb_dimension, sparse=True)

        initrange = 1.0 / self.emb_dimension
        init.uniform_(self.u_embeddings.weight.data, -initrange, initrange)
        init.uniform_(self.v_embeddings.weight.data, -initrange, initrange)

    def forward(self, pos_u, pos_v, neg_v):
        emb_u = self.u_embeddings(pos_u)
        emb_v = self.v_embeddings(pos_v)
        emb_neg_v = self.v_embeddings(neg_v)

        score = torch.sum(torch.mul(emb_u, emb_v), dim=1)
        score = torch.clamp(score, max=10, min=-10)
        score = -F.logsigmoid(score)

        neg_score = torch.bmm(emb_neg_v, emb_u.unsqueeze(2)).squeeze()
        neg_score = torch.clamp(neg_score, max=10, min=-10)
        neg_score = -torch.sum(F.logsigmoid(-neg_score), dim=1)

        return torch.mean(score + neg_score)


class Word2VecTrainer:
    def __init__(self, emb_size, emb_dimension):
        self.skip_gram_model = SkipGramModel(emb_size, emb_dimension)


torch.manual_seed(0)
w2v = Word2VecTrainer(50, 16)
optimizer = torch.optim.SparseAdam(list(w2v.skip_gram_model.parameters()), lr=0.001)
norms = []
for _ in range(8):
    pos_u = torch.randint(0, 50, (32,))
    pos_v = torch.randint(0, 50, (32,))
    neg_v = torch.randint(0, 50, (32, 5))
    optimizer.zero_grad()
    loss = w2v.skip_gram_model.forward(pos_u, pos_v, neg_v)
    loss.backward()
    norms.append({name: p.grad.coalesce().values().norm().item()
                  for name, p in w2v.skip_gram_model.named_parameters()})
    optimizer.step()
print(json.dumps(norms))
