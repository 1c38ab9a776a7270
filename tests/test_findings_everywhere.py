"""Findings go where the graph goes: `dot` says them on stderr and judges them as `show` does
(--strict, --fail-on, -q), pictures mark the nodes where a NaN or Inf was born or passed, and
the terminal paints non-finite numbers red."""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
from helpers import SCENARIOS, invoke, needs_dot

from gradtrace.model import Edge, Node, TensorInfo, Trace
from gradtrace.model.records import Finding, GradSummary, NodeFlow, Pass
from gradtrace.render.dot import to_dot
from gradtrace.render.drawing import DrawOptions, drawing
from gradtrace.render.marks import non_finite_nodes
from gradtrace.render.mermaid import to_mermaid

LOG_OF_ZERO = SCENARIOS / "explained" / "log_of_zero.py"
INPLACE = SCENARIOS / "explained" / "inplace_after_save.py"
SVG_NS = "{http://www.w3.org/2000/svg}"


# --- dot says the findings on stderr, and judges them as show does ------------------------

def test_dot_says_the_findings_on_stderr_one_line_each(tmp_path: Path) -> None:
    result = invoke("dot", LOG_OF_ZERO, "-o", tmp_path / "g.dot")
    assert result.exit_code == 0 and result.stdout == ""
    *lines, wrote = result.stderr.splitlines()
    assert all(line.startswith(("error [", "warning [", "info [")) for line in lines)
    assert wrote == f"wrote {tmp_path / 'g.dot'}"
    assert any(line.startswith("error [nan-value] pass 1: loss is Inf, and its first Inf was "
                               "made in the forward at line 8")
               for line in lines)
    result = invoke("dot", INPLACE)  # DOT on stdout stays clean: findings go to stderr
    assert result.stdout.startswith("digraph gradtrace {") and "[inplace-modified]" not in \
        result.stdout
    said = result.stderr.splitlines()
    findings = [line for line in said if line.startswith(("error [", "warning [", "info ["))]
    assert any(line.startswith("error [inplace-modified] b (output of SigmoidBackward0, "
                               "line 6)") for line in findings)
    # the failed backward is the stop's finding (torch's message once), after its cause
    assert findings[-1].startswith("error [scenario-stopped]")
    assert len(findings) == 2  # no hint lines: one line a finding
    assert result.exit_code == 2  # the script stopped in backward(), as python would


def test_quiet_says_nothing_and_a_clean_graph_says_nothing(tmp_path: Path) -> None:
    result = invoke("dot", LOG_OF_ZERO, "-q", "-o", tmp_path / "g.dot")
    assert result.exit_code == 0 and result.stderr == ""
    assert invoke("dot", LOG_OF_ZERO, "--quiet").stderr == ""
    assert invoke("dot", SCENARIOS / "chain_rule.py").stderr == ""


@pytest.mark.parametrize(("args", "code"), [
    (["--fail-on", "nan-gradient"], 1),  # found in the gradient flow: dot records it then
    (["--fail-on", "nan-value", "-q"], 1),  # quiet, but still judged
    (["--fail-on", "unreached-leaf"], 0),
    (["--strict"], 1),
])
def test_strict_and_fail_on_mean_what_they_mean_in_show(args: list[str], code: int,
                                                        tmp_path: Path) -> None:
    out = tmp_path / "g.mmd"
    result = invoke("dot", LOG_OF_ZERO, *args, "-o", out)
    assert result.exit_code == code, result.stderr
    assert out.read_text().startswith("flowchart")  # the picture is written all the same
    shown = [a for a in args if a != "-q"]  # show prints its findings in the report
    assert invoke("show", LOG_OF_ZERO, *shown).exit_code == code


def test_strict_passes_a_clean_graph_and_fail_on_refuses_an_unknown_code() -> None:
    assert invoke("dot", SCENARIOS / "chain_rule.py", "--strict").exit_code == 0
    result = invoke("dot", SCENARIOS / "chain_rule.py", "--fail-on", "nan-gradint")
    assert result.exit_code == 2 and result.stdout == ""  # refused before the scenario runs
    assert "error: --fail-on: no finding has the code nan-gradint" in result.stderr


def test_a_saved_trace_is_judged_too(tmp_path: Path) -> None:
    saved = tmp_path / "t.json"
    saved.write_text(invoke("show", LOG_OF_ZERO, "--json").stdout)
    result = invoke("dot", saved, "--fail-on", "nan-gradient")
    assert result.exit_code == 1 and "[nan-gradient]" in result.stderr


# --- pictures mark the nodes that carry NaN or Inf ----------------------------------------

def _summary(*values: float) -> GradSummary:
    finite = all(v == v and abs(v) != float("inf") for v in values)
    return GradSummary((len(values),), 1.0, min(values), max(values), finite, list(values))


def _nan_trace() -> Trace:
    """x -> a (Mul) -> b (Log) -> c (Sum): b's backward turns a finite gradient into Inf."""
    nodes = (Node("n0", "SumBackward0", "op", "c"), Node("n1", "LogBackward0", "op", "b"),
             Node("n2", "MulBackward0", "op", "a"), Node("n3", "AccumulateGrad", "leaf", "x"))
    edges = (Edge("n1", "n0", 0, 0), Edge("n2", "n1", 0, 0), Edge("n3", "n2", 0, 0))
    fine, bad = _summary(1.0, 1.0), _summary(1.0, float("inf"))
    flow = {"n0": NodeFlow((_summary(1.0),), (fine,), 0),
            "n1": NodeFlow((fine,), (bad,), 1),
            "n2": NodeFlow((bad,), (bad,), 2),
            "n3": NodeFlow((bad,), (), 3)}
    tensors = (TensorInfo("x", (2,), "float32", True, True, False, None, "n3", bad),
               TensorInfo("c", (), "float32", True, False, False, "SumBackward0", "n0", None))
    finding = Finding("nan-gradient", "error", "the first non-finite gradient is born at n1",
                      node="n1")
    return Trace("s.py", "0", "2", ("n0",), ("c",), "", nodes, edges, tensors,
                 (Pass("backward", ("n0",), False, False, None, flow),), (finding,))


