"""`gradtrace dot`: real Graphviz on every scenario, golden DOT and Mermaid, escaping, files."""

from __future__ import annotations

import json
import os
import subprocess
import xml.etree.ElementTree as ET
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from helpers import DOT, SCENARIOS, STOPS, UNDER_TORCHRUN, invoke, needs_dot, show_json

from gradtrace.errors import ExportError
from gradtrace.model import Edge, Node, TensorInfo, Trace
from gradtrace.model.records import GradSummary, Pass
from gradtrace.render.dot import quote, render, to_dot
from gradtrace.render.drawing import DrawOptions, drawing
from gradtrace.render.mermaid import to_mermaid

GOLDEN = Path(__file__).parent / "golden"
UPDATE = os.environ.get("GRADTRACE_UPDATE_GOLDEN") == "1"  # regenerate: set it and rerun
# not drawn whole: a script that raises (exit 2 after the picture), a file of test functions
EXIT_2 = {"raises_after_two_passes.py", "test_value_grads.py"}
# no graph: only gradcheck calls (a passing one; a failing one, which stops the script), or
# a forward under no_grad whose backward then raised
NOTHING_TO_DRAW = {"gradcheck_pow.py", "gradcheck_pow_wrong_backward.py",
                   "eval_then_backward.py", "no_grad_context.py"}
# the 1,000-step loop draws the graph of mlp_30_steps.py's step: tests/test_loops.py has it
# compiled examples compile again for each run (seconds): drawn in the slow tier
COMPILED = {"compile_tutorial.py", "compiled_autograd.py", "compiled_model.py"}
GALLERY = [pytest.param(p, marks=pytest.mark.slow) if p.name in COMPILED else p
           for p in sorted(SCENARIOS.rglob("*.py"))
           if "no_graph" not in p.parts and UNDER_TORCHRUN not in p.parts
           and p.name not in EXIT_2 and p.name != "mlp_1000_steps.py"]


def dot_text(scenario: Path, *args: str) -> str:
    result = invoke("dot", scenario, *args)
    assert result.exit_code == 0, result.stderr
    return result.stdout


@needs_dot
@pytest.mark.parametrize("scenario", GALLERY, ids=lambda p: getattr(p, "stem", None))
def test_every_scenario_draws_with_real_graphviz(scenario: Path, tmp_path: Path,
                                                shared_trace: Callable[..., Any]) -> None:
    stops = scenario.relative_to(SCENARIOS).as_posix() in STOPS
    trace = shared_trace(scenario, code=2 if stops else 0)  # test_real reads them too
    drawn_from = scenario
    if scenario.name in COMPILED:  # compiling takes seconds: drawn from the shared run's trace
        drawn_from = tmp_path / "trace.json"
        drawn_from.write_text(json.dumps(trace), encoding="utf-8")
    result = invoke("dot", drawn_from, "--saved", "--grads")
    if scenario.name in NOTHING_TO_DRAW:  # exit 2 and no picture, never an empty one
        assert result.exit_code == 2 and result.stdout == "", result.stderr
        assert "no output to trace" in result.stderr or stops
        return
    # a scenario whose own backward raised: the picture of what it recorded, then exit 2
    assert result.exit_code == (2 if stops else 0), result.stderr
    text = result.stdout
    proc = subprocess.run([DOT, "-Tsvg"], input=text.encode(), capture_output=True)
    assert proc.returncode == 0, proc.stderr.decode()
    svg = ET.fromstring(proc.stdout)  # well-formed XML
    drawn = " ".join(t.text or "" for t in svg.iter("{http://www.w3.org/2000/svg}text"))
    for node in trace["nodes"]:
        if node["kind"] == "leaf" and node["tensor"]:
            assert node["tensor"] in drawn, node["tensor"]


@needs_dot
def test_svg_file_is_written_and_names_the_leaves(tmp_path: Path) -> None:
    out = tmp_path / "graph.svg"
    result = invoke("dot", SCENARIOS / "shopping_apple_tangerine.py", "-o", out)
    assert result.exit_code == 0, result.stderr
    svg = ET.parse(out).getroot()
    drawn = " ".join(t.text or "" for t in svg.iter("{http://www.w3.org/2000/svg}text"))
    for leaf in ("apple", "tangerine", "num_apple", "num_tangerine", "ctax"):
        assert leaf in drawn.split()


@needs_dot
@pytest.mark.parametrize("suffix,magic", [(".png", b"\x89PNG"), (".pdf", b"%PDF")])
def test_binary_formats(tmp_path: Path, suffix: str, magic: bytes) -> None:
    out = tmp_path / f"graph{suffix}"
    assert invoke("dot", SCENARIOS / "chain_rule.py", "-o", out).exit_code == 0
    assert out.read_bytes().startswith(magic)


