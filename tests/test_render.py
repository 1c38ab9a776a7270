"""Renderers and the JSON form, on Trace records built by hand (no torch)."""

from __future__ import annotations

import io
import json
from dataclasses import replace

from rich.console import Console

from gradtrace.model import (
    Edge,
    Finding,
    GradChange,
    GradSummary,
    Node,
    NodeFlow,
    Pass,
    SavedTensor,
    TensorInfo,
    Trace,
)
from gradtrace.model.codec import trace_from_dict, trace_to_dict
from gradtrace.model.compact import expanded
from gradtrace.render.json import to_json
from gradtrace.render.report import findings_view, passes_view
from gradtrace.render.table import tensor_table
from gradtrace.render.tree import graph_tree


def scalar(v: float) -> GradSummary:
    return GradSummary((), abs(v), v, v, v == v and abs(v) != float("inf"), v)


def make_trace(nodes: list[Node], edges: list[Edge], **kw: object) -> Trace:
    fields = dict(scenario="hand.py", gradtrace_version="0", torch_version="0",
                  outputs=(nodes[0].id,) if nodes else (), output_names=("z",) if nodes else (),
                  root_reason="test", nodes=tuple(nodes), edges=tuple(edges), tensors=(),
                  passes=(), findings=())
    fields.update(kw)
    return Trace(**fields)  # type: ignore[arg-type]


def render(renderable: object, width: int = 100) -> str:
    console = Console(file=io.StringIO(), width=width, color_system=None)
    console.print(renderable, soft_wrap=True)  # as `show --all` prints: never cropped
    return console.file.getvalue()  # type: ignore[attr-defined]


def chain_rule_trace() -> Trace:
    return make_trace(
        [Node("n0", "LogBackward0", "op", "z", (SavedTensor("self", (), "float32", 4),)),
         Node("n1", "PowBackward0", "op", "y", (SavedTensor("self", (), "float32", 4, "freed"),)),
         Node("n2", "AccumulateGrad", "leaf", "x")],
        [Edge("n1", "n0", 0, 0), Edge("n2", "n1", 0, 0)],
        tensors=(TensorInfo("x", (), "float32", True, True, False, None, "n2", scalar(0.6),
                            None, scalar(5.0)),
                 TensorInfo("z", (), "float32", True, False, False, "LogBackward0", "n0", None,
                            None, scalar(4.828))),
        passes=(Pass("backward", ("n0",), False, False, None, by="gradtrace",
                     root_names=("z",), grad_changes=(GradChange("x", None, scalar(0.6)),)),),
    )


def diamond_trace(layers: int) -> Trace:
    """h_{i+1} = a_i + b_i, both computed from h_i: 2**layers paths, 3*layers+1 nodes."""
    nodes, edges = [], []
    for i in range(layers):
        add, a, b = f"n{3 * i}", f"n{3 * i + 1}", f"n{3 * i + 2}"
        nodes += [Node(add, "AddBackward0", "op", None), Node(a, "SinBackward0", "op", None),
                  Node(b, "CosBackward0", "op", None)]
        below = f"n{3 * i + 3}"
        edges += [Edge(a, add, 0, 0), Edge(b, add, 1, 0), Edge(below, a, 0, 0),
                  Edge(below, b, 0, 0)]
    nodes.append(Node(f"n{3 * layers}", "AccumulateGrad", "leaf", "x"))
    return make_trace(nodes, edges)


def test_tree_shows_names_indexes_and_leaves() -> None:
    text = render(graph_tree(chain_rule_trace()))
    assert "output z" in text
    assert "LogBackward0 (z)" in text
    assert "[0] PowBackward0 (y)" in text
    assert "AccumulateGrad → x" in text


def test_tree_saved_tensors_and_freed_buffers() -> None:
    text = render(graph_tree(chain_rule_trace(), saved=True))
    assert "saved: self float32[] 4 B" in text
    assert "saved: self (freed)" in text


def test_diamond_prints_each_node_once() -> None:
    trace = diamond_trace(50)
    text = render(graph_tree(trace, max_depth=1000, max_nodes=10_000))
    assert text.count("SinBackward0") == 50
    assert text.count("shown above") == 50  # the second way into each shared node
    assert len(text.splitlines()) < 4 * 50 + 10


