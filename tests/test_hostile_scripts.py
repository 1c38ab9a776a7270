"""Scripts that do odd things to their process end under gradtrace as under python (each run
in a real process, with a time limit: some failures were hangs): a child it forks runs the
script on and exits at its end, printing what it printed; a daemon thread keeps its globals
and writes nothing into gradtrace's output; a backward made a no-op records no pass; a
deleted working folder changes nothing on stdout."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
from helpers import write_script
from plain_python import run_gradtrace, run_plain

LIMIT = 60  # seconds: the run takes a few; a hang is the failure

FORKS = {
    # the child falls through to the script's end, as most forking code does
    "falls through": """import os
import torch

x = torch.tensor([1.0, 2.0], requires_grad=True)
pid = os.fork()
y = (x * 3).sum()
y.backward()
if pid:  # the child prints first: two processes printing at once interleave, under python too
    os.waitpid(pid, 0)
print("grad", "child" if pid == 0 else "parent", x.grad.tolist(), flush=True)
""",
    "sys.exit": """import os
import sys
import torch

x = torch.tensor([1.0, 2.0], requires_grad=True)
pid = os.fork()
(x * 3).sum().backward()
if pid == 0:
    print("grad child", x.grad.tolist())
    sys.exit(0)
os.waitpid(pid, 0)
print("grad parent", x.grad.tolist())
""",
    "os._exit": """import os
import torch

x = torch.tensor([1.0, 2.0], requires_grad=True)
pid = os.fork()
(x * 3).sum().backward()
if pid == 0:
    print("grad child", x.grad.tolist())
    os._exit(0)
os.waitpid(pid, 0)
print("grad parent", x.grad.tolist())
""",
    "raises": """import os
import torch

x = torch.tensor([1.0, 2.0], requires_grad=True)
pid = os.fork()
if pid == 0:
    raise ValueError("the child's own error")
_, status = os.waitpid(pid, 0)
(x * 3).sum().backward()
print("child exit status", os.waitstatus_to_exitcode(status))
print("grad parent", x.grad.tolist())
""",
    "DataLoader workers, then a fork": """import os
import torch
from torch.utils.data import DataLoader, TensorDataset

torch.manual_seed(0)
data = DataLoader(TensorDataset(torch.randn(16, 3)), batch_size=4, num_workers=2,
                  multiprocessing_context="fork")
w = torch.ones(3, requires_grad=True)
for (x,) in data:
    (x @ w).sum().backward()
pid = os.fork()
if pid == 0:
    (w * 2).sum().backward()
    print("grad child", round(float(w.grad.norm()), 4))
else:
    os.waitpid(pid, 0)
    print("grad parent", round(float(w.grad.norm()), 4))
""",
}


def gradtrace(script: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return run_gradtrace("show", script, *args, timeout=LIMIT, cwd=script.parent)


@pytest.mark.parametrize("text", FORKS.values(), ids=FORKS.keys())
def test_a_forked_child_runs_on_and_exits_as_under_python(text: str, tmp_path: Path) -> None:
    script = write_script(tmp_path, text)
    plain = run_plain(script)
    assert plain.returncode == 0, plain.stderr
    ours = gradtrace(script, "--json")
    assert ours.returncode == 0, ours.stderr
    trace = json.loads(ours.stdout)  # the parent's report, whole
    assert trace["passes"] and "Traceback" not in ours.stderr
    # what each process printed, the child's too (it lives in the child's memory); the
    # script's stderr is in the box as well: the child's traceback, from the script's frames,
    # and what python warned of on stderr too (DataLoader's worker count on one core)
    printed = trace["stdout"].splitlines()
    warned = plain.stderr.splitlines()
    assert sorted(line for line in printed if not line.startswith(" ") and line not in warned
                  and line.split(":")[0] not in ("Traceback (most recent call last)",
                                                 "ValueError")) == \
        sorted(plain.stdout.splitlines())
    if "ValueError" in text:
        assert 'ValueError: the child\'s own error' in printed
        assert [line for line in printed if line.startswith("  File ")] == \
            [f'  File "{script}", line 7, in <module>']


DAEMON = """import os
import sys
import threading
import time
import torch

