"""Actor-critic with one backward: the critic's zero_grad() sits between the backward and
its step (the bug), so the critic never learns."""
import torch
import torch.nn as nn

torch.manual_seed(0)
actor = nn.Linear(4, 2)
critic = nn.Linear(4, 1)
a_opt = torch.optim.Adam(actor.parameters(), 1e-3)
c_opt = torch.optim.Adam(critic.parameters(), 1e-3)
for _ep in range(20):
    s = torch.randn(16, 4)
    v = critic(s).squeeze(-1)
    loss = -(actor(s).log_softmax(-1)[:, 0] * (1 - v).detach()).mean() + (1 - v).pow(2).mean()
    a_opt.zero_grad()
    loss.backward()
    a_opt.step()
    c_opt.zero_grad()   # bug: resets the critic's gradient before its step
    c_opt.step()
print(loss.item())