def test_marks_say_where_a_nan_was_born_and_where_it_passed() -> None:
    marks = non_finite_nodes(_nan_trace(), None)
    assert {k: m.level for k, m in marks.items()} == {"n1": "born", "n2": "carries",
                                                      "n3": "carries"}
    assert marks["n1"].note == "⚠ first NaN/Inf gradient here"
    assert marks["n3"].note == "NaN/Inf gradient"
    plain = _nan_trace()
    clean = Trace(plain.scenario, "0", "2", plain.outputs, plain.output_names, "",
                  plain.nodes, plain.edges, plain.tensors[1:], (), ())
    assert non_finite_nodes(clean, None) == {}


def test_dot_and_mermaid_draw_the_marks_with_a_legend() -> None:
    picture = drawing(_nan_trace())
    assert [(box, m.level) for box, m in picture.marks.items()] == [
        ("n1", "born"), ("n2", "carries"), ("n3", "carries")]  # in drawing order
    text = to_dot(picture)
    born = next(line for line in text.splitlines() if line.strip().startswith("n1 ["))
    assert "⚠ first NaN/Inf gradient here" in born and 'color="#c62828", penwidth=3' in born
    assert 'tooltip="⚠ first NaN/Inf gradient here"' in born
    plain = next(line for line in text.splitlines() if line.strip().startswith("n0 ["))
    assert "penwidth" not in plain and "NaN" not in plain
    assert 'legend_born [label="first NaN/Inf born here"' in text
    assert 'legend_carries [label="NaN/Inf passed through"' in text
    mermaid = to_mermaid(picture)
    assert "  class n1 nonfinite_born" in mermaid and "  class n2,n3 nonfinite_carries" in mermaid
    assert to_dot(picture) == text  # deterministic


def test_only_drawn_nodes_are_marked() -> None:
    picture = drawing(_nan_trace(), DrawOptions(focus="n1", radius=0))
    assert {box: m.level for box, m in picture.marks.items()} == {"n1": "born"}  # only n1 drawn
    assert "legend_carries" not in to_dot(picture)


@needs_dot
def test_the_svg_marks_the_node_where_the_nan_was_born(tmp_path: Path) -> None:
    out = tmp_path / "g.svg"
    assert invoke("dot", LOG_OF_ZERO, "--grads", "-o", out).exit_code == 0
    root = ET.parse(out).getroot()
    boxes = {g.findtext(f"{SVG_NS}title"): g for g in root.iter(f"{SVG_NS}g")
             if g.get("class") == "node"}
    born = " ".join(t.text or "" for t in boxes["n1"].iter(f"{SVG_NS}text"))
    assert "first NaN/Inf gradient and value here" in born
    border = next(boxes["n1"].iter(f"{SVG_NS}path"))
    assert border.get("stroke") == "#c62828" and border.get("stroke-width") == "3"
    clean = " ".join(t.text or "" for t in boxes["out0"].iter(f"{SVG_NS}text"))
    assert "NaN" not in clean


# --- the terminal paints non-finite numbers red -------------------------------------------

def _coloured(args: list[str]) -> str:
    result = invoke("show", LOG_OF_ZERO, *args, env={"FORCE_COLOR": "1", "NO_COLOR": None,
                                                      "COLUMNS": "200", "TERM": "xterm"})
    assert result.exit_code == 0, result.stderr
    return result.stdout


def test_nan_and_inf_are_red_in_the_tree_and_the_tables() -> None:
    out = _coloured([])
    red = re.compile(r"\x1b\[(?:[0-9;]*;)?31(?:;[0-9;]*)?m(-?(?:nan|inf))")
    painted = red.findall(out)
    tree = out[out.index("graph"):out.index("tensors")]
    assert red.search(tree), tree  # the gradient a node received
    table = out[out.index("tensors"):out.index("\x1b[1mpasses")]
    assert red.search(table)  # .grad and value cells
    assert "[-0.6931, \x1b[1;31m-inf\x1b[0m, 0]" in table  # y's value: only -inf is red
    changes = out[out.index("\x1b[1mpasses"):out.index("\x1b[1mfindings")]
    assert red.search(changes)  # x.grad  None → [0.333333, inf, 0.166667]
    assert {"nan", "inf"} <= set(painted)
    plain = re.sub(r"\x1b\[[0-9;]*m", "", out)
    assert "grad in [0.666667, inf, 0.333333]" in plain  # the words are unchanged


def test_no_colour_when_piped() -> None:
    result = invoke("show", LOG_OF_ZERO)
    assert "\x1b[" not in result.stdout


def test_nonfinite_text_styles_only_whole_words() -> None:
    from gradtrace.render.numbers import number_text

    text = number_text("[inf, -inf, nan] norm 3 in [information, banana]", "bold yellow")
    red = [text.plain[s.start:s.end] for s in text.spans if "red" in str(s.style)]
    assert red == ["inf", "-inf", "nan"]
