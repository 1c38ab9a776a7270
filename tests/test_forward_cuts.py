"""Causes inside a module's forward(). A graph cut (`self.ln(h.detach())`), in the script
or in the model's own file beside it: the graph-cut finding names that line and its
function, first, and the unreached-leaf finding points to it; a forward that detaches what
should not learn (a target) while every parameter is reached gets no such finding. An
in-place change of a local (`g.mul_(0.5)`) is one finding, naming that line."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from helpers import invoke, write_script

from gradtrace.capture.naming.forward_cuts import function_cuts
from gradtrace.findings.cuts import why_cut

BLOCK = """import torch
import torch.nn as nn


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(8, 8)
        self.ln = nn.LayerNorm(8)

    def forward(self, h):
        h = self.fc(h)
        return self.ln(h.{cut})
"""
SCRIPT = """import torch
import torch.nn as nn
{model}
torch.manual_seed(0)
model = nn.Sequential(nn.Linear(4, 8), Block(), nn.Linear(8, 1))
loss = model(torch.randn(16, 4)).pow(2).mean()
loss.backward()
"""


def _findings(script: Path) -> list[dict[str, Any]]:
    result = invoke("show", script, "--json")
    assert result.exit_code == 0, result.stderr
    return list(json.loads(result.stdout)["findings"])


def test_a_detach_inside_forward_is_named_with_its_line_and_function(tmp_path: Path) -> None:
    block = BLOCK.format(cut="detach()").split("\n", 2)[2]  # without its imports
    script = write_script(tmp_path, SCRIPT.format(model=block))
    found = _findings(script)
    assert [f["code"] for f in found] == ["graph-cut", "unreached-leaf"]
    cut, lost = found
    line = script.read_text().splitlines().index("        return self.ln(h.detach())") + 1
    assert cut["line"] == line and cut["file"].endswith("s.py")
    assert "`return self.ln(h.detach())` in Block.forward" in cut["message"]
    assert "4 tensors (model.0.weight, …) reach no root" in cut["message"]
    assert "detach only what should not learn" in cut["hint"]
    assert lost["hint"] == f"line {line} cut their graph in Block.forward: see the graph-cut " \
        "finding"


def test_a_cut_in_the_model_s_own_file_is_named_there(tmp_path: Path) -> None:
    write_script(tmp_path, BLOCK.format(cut="data"), "blocks.py")
    script = write_script(tmp_path, SCRIPT.format(model="from blocks import Block\n"))
    (cut,) = [f for f in _findings(script) if f["code"] == "graph-cut"]
    assert cut["file"].endswith("blocks.py") and cut["line"] == 13
    assert ".data is the tensor without its graph" in cut["message"]
    # another file's line is told with its file's name, and the module with its path
    assert "blocks.py:13 `return self.ln(h.data)` in Block.forward of model.1" in cut["message"]


def test_a_forward_that_detaches_a_target_reaches_every_parameter(tmp_path: Path) -> None:
    block = BLOCK.format(cut="detach()").split("\n", 2)[2].replace(
        "return self.ln(h.detach())", "return self.ln(h) - self.ln(h).mean().detach()")
    script = write_script(tmp_path, SCRIPT.format(model=block))
    assert not [f for f in _findings(script) if f["code"] in ("graph-cut", "unreached-leaf")]


GATE = """import torch
import torch.nn as nn


class Gate(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(8, 8)

    def forward(self, h):
        g = torch.sigmoid(self.fc(h))
        out = g * h
        g.mul_(0.5)
        return out


torch.manual_seed(0)
model = nn.Sequential(nn.Linear(4, 8), Gate(), nn.Linear(8, 1))
model(torch.randn(16, 4)).pow(2).mean().backward()
"""


def test_an_in_place_change_inside_forward_is_one_finding_naming_its_line(
        tmp_path: Path) -> None:
    result = invoke("show", write_script(tmp_path, GATE), "--json")
    assert result.exit_code == 2  # the backward raises, as under python
    found = [f for f in json.loads(result.stdout)["findings"] if f["code"] == "inplace-modified"]
    assert len(found) == 1  # sigmoid's result and mul's self are one tensor: one cause
    (f,) = found
    assert f["line"] == 13 and "changed in place at line 13 `g.mul_(0.5)`" in f["message"]
    assert "SigmoidBackward0 (line 11, in model.1)" in f["message"]
    assert f["hint"] == "write line 13 out of place: `g = g.mul(0.5)`"


def test_an_in_place_change_in_the_model_s_own_file_is_told_there_once_before_the_stop(
        tmp_path: Path) -> None:
    gate = GATE.split("\n\ntorch.manual_seed")[0]
    write_script(tmp_path, gate, "gates.py")
    script = write_script(tmp_path, GATE.replace(gate, "import torch\nimport torch.nn as nn\n"
                                                 "from gates import Gate\n"))
    result = invoke("show", script)
    assert result.exit_code == 2
    findings = result.stdout.split("\nfindings\n")[1]
    assert findings.count("error [") == 2  # the cause, then the stop: one finding each
    assert findings.index("[inplace-modified]") < findings.index("[scenario-stopped]")
    assert "SigmoidBackward0 (gates.py:11, in model.1)" in findings
    assert "changed in place at gates.py:13 `g.mul_(0.5)`" in findings
    assert findings.count("modified by an inplace operation") == 1  # torch's text, once


def test_a_no_grad_decorated_helper_forward_calls_is_the_cut_only_when_it_ran() -> None:
    lines = ["import torch", "", "@torch.no_grad()", "def scale(x):", "    return x * 2",
             "", "@torch.inference_mode()", "def unused(x):", "    return x"]
    (cut,) = function_cuts(lines, {1, 3, 4, 5, 7, 8})  # unused's body never ran
    assert (cut.line, cut.function) == (3, "scale")
    assert why_cut(cut.cut).startswith("@torch.no_grad() turns gradients off in all of scale()")
