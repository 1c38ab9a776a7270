"""A normalizing flow whose scale layer takes its scale as a Python number (line 39,
`.item()`, to call math.log): the scale never learns. The loop logs each loss with
`.data.numpy()` after backward, as normflows' README does; that line cuts nothing a
backward used. Expected: graph-cut (warning) at line 39, in Scale.forward of flow.layers.3.
The healthy twin is flow_scale_item_fixed.py."""

import math

import numpy as np
import torch
import torch.nn as nn

torch.manual_seed(0)


class AffineCoupling(nn.Module):
    def __init__(self, dim: int, hidden: int) -> None:
        super().__init__()
        self.half = dim // 2
        self.net = nn.Sequential(nn.Linear(self.half, hidden), nn.Tanh(),
                                 nn.Linear(hidden, 2 * (dim - self.half)))

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        x1, x2 = x[:, :self.half], x[:, self.half:]
        s, t = self.net(x1).chunk(2, dim=1)
        s = torch.tanh(s)
        return torch.cat([x2 * torch.exp(s) + t, x1], dim=1), s.sum(dim=1)


class Scale(nn.Module):
    """One learned scale for every dimension."""

    def __init__(self, dim: int) -> None:
        super().__init__()
        self.dim = dim
        self.log_scale = nn.Parameter(torch.zeros(()))

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        scale = self.log_scale.exp().item()
        return x * scale, torch.full((x.shape[0],), self.dim * math.log(scale))


class Flow(nn.Module):
    def __init__(self, dim: int) -> None:
        super().__init__()
        self.dim = dim
        self.layers = nn.ModuleList([AffineCoupling(dim, 16), AffineCoupling(dim, 16),
                                     AffineCoupling(dim, 16), Scale(dim)])

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        log_det = torch.zeros(x.shape[0])
        for layer in self.layers:
            x, ld = layer(x)
            log_det = log_det + ld
        return x, log_det

    def forward_kld(self, x: torch.Tensor) -> torch.Tensor:
        """The negative log-likelihood of x under the flow, with a standard normal base."""
        z, log_det = self(x)
        log_p = -0.5 * (z ** 2).sum(dim=1) - 0.5 * self.dim * math.log(2 * math.pi)
        return -(log_p + log_det).mean()


flow = Flow(4)
optimizer = torch.optim.Adam(flow.parameters(), lr=1e-3)
data = torch.randn(8, 64, 4) * torch.tensor([1.0, 0.5, 2.0, 1.0])
loss_hist = np.array([])
for x in data:
    optimizer.zero_grad()
    loss = flow.forward_kld(x)
    loss.backward()
    optimizer.step()
    loss_hist = np.append(loss_hist, loss.to("cpu").data.numpy())
print(f"loss {loss_hist[0]:.4f} -> {loss_hist[-1]:.4f}")
