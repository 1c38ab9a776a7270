"""Where a NaN is born (issue 53): the first op whose output is not finite from finite inputs,
with its line and module, read off the values the graph saved for backward at the first
pass whose loss is not finite, or at the stop of code that raises at its first NaN loss; and
a nan-gradient that carries a forward's NaN says so, not that a derivative is infinite."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import torch
from helpers import SCENARIOS, as_read, invoke, shared_invoke, write_script

import gradtrace
from gradtrace.capture.observers import births

BUGS = SCENARIOS / "bugs"
MASKED_MEAN = BUGS / "nan_masked_mean.py"
RAISES = BUGS / "nan_raise_on_loss.py"


def line_of(path: Path, code: str) -> int:
    """The number of the line of path that holds code."""
    (number,) = [i for i, line in enumerate(path.read_text().splitlines(), 1) if code in line]
    return number


DIVISION = line_of(MASKED_MEAN, "pooled = total / count")


def _show(path: Path, *args: str, shared: bool = True) -> tuple[int, dict[str, Any]]:
    result = (shared_invoke if shared else invoke)("show", str(path), "--json", *args)
    assert result.stdout.lstrip().startswith("{"), result.stderr
    return result.exit_code, as_read(result.stdout)


def _one(trace: dict[str, Any], code: str) -> dict[str, Any]:
    (found,) = [f for f in trace["findings"] if f["code"] == code]
    return found


def test_the_masked_mean_nan_is_born_at_the_division_inside_forward() -> None:
    code, trace = _show(MASKED_MEAN)
    assert code == 0
    born = _one(trace, "nan-value")
    assert (Path(born["file"]).name, born["line"]) == ("nan_masked_mean.py", DIVISION)
    assert born["message"] == (
        f"pass 5: loss is NaN, and its first NaN was made in the forward at line {DIVISION} "
        "`pooled = total / count` (DivBackward0 in model, an unnamed tensor); those of its "
        "inputs kept for backward are finite")
    assert born["hint"].startswith("division by zero")
    # not the parameters the optimizer wrote NaN into afterwards
    assert "end of the run" not in json.dumps(trace["findings"])


def test_a_nan_gradient_from_the_forward_blames_the_forward_not_a_derivative() -> None:
    _, trace = _show(MASKED_MEAN)
    carried = _one(trace, "nan-gradient")
    assert carried["message"].startswith("pass 5: the first non-finite gradient comes out of "
                                         "LogSoftmaxBackward0")
    assert "the NaN came from the forward, not from its derivative" in carried["message"]
    assert carried["hint"] == (f"fix the forward where the NaN was born at line {DIVISION} "
                               "(the nan-value finding); this op only carries it")
    assert "infinite" not in carried["message"] + carried["hint"]
    exploding = _one(trace, "exploding-gradient")
    assert exploding["hint"].startswith("the nan-value finding (pass 5) names the forward op")


def test_the_pass_shown_marks_the_birth_node() -> None:
    _, trace = _show(MASKED_MEAN, "--pass", "5")
    born = _one(trace, "nan-value")
    node = next(n for n in trace["nodes"] if n["id"] == born["node"])
    assert (node["type"], node["module"]) == ("DivBackward0", "model")


@pytest.mark.parametrize(("derivative", "hint"), [
    ("safe = torch.where(x > 0, torch.log(x), torch.zeros_like(x))",
     "log has an infinite derivative"),
    ("safe = torch.sqrt(x * x)", "sqrt has an infinite derivative"),
])
def test_a_truly_infinite_derivative_keeps_its_wording(tmp_path: Path, derivative: str,
                                                      hint: str) -> None:
    """Finite forward values, finite loss: the derivative is what is infinite there."""
    path = write_script(tmp_path, "import torch\nx = torch.tensor([0.0, 1.0, 4.0], "
                        f"requires_grad=True)\n{derivative}\nloss = safe.sum()\n"
                        "loss.backward()\n")
    _, trace = _show(path, shared=False)
    found = _one(trace, "nan-gradient")
    assert "is born at" in found["message"] and found["hint"].startswith(hint)
    assert "nan-value" not in {f["code"] for f in trace["findings"]}


def test_log_of_zero_is_born_in_the_forward_and_its_derivative_is_infinite() -> None:
    _, trace = _show(SCENARIOS / "explained" / "log_of_zero.py")
    assert _one(trace, "nan-value")["line"] == 8
    # log's saved input is 0, finite: its derivative there is what is infinite
    assert _one(trace, "nan-gradient")["hint"].startswith("log has an infinite derivative")


def test_the_healthy_twin_has_no_warning_or_error() -> None:
    code, trace = _show(BUGS / "nan_masked_mean_fixed.py")
    assert code == 0
    assert [f for f in trace["findings"] if f["severity"] != "info"] == []


def test_a_loop_that_raises_at_its_first_nan_loss_gets_the_birth_and_that_steps_tensors(
        ) -> None:
    code, trace = _show(RAISES)
    assert code == 2
    born = _one(trace, "nan-value")
    line = line_of(RAISES, "pooled = total / count")
    assert (Path(born["file"]).name, born["line"]) == ("nan_raise_on_loss.py", line)
    assert born["message"].startswith("when the script stopped: loss is NaN (no backward ran "
                                      "from it), and its first NaN was made in the forward "
                                      f"at line {line} `pooled = total / count` (DivBackward0 "
                                      "in model, an unnamed tensor)")
    # the locals of train() as it raised (step 5's), not as its last backward saw them
    rows = {t["name"]: t for t in trace["tensors"]}
    assert rows["loss"]["value"]["finite"] is False
    assert rows["logits"]["value"]["finite"] is False
    assert _one(trace, "scenario-stopped")["line"] == line_of(RAISES, "raise ValueError")


@pytest.mark.parametrize("script", [MASKED_MEAN, RAISES])
def test_a_nan_in_a_light_step_of_a_long_loop_has_its_line_and_module(tmp_path: Path,
                                                                       script: Path) -> None:
    """At step 40 a loop's passes are light (their forwards run without lines or modules
    noted): the birth's line and module are those of its twin in the latest pass in detail."""
    text = script.read_text().replace("STEPS, EMPTY_AT = 50, 16, 3, 30, 5",
                                      "STEPS, EMPTY_AT = 50, 16, 3, 45, 40")
    assert "EMPTY_AT = 50, 16, 3, 45, 40" in text
    _, trace = _show(write_script(tmp_path, text, script.name), shared=False)
    born = _one(trace, "nan-value")
    assert born["line"] == line_of(script, "pooled = total / count")
    assert "(DivBackward0 in model, an unnamed tensor)" in born["message"]
    if script == MASKED_MEAN:
        assert born["message"].startswith("pass 40: loss is NaN")
        assert trace["passes"][39]["light"]


