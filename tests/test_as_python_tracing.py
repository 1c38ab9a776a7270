"""A script that touches the interpreter's tracing, recursion or KeyboardInterrupt runs as under
python, and gradtrace's line log and error messages stay right: the script's own
`sys.settrace(None)` (pdb's `continue`, `coverage.stop()`) or a tracer of its own, a
RecursionError it catches or not, a `raise KeyboardInterrupt` of its own."""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from helpers import as_read, invoke, write_script
from plain_python import run_gradtrace, run_plain, start_gradtrace

LIMIT = 120  # seconds: a run takes a few


def node_lines(trace: dict[str, Any]) -> dict[str, int | None]:
    """Each op node's type and the line that made it."""
    return {node["type"]: (node["source"] or {}).get("line") for node in trace["nodes"]
            if node["kind"] == "op"}


def shown(script: Path) -> dict[str, Any]:
    """`gradtrace show SCRIPT --json`, which must succeed."""
    result = invoke("show", script, "--json")
    assert result.exit_code == 0, result.stderr
    return as_read(result.stdout)


GRAPH = """y = x * 2
z = y.exp()
w = z.sum()
w.backward()
"""
LINES = {"MulBackward0": 5, "ExpBackward0": 6, "SumBackward0": 7}


def test_the_scripts_own_settrace_none_leaves_the_line_log_on(tmp_path: Path) -> None:
    """pdb's `continue` and coverage.stop() clear the tracer: the nodes made afterwards are
    still told by the line that made them, not the line that cleared it."""
    script = write_script(tmp_path, "import sys\nimport torch\nx = torch.ones(3, requires_grad"
                          "=True)\nsys.settrace(None)\n" + GRAPH)
    assert node_lines(shown(script)) == LINES


def test_a_tracer_of_the_scripts_runs_and_the_line_log_comes_back_after(tmp_path: Path
                                                                        ) -> None:
    """The script's own tracer sees its lines as under python (f's); once the script takes it
    off, the line log goes on."""
    script = write_script(tmp_path, """import sys
import torch
seen = []
def mine(frame, event, arg):
    seen.append(frame.f_lineno)
    return mine
def f(x):
    return x + 1
x = torch.ones(3, requires_grad=True)
sys.settrace(mine)
a = f(x)
sys.settrace(None)
""" + GRAPH.replace("x * 2", "a * 2") + "assert 8 in seen, seen\n")
    # the module's frame runs on with the log's tracer (python leaves a running frame's
    # own): f's node is told by the line that called f
    lines = node_lines(shown(script))
    assert lines == {"AddBackward0": 11, "MulBackward0": 13, "ExpBackward0": 14,
                     "SumBackward0": 15}


def test_a_tracer_the_script_takes_off_in_a_light_step_is_called_no_more(tmp_path: Path
                                                                       ) -> None:
    """A loop's light step runs without the line log: the script's settrace(None) there
    takes its own tracer off, as python does."""
    script = write_script(tmp_path, """import sys
import torch
calls = []
def mine(frame, event, arg):
    calls.append(event)
def f(x):
    return x * 2
x = torch.ones(3, requires_grad=True)
for step in range(60):
    if step == 50:
        sys.settrace(mine)
    if step == 51:
        sys.settrace(None)
        n = len(calls)
    loss = f(x).sum()
    loss.backward()
print("after", len(calls) - n)
""")
    assert shown(script)["stdout"] == run_plain(script, timeout=LIMIT).stdout == "after 0\n"


def test_a_tracer_cleared_from_c_leaves_no_wrong_line(tmp_path: Path) -> None:
    """coverage's stop() clears the tracer in C, out of gradtrace's sight: the nodes made
    until the next backward pass have no line rather than the line before, and those after it
    their own."""
    script = write_script(tmp_path, "import ctypes\nimport torch\nx = torch.ones(3, requires_"
                          "grad=True)\nctypes.pythonapi.PyEval_SetTrace(None, None)\n" + GRAPH
                          + "q = (x * 3).sum()\nq.backward()\n")
    lines = [(node["type"], (node["source"] or {}).get("line"))
             for node in shown(script)["nodes"] if node["kind"] == "op"]
    assert lines == [("SumBackward0", 9), ("MulBackward0", 9), ("SumBackward0", None),
                     ("ExpBackward0", None), ("MulBackward0", None)]


RECURSING = """def f(n):
    return f(n + 1)
"""


