"""The torch.compile tutorial's examples on CPU: a compiled function, a compiled module, and a
compiled training step that calls backward() itself.

Source: pytorch/tutorials, intermediate_source/torch_compile_tutorial.py ("Basic Usage":
`opt_foo1 = torch.compile(foo)`, `MyModule` and `opt_mod = torch.compile(mod)`; "Demonstrating
Speedups": `train(mod, data)` with `opt.zero_grad(True)`, CrossEntropyLoss, `loss.backward()`,
`opt.step()`, compiled as `train_opt = torch.compile(train)`).
Changes: CPU only; densenet121 (torchvision) replaced by the tutorial's own MyModule with a
second layer; 4 training steps on fixed random data instead of timing 10; the backend is
the first argument (default `aot_eager`, fast; `inductor` compiles C++); the final gradient
norms are printed as JSON.
"""

import json
import sys

import torch

backend = sys.argv[1] if len(sys.argv) > 1 else "aot_eager"
torch.manual_seed(0)


def foo(x, y):
    a = torch.sin(x)
    b = torch.cos(x)
    return a + b


opt_foo1 = torch.compile(foo, backend=backend)
print(opt_foo1(torch.randn(10, 10), torch.randn(10, 10)).shape)


class MyModule(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(100, 10)
        self.out = torch.nn.Linear(10, 10)

    def forward(self, x):
        return self.out(torch.nn.functional.relu(self.lin(x)))


model = MyModule()
opt = torch.optim.Adam(model.parameters())


def train(mod, data):
    opt.zero_grad(True)
    pred = mod(data[0])
    loss = torch.nn.CrossEntropyLoss()(pred, data[1])
    loss.backward()
    opt.step()


train_opt = torch.compile(train, backend=backend)
batches = [(torch.randn(16, 100), torch.randint(10, (16,))) for _ in range(4)]
for i, inp in enumerate(batches):
    train_opt(model, inp)
    print(f"compile train step {i}")
print(json.dumps({f"model.{n}": p.grad.norm().item() for n, p in model.named_parameters()}))
