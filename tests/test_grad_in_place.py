"""Scripts that change .grad in place after a pass (public tutorials' patterns): every pass's
numbers are what backward wrote, as plain python saw them right after it — never "values
unavailable", never the values the script made of them afterwards."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pytest
from helpers import invoke, show_json, write_script
from plain_python import run_plain

pytestmark = pytest.mark.matrix

# Each script calls seen() right after each backward: plain python prints what .grad held
# then, per named leaf, as the last line.
SNAPSHOT = """import json
import torch
SEEN = []
def seen(**leaves):
    SEEN.append({n: t.grad.detach().flatten().tolist() for n, t in leaves.items()})
"""
END = "print(json.dumps(SEEN))\n"

PATTERNS = {
    # d2l's autograd tutorial: x.grad.zero_() between backward calls
    "zeroed": """x = torch.arange(4.0, requires_grad=True)
for i in range(4):
    y = 2 * torch.dot(x, x) * (i + 1)
    y.backward()
    seen(x=x)
    x.grad.zero_()
""",
    # an optimizer step after p.grad.mul_(), .grad zeroed in place (set_to_none=False)
    "scaled_by_hand": """torch.manual_seed(0)
model = torch.nn.Linear(3, 2)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
data = torch.randn(5, 3)
for step in range(4):
    opt.zero_grad(set_to_none=False)
    loss = model(data).pow(2).sum()
    loss.backward()
    seen(w=model.weight, b=model.bias)
    for p in model.parameters():
        p.grad.mul_(0.5)
    opt.step()
""",
    # clip_grad_norm_, then clipping by hand as d2l's RNN does (param.grad[:] *= theta / norm)
    "clipped": """torch.manual_seed(0)
model = torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.Tanh(), torch.nn.Linear(4, 1))
opt = torch.optim.SGD(model.parameters(), lr=0.5)
data = torch.randn(8, 3)
for step in range(4):
    opt.zero_grad()
    loss = model(data).pow(2).mean() * 100
    loss.backward()
    seen(w0=model[0].weight, w2=model[2].weight)
    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
    params = [p for p in model.parameters()]
    norm = torch.sqrt(sum(torch.sum(p.grad ** 2) for p in params))
    for param in params:
        param.grad[:] *= 0.5 / norm
    opt.step()
""",
    # a GradScaler: unscale_ and a clip change .grad in place after the scaled backward
    "grad_scaler": """torch.manual_seed(0)
model = torch.nn.Linear(3, 1)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
scaler = torch.amp.GradScaler("cpu", init_scale=1024.0)
data = torch.randn(6, 3)
for step in range(4):
    opt.zero_grad()
    loss = model(data).pow(2).mean()
    scaler.scale(loss).backward()
    seen(w=model.weight, b=model.bias)
    scaler.unscale_(opt)
    torch.nn.utils.clip_grad_norm_(model.parameters(), 0.01)
    scaler.step(opt)
    scaler.update()
""",
}
NAMES = {"w": "model.weight", "b": "model.bias", "w0": "model.0.weight",
         "w2": "model.2.weight", "x": "x"}


def _norm(values: list[float]) -> float:
    return math.sqrt(math.fsum(v * v for v in values))


@pytest.fixture(scope="module", params=sorted(PATTERNS))
def ran(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
        ) -> tuple[list[dict[str, list[float]]], dict[str, Any]]:
    """What plain python saw after each pass, and gradtrace's trace of the same script."""
    script = write_script(tmp_path_factory.mktemp(request.param),
                          SNAPSHOT + PATTERNS[request.param] + END)
    plain = run_plain(script)
    assert plain.returncode == 0, plain.stderr
    trace = show_json(script)
    assert trace["stdout"] == plain.stdout  # the script saw what it sees under python
    return json.loads(plain.stdout.splitlines()[-1]), trace