def test_a_caught_recursion_error_leaves_the_line_log_on(tmp_path: Path) -> None:
    """CPython takes a tracer off when the stack runs out inside it: gradtrace's comes back
    once the script has caught the RecursionError."""
    script = write_script(tmp_path, "import torch\nx = torch.ones(3, requires_grad=True)\n"
                          + RECURSING + "try:\n    f(0)\nexcept RecursionError:\n    pass\n"
                          + GRAPH)
    assert node_lines(shown(script)) == {"MulBackward0": 9, "ExpBackward0": 10,
                                         "SumBackward0": 11}


def test_an_uncaught_recursion_error_is_the_scripts_as_under_python(tmp_path: Path) -> None:
    """Not "a bug in gradtrace": python fails the same way; exit 2, naming the line."""
    script = write_script(tmp_path, "import torch\nx = torch.ones(3, requires_grad=True)\n"
                          "(x * 2).sum().backward()\n" + RECURSING + "f(0)\n")
    plain = run_plain(script, timeout=LIMIT)
    assert plain.returncode == 1 and "RecursionError" in plain.stderr
    done = run_gradtrace("show", script, timeout=LIMIT)
    assert done.returncode == 2
    assert "bug in gradtrace" not in done.stderr + done.stdout
    assert f"{script}:5: the scenario raised RecursionError" in done.stderr
    assert "python fails the same way" in done.stderr


def test_the_script_recurses_as_deep_as_under_python(tmp_path: Path) -> None:
    """gradtrace's own frames below the script's, and its line log's, take none of the depth
    python gives the script."""
    script = write_script(tmp_path, """import sys
def f(n):
    try:
        return f(n + 1)
    except RecursionError:
        return n
print("reached", f(0))
if "torch" in sys.modules:  # under gradtrace (python's own run has no need of it)
    import torch
    x = torch.ones(3, requires_grad=True)
    (x * 2).sum().backward()
""")
    # a python of its own: run_plain's forked one has frames of its own below the script
    plain = subprocess.run([sys.executable, script], capture_output=True, text=True,
                           timeout=LIMIT, check=True)
    reached = int(shown(script)["stdout"].split()[1])
    assert abs(reached - int(plain.stdout.split()[1])) <= 2, (reached, plain.stdout)


def test_a_keyboard_interrupt_the_script_raises_names_its_line(tmp_path: Path) -> None:
    """As a real Ctrl-C does (the README's promise), exit 130 as python does."""
    script = write_script(tmp_path, "import torch\nx = torch.ones(2, requires_grad=True)\n"
                          "raise KeyboardInterrupt\n")
    plain = run_plain(script, timeout=LIMIT)
    assert plain.returncode != 0 and "KeyboardInterrupt" in plain.stderr
    done = run_gradtrace("show", script, timeout=LIMIT)
    assert done.returncode == 130
    assert done.stderr.strip().endswith(
        f"error: interrupted at {script}:3 `raise KeyboardInterrupt`"), done.stderr


def test_a_keyboard_interrupt_stops_check_as_it_stops_pytest(tmp_path: Path) -> None:
    """check runs no scenario after one that raised KeyboardInterrupt: exit 130 (it went on,
    counted it as one that could not run, and exited 2)."""
    write_script(tmp_path, "import torch\nraise KeyboardInterrupt\n", "test_a.py")
    write_script(tmp_path, "import torch\nprint('ran b')\n", "test_b.py")
    done = run_gradtrace("check", tmp_path, timeout=LIMIT)
    assert done.returncode == 130
    assert "test_b.py" not in done.stderr + done.stdout
    assert done.stderr.strip().endswith(
        f"error: interrupted at {tmp_path / 'test_a.py'}:2 `raise KeyboardInterrupt`")


def test_ctrl_c_stops_check_and_names_the_line(tmp_path: Path) -> None:
    """A real Ctrl-C stops the whole check (it went on with the next scenario)."""
    started = tmp_path / "started"
    write_script(tmp_path, f"import time\nopen({str(started)!r}, 'w').close()\nwhile True:\n"
                 "    time.sleep(0.01)\n", "test_a.py")
    write_script(tmp_path, "import torch\n", "test_b.py")
    proc = start_gradtrace("check", tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                           sigint=True)
    deadline = time.monotonic() + LIMIT
    while not started.exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    time.sleep(0.5)
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=30)
    assert proc.returncode == 130
    assert "test_b.py" not in err.decode()
    assert err.decode().strip().endswith(
        f"error: interrupted at {tmp_path / 'test_a.py'}:4 `time.sleep(0.01)`")
