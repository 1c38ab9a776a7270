"""An RNN language model from scratch: its parameters live only in a list.

Source: adapted from d2l-ai/d2l-en, chapter_recurrent-neural-networks/rnn-scratch (PyTorch
version, Apache-2.0 / CC BY-SA): get_params() returns `params = [W_xh, W_hh, b_h, W_hq, b_q]`
and its frame is gone; RNNModelScratch keeps the list as `net.params`; rnn(), grad_clipping(),
sgd() and train_epoch_ch8() as in the book (Optimizer branches dropped).
Changes: random token batches instead of The Time Machine; vocabulary 8, 16 hidden units,
3 minibatches; no timer, perplexity or prediction; the gradient norms of each step (right
after backward, before clipping) are printed as JSON.
"""

import json
import math

import torch
from torch import nn
from torch.nn import functional as F


def get_params(vocab_size, num_hiddens, device):
    num_inputs = num_outputs = vocab_size

    def normal(shape):
        return torch.randn(size=shape, device=device) * 0.01

    # Hidden layer parameters
    W_xh = normal((num_inputs, num_hiddens))
    W_hh = normal((num_hiddens, num_hiddens))
    b_h = torch.zeros(num_hiddens, device=device)
    # Output layer parameters
    W_hq = normal((num_hiddens, num_outputs))
    b_q = torch.zeros(num_outputs, device=device)
    # Attach gradients
    params = [W_xh, W_hh, b_h, W_hq, b_q]
    for param in params:
        param.requires_grad_(True)
    return params


def init_rnn_state(batch_size, num_hiddens, device):
    return (torch.zeros((batch_size, num_hiddens), device=device),)


def rnn(inputs, state, params):
    # Shape of inputs: (num_steps, batch_size, vocab_size)
    W_xh, W_hh, b_h, W_hq, b_q = params
    H, = state
    outputs = []
    for X in inputs:
        H = torch.tanh(torch.mm(X, W_xh) + torch.mm(H, W_hh) + b_h)
        Y = torch.mm(H, W_hq) + b_q
        outputs.append(Y)
    return torch.cat(outputs, dim=0), (H,)


class RNNModelScratch:
    """A RNN model implemented from scratch."""

    def __init__(self, vocab_size, num_hiddens, device, get_params, init_state, forward_fn):
        self.vocab_size, self.num_hiddens = vocab_size, num_hiddens
        self.params = get_params(vocab_size, num_hiddens, device)
        self.init_state, self.forward_fn = init_state, forward_fn

    def __call__(self, X, state):
        X = F.one_hot(X.T, self.vocab_size).type(torch.float32)
        return self.forward_fn(X, state, self.params)

    def begin_state(self, batch_size, device):
        return self.init_state(batch_size, self.num_hiddens, device)


def grad_clipping(net, theta):
    """Clip the gradient."""
    params = net.params
    norm = torch.sqrt(sum(torch.sum(p.grad ** 2) for p in params))
    if norm > theta:
        for param in params:
            param.grad[:] *= theta / norm


def sgd(params, lr, batch_size):
    """Minibatch stochastic gradient descent."""
    with torch.no_grad():
        for param in params:
            param -= lr * param.grad / batch_size
            param.grad.zero_()


def train_epoch_ch8(net, train_iter, loss, updater, device, norms):
    """Train a net within one epoch (sequential partitioning: the state carries over)."""
    state = None
    for X, Y in train_iter:
        if state is None:
            state = net.begin_state(batch_size=X.shape[0], device=device)
        else:
            for s in state:
                s.detach_()
        y = Y.T.reshape(-1)
        X, y = X.to(device), y.to(device)
        y_hat, state = net(X, state)
        l = loss(y_hat, y.long()).mean()  # noqa: E741 (the book's name)
        l.backward()
        norms.append([p.grad.norm().item() for p in net.params])
        grad_clipping(net, 1)
        updater(batch_size=1)


torch.manual_seed(0)
vocab_size, num_hiddens, num_steps, batch_size, lr = 8, 16, 5, 2, 1.0
device = torch.device("cpu")
tokens = torch.randint(0, vocab_size, (3, batch_size, num_steps + 1))
train_iter = [(b[:, :-1], b[:, 1:]) for b in tokens]
net = RNNModelScratch(vocab_size, num_hiddens, device, get_params, init_rnn_state, rnn)
norms = []
train_epoch_ch8(net, train_iter, nn.CrossEntropyLoss(),
                lambda batch_size: sgd(net.params, lr, batch_size), device, norms)
print(json.dumps({"norms": norms, "perplexity_ok": math.isfinite(norms[-1][0])}))