def test_a_parameter_already_nan_is_named_as_the_origin(tmp_path: Path) -> None:
    path = write_script(tmp_path, """import torch
model = torch.nn.Linear(3, 1)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
x = torch.ones(4, 3)
for step in range(3):
    loss = model(x).pow(2).mean()
    opt.zero_grad()
    loss.backward()
    if step == 0:
        model.weight.grad[0, 0] = float("inf")
    opt.step()
""")
    _, trace = _show(path, shared=False)
    born = _one(trace, "nan-value")
    assert born["message"].startswith("pass 2: loss is Inf, and its Inf was in parameter "
                                      "model.weight already, before the forward")
    assert born["tensor"] == "model.weight"


def test_a_checkpointed_region_is_not_read_and_the_run_is_unchanged(tmp_path: Path) -> None:
    """Reading what a checkpointed node saved would recompute its region: left out, and
    the gradients are python's."""
    text = """import torch
from torch.utils.checkpoint import checkpoint
w = torch.tensor([1.0, 2.0, 0.0], requires_grad=True)
def block(v):
    return torch.tanh(v) * 3
h = checkpoint(block, w * 2, use_reentrant=False)
loss = (h / w).sum()
loss.backward()
"""
    _, trace = _show(write_script(tmp_path, text), shared=False)
    assert _one(trace, "nan-value")["line"] == 7
    namespace: dict[str, Any] = {}
    exec(text, namespace)
    mine = next(t for t in trace["tensors"] if t["name"] == "w")["grad"]["values"]
    assert [str(v) for v in mine] == [str(v) for v in namespace["w"].grad.tolist()]


