"""Provenance: every op node knows the scenario line whose forward call made it."""

from __future__ import annotations

import json
from pathlib import Path
from xml.etree import ElementTree

from helpers import SCENARIOS, as_read, invoke, needs_dot, show_json


def sources(trace: dict) -> dict[str, tuple[int, str] | None]:
    """node type (with its tensor) -> (line, code)."""
    return {f"{n['type']}({n['tensor']})": None if n["source"] is None else
            (n["source"]["line"], n["source"]["code"]) for n in trace["nodes"]}


def test_each_op_knows_its_line_and_a_leaf_has_none() -> None:
    found = sources(show_json("chain_rule.py"))
    assert found == {"LogBackward0(z)": (7, "z = torch.log(y)"),
                     "PowBackward0(y)": (6, "y = x**3"), "AccumulateGrad(x)": None}


def test_the_caller_line_goes_on_after_a_call_returns() -> None:
    trace = show_json(SCENARIOS / "real" / "gpt_tiny.py")
    adds = {n["source"]["code"] for n in trace["nodes"]
            if n["type"] == "AddBackward0" and n["module"] == "model.transformer.h.0"}
    # the residual adds run after self.attn(...) and self.mlp(...) returned
    assert adds == {"x = x + self.attn(self.ln_1(x))", "return x + self.mlp(self.ln_2(x))"}


def test_lines_in_a_helper_file_of_the_scenario_folder(tmp_path: Path) -> None:
    (tmp_path / "helper.py").write_text("def square(t):\n    return t * t\n")
    scenario = tmp_path / "s.py"
    scenario.write_text("import torch\nfrom helper import square\n"
                        "x = torch.ones(2, requires_grad=True)\ny = square(x).sum()\n")
    trace = as_read(invoke("show", scenario, "--json").stdout)
    mul = next(n for n in trace["nodes"] if n["type"] == "MulBackward0")
    assert mul["source"]["file"].endswith("helper.py") and mul["source"]["line"] == 2
    tree = invoke("show", scenario).stdout
    assert "MulBackward0  n1  helper.py:2" in tree  # another file's line names its file


def test_dot_lines_labels_ops_with_their_line() -> None:
    text = invoke("dot", SCENARIOS / "chain_rule.py", "--lines").stdout
    assert 'label="LogBackward0\\n(z)\\nline 7"' in text


@needs_dot
def test_hovering_a_box_in_the_svg_shows_its_line(tmp_path: Path) -> None:
    out = tmp_path / "g.svg"
    assert invoke("dot", SCENARIOS / "chain_rule.py", "-o", out).exit_code == 0
    svg = ElementTree.parse(out).getroot()
    titles = {a.get("{http://www.w3.org/1999/xlink}title")
              for a in svg.iter("{http://www.w3.org/2000/svg}a")}
    assert "chain_rule.py:7: z = torch.log(y)" in titles


def test_a_saved_trace_keeps_the_sources_and_a_bad_one_is_refused(tmp_path: Path) -> None:
    trace = show_json("chain_rule.py")
    path = tmp_path / "t.json"
    path.write_text(json.dumps(trace))
    assert "line 7" in invoke("show", path).stdout
    trace["nodes"][0]["source"] = {"file": "s.py", "line": "seven", "code": ""}
    path.write_text(json.dumps(trace))
    bad = invoke("show", path)
    assert bad.exit_code == 2 and "nodes[0].source.line" in bad.stderr


CREATE_GRAPH_IN_A_FUNCTION = '''import torch
class Square(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x * x
    @staticmethod
    def backward(ctx, grad):
        (x,) = ctx.saved_tensors
        return grad * 2 * x
x = torch.tensor(3.0, requires_grad=True)
y = Square.apply(x)
(g,) = torch.autograd.grad(y, x, create_graph=True)
'''


def test_a_node_made_in_a_create_graph_backward_has_the_functions_line(
        tmp_path: Path) -> None:
    # the line tracer is off while gradtrace records a pass, and on in a backward that makes
    # a graph: the node `grad * 2 * x` makes is the backward's line 10, not line 13
    path = tmp_path / "s.py"
    path.write_text(CREATE_GRAPH_IN_A_FUNCTION)
    found = sources(show_json(path, "--root", "g"))
    assert found["MulBackward0(g)"] == (10, "return grad * 2 * x")


def test_a_debuggers_tracer_stays_on_through_a_recorded_backward() -> None:
    import sys

    import torch

    import gradtrace

    seen: list[str] = []

    def tracer(frame, event, arg):  # what a debugger or coverage would set
        if event == "call":
            seen.append(frame.f_code.co_name)
        return None

    def doubled(grad):
        return grad * 2

    x = torch.ones(2, requires_grad=True)
    before = sys.gettrace()
    sys.settrace(tracer)
    try:
        with gradtrace.record():
            y = x * 3
            y.register_hook(doubled)
            y.sum().backward()
    finally:
        sys.settrace(before)
    assert "doubled" in seen and x.grad.tolist() == [6.0, 6.0]
