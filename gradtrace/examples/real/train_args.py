"""An argparse training script: `gradtrace show train_args.py -- --epochs 1`.

Source: modeled on pytorch/examples mnist/main.py (its flags --batch-size, --epochs, --lr,
--seed and its train() loop), written for gradtrace.
Changes: random 1x12x12 "images" instead of the MNIST download; a smaller network; the
final gradient norms are printed as JSON so tests can compare them with plain PyTorch.
"""

import argparse
import json

import torch
import torch.nn as nn
import torch.nn.functional as F


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(1, 4, 3, 1)
        self.fc1 = nn.Linear(4 * 5 * 5, 16)
        self.fc2 = nn.Linear(16, 10)

    def forward(self, x):
        x = F.relu(self.conv1(x))
        x = F.max_pool2d(x, 2)
        x = torch.flatten(x, 1)
        x = F.relu(self.fc1(x))
        return F.log_softmax(self.fc2(x), dim=1)


def train(model, data, target, optimizer, batch_size):
    model.train()
    for start in range(0, len(data), batch_size):
        batch, labels = data[start:start + batch_size], target[start:start + batch_size]
        optimizer.zero_grad()
        output = model(batch)
        loss = F.nll_loss(output, labels)
        loss.backward()
        optimizer.step()


def main():
    parser = argparse.ArgumentParser(description="a small training run")
    parser.add_argument("--batch-size", type=int, default=16)
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--lr", type=float, default=0.1)
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()
    torch.manual_seed(args.seed)
    data, target = torch.randn(64, 1, 12, 12), torch.randint(0, 10, (64,))
    model = Net()
    optimizer = torch.optim.SGD(model.parameters(), lr=args.lr)
    for _ in range(args.epochs):
        train(model, data, target, optimizer, args.batch_size)
    print(json.dumps({f"model.{n}": p.grad.norm().item() for n, p in model.named_parameters()}))


if __name__ == "__main__":
    main()
