"""Saved tensors packed by the script's own saved_tensors_hooks (torch.utils.checkpoint's
among them) are never unpacked by gradtrace (issue 55, item 2): reading them would run the
script's unpack hook, or recompute a checkpointed function, outside the script's backward.
They show as "packed by a hook"; every other saved tensor still reads."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from helpers import as_read, invoke, write_script
from plain_python import run_gradtrace, run_plain

# each call of the checkpointed block appends a line to a file next to the script: a side
# effect counted wherever the call happens (during the run or while the trace is built)
CHECKPOINTED = """\
from pathlib import Path
import torch
from torch.utils.checkpoint import checkpoint

CALLS = Path(__file__).with_name("calls.txt")


def block(x):
    with CALLS.open("a") as f:
        f.write("call\\n")
    return torch.sin(x) * x


w = torch.randn(4, requires_grad=True)
for step in range(3):
    y = checkpoint(block, w, use_reentrant=REENTRANT)
    y = checkpoint(block, y, use_reentrant=REENTRANT)
    y.sum().backward()
"""

# a hook that offloads each saved tensor to a file and deletes the file as it unpacks it
OFFLOADED = """\
import os, tempfile, torch
d = tempfile.mkdtemp()
n = 0
def pack(t):
    global n
    n += 1
    p = os.path.join(d, f"{n}.pt")
    torch.save(t, p)
    return p
def unpack(p):
    t = torch.load(p)
    os.remove(p)
    return t
x = torch.randn(5, requires_grad=True)
with torch.autograd.graph.saved_tensors_hooks(pack, unpack):
    y = (x.sin() * x).sum()
y.backward()
print(x.grad.shape)
"""
# the same script without the hooks: its saved tensors read as ever
UNHOOKED = OFFLOADED.replace("with torch.autograd.graph.saved_tensors_hooks(pack, unpack):\n    ",
                             "")

# every output that reads saved tensors, and the plain tree that never did
OUTPUTS = [("show",), ("show", "--json"), ("show", "-o", "x.json"), ("show", "--saved"),
           ("dot", "-o", "x.html"), ("dot", "-o", "x.svg")]


def _calls(folder: Path) -> int:
    counted = folder / "calls.txt"
    n = len(counted.read_text().splitlines()) if counted.exists() else 0
    counted.unlink(missing_ok=True)
    return n


@pytest.fixture(scope="module")
def python_calls(tmp_path_factory: pytest.TempPathFactory) -> dict[bool, int]:
    """The checkpointed block's calls under python, by use_reentrant."""
    counts = {}
    for reentrant in (False, True):
        folder = tmp_path_factory.mktemp(f"plain{reentrant}")
        script = write_script(folder, CHECKPOINTED.replace("REENTRANT", str(reentrant)))
        done = run_plain(script)
        assert done.returncode == 0, done.stderr
        counts[reentrant] = _calls(folder)
    assert counts[False] == 12  # 6 forwards, and each recomputed once in its backward
    return counts


@pytest.mark.parametrize("reentrant", [False, True], ids=["non-reentrant", "reentrant"])
@pytest.mark.parametrize("output", OUTPUTS, ids=" ".join)
def test_a_checkpointed_function_runs_as_often_as_under_python(
        tmp_path: Path, python_calls: dict[bool, int], output: tuple[str, ...],
        reentrant: bool) -> None:
    script = write_script(tmp_path, CHECKPOINTED.replace("REENTRANT", str(reentrant)))
    command, *rest = output
    done = run_gradtrace(command, script, *rest, cwd=tmp_path)
    if done.returncode == 2 and "Graphviz" in done.stderr:
        pytest.skip("Graphviz is not installed")
    assert done.returncode == 0, done.stderr
    assert _calls(tmp_path) == python_calls[reentrant]


@pytest.mark.parametrize("output", [*OUTPUTS, ("show", "--profile")], ids=" ".join)
def test_an_unpack_hook_that_deletes_its_file_runs_once(tmp_path: Path,
                                                         output: tuple[str, ...]) -> None:
    """python runs the script; so does gradtrace, under every output."""
    script = write_script(tmp_path, OFFLOADED)
    assert run_plain(script).returncode == 0
    command, *rest = output
    done = run_gradtrace(command, script, *rest, cwd=tmp_path)
    if done.returncode == 2 and "Graphviz" in done.stderr:
        pytest.skip("Graphviz is not installed")
    assert done.returncode == 0, done.stderr


def _saved(text: str, tmp_path: Path) -> dict[str, list[dict[str, object]]]:
    """The saved tensors of each node, by type, in `show --json` of the script text."""
    result = invoke("show", write_script(tmp_path, text), "--json")
    assert result.exit_code == 0, result.stderr
    return {n["type"]: n.get("saved", []) for n in as_read(result.stdout)["nodes"]}


def test_tensors_a_hook_packed_are_not_read_and_say_so(tmp_path: Path) -> None:
    saved = _saved(OFFLOADED, tmp_path)
    assert saved["MulBackward0"] == [
        {"name": "other", "shape": None, "dtype": None, "bytes": 0, "status": "packed by a hook"},
        {"name": "self", "shape": None, "dtype": None, "bytes": 0, "status": "packed by a hook"}]
    assert [s["status"] for s in saved["SinBackward0"]] == ["packed by a hook"]