@needs_dot
def test_a_picture_graphviz_cannot_make_says_what_to_draw_instead() -> None:
    """Graphviz fails on some pictures (Debian's, on a ~30,000-node PNG: malloc() fails):
    its words are said, with what to do."""
    with pytest.raises(ExportError) as failed:
        render("digraph { a -> }", "png")  # a picture Graphviz refuses, made quickly
    assert failed.value.message.startswith("Graphviz failed to render PNG: ")
    assert "--max-nodes" in (failed.value.hint or "") and "no --no-fold" in failed.value.hint


def test_json_and_mermaid_files(tmp_path: Path) -> None:
    assert invoke("dot", SCENARIOS / "chain_rule.py", "-o", tmp_path / "t.json").exit_code == 0
    assert '"schema": "gradtrace.trace/3"' in (tmp_path / "t.json").read_text()
    assert invoke("dot", tmp_path / "t.json", "-o", tmp_path / "g.mmd").exit_code == 0
    assert (tmp_path / "g.mmd").read_text().startswith("flowchart TB")


@pytest.mark.parametrize("name", ["chain_rule", "two_paths_add_up", "custom_pow_function",
                                  "second_derivative", "chunk_multi_output"])
@pytest.mark.parametrize("fmt", ["dot", "mmd"])
def test_golden(name: str, fmt: str) -> None:
    args = ["--grads", "--saved"] if fmt == "dot" else []
    text = dot_text(SCENARIOS / f"{name}.py", "--to", fmt, *args)
    golden = GOLDEN / f"{name}.{fmt}"
    if UPDATE:
        golden.write_text(text)
    assert text == golden.read_text(), f"{golden} differs; GRADTRACE_UPDATE_GOLDEN=1 updates it"


def test_same_scenario_same_bytes() -> None:
    args = ("--grads", "--saved")
    assert dot_text(SCENARIOS / "two_paths_add_up.py", *args) == \
        dot_text(SCENARIOS / "two_paths_add_up.py", *args)


def test_pictures_read_the_way_gradients_flow() -> None:
    """Issue 54: an arrow's label says what it carries, the slot apart from the gradient; the
    legend says gradients flow back against the arrows; a leaf's box holds its total .grad
    (x's 1.6 where its two arrows bring 0.6 and 1)."""
    text = dot_text(SCENARIOS / "two_paths_add_up.py", "--grads")
    assert 'n5 [label="x\\nfloat32[]\\n.grad 1.6"' in text
    assert 'n5 -> n3 [label="grad 0.6"];' in text and 'n5 -> n4 [label="grad 1"];' in text
    assert 'n1 -> n0 [label="input 0 · grad 1"];' in text
    assert 'n2 -> n0 [label="input 1 · grad 1"];' in text
    assert "[0]" not in text and "[1]" not in text  # no bare brackets left to guess at
    assert "legend_arrows" in text and "flowed back against an arrow, from the output to the " \
        "leaves" in text and ".grad: a leaf's total" in text
    plain = dot_text(SCENARIOS / "two_paths_add_up.py")  # no gradients: slots and direction
    assert 'n1 -> n0 [label="input 0"];' in plain and ".grad" not in plain
    assert "gradients flow back against them, from the output to the leaves" in plain
    mermaid = dot_text(SCENARIOS / "two_paths_add_up.py", "--grads", "--to", "mmd")
    assert '.grad 1.6"]:::leaf' in mermaid and '-->|"input 0 · grad 1"| n0' in mermaid


def test_leaf_total_grad_needs_the_trace_to_have_it() -> None:
    """A leaf without a recorded .grad gets no line; a vector's total shows by value."""
    nodes = (Node("n0", "MulBackward0", "op", "y"), Node("n1", "AccumulateGrad", "leaf", "x"),
             Node("n2", "AccumulateGrad", "leaf", "w"))
    edges = (Edge("n1", "n0", 0, 0), Edge("n2", "n0", 1, 0))
    total = GradSummary((3,), 3.742, 1.0, 3.0, True, [1.0, 2.0, 3.0])
    tensors = (TensorInfo("x", (3,), "float32", True, True, False, None, "n1", total),
               TensorInfo("w", (3,), "float32", True, True, False, None, "n2", None))
    backward = Pass("backward", ("n0",), False, False, None)
    trace = Trace("t.py", "0", "0", ("n0",), ("y",), "test", nodes, edges, tensors,
                  (backward,), ())
    boxes = {b[0]: b[1] for b in drawing(trace, DrawOptions(grads=trace.passes[0])).boxes}
    assert boxes["n1"] == ("x", "float32[3]", ".grad [1, 2, 3]")
    assert boxes["n2"] == ("w", "float32[3]")
    assert all(".grad" not in line for lines in
               (b[1] for b in drawing(trace).boxes) for line in lines)  # only with --grads


