"""`model` rebound three times: each refactor of the tutorial trains a new model.

Source: adapted from pytorch/tutorials beginner_source/nn_tutorial.py ("What is torch.nn
really?", BSD-3-Clause): Mnist_Logistic with nn.Parameter weights and bias trained by fit();
Mnist_Logistic redefined with nn.Linear, `model = Mnist_Logistic()` and fit() again; then
`model, opt = get_model()` and the loop with optim.SGD.
Changes: random 784-pixel inputs for 64 samples instead of the MNIST download (bs 32, one
epoch); no accuracy or validation; each pass's gradient norms are collected and printed as
JSON.
"""

import json
import math

import torch
import torch.nn.functional as F
from torch import nn, optim

torch.manual_seed(0)
n, bs, lr, epochs = 64, 32, 0.5, 1
x_train = torch.randn(n, 784)
y_train = torch.randint(0, 10, (n,))
loss_func = F.cross_entropy
norms = []  # per pass: {parameter name: gradient norm}


class Mnist_Logistic(nn.Module):
    def __init__(self):
        super().__init__()
        self.weights = nn.Parameter(torch.randn(784, 10) / math.sqrt(784))
        self.bias = nn.Parameter(torch.zeros(10))

    def forward(self, xb):
        return xb @ self.weights + self.bias


model = Mnist_Logistic()


def fit():
    for _epoch in range(epochs):
        for i in range((n - 1) // bs + 1):
            start_i = i * bs
            end_i = start_i + bs
            xb = x_train[start_i:end_i]
            yb = y_train[start_i:end_i]
            pred = model(xb)
            loss = loss_func(pred, yb)

            loss.backward()
            norms.append({f"model.{k}": p.grad.norm().item()
                          for k, p in model.named_parameters()})
            with torch.no_grad():
                for p in model.parameters():
                    p -= p.grad * lr
                model.zero_grad()


fit()


class Mnist_Logistic(nn.Module):  # noqa: F811 (the tutorial's refactor)
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(784, 10)

    def forward(self, xb):
        return self.lin(xb)


model = Mnist_Logistic()
fit()


def get_model():
    model = Mnist_Logistic()
    return model, optim.SGD(model.parameters(), lr=lr)


model, opt = get_model()
for _epoch in range(epochs):
    for i in range((n - 1) // bs + 1):
        start_i = i * bs
        end_i = start_i + bs
        xb = x_train[start_i:end_i]
        yb = y_train[start_i:end_i]
        pred = model(xb)
        loss = loss_func(pred, yb)

        loss.backward()
        norms.append({f"model.{k}": p.grad.norm().item() for k, p in model.named_parameters()})
        opt.step()
        opt.zero_grad()
print(json.dumps(norms))
