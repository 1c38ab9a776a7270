"""The graphs the benchmarks measure, built the same way by each of them."""

from __future__ import annotations

import torch


def mlp() -> torch.Tensor:
    torch.manual_seed(0)
    layers: list[torch.nn.Module] = []
    for _ in range(4):
        layers += [torch.nn.Linear(256, 256), torch.nn.ReLU()]
    return torch.nn.Sequential(*layers)(torch.randn(64, 256)).pow(2).mean()


def transformer() -> torch.Tensor:
    """A 6-layer nn.TransformerEncoder (d_model 128, batch 8, seq 32): 455 nodes."""
    torch.manual_seed(0)
    layer = torch.nn.TransformerEncoderLayer(d_model=128, nhead=4, batch_first=True)
    model = torch.nn.TransformerEncoder(layer, num_layers=6, enable_nested_tensor=False)
    return model(torch.randn(8, 32, 128)).pow(2).mean()


def many_leaves(n: int = 10_000) -> torch.Tensor:
    leaves = [torch.randn((), requires_grad=True) for _ in range(n)]
    return torch.stack([(leaf * 2).sin().exp() for leaf in leaves]).sum()


def chain(n: int) -> torch.Tensor:
    y = torch.tensor(1.0, requires_grad=True)
    for _ in range(n):
        y = y * 1.0001
    return y


def diamond(layers: int = 50) -> torch.Tensor:
    """Two branches per layer that meet again, both using the same two weights: 2^50 paths."""
    torch.manual_seed(0)
    w1, w2 = torch.randn(4, 4, requires_grad=True), torch.randn(4, 4, requires_grad=True)
    h = torch.randn(1, 4, requires_grad=True)
    for _ in range(layers):
        h = torch.tanh(h @ w1) + torch.tanh(h @ w2)
    return h.sum()
