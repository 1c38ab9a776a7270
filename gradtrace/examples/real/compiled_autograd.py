"""Compiled autograd: the backward pass compiled as one graph, its hooks traced into it.

Source: pytorch/tutorials, intermediate_source/compiled_autograd_tutorial.rst: "Basic usage"
(torch._dynamo.config.compiled_autograd = True and a compiled train step that calls
backward()), "Compiling the forward and backward pass using different flags"
(compiled_autograd._enable with fullgraph=True) and "Backward hooks can now be captured".
Changes: backend="aot_eager" (the tutorial compiles with inductor in its first two parts);
compiled_autograd.enable is compiled_autograd._enable (the public name is gone in torch 2.13);
the three parts run one after another on their own models; train() runs twice; the .grad
norms printed as a JSON line; torch.manual_seed(0).
"""
import json

import torch


class Model(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.linear = torch.nn.Linear(10, 10)

    def forward(self, x):
        return self.linear(x)


torch.manual_seed(0)
# 1. basic usage
model = Model()
x = torch.randn(10)

torch._dynamo.config.compiled_autograd = True
@torch.compile(backend="aot_eager")
def train(model, x):
    loss = model(x).sum()
    loss.backward()

train(model, x)
train(model, x)   # grads accumulate: 2x
torch._dynamo.config.compiled_autograd = False
out = {"basic." + n: p.grad.norm().item() for n, p in model.named_parameters()}

# 2. different flags for forward and backward, context manager
model2 = Model()
def train2(model, x):
    model = torch.compile(model, backend="aot_eager")
    loss = model(x).sum()
    with torch._dynamo.compiled_autograd._enable(torch.compile(backend="aot_eager", fullgraph=True)):
        loss.backward()

train2(model2, x)
out.update({"ctx." + n: p.grad.norm().item() for n, p in model2.named_parameters()})

# 3. backward hooks captured
@torch.compile(backend="aot_eager")
def fn(x):
    return x.sum()

xh = torch.randn(10, 10, requires_grad=True)
xh.register_hook(lambda grad: grad+10)
loss = fn(xh)

with torch._dynamo.compiled_autograd._enable(torch.compile(backend="aot_eager")):
    loss.backward()
out["hook.xh"] = xh.grad.norm().item()
print(json.dumps(out))
