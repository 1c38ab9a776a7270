"""Soft actor-critic updates: the networks are attributes of a plain agent object.

Source: adapted from pranz24/pytorch-soft-actor-critic (MIT), sac.py and model.py: class
SAC(object) holds critic, critic_target (hard_update), a GaussianPolicy sampled with rsample,
log_alpha with automatic entropy tuning and their Adam optimizers; update_parameters() runs
the critic, policy and alpha losses, each with its own backward() and step().
Changes: the critic holds its two Q-functions as submodules Q1 and Q2 (pranz24 keeps them as
linear1-3 and linear4-6 of one QNetwork); a random replay batch instead of a gym
environment; 4 state dims, 2 action dims, 8 hidden units; two updates; the gradient norms
after each update's losses are printed as JSON.
"""

import json

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.distributions import Normal
from torch.optim import Adam

LOG_SIG_MAX = 2
LOG_SIG_MIN = -20
epsilon = 1e-6


def hard_update(target, source):
    for target_param, param in zip(target.parameters(), source.parameters(), strict=True):
        target_param.data.copy_(param.data)


def soft_update(target, source, tau):
    for target_param, param in zip(target.parameters(), source.parameters(), strict=True):
        target_param.data.copy_(target_param.data * (1.0 - tau) + param.data * tau)


class QNetwork(nn.Module):
    def __init__(self, num_inputs, num_actions, hidden_dim):
        super().__init__()
        self.linear1 = nn.Linear(num_inputs + num_actions, hidden_dim)
        self.linear2 = nn.Linear(hidden_dim, hidden_dim)
        self.linear3 = nn.Linear(hidden_dim, 1)

    def forward(self, xu):
        x = F.relu(self.linear1(xu))
        x = F.relu(self.linear2(x))
        return self.linear3(x)


class Critic(nn.Module):
    def __init__(self, num_inputs, num_actions, hidden_dim):
        super().__init__()
        self.Q1 = QNetwork(num_inputs, num_actions, hidden_dim)
        self.Q2 = QNetwork(num_inputs, num_actions, hidden_dim)

    def forward(self, state, action):
        xu = torch.cat([state, action], 1)
        return self.Q1(xu), self.Q2(xu)


class GaussianPolicy(nn.Module):
    def __init__(self, num_inputs, num_actions, hidden_dim):
        super().__init__()
        self.linear1 = nn.Linear(num_inputs, hidden_dim)
        self.linear2 = nn.Linear(hidden_dim, hidden_dim)
        self.mean_linear = nn.Linear(hidden_dim, num_actions)
        self.log_std_linear = nn.Linear(hidden_dim, num_actions)

    def forward(self, state):
        x = F.relu(self.linear1(state))
        x = F.relu(self.linear2(x))
        mean = self.mean_linear(x)
        log_std = torch.clamp(self.log_std_linear(x), min=LOG_SIG_MIN, max=LOG_SIG_MAX)
        return mean, log_std

    def sample(self, state):
        mean, log_std = self.forward(state)
        std = log_std.exp()
        normal = Normal(mean, std)
        x_t = normal.rsample()  # for reparameterization trick (mean + std * N(0,1))
        y_t = torch.tanh(x_t)
        action = y_t
        log_prob = normal.log_prob(x_t)
        # Enforcing Action Bound
        log_prob -= torch.log(1 - y_t.pow(2) + epsilon)
        log_prob = log_prob.sum(1, keepdim=True)
        return action, log_prob, torch.tanh(mean)


class SAC(object):  # noqa: UP004 (as in sac.py)
    def __init__(self, num_inputs, num_actions, hidden_size=8, lr=3e-4):
        self.gamma, self.tau, self.alpha = 0.99, 0.005, 0.2
        self.critic = Critic(num_inputs, num_actions, hidden_size)
        self.critic_optim = Adam(self.critic.parameters(), lr=lr)
        self.critic_target = Critic(num_inputs, num_actions, hidden_size)
        hard_update(self.critic_target, self.critic)
        # Target Entropy = -dim(A) as given in the paper
        self.target_entropy = -float(num_actions)
        self.log_alpha = torch.zeros(1, requires_grad=True)
        self.alpha_optim = Adam([self.log_alpha], lr=lr)
        self.policy = GaussianPolicy(num_inputs, num_actions, hidden_size)
        self.policy_optim = Adam(self.policy.parameters(), lr=lr)

    def update_parameters(self, memory, norms):
        state_batch, action_batch, reward_batch, next_state_batch, mask_batch = memory
        with torch.no_grad():
            next_state_action, next_state_log_pi, _ = self.policy.sample(next_state_batch)
            qf1_next_target, qf2_next_target = self.critic_target(next_state_batch,
                                                                  next_state_action)
            min_qf_next_target = torch.min(qf1_next_target, qf2_next_target) \
                - self.alpha * next_state_log_pi
            next_q_value = reward_batch + mask_batch * self.gamma * min_qf_next_target
        # Two Q-functions to mitigate positive bias in the policy improvement step
        qf1, qf2 = self.critic(state_batch, action_batch)
        qf1_loss = F.mse_loss(qf1, next_q_value)
        qf2_loss = F.mse_loss(qf2, next_q_value)
        qf_loss = qf1_loss + qf2_loss

        self.critic_optim.zero_grad()
        qf_loss.backward()
        norms["critic"].append(self.critic.Q1.linear1.weight.grad.norm().item())
        self.critic_optim.step()

        pi, log_pi, _ = self.policy.sample(state_batch)
        qf1_pi, qf2_pi = self.critic(state_batch, pi)
        min_qf_pi = torch.min(qf1_pi, qf2_pi)
        policy_loss = ((self.alpha * log_pi) - min_qf_pi).mean()

        self.policy_optim.zero_grad()
        policy_loss.backward()
        norms["policy"].append(self.policy.mean_linear.weight.grad.norm().item())
        self.policy_optim.step()

        alpha_loss = -(self.log_alpha * (log_pi + self.target_entropy).detach()).mean()
        self.alpha_optim.zero_grad()
        alpha_loss.backward()
        norms["alpha"].append(self.log_alpha.grad.norm().item())
        self.alpha_optim.step()
        self.alpha = self.log_alpha.exp()

        soft_update(self.critic_target, self.critic, self.tau)
        return qf1_loss.item(), qf2_loss.item(), policy_loss.item(), alpha_loss.item()


def random_batch(batch_size, num_inputs, num_actions):
    return (torch.randn(batch_size, num_inputs), torch.rand(batch_size, num_actions) * 2 - 1,
            torch.randn(batch_size, 1), torch.randn(batch_size, num_inputs),
            torch.ones(batch_size, 1))


torch.manual_seed(0)
agent = SAC(4, 2)
norms = {"critic": [], "policy": [], "alpha": []}
for _updates in range(2):
    agent.update_parameters(random_batch(16, 4, 2), norms)
print(json.dumps(norms))
