"""tests/plain_python.py, the harness the tests run real processes with, held to what its
docstring promises: a forked run gives the script what a real `python` gives it (each test
compares with one), leaves nothing to the next run, ends as python ends, and its servers
go away with the tests' process."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from helpers import write_script
from plain_python import (
    forwarding_command,
    run_gradtrace,
    run_module,
    run_plain,
    start_gradtrace,
)

TESTS = Path(__file__).parent

# what python gives a script: its __main__, argv, path, folder, environment, streams
PROBE = """import json, os, sys
count: int = 3
sys.stderr.write("to stderr\\n")
print(json.dumps({
    "globals": list(globals()), "name": __name__, "file": __file__, "package": __package__,
    "spec": __spec__, "loader": type(__loader__).__name__,
    "builtins": type(__builtins__).__name__, "annotations": repr(__annotations__),
    "main": sys.modules["__main__"].__dict__ is globals(),
    "argv": sys.argv, "orig_argv": sys.orig_argv[1:], "path0": sys.path[0],
    "cwd": os.getcwd(), "env": os.environ.get("PLAIN_PYTHON_PROBE"),
    "stdin": sys.stdin.read(), "encoding": sys.stdout.encoding,
}))
"""


def _python(script: Path, *args: str, cwd: Path | None = None,
            env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """A real, fresh `python SCRIPT ARGS`, with run_plain's defaults (its folder, no stdin)."""
    return subprocess.run([sys.executable, str(script), *args], cwd=cwd or script.parent,
                          env=env, stdin=subprocess.DEVNULL, capture_output=True, text=True,
                          timeout=60)


def _same(forked: subprocess.CompletedProcess[str],
          real: subprocess.CompletedProcess[str]) -> None:
    assert (forked.returncode, forked.stdout, forked.stderr) == (
        real.returncode, real.stdout, real.stderr)


def test_a_script_is_given_what_python_gives_it(tmp_path: Path) -> None:
    script = write_script(tmp_path, PROBE)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    env = {**os.environ, "PLAIN_PYTHON_PROBE": "set"}
    forked = run_plain(script, "a", "b c", cwd=elsewhere, env=env)
    _same(forked, _python(script, "a", "b c", cwd=elsewhere, env=env))
    given = json.loads(forked.stdout)
    assert given["argv"] == [str(script), "a", "b c"] and given["cwd"] == str(elsewhere)
    assert given["builtins"] == "module" and given["annotations"] == "{'count': <class 'int'>}"
    assert given["main"] and given["env"] == "set" and given["stdin"] == ""
    # the default folder is the script's, not this process's
    assert json.loads(run_plain(script).stdout)["cwd"] == str(tmp_path)


def test_the_baseline_is_python_with_torch_imported_first(tmp_path: Path) -> None:
    """What the docstring says it is: sys.modules holds torch before the script imports it."""
    script = write_script(tmp_path, "import sys\nprint('torch' in sys.modules)\n")
    assert run_plain(script).stdout == "True\n"
    assert _python(script).stdout == "False\n"


# a run that changes what it can of the process it runs in
CHANGES = """import json, os, sys, warnings
import torch
json.CHANGED = True
os.environ["PLAIN_PYTHON_CHANGED"] = "1"
os.chdir("/")
sys.path.append("/changed")
sys.modules["changed_module"] = json
torch.manual_seed(5)
torch.set_default_dtype(torch.float64)
warnings.simplefilter("error")
"""
LOOKS = """import json, os, sys, warnings
import torch
print(hasattr(json, "CHANGED"), "PLAIN_PYTHON_CHANGED" in os.environ, os.getcwd(),
      "/changed" in sys.path, "changed_module" in sys.modules, torch.get_default_dtype(),
      warnings.filters[0][0] == "error", torch.initial_seed(), torch.rand(2).tolist())
"""


def test_a_run_leaves_nothing_to_the_next(tmp_path: Path) -> None:
    looks = write_script(tmp_path, LOOKS, "looks.py")
    before = run_plain(looks)
    assert before.stdout.startswith(f"False False {tmp_path} False False torch.float32 False"), (
        before.stdout, before.stderr)
    assert run_plain(write_script(tmp_path, CHANGES, "changes.py")).returncode == 0
    assert run_plain(looks).stdout == before.stdout


@pytest.mark.parametrize("code", [
    "import sys\nprint('out')\nsys.exit(3)\n",
    "import sys\nsys.exit('bye')\n",
    "def f():\n    raise ValueError('boom')\nprint('before')\nf()\n",
    "raise KeyboardInterrupt\n",
    "import os, signal\nprint('dying', flush=True)\nos.kill(os.getpid(), signal.SIGTERM)\n",
    "import sys\nsys.excepthook = lambda kind, *_: print('hooked', kind.__name__)\n1 / 0\n",
    "import atexit, threading, time\natexit.register(print, 'at exit')\n"
    "threading.Thread(target=lambda: (time.sleep(0.2), print('thread'))).start()\n"
    "print('main')\n",
], ids=["exit-3", "exit-message", "exception", "keyboard-interrupt", "signal", "excepthook",
        "atexit-and-thread"])
def test_a_run_ends_as_python_ends(tmp_path: Path, code: str) -> None:
    """The exit code (a signal's negative), stdout and stderr (python's traceback) of each."""
    script = write_script(tmp_path, code)
    _same(run_plain(script), _python(script))


