"""Source analysis yields facts, findings/ phrases them: gradtrace.trace(tensors) from a file
gets the graph-cut findings that the lines which surely ran before its call tell."""

from __future__ import annotations

from pathlib import Path

from helpers import module_from, write_script

from gradtrace.capture.naming.statements import CUTTING, GRAD_CUTTERS
from gradtrace.findings.cuts import CUT_BY, why_no_root
from gradtrace.model.facts import Cut, NoRoot
from gradtrace.model.records import Finding

CUT = """import torch
import gradtrace

w = torch.randn(3, requires_grad=True)
b = torch.randn(3, requires_grad=True)
scale = w.sum().{taken}
loss = (b * scale).sum()
TRACE = gradtrace.trace(loss)
"""

HEALTHY = """import torch
import gradtrace

w = torch.randn(3, requires_grad=True)
b = torch.randn(3, requires_grad=True)
scale = w.sum()
loss = (b * scale).sum()
TRACE = gradtrace.trace(loss)
"""


def _findings(folder: Path, text: str, name: str) -> tuple[Path, list[Finding]]:
    path = write_script(folder, text, name)
    return path, list(module_from(path).TRACE.findings)


def test_a_leaf_cut_by_item_gets_the_cut_finding_with_its_line(tmp_path: Path) -> None:
    path, findings = _findings(tmp_path, CUT.format(taken="item()"), "cut_by_item.py")
    (cut,) = [f for f in findings if f.code == "graph-cut"]
    assert (cut.tensor, cut.file, cut.line) == ("w", str(path), 6)
    assert cut.message == ("w reaches no root because line 6 `scale = w.sum().item()` took it "
                           "without its graph: .item() turns it into a Python number")
    # the unreached leaf is told where it was bound
    (lost,) = [f for f in findings if f.code == "unreached-leaf"]
    assert (lost.tensor, lost.file, lost.line) == ("w", str(path), 4)


IN_A_FUNCTION = """import torch
import gradtrace

def run():
    w = torch.randn(3, requires_grad=True)
    b = torch.randn(3, requires_grad=True)
    scale = w.sum().detach()
    loss = (b * scale).sum()
    return gradtrace.trace(loss)

TRACE = run()
"""


def test_a_leaf_cut_by_detach_in_a_function_gets_the_cut_finding(tmp_path: Path) -> None:
    path, findings = _findings(tmp_path, IN_A_FUNCTION, "cut_by_detach.py")
    (cut,) = [f for f in findings if f.code == "graph-cut"]
    assert (cut.file, cut.line) == (str(path), 7)
    assert cut.message.endswith("`scale = w.sum().detach()` took it without its graph: "
                                ".detach() cuts it from the graph")


def test_its_healthy_twin_gets_none(tmp_path: Path) -> None:
    _, findings = _findings(tmp_path, HEALTHY, "healthy.py")
    assert not [f for f in findings if f.code in ("graph-cut", "unreached-leaf")]


def test_a_cut_in_a_branch_not_known_to_have_run_is_not_blamed(tmp_path: Path) -> None:
    """No line log ran: a line inside an if (or a loop, a handler) may not have run."""
    script = CUT.format(taken="item()").replace(
        "scale = w.sum().item()", "scale = 2.0\nif w.sum() > 1e9:\n    scale = w.sum().item()")
    _, findings = _findings(tmp_path, script, "cut_in_a_branch.py")
    assert [f.code for f in findings if f.tensor == "w"] == ["unreached-leaf"]


def test_every_cutting_name_has_its_words() -> None:
    assert set(CUT_BY) == CUTTING
    for name in GRAD_CUTTERS:
        cutters = (Cut("call" if name == "detach" else "block", name, 3),)
        why = why_no_root(NoRoot(("w",), cutters, None, None, 3, None, "nothing"))
        assert why.endswith(f"{name}() on line 3)")