HOSTILE = ['say "hi"', "back\\slash", "<b>tag</b>", "{brace}", "new\nline", "pipe|x", "a`b"]


def hostile_trace() -> Trace:
    nodes = [Node(f"n{i}", name + "Backward", "op" if i else "custom", name)
             for i, name in enumerate(HOSTILE)]
    nodes.append(Node(f"n{len(HOSTILE)}", "AccumulateGrad", "leaf", 'leaf "x"\\'))
    edges = [Edge(f"n{i + 1}", f"n{i}", 0, 0) for i in range(len(HOSTILE))]
    tensors = (TensorInfo('leaf "x"\\', (2,), "float32", True, True, False, None,
                          f"n{len(HOSTILE)}", None),)
    return Trace("evil.py", "0", "0", ("n0",), ('out "put"',), "test", tuple(nodes),
                 tuple(edges), tensors, (), ())


@needs_dot
def test_hostile_names_cannot_break_dot_or_svg() -> None:
    text = to_dot(drawing(hostile_trace(), DrawOptions(fold=False)))
    proc = subprocess.run([DOT, "-Tsvg"], input=text.encode(), capture_output=True)
    assert proc.returncode == 0, proc.stderr.decode()
    svg = ET.fromstring(proc.stdout)
    drawn = [t.text for t in svg.iter("{http://www.w3.org/2000/svg}text")]
    for name in HOSTILE:
        for part in name.split("\n"):
            assert any(part in (t or "") for t in drawn), part
    assert 'leaf "x"\\' in drawn
    canon = subprocess.run([DOT, "-Tcanon"], input=text.encode(), capture_output=True)
    assert canon.stdout.count(b"->") == len(HOSTILE) + 1  # every edge survived


def test_hostile_names_cannot_break_mermaid() -> None:
    text = to_mermaid(drawing(hostile_trace(), DrawOptions(fold=False)))
    for line in text.splitlines()[1:]:
        if "[" in line and line.strip().startswith("n"):
            label = line[line.index("[") + 1: line.rindex("]")]
            assert label.startswith('"') and label.endswith('"')
            assert '"' not in label[1:-1] and "\n" not in label
            assert "<" not in label.replace("<br/>", "")


def test_quote() -> None:
    assert quote('a"b\\c\nd') == '"a\\"b\\\\c\\nd"'


def test_max_nodes_cuts_visibly(tmp_path: Path) -> None:
    text = dot_text(SCENARIOS / "shopping_apple_tangerine.py", "--max-nodes", "3")
    assert "more nodes not drawn" in text
    assert text.count("[label=") - text.count("legend_") - text.count("->") <= 3 + 2


def test_focus_draws_a_neighbourhood() -> None:
    text = dot_text(SCENARIOS / "shopping_apple_tangerine.py", "--focus", "num_apple",
                    "--radius", "1", "--no-fold")
    assert "num_apple" in text and "tangerine\\n" not in text
    assert "more nodes not drawn" in text


def test_folding_a_long_chain(tmp_path: Path) -> None:
    path = tmp_path / "chain.py"
    path.write_text("import torch\nx = torch.tensor(1.0, requires_grad=True)\ny = x\n"
                    "for _ in range(128):\n    y = y * 1.01\n"
                    "for _ in range(50):\n    y = (y * 1.01) + 1\n")
    text = dot_text(path)
    # forward order from x: 128 Muls and the first pair's Mul, then (Add, Mul) pairs; the
    # output's own Add is never folded
    assert "MulBackward0 ×129" in text
    assert "(AddBackward0 → MulBackward0) ×49" in text
    assert text.count("->") < 10
    unfolded = dot_text(path, "--no-fold")
    assert unfolded.count("MulBackward0") == 178


