"""Pictures stay bounded on graphs folding cannot shrink (issue 58): past a number of boxes the
first ones are drawn and one box says how many nodes were left out; a fold says which of its
nodes a NaN was born at. Real torch graphs, built in-process."""

from __future__ import annotations

import io
import re
from pathlib import Path

import pytest
import torch
from helpers import invoke, needs_dot, write_script
from rich.console import Console

import gradtrace
from gradtrace.diff.compare import compare
from gradtrace.diff.match import match_nodes
from gradtrace.diff.union import union_trace
from gradtrace.model.records import Trace
from gradtrace.render.bounded import MAX_BOXES
from gradtrace.render.diffs import diff_drawing, diff_report
from gradtrace.render.dot import to_dot
from gradtrace.render.drawing import Drawing, DrawOptions, drawing

# five distinct ops a step: longer than any pattern folding looks for, so one box a node
UNFOLDABLE = '''import torch
x = torch.tensor(1.0, requires_grad=True)
y = x
for _ in range({steps}):
    y = -(((y * 1.5) + 0.5) - 0.5) / 1.5
y.backward()
'''


def unfoldable(steps: int, start: float = 1.0) -> Trace:
    """A chain of 5 × steps ops and its leaf (5 × steps + 1 nodes), after its backward."""
    x = torch.tensor(start, requires_grad=True)
    y = x.log() if start == 0 else x  # log(0): a -inf born at the far end of the chain
    for _ in range(steps):
        y = -(((y * 1.5) + 0.5) - 0.5) / 1.5
    return gradtrace.trace(y, backward=True).trace


def node_boxes(picture: Drawing) -> list[str]:
    return [box_id for box_id, _, kind, _ in picture.boxes
            if kind not in ("output", "more", "cut")]


def more_box(picture: Drawing) -> tuple[str, ...]:
    return next(lines for box_id, lines, _, _ in picture.boxes if box_id == "more")


def test_past_the_bound_the_first_boxes_are_drawn_and_one_box_counts_the_rest() -> None:
    trace = unfoldable(120)  # 601 nodes
    picture = drawing(trace, DrawOptions(max_boxes=100, more_hint="how to see more"))
    kept = node_boxes(picture)
    assert kept == [n.id for n in trace.nodes[:100]]  # nearest the output first
    assert more_box(picture) == ("… 501 more nodes not drawn",
                                 "(in 501 boxes past the first 100: a picture's bound)",
                                 "how to see more")
    drawn = {box_id for box_id, _, _, _ in picture.boxes}
    assert all(src in drawn and dst in drawn for src, dst, _ in picture.arrows)
    assert ("more", "n99", None) in picture.arrows  # what fed the last kept box
    assert any(kind == "output" for _, _, kind, _ in picture.boxes)  # the output stays
    assert to_dot(picture) == to_dot(drawing(trace, DrawOptions(max_boxes=100,
                                                                more_hint="how to see more")))


def test_a_small_graph_is_drawn_whole() -> None:
    """The healthy twin: within the bound nothing is left out, and nothing says so."""
    trace = unfoldable(10)  # 51 nodes
    picture = drawing(trace)
    assert len(node_boxes(picture)) == 51 and "more" not in {b[0] for b in picture.boxes}
    assert "not drawn" not in to_dot(picture)


def test_the_bound_counts_boxes_after_folding() -> None:
    """A 1,000-op chain folds into 3 boxes: a bound of 3 leaves nothing out; the members of
    a folded box left out count as nodes, not as one."""
    x = torch.tensor(1.0, requires_grad=True)
    y = x
    for _ in range(1000):
        y = y * 1.0001
    trace = gradtrace.trace(y, backward=True).trace
    assert len(node_boxes(drawing(trace, DrawOptions(max_boxes=3)))) == 3
    cut = drawing(trace, DrawOptions(max_boxes=1))
    assert node_boxes(cut) == ["n0"]
    assert more_box(cut)[:2] == ("… 1,000 more nodes not drawn",  # 999 folded + the leaf
                                 "(in 2 boxes past the first 1: a picture's bound)")


def test_a_nan_left_out_is_said_on_the_box_that_counts_it() -> None:
    trace = unfoldable(120, start=0.0)  # log(0) = -inf at the far end
    whole = drawing(trace, DrawOptions(max_boxes=None))
    picture = drawing(trace, DrawOptions(max_boxes=100))
    far = [box for box, mark in whole.marks.items()
           if mark.level == "born" and box not in node_boxes(picture)]
    assert far == ["n600"]  # the log's node, left out
    assert picture.marks["more"].level == "born"
    assert any(line.startswith("⚠ first NaN/Inf") and line.endswith("among them")
               for line in more_box(picture))


def test_a_fold_says_which_of_its_nodes_a_nan_was_born_at() -> None:
    x = torch.tensor(1.0, requires_grad=True)
    y = x
    for _ in range(50):
        y = y * 10.0  # the gradient overflows float32 39 multiplications from the output
    trace = gradtrace.trace(y, backward=True).trace
    node = next(f.node for f in trace.findings if f.code == "nan-gradient")
    picture = drawing(trace)
    fold = next(box_id for box_id, lines, kind, _ in picture.boxes if kind == "folded")
    assert node != fold and picture.marks[fold].note == f"⚠ first NaN/Inf gradient at {node}"


def test_a_diff_picture_is_bounded_too() -> None:
    a, b = unfoldable(100), unfoldable(120)  # B: 100 more ops, each added
    m = match_nodes(a, b)
    result = compare(a, b, "a", "b", matching=m)
    union = union_trace(a, b, m, result.nodes)
    picture = diff_drawing(union, DrawOptions(max_boxes=50))
    assert len(node_boxes(picture)) == 50
    assert more_box(picture)[0] == f"… {len(union.trace.nodes) - 50:,} more nodes not drawn"


