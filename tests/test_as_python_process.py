"""The script's process under gradtrace as under python, each in a real process: gradtrace's
own imports find nothing in the script's folder, `__file__` is absolute, the scenario's
thread gets an event loop as the main thread does, stdin reaches the script, a limit on
the address space leaves room for the scenario's thread, and `python -OO` keeps --help's
descriptions."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from pathlib import Path

import pytest
from helpers import invoke, write_script
from plain_python import run_gradtrace, run_plain, start_gradtrace

from gradtrace.errors import ScenarioError

LIMIT = 120  # seconds: a run takes a few; a hang is the failure

BACKWARD = """import torch
x = torch.tensor(2.0, requires_grad=True)
(x * x).sin().backward()
"""


def test_profile_imports_nothing_from_the_scripts_folder(tmp_path: Path) -> None:
    # torch's profiler imports torch._inductor, and with it cProfile, which imports
    # `profile`; new processes (the test servers' forks may hold it imported already)
    marker = tmp_path / "imported"
    write_script(tmp_path, f"open({str(marker)!r}, 'w').close()\n"
                           "raise RuntimeError('the script folder profile.py ran')\n",
                 "profile.py")
    script = write_script(tmp_path, BACKWARD + "import profile\n")
    plain = _python(tmp_path, str(script))  # python: only the script's own import runs it
    assert plain.returncode == 1 and "the script folder profile.py ran" in plain.stderr
    marker.unlink()
    shown = _python(tmp_path, "-m", "gradtrace", "show", str(script), "--profile")
    # gradtrace's profiler found nothing there; then the script's own `import profile`
    # gets its file, as under python
    assert shown.returncode == 2, shown.stderr
    assert "the script folder profile.py ran" in shown.stderr
    marker.unlink()
    script.write_text(BACKWARD)
    for args in (("show", "--profile"), ("dot", "--heat", "time", "-o", "heat.dot")):
        done = _python(tmp_path, "-m", "gradtrace", args[0], str(script), *args[1:])
        assert done.returncode == 0, done.stdout + done.stderr
        assert not marker.exists(), args


def _python(folder: Path, *argv: str) -> subprocess.CompletedProcess[str]:
    """`python ARGV` in a new process, started in another folder than folder (`python -m`
    puts the folder it starts in first on sys.path)."""
    return subprocess.run([sys.executable, *argv], capture_output=True, text=True,
                          timeout=LIMIT, cwd=folder.parent)


def test_main_file_is_absolute_argv_as_typed(tmp_path: Path) -> None:
    folder = tmp_path / "sub"
    folder.mkdir()
    (folder / "data.txt").write_text("next to the script")
    out = tmp_path / "out.json"
    write_script(folder, f"""import json, os, sys
from pathlib import Path
import torch
x = torch.ones(2, requires_grad=True)
(x * 2).sum().backward()
os.chdir({str(tmp_path.parent)!r})
data = Path(__file__).with_name("data.txt").read_text()
Path({str(out)!r}).write_text(json.dumps([__file__, sys.argv[0], data]))
""")
    done = run_gradtrace("show", os.path.join("sub", "s.py"), cwd=tmp_path, timeout=LIMIT)
    assert done.returncode == 0, done.stdout + done.stderr
    assert json.loads(out.read_text()) == [str(folder / "s.py"), os.path.join("sub", "s.py"),
                                           "next to the script"]


ASYNC = """import asyncio
import torch

async def grad(v):
    await asyncio.sleep(0)
    x = torch.tensor(v, requires_grad=True)
    (x * x).backward()
    return x.grad.item()

loop = asyncio.get_event_loop()  # at module level: the main thread gets one made
first = loop.run_until_complete(grad(2.0))
second = asyncio.run(grad(3.0))
print("grads", first, second)
"""


def test_event_loop_at_module_level_and_asyncio_run(tmp_path: Path) -> None:
    script = write_script(tmp_path, ASYNC)
    plain = run_plain(script, timeout=LIMIT)
    assert plain.returncode == 0, plain.stderr
    assert "grads 4.0 6.0" in plain.stdout
    done = run_gradtrace("show", script, "--json", timeout=LIMIT)
    assert done.returncode == 0, done.stderr
    printed = json.loads(done.stdout)["stdout"]
    assert "grads 4.0 6.0" in printed
    # Python 3.12 and 3.13 warn of the loop they make; 3.10 and 3.11 do not
    warned = "There is no current event loop" in plain.stderr
    assert warned == ("There is no current event loop" in printed) == (sys.version_info >= (3, 12))


def test_another_thread_gets_no_loop_as_under_python(tmp_path: Path) -> None:
    script = write_script(tmp_path, """import asyncio, threading
import torch
got = []
def ask():
    try:
        asyncio.get_event_loop()
        got.append("a loop")
    except RuntimeError:
        got.append("no loop")
t = threading.Thread(target=ask)
t.start()
t.join()
x = torch.ones(1, requires_grad=True)
(x * 2).sum().backward()
print(got)
""")
    assert "['no loop']" in run_plain(script, timeout=LIMIT).stdout
    done = run_gradtrace("show", script, "--json", timeout=LIMIT)
    assert "['no loop']" in json.loads(done.stdout)["stdout"]


def test_piped_stdin_reaches_the_script(tmp_path: Path) -> None:
    script = write_script(tmp_path, """import sys
