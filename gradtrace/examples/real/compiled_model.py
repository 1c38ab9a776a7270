"""A module compiled with torch.compile(model), trained eagerly: forward runs the compiled
graph and backward runs its compiled backward (CompiledFunctionBackward).

Source: the pattern of pytorch/tutorials, intermediate_source/torch_compile_tutorial.py
("We can also optimize torch.nn.Module instances": `opt_mod = torch.compile(mod)`) and of
the PyTorch 2.0 getting-started page (`compiled_model = torch.compile(model)`, then
`loss.backward()` and `optimizer.step()` outside it).
Changes: a small MLP on CPU, 3 steps of SGD on fixed random data; the backend is the first
argument (default `aot_eager`, fast; `inductor` compiles C++); the final gradient norms are
printed as JSON.
"""

import json
import sys

import torch
import torch.nn as nn

backend = sys.argv[1] if len(sys.argv) > 1 else "aot_eager"
torch.manual_seed(0)
model = nn.Sequential(nn.Linear(8, 16), nn.Tanh(), nn.Linear(16, 4))
compiled = torch.compile(model, backend=backend)
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
x = torch.randn(32, 8)
target = torch.randn(32, 4)
for step in range(3):
    optimizer.zero_grad()
    loss = nn.functional.mse_loss(compiled(x), target)
    loss.backward()
    optimizer.step()
    print(f"step {step} loss {loss.item():.6f}")
print(json.dumps({f"model.{n}": p.grad.norm().item() for n, p in model.named_parameters()}))
