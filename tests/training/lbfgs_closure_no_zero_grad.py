"""The L-BFGS loop of lbfgs_closure.py with its bug: the closure does not call zero_grad(),
so each of the optimizer's calls adds its gradient to those of the calls before it."""
import torch

torch.manual_seed(0)
model = torch.nn.Sequential(torch.nn.Linear(4, 16), torch.nn.Tanh(), torch.nn.Linear(16, 1))
optimizer = torch.optim.LBFGS(model.parameters(), lr=0.5)
x, y = torch.randn(32, 4), torch.randn(32, 1)
for _step in range(2):
    def closure():
        loss = ((model(x) - y) ** 2).mean()
        loss.backward()
        return loss
    optimizer.step(closure)