def test_max_nodes_cuts_with_a_count() -> None:
    text = render(graph_tree(diamond_trace(50), max_depth=1000, max_nodes=20))
    assert "more nodes not shown (--max-nodes N, or --all)" in text
    assert len(text.splitlines()) < 30


def test_max_depth_cuts_with_a_count() -> None:
    text = render(graph_tree(diamond_trace(50), max_depth=3, max_nodes=10_000))
    assert "below --max-depth 3" in text


def test_brackets_in_names_are_not_markup() -> None:
    trace = make_trace([Node("n0", "[bold]Weird[/bold]Backward", "op", "t[0]")], [])
    text = render(graph_tree(trace))
    assert "[bold]Weird[/bold]Backward (t[0])" in text


def test_table_shows_values_and_grads() -> None:
    text = render(tensor_table(chain_rule_trace()), width=140)
    assert "0.6" in text and "4.828" in text and "LogBackward0" in text
    assert "left out" not in text


def test_a_narrow_table_leaves_columns_out_and_never_breaks_a_cell() -> None:
    trace = chain_rule_trace()
    text = render(tensor_table(trace), width=60)
    rows = [line for line in text.splitlines() if line.startswith("│")]
    assert len(rows) == len(trace.tensors)  # one line a row: nothing wrapped
    assert all(len(line) <= 60 for line in text.splitlines() if "│" in line)
    assert "columns left out at 60 columns:" in text and "grad after" in text


def test_cells_show_numbers_whole_and_compact() -> None:
    from gradtrace.render.table import cell_text

    tiny = GradSummary((), 1.41859e-10, 1.41859e-10, 1.41859e-10, True, [1.41859e-10])
    assert cell_text(tiny) == "1.419e-10"
    big = GradSummary((4, 3), 0.924486, -0.475185, 0.457775, True, None)
    assert cell_text(big) == "norm 0.9245"


def test_tables_and_passes_keep_to_their_budget() -> None:
    tensors = tuple(TensorInfo(f"t{i}", (2,), "float32", True, True, False, None, None, None)
                    for i in range(50))
    trace = make_trace([], [], tensors=tensors)
    text = render(tensor_table(trace, max_rows=20), width=140)
    assert "… 30 more tensors (--all)" in text and "t19" in text and "t20 " not in text


def test_passes_show_grad_changes() -> None:
    text = render(passes_view(chain_rule_trace()))
    assert "pass 1 backward by gradtrace" in text
    assert "x.grad  None → 0.6" in text


def test_findings_sorted_by_severity() -> None:
    trace = make_trace([], [], findings=(Finding("a", "info", "fyi"),
                                         Finding("b", "error", "bad", hint="fix it")))
    text = render(findings_view(trace))
    assert text.index("bad") < text.index("fyi")
    assert "hint: fix it" in text


def test_json_round_trip_is_exact() -> None:
    trace = chain_rule_trace()
    text = to_json(trace)
    assert trace_from_dict(json.loads(text)) == trace
    assert to_json(trace_from_dict(json.loads(text))) == text


def test_streamed_json_is_the_dict_json_writes() -> None:
    """Each pass's flow is written entry by entry; the text is json's own for the whole dict,
    one top-level key and one item per line (a pass with an empty flow too)."""
    one, two = scalar(1.0), scalar(0.2)
    flow = {"n0": NodeFlow((one,), (two,), 0), "n2": NodeFlow((scalar(0.6),), (), 2),
            "n1": NodeFlow((two,), (scalar(0.6), None), 1)}  # n2 out of run order
    trace = chain_rule_trace()
    trace = replace(trace, passes=(replace(trace.passes[0], flow=flow),
                                   replace(trace.passes[0], flow={})))
    data = trace_to_dict(trace)
    assert data["passes"][0]["flow"]["n2"][2] == {"order": 2}
    assert data["passes"][-1]["flow"] == {} and data["passes"][0]["flow"]
    lines = to_json(trace).splitlines()
    for key, value in data.items():
        if isinstance(value, list) and value:
            start = lines.index(f"  {json.dumps(key)}: [")
            items = lines[start + 1:start + 1 + len(value)]
            assert [line.strip().rstrip(",") for line in items] == \
                [json.dumps(item, allow_nan=False) for item in value]
        else:
            assert any(line.strip().rstrip(",") == f"{json.dumps(key)}: {json.dumps(value)}"
                       for line in lines)