def test_the_same_script_without_hooks_still_reads_its_saved_tensors(tmp_path: Path) -> None:
    saved = _saved(UNHOOKED, tmp_path)
    assert [(s["name"], s["shape"], s.get("status", "ok")) for s in saved["MulBackward0"]] == [
        ("other", [5], "ok"), ("self", [5], "ok")]
    assert saved["SinBackward0"][0]["shape"] == [5]


def test_the_checkpointed_nodes_say_packed_and_the_others_read(tmp_path: Path) -> None:
    """A checkpoint between two plain ops: only the nodes it made are left unread."""
    text = CHECKPOINTED.replace("REENTRANT", "False").replace(
        "y.sum().backward()", "(y.exp() * w).sum().backward()")
    saved = _saved(text, tmp_path)
    assert {s["status"] for s in saved["SinBackward0"]} == {"packed by a hook"}
    assert [s["shape"] for s in saved["ExpBackward0"]] == [[4]]


def test_a_saved_tensor_changed_in_place_is_still_found(tmp_path: Path) -> None:
    """The healthy twin of the hooks: an in-place change to a plain saved tensor is told."""
    script = write_script(tmp_path, """\
import torch
x = torch.randn(3, requires_grad=True)
y = x.sigmoid()
z = y * 2
y.mul_(2)
z.sum().backward()
""")
    result = invoke("show", script, "--json")
    found = as_read(result.stdout)
    assert [f for f in found["findings"] if f["code"] == "inplace-modified"], found["findings"]
    statuses = {n["type"]: [s.get("status", "ok") for s in n.get("saved", [])]
                for n in found["nodes"]}
    assert "packed by a hook" not in str(statuses)


def test_a_saved_trace_with_packed_tensors_reads_back_and_draws(tmp_path: Path) -> None:
    """The status is part of the contract: a trace file keeps it, and every output says it."""
    script = write_script(tmp_path, OFFLOADED)
    assert invoke("show", script, "-o", tmp_path / "t.json").exit_code == 0
    again = invoke("show", tmp_path / "t.json", "--json")
    assert again.exit_code == 0, again.stderr
    assert "packed by a hook" in again.stdout
    assert "saved: other (packed by a hook), self (packed by a hook)" in invoke(
        "show", tmp_path / "t.json", "--saved").stdout
    assert invoke("dot", tmp_path / "t.json", "-o", tmp_path / "t.html").exit_code == 0
    assert "packed by a hook" in (tmp_path / "t.html").read_text()
    bad = as_read(again.stdout)
    next(n for n in bad["nodes"] if n.get("saved"))["saved"][0]["status"] = "unpacked"
    (tmp_path / "bad.json").write_text(json.dumps(bad))
    refused = invoke("show", tmp_path / "bad.json")
    assert refused.exit_code == 2 and "status" in refused.stderr


def test_save_on_cpu_and_a_custom_function_are_named_not_read(tmp_path: Path) -> None:
    """save_on_cpu subclasses saved_tensors_hooks; a Function's saved tensors, a list saved
    (an index's) and a graph made after the block are each told as they are."""
    script = write_script(tmp_path, """\
import torch
class F(torch.autograd.Function):
    @staticmethod
    def forward(ctx, a, b):
        ctx.save_for_backward(a, b)
        return a * b
    @staticmethod
    def backward(ctx, g):
        a, b = ctx.saved_tensors
        return g * b, g * a
x = torch.randn(3, requires_grad=True)
with torch.autograd.graph.save_on_cpu():
    y = F.apply(x, x.exp())
    z = y[torch.tensor([0, 2])].sum()
z.backward()
w = (x * 3).sum()
w.backward()
""")
    text = invoke("show", script, "--saved").stdout
    assert "saved: indices[0] (packed by a hook)" in text
    assert "saved: saved_tensors[0] (packed by a hook), saved_tensors[1] (packed by a hook)" \
        in text
    assert "saved: other int64[] 8 B" in text  # w's graph, made after the block
    assert "saved for backward: 8 B in 1 nodes (not read in 3 more: packed by a hook)" in text


def test_record_inside_hooks_entered_before_it_runs_no_unpack_hook() -> None:
    """gradtrace.record() begun inside a saved_tensors_hooks block: what the block's hooks
    packed is not read, before or after the hooks nested in it end."""
    import torch

    import gradtrace

    unpacked: list[int] = []

    def unpack(t: torch.Tensor) -> torch.Tensor:
        unpacked.append(1)
        return t

    x = torch.randn(3, requires_grad=True)
    with torch.autograd.graph.saved_tensors_hooks(lambda t: t, unpack):
        with gradtrace.record() as rec:
            c = x.cos()  # under the outer hooks alone
            with torch.autograd.graph.saved_tensors_hooks(lambda t: t, unpack):
                a = x.sin()
            b = (a * c).sum()  # after the inner block: under the outer hooks still
            b.backward()
    assert len(unpacked) == 4  # backward's own: cos's and sin's self, mul's self and other
    statuses = {n.type: {s.status for s in n.saved} for n in rec.trace.nodes}
    assert statuses["MulBackward0"] == statuses["SinBackward0"] == statuses["CosBackward0"] \
        == {"packed by a hook"}
