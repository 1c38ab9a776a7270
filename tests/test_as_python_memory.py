"""A script's memory under gradtrace is python's: what the script lets go of dies when it
does (its graphs, their leaves, a function's locals), and gradtrace keeps what it shows of
them as plain data (issue 55, item 1)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from helpers import as_read, invoke, show_json, write_script

# A loop that makes and drops a big leaf each step: python frees each step's leaf, its
# .grad and its graph at the `del`. 128 Mi float32 elements: a 512 MiB leaf.
FREEING = """import torch
for step in range(3):
    big = torch.randn(128 * 1024 * 1024, requires_grad=True)
    loss = (big * 2).sum()
    loss.backward()
    print(step, round(float(big.grad.norm()), 1))
    del big, loss
"""


def _peak_mib(*command: str, cwd: Path) -> int:
    """The peak resident memory of a fresh process running command, in MiB."""
    process = subprocess.Popen(command, cwd=cwd, stdout=subprocess.DEVNULL,
                               stderr=subprocess.PIPE,
                               env={**os.environ, "PYTHONPATH": str(Path.cwd())})
    _, status, usage = os.wait4(process.pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0, process.stderr.read()  # type: ignore[union-attr]
    process.stderr.close()  # type: ignore[union-attr]
    return usage.ru_maxrss // 1024


def test_a_loop_that_frees_big_tensors_peaks_as_under_python(tmp_path: Path) -> None:
    """Measured on this machine: python 1,249 MiB, gradtrace 1,334 MiB (before: 4,341 MiB)."""
    script = write_script(tmp_path, FREEING)
    plain = _peak_mib(sys.executable, str(script), cwd=tmp_path)
    ours = _peak_mib(sys.executable, "-m", "gradtrace", "show", str(script), "--json",
                     cwd=tmp_path)
    assert ours <= plain * 1.10, (plain, ours)


WEAK = """import weakref
import torch

dead = []
for step in range(3):
    leaf = torch.randn(1000, requires_grad=True)
    middle = leaf.sin()
    loss = (middle * 2).sum()
    loss.backward()
    refs = [weakref.ref(leaf), weakref.ref(middle), weakref.ref(loss)]
    del leaf, middle, loss
    dead.append(all(r() is None for r in refs))


def step():
    a = torch.randn(10, requires_grad=True)
    (a * 3).sum().backward()
    return weakref.ref(a)


r = step()  # its leaf outlived the root: its graph is let go of as the next pass starts
(torch.ones(1, requires_grad=True) * 2).sum().backward()
dead.append(r() is None)
print("dead", dead)
"""


def test_weak_references_the_script_holds_die_as_under_python(tmp_path: Path) -> None:
    trace = show_json(write_script(tmp_path, WEAK))
    assert "dead [True, True, True, True]" in trace["stdout"]
    # what the trace shows of them stays: the loop's last graph, and the last pass's (a
    # graph alike the function's: that one's flow is placed on it)
    types = [n["type"] for n in trace["nodes"]]
    assert types.count("SinBackward0") == 1 and types.count("AccumulateGrad") == 2
    rows = {t["name"]: t for t in trace["tensors"]}
    assert rows["leaf"]["grad"]["shape"] == [1000] and rows["leaf"]["node"] is not None


def test_a_graph_let_go_of_shows_the_numbers_of_one_kept(tmp_path: Path) -> None:
    """The same loop with and without `del`: the same graph, passes and gradients."""
    kept = FREEING.replace("128 * 1024 * 1024", "1000").replace("    del big, loss\n", "")
    freed = write_script(tmp_path, FREEING.replace("128 * 1024 * 1024", "1000"), "freed.py")
    a, b = show_json(write_script(tmp_path, kept, "kept.py")), show_json(freed)
    assert [(n["id"], n["type"], n["tensor"]) for n in a["nodes"]] == \
        [(n["id"], n["type"], n["tensor"]) for n in b["nodes"]]
    assert a["edges"] == b["edges"] and a["outputs"] == b["outputs"]
    assert [p["flow"] for p in a["passes"]] == [p["flow"] for p in b["passes"]]
    grads = {t["name"]: t["grad"] for t in b["tensors"]}
    assert list(grads) == ["big"]  # (the script let go of loss: no row, as under python)
    assert {t["name"]: t["grad"] for t in a["tensors"] if t["name"] in grads} == grads
    assert a["stdout"] == b["stdout"]


def test_a_training_function_that_returns_keeps_its_graph_names_and_findings() -> None:
    """Everything a function made dies as it returns: the trace still shows its last
    step's graph, its lines, and the running total that kept every step's graph."""
    result = invoke("show", "example:bugs/running_loss_keeps_graph", "--json")
    assert result.exit_code == 0, result.stderr

    trace = as_read(result.stdout)
    assert trace["output_names"] == ["loss"]
    assert any(n["type"] == "ConvolutionBackward0" and n["source"] for n in trace["nodes"])
    assert [(f["code"], f["line"]) for f in trace["findings"]
            if f["severity"] != "info"] == [("graph-kept", 23)]


THREADS = """import threading
import torch