def test_json_has_no_nan_literals() -> None:
    nan = GradSummary((2,), float("nan"), float("-inf"), float("inf"), False,
                      [float("nan"), float("inf")])
    trace = make_trace([Node("n0", "AccumulateGrad", "leaf", "x")], [],
                       tensors=(TensorInfo("x", (2,), "float32", True, True, False, None, "n0",
                                           nan),))
    text = to_json(trace)
    assert "NaN" not in text and "Infinity" not in text
    row = json.loads(text)["tensors"][0]["grad"]
    assert row["values"] == ["nan", "inf"] and row["min"] == "-inf"
    back = trace_from_dict(json.loads(text)).tensors[0].grad
    assert back is not None and back.max == float("inf") and back.norm != back.norm


def test_json_contract_keys() -> None:
    data = expanded(json.loads(to_json(chain_rule_trace())))  # read: the /2 shape
    for key in ("schema", "gradtrace_version", "torch_version", "scenario", "outputs", "nodes",
                "edges", "tensors", "gradients", "passes", "findings"):
        assert key in data
    assert set(data["nodes"][0]) >= {"id", "type", "kind", "tensor", "saved", "module",
                                     "source"}
    assert set(data["edges"][0]) >= {"src", "dst", "dst_input", "src_output"}
    assert set(data["tensors"][0]) >= {"name", "shape", "dtype", "requires_grad", "is_leaf",
                                       "retains_grad", "grad_fn", "node", "grad"}
    assert set(data["passes"][0]) >= {"kind", "roots", "retain_graph", "create_graph", "error",
                                      "flow"}


def test_long_scenario_output_shows_its_end() -> None:
    from gradtrace.render.report import scenario_output

    trace = make_trace([], [], stdout="".join(f"line {i}\n" for i in range(100)))
    text = render(scenario_output(trace))
    assert "line 99" in text and "line 89" not in text and "90 earlier lines" in text


def test_one_number_gradients_written_short_read_back_exactly() -> None:
    """/3 writes a gradient of one finite, non-zero number as its shape and value; any other
    (zero of either sign, NaN, inf, two numbers, a min that is not the value) keeps its
    statistics, and every one reads back as it was."""
    odd = GradSummary((2,), 5.0, 3.0, 4.0, True, [3.0, 4.0])
    not_its_value = GradSummary((), 2.0, 2.0, 2.5, True, 2.0)  # not from a tensor: kept
    kinds = [scalar(3.0), scalar(-2.5), scalar(0.0), scalar(-0.0), scalar(float("nan")),
             scalar(float("inf")), GradSummary((1, 1), 3.5, 3.5, 3.5, True, [[3.5]]), odd,
             not_its_value]
    nodes = [Node(f"n{i}", "MulBackward0", "op", None) for i in range(len(kinds))]
    flow = {n.id: NodeFlow((g,), (), i) for i, (n, g) in enumerate(zip(nodes, kinds, strict=True))}
    trace = make_trace(nodes, [], passes=(Pass("backward", ("n0",), False, False, None,
                                                   flow),))
    text = to_json(trace)
    table = json.loads(text)["gradients"]
    assert [set(g) for g in table] == [{"shape", "values"}] * 2 + [
        {"shape", "norm", "min", "max", "finite", "values"}] * 4 + [{"shape", "values"}] + [
        {"shape", "norm", "min", "max", "finite", "values"}] * 2
    back = trace_from_dict(json.loads(text)).passes[0].flow
    assert [repr(back[n.id].grad_outputs[0]) for n in nodes] == [repr(g) for g in kinds]
    assert to_json(trace_from_dict(json.loads(text))) == text


def test_a_deep_tree_counts_what_it_leaves_out_with_thousands_separated() -> None:
    nodes = [Node(f"n{i}", "MulBackward0", "op", None) for i in range(1500)]
    edges = [Edge(f"n{i + 1}", f"n{i}", 0, 0) for i in range(1499)]
    text = render(graph_tree(make_trace(nodes, edges), max_depth=30, max_nodes=10_000))
    shown = text.count("MulBackward0")
    assert f"… {1500 - shown:,} more nodes below --max-depth 30" in text and shown < 100
