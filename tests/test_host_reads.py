"""gradtrace reads a loop's numbers to the host in batches, not pass by pass: on an
accelerator each read of a device tensor's values waits for the device (a synchronisation)."""

from __future__ import annotations

from pathlib import Path

from helpers import show_json, write_script
from plain_python import run_plain

STEPS = 200

# The loop counts every read of a tensor's values into Python made while it runs (the
# script's, torch's and, under gradtrace, gradtrace's): a torch function mode sees each one.
COUNTED = f"""import torch
import torch.nn as nn
from torch.overrides import TorchFunctionMode

READS = {{"item", "tolist", "__float__", "__int__", "__bool__", "__index__", "numpy"}}


class Reads(TorchFunctionMode):
    def __init__(self):
        super().__init__()
        self.count = 0

    def __torch_function__(self, func, types, args=(), kwargs=None):
        if getattr(func, "__name__", "") in READS:
            self.count += 1
        return func(*args, **(kwargs or {{}}))


torch.manual_seed(0)
model = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 1))
opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
x = torch.randn(256, 8)
y = x[:, :2].sum(dim=1, keepdim=True)
with Reads() as reads:
    for step in range({STEPS}):
        batch = torch.randint(0, 256, (32,))
        opt.zero_grad()
        loss = nn.functional.mse_loss(model(x[batch]), y[batch])
        # not loss.backward(): a mode is off inside the methods it sees (Tensor.backward),
        # and gradtrace records torch.autograd.backward, which that calls
        torch.autograd.backward(loss)
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0, foreach=True)
        opt.step()
print("reads", reads.count)
"""


def _reads(printed: str) -> int:
    return int(printed.split()[-1])


def test_a_200_step_loop_costs_at_most_a_read_every_10_steps(tmp_path: Path) -> None:
    script = write_script(tmp_path, COUNTED)
    plain = run_plain(script)
    assert plain.returncode == 0, plain.stderr
    trace = show_json(script)
    assert len(trace["passes"]) == STEPS
    own = _reads(trace["stdout"]) - _reads(plain.stdout)
    assert 0 < own <= STEPS // 10, own
    # every pass has its statistics all the same
    assert all(loss is not None for loss in trace["steps"]["loss"])
    assert all(all(g is not None for g in row) for row in trace["steps"]["grads"])
