"""The default view of a real model: past 60 nodes made by nn.Modules `show` leads with the
module summary and the findings and says how to get the tree; the tensor table never drops a
column that holds a finding's evidence; --profile says when its figures are noise."""

from __future__ import annotations

import json
from dataclasses import replace

from helpers import SCENARIOS, invoke
from rich.console import Console

from gradtrace.model.codec import trace_from_dict
from gradtrace.model.records import Costs, Finding, TensorInfo, Trace
from gradtrace.render.profile import doubt_text
from gradtrace.render.table import TensorTable

GPT = SCENARIOS / "real" / "gpt_tiny.py"  # 139 nodes in 26 modules


def test_a_big_model_leads_with_its_modules_and_says_how_to_get_the_tree() -> None:
    shown = invoke("show", GPT)
    assert shown.exit_code == 0, shown.stderr
    assert "model.transformer.h.0.attn.c_attn" in shown.stdout  # a row of the module table
    assert "a graph of 139 nodes: its modules lead; --tree shows the node tree" in shown.stdout
    assert "└─ [0]" not in shown.stdout and "\ntensors" not in shown.stdout
    for asked in (("--tree",), ("--all",), ("--max-nodes", "20")):
        tree = invoke("show", GPT, *asked).stdout
        assert "└─ [0]" in tree and "its modules lead" not in tree, asked


def test_a_small_graph_keeps_its_tree() -> None:
    shown = invoke("show", SCENARIOS / "chain_rule.py").stdout
    assert "└─ [0]" in shown and "its modules lead" not in shown


def _trace_of(codes: tuple[str, ...]) -> Trace:
    trace = trace_from_dict(json.loads(invoke("show", SCENARIOS / "chain_rule.py",
                                              "--json").stdout))
    wide = TensorInfo(name="a_long_tensor_name_" * 3, shape=(2, 3), dtype="float32",
                      requires_grad=True, is_leaf=True, retains_grad=False, grad_fn=None,
                      node=None, grad=None)
    return replace(trace, tensors=(*trace.tensors, wide),
                   findings=tuple(Finding(code=c, severity="warning", message="m")
                                  for c in codes))


def _columns(trace: Trace, width: int) -> str:
    console = Console(width=width, record=True, color_system=None)
    console.print(TensorTable(trace))
    return console.export_text()


def test_a_finding_s_evidence_column_stays_however_narrow_the_terminal() -> None:
    plain = _columns(_trace_of(()), 90)
    assert "grad before" not in plain.split("columns left out")[0]
    assert "grad before" in plain.split("columns left out")[1]  # said, not silently dropped
    kept = _columns(_trace_of(("grad-accumulating",)), 90)
    assert "grad before" in kept.split("columns left out")[0]


def test_profile_figures_say_when_they_are_noise() -> None:
    calm = Costs(pass_number=1, method="steps", device="cpu", nodes={},
                 wall_us=(100.0, 102.0, 101.0), profiled_us=(120.0, 121.0, 119.0))
    assert doubt_text(calm) is None
    busy = replace(calm, wall_us=(100.0, 400.0, 110.0))
    assert "spread 273% of their median: the machine was busy" in doubt_text(busy).plain
    faster = replace(calm, profiled_us=(80.0, 81.0, 79.0))
    assert "faster under the profiler" in doubt_text(faster).plain
    once = replace(calm, method="once", wall_us=(), profiled_us=(120.0,))
    assert "timed once" in doubt_text(once).plain