def _assert_rows_are(seen: list[dict[str, list[float]]], steps: dict[str, Any]) -> None:
    """Each pass's row of light statistics holds what plain python saw after that pass
    (divided by GradScaler's scale, in a pass from its scaled loss)."""
    assert len(steps["grads"]) == len(seen)
    scales = steps["loss_scale"] or [None] * len(seen)
    for number, (row, after, scale) in enumerate(zip(steps["grads"], seen, scales,
                                                     strict=True), 1):
        for short, values in after.items():
            norm, top, finite, _ = row[steps["leaves"].index(NAMES[short])]
            norm, top = norm * (scale or 1.0), top * (scale or 1.0)
            assert norm == pytest.approx(_norm(values), rel=1e-6), (number, short)
            assert top == pytest.approx(max(map(abs, values)), rel=1e-6), (number, short)
            assert finite


def test_every_pass_s_light_statistics_are_what_backward_wrote(
        ran: tuple[list[dict[str, list[float]]], dict[str, Any]]) -> None:
    seen, trace = ran
    assert len(seen) == 4
    _assert_rows_are(seen, trace["steps"])


@pytest.mark.parametrize("name", sorted(PATTERNS))
def test_a_long_loop_s_light_passes_are_what_backward_wrote(name: str, tmp_path: Path) -> None:
    """Past the passes recorded in detail, a loop's passes are light (statistics made on
    the device as each ends, read in batches): each is still what python saw after it."""
    script = write_script(tmp_path, SNAPSHOT + PATTERNS[name].replace("range(4)", "range(150)")
                          + END)
    plain = run_plain(script)
    assert plain.returncode == 0, plain.stderr
    trace = show_json(script)
    assert trace["stdout"] == plain.stdout
    # in detail: the first pass (kept) and the last of those planned in detail (pass 100)
    assert [i for i, p in enumerate(trace["passes"], 1) if not p.get("light")] == [1, 100]
    _assert_rows_are(json.loads(plain.stdout.splitlines()[-1]), trace["steps"])
    assert "unavailable" not in json.dumps(trace)


def test_each_shown_pass_s_grad_changes_are_what_backward_wrote(
        ran: tuple[list[dict[str, list[float]]], dict[str, Any]]) -> None:
    """The first pass and the last (its changes summarised as it ended, read at the end of
    the run, after the script zeroed, clipped or scaled them)."""
    seen, trace = ran
    table = trace["gradients"]
    shown = [(i, p) for i, p in enumerate(trace["passes"]) if not p.get("light")]
    assert [i for i, _ in shown] == [0, 3]
    for i, p in shown:
        changes = {c["tensor"]: c for c in p["grad_changes"]}
        for short, values in seen[i].items():
            after = changes[NAMES[short]]["after"]
            after = table[after] if isinstance(after, int) else after
            assert "unavailable" not in str(after), (i, short)
            assert after["norm"] == pytest.approx(_norm(values), rel=1e-6), (i, short)
            assert after["min"] == pytest.approx(min(values), rel=1e-6, abs=1e-12)
            assert after["max"] == pytest.approx(max(values), rel=1e-6, abs=1e-12)


def test_no_gradient_anywhere_is_unavailable(
        ran: tuple[list[dict[str, list[float]]], dict[str, Any]]) -> None:
    _, trace = ran
    assert "unavailable" not in json.dumps(trace)


def test_the_last_pass_of_a_loop_that_zeroes_in_place_shows_its_own_values(
        tmp_path: Path) -> None:
    """The d2l pattern, end to end in the terminal: the last pass's x.grad is what its
    backward wrote (x.grad.zero_() ran after it), not 'values unavailable'."""
    script = write_script(tmp_path, SNAPSHOT + PATTERNS["zeroed"] + END)
    result = invoke("show", script)
    assert result.exit_code == 0, result.stderr
    assert "x.grad  [0, 0, 0, 0] → [0, 16, 32, 48]" in result.stdout
    assert "unavailable" not in result.stdout
