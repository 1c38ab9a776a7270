"""In-place changes located wherever the tensor came from (issue 53, item 4): the line of the
in-place op that changed a saved tensor, when forward's argument, another module's output or
an nn.ReLU(inplace=True) the line calls is the tensor; one finding per line, its hint written
from that line; and the run stops where python stops."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from helpers import SCENARIOS, invoke, shared_invoke, write_script
from plain_python import run_plain

from gradtrace.capture.naming.statements import changes_something_in_place
from gradtrace.findings.recorded import out_of_place

BUG = SCENARIOS / "bugs" / "inplace_residual.py"

# forward's argument x is a sigmoid's result, which the gate saved for its backward: the
# block's ReLU(inplace=True) writes over it (line 21)
RELU_ON_ARGUMENT = """\
import torch
import torch.nn as nn


class Gate(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc = nn.Linear(8, 8)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.sigmoid(self.fc(x))


class Block(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.relu = nn.ReLU(inplace=True)
        self.fc = nn.Linear(8, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.relu(x)
        return self.fc(x)


torch.manual_seed(0)
model = nn.Sequential(Gate(), Block())
loss = model(torch.randn(4, 8)).pow(2).mean()
loss.backward()
"""

# two lines at fault: each of three blocks adds in place to what its ReLU(inplace=True) saved
# (line 14), and the head halves its saved gate in place (line 26)
TWO_LINES = """\
import torch
import torch.nn as nn


class Block(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc = nn.Linear(8, 8)
        self.relu = nn.ReLU(inplace=True)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        identity = x
        out = self.relu(self.fc(x))
        out += identity
        return out


class Head(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc = nn.Linear(8, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        g = torch.sigmoid(self.fc(x))
        y = g * x
        g.mul_(0.5)
        return y.sum(dim=1)


torch.manual_seed(0)
model = nn.Sequential(Block(), Block(), Block(), Head())
loss = model(torch.randn(4, 8)).pow(2).mean()
loss.backward()
"""

# a functional ReLU in place, its result thrown away, on forward's argument (a tanh's result)
FUNCTIONAL = """\
import torch
import torch.nn as nn
import torch.nn.functional as F


class Block(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc = nn.Linear(8, 8)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        F.relu(x, inplace=True)
        return self.fc(x)


torch.manual_seed(0)
model = nn.Sequential(nn.Linear(8, 8), nn.Tanh(), Block())
model(torch.randn(4, 8)).sum().backward()
"""


def _inplace(result: Any) -> list[dict]:
    """The inplace-modified findings of a `show --json` run that stopped at its backward."""
    assert result.exit_code == 2, result.stderr
    return [f for f in json.loads(result.stdout)["findings"]
            if f["code"] == "inplace-modified"]


def test_the_residual_add_on_forward_s_argument_is_one_finding_at_its_line() -> None:
    (found,) = _inplace(shared_invoke("show", str(BUG), "--json"))
    assert (found["line"], found["severity"]) == (33, "error")
    assert found["file"].endswith("inplace_residual.py")
    # told at the first tensor it changed (the stem's ReLU output, made in another forward)
    assert found["message"] == (
        "the result tensor of ReluBackward0 (line 47, in model.stem.2) was saved for backward "
        "and then changed in place at line 33 `x += residual`: backward needs the saved value;"
        " line 33 changed 2 more tensors saved for backward the same way")
    assert found["hint"] == "write line 33 out of place: `x = x + residual`"


def test_the_bug_stops_where_python_stops_and_its_twin_runs_as_python_does() -> None:
    plain = run_plain(BUG)
    assert plain.returncode == 1 and "modified by an inplace operation" in plain.stderr
    assert 'inplace_residual.py", line 57, in <module>' in plain.stderr
    shown = json.loads(shared_invoke("show", str(BUG), "--json").stdout)
    (stop,) = [f for f in shown["findings"] if f["code"] == "scenario-stopped"]
    assert stop["line"] == 57 and plain.stderr.strip().splitlines()[-1] in stop["message"]
    fixed = SCENARIOS / "bugs" / "inplace_residual_fixed.py"
    plain = run_plain(fixed)
    result = shared_invoke("show", str(fixed), "--json")
    assert (plain.returncode, result.exit_code) == (0, 0), result.stderr
    assert json.loads(result.stdout)["stdout"] == plain.stdout  # the same loss, printed


def test_an_inplace_relu_module_names_the_line_that_calls_it(tmp_path: Path) -> None:
    (found,) = _inplace(invoke("show", write_script(tmp_path, RELU_ON_ARGUMENT), "--json"))
    assert found["line"] == 21
    assert found["message"].startswith(
        "the result tensor of SigmoidBackward0 (line 11, in model.0) was saved for backward "
        "and then changed in place at line 21 `x = self.relu(x)`, where model.1.relu is "
        "nn.ReLU(inplace=True), which writes its output over its input")
    assert found["hint"].startswith("build model.1.relu as nn.ReLU(inplace=False)")


def test_one_finding_per_line_at_fault_each_with_its_own_rewrite(tmp_path: Path) -> None:
    found = _inplace(invoke("show", write_script(tmp_path, TWO_LINES), "--json"))
    assert [f["line"] for f in found] == [14, 26]
    blocks, head = found
    assert "ReluBackward0 (line 13, in model.0.relu)" in blocks["message"]
    assert "`out += identity`" in blocks["message"] and "2 more tensors" in blocks["message"]
    assert blocks["hint"] == "write line 14 out of place: `out = out + identity`"
    assert "SigmoidBackward0 (line 24, in model.3)" in head["message"]
    assert "more tensor" not in head["message"]  # sigmoid's result and mul's self: one tensor
    assert head["hint"] == "write line 26 out of place: `g = g.mul(0.5)`"


def test_a_functional_inplace_call_is_rewritten_with_its_result_bound(tmp_path: Path) -> None:
    (found,) = _inplace(invoke("show", write_script(tmp_path, FUNCTIONAL), "--json"))
    assert found["line"] == 12 and "TanhBackward0 (line 18, in model.1)" in found["message"]
    assert found["hint"] == "write line 12 out of place: `x = F.relu(x, inplace=False)`"


@pytest.mark.parametrize(("code", "changes"), [
    ("x += residual", True),
    ("x.add_(1)", True),
    ("torch.relu_(x)", True),
    ("x[0] = 0", True),
    ("y = F.relu(x, inplace=True)", True),
    ("x = self.relu(x)", False),  # whether it does, its module says
    ("out = x.add(1)", False),
    ("x = x._version_(1)", False),
    ("if changed:", False),  # not a statement of its own
])
def test_which_lines_change_something_in_place(code: str, changes: bool) -> None:
    assert changes_something_in_place(code) is changes


@pytest.mark.parametrize(("line", "rewrite"), [
    ("torch.relu_(x)", "x = torch.relu(x)"),
    ("torch.relu_(x.view(2))", None),
    ("F.relu(x, inplace=True)", "x = F.relu(x, inplace=False)"),
    ("out = F.relu(out, inplace=True)", "out = F.relu(out, inplace=False)"),
    ("out += identity", "out = out + identity"),
])
def test_out_of_place_rewrites_of_functional_and_inplace_calls(
        line: str, rewrite: str | None) -> None:
    assert out_of_place(line) == rewrite