@pytest.mark.parametrize("args,message", [
    (["-o", "graph.xyz"], "cannot tell the format"),
    (["--to", "gif"], "unknown format"),
    (["--to", "png"], "write it to a file"),
    (["--rankdir", "UP"], "--rankdir"),
    (["--focus", "nowhere"], "--focus 'nowhere'"),
    (["-o", "/nonexistent/dir/g.svg"], "does not exist"),
])
def test_bad_export_arguments(args: list[str], message: str, tmp_path: Path,
                              monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    result = invoke("dot", SCENARIOS / "chain_rule.py", *args)
    assert result.exit_code == 2
    assert message in result.stderr and "Traceback" not in result.stderr
    assert list(tmp_path.iterdir()) == []  # nothing half-written


def test_never_overwrites_the_input(tmp_path: Path) -> None:
    trace = tmp_path / "t.json"
    assert invoke("dot", SCENARIOS / "chain_rule.py", "-o", trace).exit_code == 0
    before = trace.read_bytes()
    result = invoke("dot", trace, "-o", trace)
    assert result.exit_code == 2 and "refusing to overwrite" in result.stderr
    assert trace.read_bytes() == before


def test_unwritable_path() -> None:
    # /proc refuses new files even to root, so this holds for every user
    result = invoke("dot", SCENARIOS / "chain_rule.py", "-o", "/proc/gradtrace-graph.dot")
    assert result.exit_code == 2 and "cannot write /proc/gradtrace-graph.dot" in result.stderr


def test_no_graphviz_says_what_to_install(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))  # a PATH with no `dot` on it
    result = invoke("dot", SCENARIOS / "chain_rule.py", "-o", tmp_path / "g.svg")
    assert result.exit_code == 2 and "apt-get install graphviz" in result.stderr
    assert not (tmp_path / "g.svg").exists()
    assert invoke("dot", SCENARIOS / "chain_rule.py", "-o", tmp_path / "g.mmd").exit_code == 0


def test_nodes_are_clustered_by_the_module_that_made_them() -> None:
    trace = show_json(SCENARIOS / "mlp_modules.py")
    modules = {n["type"] + ":" + (n["tensor"] or ""): n["module"] for n in trace["nodes"]}
    assert modules["ReluBackward0:"] == "model.1"
    assert modules["AccumulateGrad:model.0.weight"] == "model.0"
    assert modules["MeanBackward0:loss"] is None  # made outside any module
    text = dot_text(SCENARIOS / "mlp_modules.py")
    assert 'subgraph "cluster_model" {' in text and 'subgraph "cluster_model.0" {' in text
    assert text.index('"cluster_model"') < text.index('"cluster_model.0"')
    shallow = dot_text(SCENARIOS / "mlp_modules.py", "--module-depth", "1")
    assert '"cluster_model.0"' not in shallow and '"cluster_model"' in shallow
    assert "subgraph cluster1[" in dot_text(SCENARIOS / "mlp_modules.py", "--to", "mmd")


def test_written_files_get_ordinary_permissions(tmp_path: Path) -> None:
    out = tmp_path / "g.dot"
    assert invoke("dot", SCENARIOS / "chain_rule.py", "-o", out).exit_code == 0
    mask = os.umask(0)
    os.umask(mask)
    assert out.stat().st_mode & 0o777 == 0o666 & ~mask
    assert [p.name for p in tmp_path.iterdir()] == ["g.dot"]  # no temporary file left


def wide(folder: Path, leaves: int) -> Path:
    """A scenario of `leaves` leaves, each through mul → sin → exp, stacked and summed."""
    path = folder / "wide.py"
    path.write_text(f"import torch\nleaves = [torch.randn((), requires_grad=True) "
                    f"for _ in range({leaves})]\n"
                    "loss = torch.stack([(leaf * 2).sin().exp() for leaf in leaves]).sum()\n")
    return path


def test_identical_branches_side_by_side_fold_into_one_box(tmp_path: Path) -> None:
    text = dot_text(wide(tmp_path, 300))
    assert "×300 (AccumulateGrad → MulBackward0 → SinBackward0 → ExpBackward0)" in text
    assert '[label="×300"]' in text  # one arrow for the 300 that arrive side by side
    assert text.count("[label=") < 12  # sum, stack, the box, the output and the legend


def test_branches_that_differ_or_are_named_stay_apart(tmp_path: Path) -> None:
    path = tmp_path / "apart.py"
    path.write_text("import torch\nx = torch.ones(2, requires_grad=True)\n"
                    "a, b, c = (torch.ones(2, requires_grad=True) for _ in range(3))\n"
                    "same = torch.stack([x * float(i) for i in range(5)]).sum()\n"
                    "mixed = torch.stack([x.sin(), x.cos(), x.exp()]).sum()\n"
                    "named = torch.stack([a, b, c]).sum()\n")
    shared = dot_text(path, "--root", "same")
    assert "×5 (MulBackward0)" in shared and '[label="×5"]' in shared  # all from x
    assert "×" not in dot_text(path, "--root", "mixed")  # sin, cos, exp: not one kind
    named = dot_text(path, "--root", "named")
    assert all(f'"{n}\\nfloat32[2]"' in named for n in "abc")  # each named leaf drawn


@needs_dot
def test_ten_thousand_leaves_become_a_small_svg(tmp_path: Path) -> None:
    """Regression: 10,000 leaves × 3 ops (40,002 boxes) did not lay out in 75 s."""
    out = tmp_path / "wide.svg"
    assert invoke("dot", wide(tmp_path, 10_000), "-o", out).exit_code == 0
    assert "×10000 (AccumulateGrad" in out.read_text()