out = {}


def work():
    b = (torch.randn(3, requires_grad=True) * 2).sum()
    b.backward()


def live():
    x = torch.randn(3, requires_grad=True)
    out["y"], out["x"] = (x * 3).sum(), x


for target in (work, live):
    thread = threading.Thread(target=target)
    thread.start()
    thread.join()
y, x = out["y"], out["x"]
y.backward()
"""


def test_graphs_of_two_threads_with_the_same_node_numbers_stay_apart(tmp_path: Path) -> None:
    """Autograd numbers nodes per thread: the thread's graph (let go of) and the live one
    have nodes of the same class and number, and are two graphs."""
    trace = show_json(write_script(tmp_path, THREADS), "--pass", "all")
    assert [n["type"] for n in trace["nodes"]].count("SumBackward0") == 2
    first, second = (p["roots"] for p in trace["passes"])
    assert first != second and len(trace["edges"]) == 4
    assert {n["tensor"] for n in trace["nodes"] if n["id"] in second} == {"y"}


def test_objects_the_host_froze_stay_frozen(tmp_path: Path) -> None:
    """gradtrace sets the objects older than a run aside from the collector meanwhile, and
    not when the host froze some itself (a notebook's gc.freeze()): unfreezing would undo it."""
    import gc

    gc.freeze()
    try:
        frozen = gc.get_freeze_count()
        assert frozen > 0
        result = invoke("show", write_script(tmp_path, FREEING.replace("128 * 1024 * 1024",
                                                                      "10")))
        assert result.exit_code == 0, result.stderr
        assert gc.get_freeze_count() > frozen // 2  # (some died since; unfrozen: none)
    finally:
        gc.unfreeze()


# The CLI (by os._exit) leaves a run's cycles uncollected as it ends; a run after it in the
# same process (`check` and `diff` run several) collects them first, the collector on.
CLI_RUNS = """import sys
from gradtrace.capture.runner import run_scenario
from gradtrace.capture.script.scenario_thread import ProcessEnd
ProcessEnd.by_os_exit = True
for script in sys.argv[1:]:
    run_scenario(script)
"""
HOLDS = """import builtins, weakref, torch
w = torch.zeros(1000, requires_grad=True)
def helper():  # the module's globals are a reference cycle through this function
    return w
(helper() * 2).sum().backward()
builtins.FIRST = weakref.ref(w)
"""
ASKS = """import builtins, gc, torch
with open("asked.txt", "w") as out:  # (what a run prints is its trace's)
    out.write(f"{builtins.FIRST() is None} {gc.isenabled()}")
x = torch.ones(2, requires_grad=True)
(x * 3).sum().backward()
"""


def test_a_run_after_one_the_cli_left_uncollected_frees_its_cycles_first(
        tmp_path: Path) -> None:
    driver = write_script(tmp_path, CLI_RUNS, "driver.py")
    first, second = write_script(tmp_path, HOLDS, "a.py"), write_script(tmp_path, ASKS, "b.py")
    run = subprocess.run([sys.executable, driver, first, second], cwd=tmp_path,
                         capture_output=True, text=True, timeout=300,
                         env={**os.environ, "PYTHONPATH": str(Path.cwd())})
    assert run.returncode == 0, run.stderr
    # a.py's tensor freed, the collector on
    assert (tmp_path / "asked.txt").read_text().split() == ["True", "True"]
