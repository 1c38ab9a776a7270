"""The Python API for notebooks: gradtrace.trace() and the Trace's representations."""

from __future__ import annotations

import io
import json
import shutil
from pathlib import Path

import pytest
import torch
from helpers import SCENARIOS, as_read, shared_invoke, write_script
from rich.console import Console

import gradtrace


def chain():
    x = torch.tensor(5.0, requires_grad=True)
    y = x**3
    z = torch.log(y)
    return x, y, z


def test_trace_names_nodes_from_the_callers_variables() -> None:
    x, y, z = chain()
    t = gradtrace.trace(z)
    assert [(n.type, n.tensor) for n in t.nodes] == [
        ("LogBackward0", "z"), ("PowBackward0", "y"), ("AccumulateGrad", "x")]
    assert x.grad is None  # no backward unless asked


def test_trace_with_backward_records_the_flow() -> None:
    x, y, z = chain()
    t = gradtrace.trace(z, backward=True)
    assert x.grad is not None and x.grad.item() == pytest.approx(0.6)
    leaf = next(n.id for n in t.nodes if n.kind == "leaf")
    assert t.passes[0].flow[leaf].grad_outputs[0].values == pytest.approx(0.6)


def test_trace_of_a_scenario_path() -> None:
    t = gradtrace.trace(str(SCENARIOS / "two_paths_add_up.py"))
    assert next(s for s in t.tensors if s.name == "x").grad.values == pytest.approx(1.6)


def test_representations() -> None:
    x, y, z = chain()  # named here, so the picture says x, y, z
    t = gradtrace.trace(z)
    assert t.to_dot().startswith("digraph gradtrace {")
    assert t.to_mermaid().startswith("flowchart TB")
    assert json.loads(t.to_json())["schema"] == "gradtrace.trace/3"
    console = Console(file=io.StringIO(), width=100, color_system=None)
    console.print(t)
    assert "AccumulateGrad → x" in console.file.getvalue()


@pytest.mark.skipif(shutil.which("dot") is None, reason="Graphviz is installed by dev.py")
def test_notebook_svg() -> None:
    x, y, z = chain()  # named here, so the picture says x, y, z
    svg = gradtrace.trace(z)._repr_svg_()
    assert svg is not None and "<svg" in svg and ">x<" in svg


def test_trace_rejects_what_is_not_a_graph() -> None:
    from gradtrace.errors import ScenarioError

    with pytest.raises(ScenarioError, match="grad_fn"):
        gradtrace.trace(torch.ones(2))


def test_record_names_what_the_block_made_and_records_its_passes() -> None:
    import gradtrace

    w = torch.ones(3, requires_grad=True)
    model = torch.nn.Linear(3, 1)
    with gradtrace.record() as rec:
        loss = model(w * 2).sum()
        loss.backward()
    trace = as_read(rec.to_json())
    assert {"w", "loss", "model.weight", "model.bias"} <= {t["name"] for t in trace["tensors"]}
    assert trace["output_names"] == ["loss"] and len(trace["passes"]) == 1
    assert rec.passes[0].line is not None  # the block's own line of loss.backward()
    assert {n["module"] for n in trace["nodes"] if n["type"] == "AddmmBackward0"} == {"model"}
    assert torch.equal(model.weight.grad, torch.full((1, 3), 2.0))  # as without gradtrace


def test_record_runs_no_backward_of_its_own() -> None:
    import gradtrace

    x = torch.ones(2, requires_grad=True)
    with gradtrace.record() as rec:
        y = (x * 3).sum()  # noqa: F841  (named from the block's frame)
    assert x.grad is None and rec.passes == () and rec.output_names == ("y",)


def test_an_error_in_the_block_goes_on_up_and_torch_is_restored() -> None:
    import gradtrace

    backward = torch.Tensor.backward
    with pytest.raises(ZeroDivisionError), gradtrace.record():
        raise ZeroDivisionError
    assert torch.Tensor.backward is backward
    grad = torch.autograd.grad
    with gradtrace.record(), gradtrace.record():  # nested: each restores what it wrapped
        pass
    assert torch.autograd.grad is grad


