"""L-BFGS as torch.optim's documentation has it: the closure resets the gradients, then
computes the loss and its backward; the optimizer calls it up to 20 times a step."""
import torch

torch.manual_seed(0)
model = torch.nn.Sequential(torch.nn.Linear(4, 16), torch.nn.Tanh(), torch.nn.Linear(16, 1))
optimizer = torch.optim.LBFGS(model.parameters(), lr=0.5)
x, y = torch.randn(32, 4), torch.randn(32, 1)
for _step in range(2):
    def closure():
        optimizer.zero_grad()
        loss = ((model(x) - y) ** 2).mean()
        loss.backward()
        return loss
    optimizer.step(closure)