w = torch.ones(2, requires_grad=True)


def spin():
    while True:
        print("tick", w.shape)  # reads its global: a NameError once it is gone
        print("tock", file=sys.stderr)
        os.write(1, b"raw tick\\n")  # below python: it reached the JSON on stdout
        time.sleep(0.0005)


threading.Thread(target=spin, daemon=True).start()
loss = (w * 3).sum()
loss.backward()
time.sleep(0.01)
"""


@pytest.mark.parametrize("args", [["--json"], ["-o", "t.json"], []], ids=["json", "o", "report"])
def test_a_daemon_thread_keeps_its_globals_and_stays_out_of_the_output(
        args: list[str], tmp_path: Path) -> None:
    script = write_script(tmp_path, DAEMON)
    for _ in range(3):  # it was one run in three
        ours = gradtrace(script, *args)
        assert ours.returncode == 0, ours.stderr
        assert "tick" not in ours.stderr and "tock" not in ours.stderr
        assert "NameError" not in ours.stderr and "Exception in thread" not in ours.stderr
        if args == ["--json"]:
            assert json.loads(ours.stdout)["passes"]
        elif args:
            assert json.loads((tmp_path / "t.json").read_text())["passes"]
        else:  # what it printed while the script ran is in the report's box, not after it
            assert "tick" not in ours.stdout[ours.stdout.index("passes"):]


PHANTOM = """import torch

x = torch.tensor(2.0, requires_grad=True)
y = x * 3
y.backward(retain_graph=True)
torch.autograd.backward = lambda *args, **kwargs: None  # python runs no backward from here
z = x * 4
z.backward()
print("grad", x.grad.item())
"""


@pytest.mark.parametrize("command", ["show", "steps"])
def test_a_backward_made_a_no_op_records_no_pass(command: str, tmp_path: Path) -> None:
    script = write_script(tmp_path, PHANTOM)
    assert run_plain(script).stdout == "grad 3.0\n"
    ours = run_gradtrace(command, script, "--json", timeout=LIMIT)
    assert ours.returncode == 0, ours.stderr
    passes = json.loads(ours.stdout)["passes"]  # show: the passes; steps: how many
    assert (len(passes) if command == "show" else passes) == 1


DELETES_ITS_FOLDER = """import os
import shutil
import torch

shutil.rmtree(os.getcwd())  # the folder gradtrace was started in
x = torch.tensor(2.0, requires_grad=True)
(x * 3).backward()
"""


@pytest.mark.parametrize("args", [["show"], ["show", "--json"], ["dot"], ["steps"]],
                         ids=" ".join)
def test_stdout_does_not_depend_on_the_working_folder(args: list[str], tmp_path: Path) -> None:
    folder = tmp_path / "deleted"
    folder.mkdir()
    script = write_script(folder, DELETES_ITS_FOLDER)
    ours = run_gradtrace(*args, "s.py", timeout=LIMIT, cwd=folder)
    assert ours.returncode == 0, ours.stderr
    assert not folder.exists() and not script.exists()
    assert ours.stdout.strip() and "error" not in ours.stderr


@pytest.mark.parametrize("command", ["show", "dot", "steps"])
def test_a_file_into_the_folder_the_script_removed_is_said_by_its_name(
        command: str, tmp_path: Path) -> None:
    """-o FILE where the script removed the folder: python could not write there either;
    the error names the file (show and steps failed on the gone folder itself, a message of
    no file: "cannot write the output: No such file or directory")."""
    folder = tmp_path / "deleted"
    folder.mkdir()
    write_script(folder, DELETES_ITS_FOLDER)
    out = {"show": "t.json", "dot": "g.svg", "steps": "s.svg"}[command]
    ours = run_gradtrace(command, "s.py", "-o", out, timeout=LIMIT, cwd=folder)
    assert ours.returncode == 2
    assert f"error: cannot write {folder / out}: folder {folder} does not exist" in ours.stderr