def test_a_healthy_loop_never_searches(monkeypatch: pytest.MonkeyPatch) -> None:
    def searched(*args: Any) -> None:
        raise AssertionError("a healthy run read its saved values")

    monkeypatch.setattr(births, "search", searched)
    model = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.ReLU(), torch.nn.Linear(8, 1))
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    with gradtrace.record() as rec:
        for _ in range(40):
            loss = model(torch.randn(16, 4)).pow(2).mean()
            opt.zero_grad()
            loss.backward()
            opt.step()
    assert not [f for f in rec.findings if f.code.startswith("nan")]


def test_not_finite_reads_many_small_values_in_batches_as_one_by_one(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """A million-node graph saves a million small values: read stacked by shape, in runs of
    at most JOINED elements, each flag is what reading the tensor alone says (dtypes mixed,
    complex, big ones on their own); a healthy twin of all-finite values is all False."""
    from gradtrace.extract import births

    monkeypatch.setattr(births, "JOINED", 7)  # runs cut often
    torch.manual_seed(0)
    values = [1.0, -2.5, float("nan"), float("inf"), float("-inf"), 0.0]
    tensors = [torch.tensor(values[i % 6]) for i in range(40)] + [
        torch.tensor([1.0, values[i % 6]], dtype=dtype)
        for i, dtype in enumerate([torch.float16, torch.bfloat16, torch.float64] * 4)] + [
        torch.tensor([1 + 2j, complex(values[i % 6], 0)]) for i in range(6)] + [
        torch.randn(5000), torch.full((5000,), float("nan")), torch.randn(3, 4).t(),
        torch.tensor([70000.0]).half()]
    alone = [bool((~torch.isfinite(t)).any()) for t in tensors]
    assert births.not_finite(tensors) == alone and any(alone) and not all(alone)
    healthy = [t.nan_to_num(0.0, 0.0, 0.0) for t in tensors]
    assert births.not_finite(healthy) == [False] * len(healthy)


OVERFLOW = """import torch

x = torch.tensor(1.0, requires_grad=True)
w = torch.tensor(10.0, requires_grad=True)
y = x
for _ in range(50):
    y = y * {factor}
y.backward()
"""


def test_an_overflow_whose_values_nothing_kept_says_which_ops_may_have_made_it(
        tmp_path: Path) -> None:
    """y * 10, fifty times: float32 overflows at the 39th product, but a product by a
    number keeps no value for backward, so the search cannot tell which one: the finding
    names the last and says any of the 49 before it may have made it. Its twin, y * w,
    keeps every value: the 39th product itself is named, of finite inputs."""
    by_number = tmp_path / "by_number.py"
    by_number.write_text(OVERFLOW.format(factor="10"))
    _, trace = _show(by_number, shared=False)
    born = _one(trace, "nan-value")
    assert born["node"] == "n0" and born["message"].endswith(
        "(MulBackward0, y); nothing kept the values before it for backward: it, or one of "
        "the 49 ops above it, made it")
    by_tensor = tmp_path / "by_tensor.py"
    by_tensor.write_text(OVERFLOW.format(factor="w"))
    _, trace = _show(by_tensor, shared=False)
    born = _one(trace, "nan-value")
    assert born["message"].endswith("(MulBackward0, an unnamed tensor), of finite inputs")
    nodes = {n["id"]: n for n in trace["nodes"]}
    # the 39th product: 11 products after it lie between it and the root
    products = [n["id"] for n in trace["nodes"] if n["type"] == "MulBackward0"]
    assert born["node"] == products[50 - 39] and nodes[born["node"]]["type"] == "MulBackward0"


NORMALISED = """import torch
import torch.nn as nn

torch.manual_seed(0)


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.q = nn.Linear(8, 8)
        self.norm = {norm}

    def forward(self, x):
        wei = torch.softmax(self.q(x) @ x.transpose(-2, -1), dim=-1)
        wei = wei + {made}
        return self.norm((wei @ x).reshape(-1, 8))


model = Block()
x = torch.randn(2, 4, 8){data}
loss = model(x).sum()
loss.backward()
"""


@pytest.mark.parametrize("norm", ["nn.LayerNorm(8)", "nn.BatchNorm1d(8)"])
def test_a_nan_made_before_a_norm_layer_is_blamed_on_its_op_not_on_the_data(
        tmp_path: Path, norm: str) -> None:
    # LayerNorm and BatchNorm save their mean and rstd, outputs that need no grad: NaN there
    # once said "came in with an input without grad (data)" of finite data
    script = write_script(tmp_path, NORMALISED.format(norm=norm, made="torch.log(wei - 2)",
                                                      data=""))
    _, trace = _show(script, shared=False)
    born = _one(trace, "nan-value")
    made = line_of(script, "torch.log(wei - 2)")
    assert born["line"] == made, born["message"]
    assert born["message"].startswith(f"pass 1: loss is NaN, and its first NaN was made in "
                                      f"the forward at line {made} ")
    assert "(LogBackward0 in model" in born["message"]
    assert "data" not in born["message"] + born["hint"]


def test_the_data_s_nan_into_a_norm_layer_is_still_the_data_s(tmp_path: Path) -> None:
    # the twin: the NaN is in x itself, an input without grad of the first Linear
    script = write_script(tmp_path, NORMALISED.format(norm="nn.LayerNorm(8)", made="0.0",
                                                      data="\nx[0, 1, 2] = float('nan')"))
    _, trace = _show(script, shared=False)
    born = _one(trace, "nan-value")
    assert "came in with an input without grad (data) already" in born["message"]
    assert born["hint"].startswith("check the data where it is loaded")


def test_an_evaluating_batch_norm_s_nan_running_mean_is_the_cause(tmp_path: Path) -> None:
    # the other twin: in eval mode BatchNorm reads its running statistics (buffers, no grad)
    script = write_script(tmp_path, NORMALISED.format(
        norm="nn.BatchNorm1d(8)", made="0.0",
        data="\nmodel.eval()\nmodel.norm.running_mean[3] = float('nan')"))
    _, trace = _show(script, shared=False)
    born = _one(trace, "nan-value")
    assert "came in with an input without grad (data) already" in born["message"]
    assert "(NativeBatchNormBackward0 in model.norm)" in born["message"]


def test_findings_without_a_line_or_a_name_read_whole() -> None:
    # "… already, used (MulBackward0)" and "(`the shared tensor.detach()`)" as code
    from gradtrace.findings.births import born
    from gradtrace.findings.recorded import findings_of
    from gradtrace.model.facts import GraphFreed, NonFiniteBorn

    data = born(NonFiniteBorn(3, "loss", "NaN", "NaN", "input", "MulBackward0", None, None,
                              None, None, True, False, 2))
    assert data.message == ("pass 3: loss is NaN, and its NaN came in with an input without "
                            "grad (data) already, used by MulBackward0")
    (freed,) = findings_of([GraphFreed(2, 5, 1, 7, "loss.backward()", None, "MulBackward0",
                                       None, False)], "s.py")
    assert freed.hint is not None and "`" not in freed.hint
    assert freed.hint.startswith("the shared tensor links the two passes")