def test_a_block_that_raises_hands_on_what_it_recorded_before() -> None:
    import gradtrace

    x = torch.ones(2, requires_grad=True)
    with pytest.raises(ValueError, match="after one pass") as raised, \
            gradtrace.record() as rec:
        (x * 3).sum().backward()
        raise ValueError("after one pass")
    partial = raised.value.gradtrace_trace  # type: ignore[attr-defined]
    assert partial is rec and len(rec.passes) == 1
    assert next(t for t in rec.tensors if t.name == "x").grad is not None
    stopped = [f for f in rec.findings if f.code == "scenario-stopped"]
    assert len(stopped) == 1 and "ValueError: after one pass" in stopped[0].message
    assert stopped[0].line is not None


def test_trace_of_tensors_finds_an_in_place_change_without_a_backward() -> None:
    import gradtrace

    a = torch.randn(3, requires_grad=True)
    b = a.sigmoid()
    c = b * 2
    b.add_(1)
    traced = gradtrace.trace(c.sum())
    assert a.grad is None and traced.passes == ()
    assert [f.code for f in traced.findings] == ["inplace-modified"]
    assert traced.findings[0].tensor == "b"


def test_trace_of_a_path_finds_what_show_finds_on_an_in_place_graph() -> None:
    path = str(SCENARIOS / "explained" / "inplace_after_save.py")
    shown = json.loads(shared_invoke("show", path, "--json").stdout)  # exit 2: it stopped
    with pytest.raises(gradtrace.ScenarioStopped) as stopped:  # its backward raises
        gradtrace.trace(path)
    traced = stopped.value.trace  # what ran up to there
    assert [(f.code, f.tensor, f.line) for f in traced.findings] == \
        [(f["code"], f.get("tensor"), f.get("line")) for f in shown["findings"]]
    assert "inplace-modified" in {f.code for f in traced.findings}


def test_the_errors_a_caller_catches_are_public_and_carry_the_partial_trace(
        tmp_path: Path) -> None:
    """gradtrace's error types are in gradtrace.__all__: a script that raised after a pass
    is ScenarioStopped with the trace up to there; one that never ran a ScenarioError."""
    assert {"GradtraceError", "ScenarioError", "ScenarioStopped", "NoGraph",
            "ExportError"} <= set(gradtrace.__all__)
    assert issubclass(gradtrace.ScenarioStopped, gradtrace.ScenarioError)
    assert issubclass(gradtrace.NoGraph, gradtrace.GradtraceError)
    stops = write_script(tmp_path, "import torch\n"
                         "x = torch.tensor(2.0, requires_grad=True)\n"
                         "(x * x).backward()\n"
                         "raise ValueError('after one pass')\n", "stops.py")
    with pytest.raises(gradtrace.ScenarioStopped) as stopped:
        gradtrace.trace(str(stops))
    error = stopped.value
    assert "ValueError: after one pass" in error.message and error.hint
    assert error.line == 4  # the script's line that raised
    assert len(error.trace.passes) == 1  # the partial trace: what ran before the raise
    assert [t.grad.values for t in error.trace.tensors if t.name == "x"] == [4.0]
    assert "scenario-stopped" in {f.code for f in error.trace.findings}
    assert gradtrace.TraceView(error.trace).to_json()  # shown as any trace is
    with pytest.raises(gradtrace.ScenarioError) as missing:  # nothing ran: no trace
        gradtrace.trace(str(tmp_path / "nope.py"))
    assert not isinstance(missing.value, gradtrace.ScenarioStopped)
    none = write_script(tmp_path, "import torch\nx = torch.ones(2)\n", "none.py")
    with pytest.raises(gradtrace.NoGraph):
        gradtrace.trace(str(none))


def test_trace_of_a_path_runs_a_backward_as_show_does() -> None:
    import gradtrace

    shown = gradtrace.trace("example:mlp_modules")  # a script that runs no backward
    assert [p.by for p in shown.passes] == ["gradtrace"]
    assert gradtrace.trace("example:mlp_modules", backward=False).passes == ()