def test_a_run_past_its_time_is_killed(tmp_path: Path) -> None:
    script = write_script(tmp_path, "import time\ntime.sleep(60)\n")
    began = time.monotonic()
    assert run_plain(script, timeout=0.5).returncode == -signal.SIGKILL
    assert time.monotonic() - began < 30


def test_a_module_runs_as_python_dash_m_runs_it(tmp_path: Path) -> None:
    (tmp_path / "data.json").write_text('{"b": [1, 2], "a": null}')
    real = subprocess.run([sys.executable, "-m", "json.tool", "--sort-keys", "data.json"],
                          cwd=tmp_path, stdin=subprocess.DEVNULL, capture_output=True,
                          text=True, timeout=60)
    forked = run_module("json.tool", "--sort-keys", "data.json", cwd=tmp_path)
    _same(forked, real)
    assert forked.stdout.startswith('{\n    "a": null')


def test_a_start_environment_of_its_own_gets_a_server_of_its_own(tmp_path: Path) -> None:
    """Python reads PYTHONIOENCODING as it starts: a run in another is not forked from a
    process that started in this one."""
    script = write_script(tmp_path, "import sys\nprint(sys.stdout.encoding)\n")
    latin = {**os.environ, "PYTHONIOENCODING": "latin-1"}
    _same(run_plain(script, env=latin), _python(script, env=latin))
    assert run_plain(script, env=latin).stdout == "iso8859-1\n"
    assert run_plain(script).stdout == _python(script).stdout != "iso8859-1\n"


def test_gradtrace_runs_as_python_dash_m_gradtrace(tmp_path: Path) -> None:
    """run_gradtrace, start_gradtrace's pipes and the forwarding command give what a real
    `python -m gradtrace` gives (an error: exit 2, its message on stderr)."""
    real = subprocess.run([sys.executable, "-m", "gradtrace", "show", "missing.py"],
                          cwd=tmp_path, stdin=subprocess.DEVNULL, capture_output=True,
                          text=True, timeout=120)
    assert real.returncode == 2 and "missing.py" in real.stderr
    _same(run_gradtrace("show", "missing.py", cwd=tmp_path), real)
    started = start_gradtrace("show", "missing.py", cwd=tmp_path, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True)
    assert started.communicate(timeout=60) == (real.stdout, real.stderr)
    assert started.returncode == 2
    forwarded = subprocess.run([forwarding_command(), "show", "missing.py"], cwd=tmp_path,
                               stdin=subprocess.DEVNULL, capture_output=True, text=True,
                               timeout=60)
    _same(forwarded, real)


def test_a_started_gradtrace_reads_a_pipe_and_takes_signals(tmp_path: Path) -> None:
    reads = write_script(tmp_path, "import torch\nx = torch.ones(1, requires_grad=True)\n"
                         "(x * float(input())).sum().backward()\nprint('read', x.grad.item())\n",
                         "reads.py")
    run = start_gradtrace("show", reads, "--json", stdin=subprocess.PIPE,
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert run.stdin is not None
    run.stdin.write(b"3\n")
    run.stdin.close()
    out, err = run.communicate(timeout=60)
    assert run.returncode == 0, err
    assert json.loads(out)["stdout"] == "read 3.0\n"
    sleeps = write_script(tmp_path, "import time\ntime.sleep(60)\n", "sleeps.py")
    run = start_gradtrace("show", sleeps)
    with pytest.raises(subprocess.TimeoutExpired):
        run.wait(0.2)
    run.kill()
    assert run.wait(30) == -signal.SIGKILL


# a tests' process that starts a server, prints its pid and its socket, then ends as told
CLIENT = """import os, signal, sys
sys.path.insert(0, {tests!r})
import plain_python
address = plain_python.server_address("python")
if sys.argv[1] == "killed":  # once the server serves (its torch imported)
    plain_python.run_plain({script!r})
(server, _), = plain_python._servers.values()
print(server.pid, address, flush=True)
if sys.argv[1] == "killed":
    os.kill(os.getpid(), signal.SIGKILL)
"""


def _gone(pid: int) -> bool:
    """The process has ended (a zombie not yet reaped has too)."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().split(")")[-1].split()[0] in "ZX"
    except FileNotFoundError:
        return True


@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="reads /proc (Linux)")
@pytest.mark.parametrize("end", ["exits", "killed"])
def test_the_server_goes_away_with_the_tests_process(tmp_path: Path, end: str) -> None:
    """Killed as the tests' process exits; gone by itself within seconds if that process
    is killed (no atexit runs)."""
    nothing = write_script(tmp_path, "", "nothing.py")
    client = write_script(tmp_path, CLIENT.format(tests=str(TESTS), script=str(nothing)),
                          "client.py")
    done = subprocess.run([sys.executable, client, end], capture_output=True, text=True,
                          timeout=120, stdin=subprocess.DEVNULL)
    assert done.returncode == (-signal.SIGKILL if end == "killed" else 0), done.stderr
    pid, address = done.stdout.split()
    waited = time.monotonic()
    while not _gone(int(pid)) and time.monotonic() - waited < 10:
        time.sleep(0.1)
    assert _gone(int(pid))
    if end == "exits":  # its folder too
        assert not Path(address).parent.exists()
    shutil.rmtree(Path(address).parent, ignore_errors=True)  # what a killed process leaves