import torch
n = float(input("n? "))
rest = sys.stdin.read()
x = torch.tensor(n, requires_grad=True)
(x * x).backward()
print("read", n, repr(rest), x.grad.item())
""")
    run = start_gradtrace("show", script, "--json", stdin=subprocess.PIPE,
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert run.stdin is not None
    run.stdin.write(b"3\nmore\n")
    run.stdin.close()
    out, err = run.communicate(timeout=LIMIT)
    assert run.returncode == 0, err
    assert "read 3.0 'more\\n' 6.0" in json.loads(out)["stdout"]


def test_breakpoint_stops_with_a_clear_error(tmp_path: Path) -> None:
    script = write_script(tmp_path, BACKWARD + "breakpoint()\nprint('after')\n")
    with open(os.devnull, "rb") as nothing:
        run = start_gradtrace("show", script, stdin=nothing, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True)
        out, err = run.communicate(timeout=LIMIT)
    assert run.returncode == 2
    assert "s.py:4: breakpoint() cannot open pdb under gradtrace" in err
    assert "debug with `python" in err and "bug in gradtrace" not in err
    assert "Traceback" not in err + out
    # PYTHONBREAKPOINT=0 skips it, under python as under gradtrace
    env = {**os.environ, "PYTHONBREAKPOINT": "0"}
    assert "after" in run_plain(script, env=env, timeout=LIMIT).stdout
    done = run_gradtrace("show", script, "--json", env=env, timeout=LIMIT)
    assert done.returncode == 0 and "after" in json.loads(done.stdout)["stdout"]


def _peak_kib(text: str) -> int:
    return int(text.split("peak")[-1].split()[0])


@pytest.mark.skipif(not Path("/proc/self/status").exists(), reason="reads /proc (Linux)")
def test_a_limited_address_space_python_runs_in(tmp_path: Path) -> None:
    script = write_script(tmp_path, BACKWARD + "peak = [l for l in open('/proc/self/status')"
                          " if l.startswith('VmPeak')][0].split()[1]\nprint('peak', peak)\n")
    plain = subprocess.run([sys.executable, str(script)], capture_output=True, text=True,
                           timeout=LIMIT, check=True)
    # room for the script and gradtrace's own modules, not for a 1 GiB stack
    limit = _peak_kib(plain.stdout) + 384 * 1024

    def limited(*argv: str) -> subprocess.CompletedProcess[str]:
        command = f"ulimit -v {limit} && exec \"$@\""
        return subprocess.run(["bash", "-c", command, "bash", sys.executable, *argv],
                              capture_output=True, text=True, timeout=LIMIT, cwd=tmp_path)

    assert limited(str(script)).returncode == 0
    done = limited("-m", "gradtrace", "show", str(script))
    assert done.returncode == 0, done.stderr
    assert "peak" in done.stdout


def test_no_thread_at_all_is_a_clear_memory_error(monkeypatch: pytest.MonkeyPatch) -> None:
    from gradtrace.capture.script import stack

    def refuse(self: threading.Thread) -> None:
        raise RuntimeError("can't start new thread")

    monkeypatch.setattr(threading.Thread, "start", refuse)
    with pytest.raises(ScenarioError) as raised:
        stack.started_thread(lambda: None, "gradtrace-scenario")
    assert "not enough memory to start the thread the scenario runs in" in raised.value.message
    assert "ulimit -v" in (raised.value.hint or "")


@pytest.mark.parametrize("flag", [["-OO"], []])
def test_help_descriptions_survive_optimize(flag: list[str]) -> None:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONOPTIMIZE"}
    for command, description in (("show", "Run a scenario and show its autograd graph"),
                                  ("dot", "Export the autograd graph"),
                                  ("check", "gradcheck and gradgradcheck")):
        done = subprocess.run([sys.executable, *flag, "-m", "gradtrace", command, "--help"],
                              capture_output=True, text=True, env={**env, "COLUMNS": "200"},
                              timeout=LIMIT, check=True)
        assert description in done.stdout, command
    listing = subprocess.run([sys.executable, *flag, "-m", "gradtrace", "--help"],
                             capture_output=True, text=True, env={**env, "COLUMNS": "200"},
                             timeout=LIMIT, check=True).stdout
    assert "Compare two graphs" in listing


def test_an_import_the_script_fails_is_its_own_error(tmp_path: Path) -> None:
    """A failing import is the script's, as under python (it was 'a bug in gradtrace', in
    the line log's import wrapper), whether the module is missing or raises as it loads."""
    (tmp_path / "raising_module.py").write_text('raise ImportError("from raising_module")\n')
    for body, error in [("import nonexistent_module_55\n", "ModuleNotFoundError"),
                        ("import raising_module\n", "ImportError")]:
        script = tmp_path / "s.py"
        script.write_text("import torch\nx = torch.ones(2, requires_grad=True)\n" + body)
        result = invoke("show", script)
        assert result.exit_code == 2
        assert f"s.py:3: the scenario raised {error}" in result.stderr, result.stderr
        assert "bug in gradtrace" not in result.stderr
