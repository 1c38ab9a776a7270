"""The PyTorch tutorial's DQN: its target network, used under no_grad and soft-updated by
state_dict, is an updated copy, not a graph cut.

Source: adapted from the PyTorch tutorial "Reinforcement Learning (DQN) Tutorial"
(pytorch/tutorials, intermediate_source/reinforcement_q_learning.py, BSD-3-Clause): the DQN
of three Linear layers, policy_net and target_net (loaded from policy_net's state_dict),
ReplayMemory, select_action's epsilon-greedy choice under no_grad, optimize_model() with the
target's values under no_grad, SmoothL1Loss, AdamW(amsgrad=True), clip_grad_value_ at 100,
and the soft update of the target's weights by state_dict (TAU).
Changes: CartPole replaced by random tensors (4 observations, 2 actions, a random next state,
reward 1.0, an episode ends at random or after 12 steps); BATCH_SIZE 16, 3 episodes; a fixed
seed; no plots; the episode durations and the policy's final gradient norms are printed as
JSON.
"""

import json
import math
import random
from collections import deque, namedtuple
from itertools import count

import torch
import torch.nn as nn
import torch.nn.functional as F
import torch.optim as optim

random.seed(0)
torch.manual_seed(0)
device = torch.device("cpu")

Transition = namedtuple("Transition", ("state", "action", "next_state", "reward"))


class ReplayMemory:

    def __init__(self, capacity):
        self.memory = deque([], maxlen=capacity)

    def push(self, *args):
        """Save a transition"""
        self.memory.append(Transition(*args))

    def sample(self, batch_size):
        return random.sample(self.memory, batch_size)

    def __len__(self):
        return len(self.memory)


class DQN(nn.Module):

    def __init__(self, n_observations, n_actions):
        super().__init__()
        self.layer1 = nn.Linear(n_observations, 128)
        self.layer2 = nn.Linear(128, 128)
        self.layer3 = nn.Linear(128, n_actions)

    # Called with either one element to determine next action, or a batch
    # during optimization. Returns tensor([[left0exp,right0exp]...]).
    def forward(self, x):
        x = F.relu(self.layer1(x))
        x = F.relu(self.layer2(x))
        return self.layer3(x)


BATCH_SIZE = 16
GAMMA = 0.99
EPS_START = 0.9
EPS_END = 0.05
EPS_DECAY = 1000
TAU = 0.005
LR = 1e-4

n_actions = 2
n_observations = 4

policy_net = DQN(n_observations, n_actions).to(device)
target_net = DQN(n_observations, n_actions).to(device)
target_net.load_state_dict(policy_net.state_dict())

optimizer = optim.AdamW(policy_net.parameters(), lr=LR, amsgrad=True)
memory = ReplayMemory(10000)

steps_done = 0


def select_action(state):
    global steps_done
    sample = random.random()
    eps_threshold = EPS_END + (EPS_START - EPS_END) * math.exp(-1. * steps_done / EPS_DECAY)
    steps_done += 1
    if sample > eps_threshold:
        with torch.no_grad():
            # t.max(1) will return the largest column value of each row.
            return policy_net(state).max(1).indices.view(1, 1)
    else:
        return torch.tensor([[random.randrange(n_actions)]], device=device, dtype=torch.long)


def optimize_model():
    if len(memory) < BATCH_SIZE:
        return
    transitions = memory.sample(BATCH_SIZE)
    # Transpose the batch: a Transition of batch-arrays.
    batch = Transition(*zip(*transitions, strict=True))

    # Compute a mask of non-final states and concatenate the batch elements
    non_final_mask = torch.tensor(tuple(map(lambda s: s is not None, batch.next_state)),
                                  device=device, dtype=torch.bool)
    non_final_next_states = torch.cat([s for s in batch.next_state if s is not None])
    state_batch = torch.cat(batch.state)
    action_batch = torch.cat(batch.action)
    reward_batch = torch.cat(batch.reward)

    # Compute Q(s_t, a): the columns of the actions taken
    state_action_values = policy_net(state_batch).gather(1, action_batch)

    # Compute V(s_{t+1}) for all next states with the "older" target_net
    next_state_values = torch.zeros(BATCH_SIZE, device=device)
    with torch.no_grad():
        next_state_values[non_final_mask] = target_net(non_final_next_states).max(1).values
    # Compute the expected Q values
    expected_state_action_values = (next_state_values * GAMMA) + reward_batch

    # Compute Huber loss
    criterion = nn.SmoothL1Loss()
    loss = criterion(state_action_values, expected_state_action_values.unsqueeze(1))

    # Optimize the model
    optimizer.zero_grad()
    loss.backward()
    # In-place gradient clipping
    torch.nn.utils.clip_grad_value_(policy_net.parameters(), 100)
    optimizer.step()


episode_durations = []
num_episodes = 3
for _episode in range(num_episodes):
    # Initialize the environment and get its state (random, in place of CartPole's reset())
    state = torch.randn(1, n_observations, device=device)
    for t in count():
        action = select_action(state)
        # env.step(action.item()): a random observation, reward 1.0, and the episode ends at
        # random (terminated) or after 12 steps (truncated)
        observation = torch.randn(n_observations).tolist()
        reward = torch.tensor([1.0], device=device)
        terminated, truncated = random.random() < 0.1, t == 11
        done = terminated or truncated

        if terminated:
            next_state = None
        else:
            next_state = torch.tensor(observation, dtype=torch.float32,
                                      device=device).unsqueeze(0)

        # Store the transition in memory
        memory.push(state, action, next_state, reward)

        # Move to the next state
        state = next_state

        # Perform one step of the optimization (on the policy network)
        optimize_model()

        # Soft update of the target network's weights
        # θ′ ← τ θ + (1 −τ )θ′
        target_net_state_dict = target_net.state_dict()
        policy_net_state_dict = policy_net.state_dict()
        for key in policy_net_state_dict:
            target_net_state_dict[key] = policy_net_state_dict[key] * TAU \
                + target_net_state_dict[key] * (1 - TAU)
        target_net.load_state_dict(target_net_state_dict)

        if done:
            episode_durations.append(t + 1)
            break

print(json.dumps({"episode_durations": episode_durations}))
print(json.dumps({f"policy_net.{name}": p.grad.norm().item()
                  for name, p in policy_net.named_parameters()}))