@pytest.fixture(scope="module")
def past_the_bound(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A scenario of MAX_BOXES + 6 nodes, none of which fold."""
    steps = (MAX_BOXES + 5) // 5
    return write_script(tmp_path_factory.mktemp("bound"), UNFOLDABLE.format(steps=steps))


def test_dot_says_how_to_draw_more(past_the_bound: Path) -> None:
    result = invoke("dot", past_the_bound)
    assert result.exit_code == 0, result.stderr
    assert "… 6 more nodes not drawn\\n(in 6 boxes past the first 2,000: a picture's bound)" \
           "\\n--max-nodes N draws N nodes; --focus NODE around one" in result.stdout
    asked = invoke("dot", past_the_bound, "--max-nodes", "3000")  # the bound asked instead
    assert "not drawn" not in asked.stdout
    assert len(re.findall(r"^  n\d+ \[", asked.stdout, re.M)) == MAX_BOXES + 6


@pytest.mark.slow
@needs_dot
def test_an_unfoldable_100_000_node_graph_draws_a_bounded_svg(tmp_path: Path) -> None:
    script = write_script(tmp_path, UNFOLDABLE.format(steps=20_000))
    out = tmp_path / "g.svg"
    result = invoke("dot", script, "-o", out)  # Graphviz ran out of memory on it before
    assert result.exit_code == 0, result.stderr
    svg = out.read_text()
    assert len(re.findall(r"<title>n\d+</title>", svg)) == MAX_BOXES
    assert "… 98,001 more nodes not drawn" in svg and out.stat().st_size < 3_000_000


def report_text(a: Trace, b: Trace, every: bool = False) -> str:
    console = Console(file=io.StringIO(), width=200, highlight=False)
    console.print(diff_report(compare(a, b, "a", "b"), every=every))
    return console.file.getvalue()


def chain(ops: int) -> Trace:
    x = torch.tensor(1.0, requires_grad=True)
    y = x
    for _ in range(ops):
        y = y * 1.0001
    return gradtrace.trace(y, backward=True).trace


def test_diff_folds_alike_changes_in_a_row_and_counts_every_one() -> None:
    a, b = chain(600), unfoldable(20)  # A: 600 Muls; B: 100 ops of five kinds
    d = compare(a, b, "a", "b")
    removed = [c for c in d.nodes if c.kind == "removed"]
    text = report_text(a, b)
    first, last = removed[0].a, removed[-1].a
    assert first is not None and last is not None and len(removed) > 400
    assert f"  - MulBackward0 ({first.id}) … ×{len(removed):,} alike, the last {last.id}\n" \
        in text
    # the "… N more" line counts changes, not lines: what is listed and what is not add up
    listed = sum(int(m.group(1).replace(",", "")) if m.group(1) else 1 for m in re.finditer(
        r"^  [-+] .*?(?:×([\d,]+) alike.*)?$", text.split("\nedges")[0], re.M))
    more = int(re.search(r"… ([\d,]+) more", text)[1].replace(",", ""))  # type: ignore[index]
    assert listed + more == len(d.nodes)
    assert "alike" not in report_text(a, b, every=True)  # --all lists each


def test_diff_lists_changes_that_differ_one_by_one() -> None:
    """The healthy twin: changes in a row that differ in more than their ids stay apart."""
    a, b = unfoldable(3), unfoldable(6)
    text = report_text(a, b)
    assert "alike" not in text and "NegBackward0" in text


def test_mermaid_stops_at_its_own_smaller_bound_and_says_so(tmp_path: Path) -> None:
    """Mermaid refuses a flowchart past 500 edges or 50,000 characters by default: a .mmd (dot,
    the API, diff -o) stops at MERMAID_BOXES boxes, well inside both; --max-nodes N still draws
    N. Its twin, a graph within the bound, is drawn whole."""
    from gradtrace.render.bounded import MERMAID_BOXES

    script = write_script(tmp_path, UNFOLDABLE.format(steps=200))  # 1,001 nodes
    text = invoke("dot", script, "--to", "mmd").stdout
    assert text.count("-->") <= 500 and len(text) < 50_000
    boxes = re.findall(r"^  (n\d+)\[", text, re.M)
    assert len(boxes) == MERMAID_BOXES
    assert f"… {1001 - MERMAID_BOXES:,} more nodes not drawn" in text
    assert f"past the first {MERMAID_BOXES}: a picture's bound" in text
    x = torch.tensor(1.0, requires_grad=True)
    y = x
    for _ in range(200):
        y = -(((y * 1.5) + 0.5) - 0.5) / 1.5
    api = gradtrace.trace(y, backward=True).to_mermaid()
    assert len(re.findall(r"^  (n\d+)\[", api, re.M)) == MERMAID_BOXES
    wide = invoke("dot", script, "--to", "mmd", "--max-nodes", "400").stdout
    assert len(re.findall(r"^  (n\d+)\[", wide, re.M)) >= 400
    other = write_script(tmp_path, UNFOLDABLE.format(steps=200).replace("+ 0.5", "+ 0.25"),
                         "other.py")
    assert invoke("diff", script, other, "-o", tmp_path / "d.mmd").exit_code in (0, 1)
    assert f"past the first {MERMAID_BOXES}: a picture's bound" in \
        (tmp_path / "d.mmd").read_text()
    small = write_script(tmp_path, UNFOLDABLE.format(steps=20), "small.py")  # 101 nodes
    whole = invoke("dot", small, "--to", "mmd").stdout
    assert "more nodes not drawn" not in whole
    assert len(re.findall(r"^  (n\d+)\[", whole, re.M)) == 101
