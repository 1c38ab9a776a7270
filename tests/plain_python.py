"""`python SCRIPT ARGS` without gradtrace, for comparison: each run is a fork of one process
that imported torch once (2-3 s saved per run), so each script still starts from a fresh
interpreter state, as under `python`.

`gradtrace ARGS` likewise (run_gradtrace): forked from a process that imported torch and
gradtrace. The tests call run_plain() and run_gradtrace(); this file run as a script is the
process they fork from: it reads one JSON request per line and answers one JSON line each."""

from __future__ import annotations

import atexit
import io
import json
import os
import subprocess
import sys
import tempfile
import threading
from pathlib import Path
from typing import Any

# by interpreter, kind ("python" or "gradtrace": what each imported) and start environment
_servers: dict[tuple[str, str, tuple[str | None, ...]], subprocess.Popen[bytes]] = {}
_lock = threading.Lock()
_READ_AT_IMPORT = "GRADTRACE_WITHOUT"  # gradtrace's probes read it as they are imported


def run_plain(script: str | Path, *args: str, cwd: str | Path | None = None,
              timeout: float = 300) -> subprocess.CompletedProcess[str]:
    """The script run as `python SCRIPT ARGS` in cwd (default: the script's folder)."""
    script = Path(script).resolve()
    return _ask({"argv": [str(script), *args], "cwd": str(cwd or script.parent),
                 "timeout": timeout})


def run_gradtrace(*args: str | Path, cwd: str | Path | None = None,
                  env: dict[str, str] | None = None, timeout: float = 300,
                  python: str | Path = sys.executable, text: bool = True) -> Any:
    """`gradtrace ARGS` (as `python -m gradtrace ARGS`) in a process of its own, forked from
    one that imported torch and gradtrace once: a real process (signals, forks, its exit),
    without 2-3 s of imports. env: the whole environment (default: this one's); python: the
    interpreter (another venv's imports what that venv has); text: as subprocess.run's."""
    env = dict(os.environ if env is None else env)
    # gradtrace imported anew when the environment changes what its import reads: forked
    # from the process that imported torch alone
    fresh = env.get(_READ_AT_IMPORT) != os.environ.get(_READ_AT_IMPORT)
    return _ask({"argv": [str(a) for a in args], "cwd": str(cwd or os.getcwd()),
                 "timeout": timeout, "module": "gradtrace", "env": env},
                "python" if fresh else "gradtrace", str(python), text)


# What python reads as it starts (the locale sets stdout's encoding): a server is started
# in an environment that differs in these, not forked from one that started in another.
_READ_AT_START = ("LANG", "LC_ALL", "LC_CTYPE", "PYTHONIOENCODING", "PYTHONUTF8",
                  "PYTHONPATH", "PYTHONHOME", "PATH")


def _ask(request: dict[str, Any], kind: str = "python", python: str = sys.executable,
         text: bool = True) -> Any:
    """The answer of the server of kind ("python": torch imported; "gradtrace": gradtrace
    too) run by python in the request's environment."""
    env = request.get("env") or os.environ
    started = tuple(env.get(k) for k in _READ_AT_START)
    with _lock:
        server = _servers.get((python, kind, started))
        if server is None or server.poll() is not None:
            server = _servers[python, kind, started] = subprocess.Popen(
                [python, __file__, kind], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                env=dict(env))
            atexit.register(server.kill)
        assert server.stdin is not None and server.stdout is not None
        server.stdin.write(json.dumps(request).encode() + b"\n")
        server.stdin.flush()
        answer = json.loads(server.stdout.readline())
    out, err = (answer[k].encode("latin-1") for k in ("stdout", "stderr"))  # the bytes
    if text:  # as subprocess.run(text=True) reads them: universal newlines
        out, err = (io.TextIOWrapper(io.BytesIO(b), encoding="utf-8").read() for b in (out, err))
    return subprocess.CompletedProcess(request["argv"], answer["code"], out, err)


def _run_in_child(request: dict[str, Any], out: int, err: int) -> None:
    """In the forked child: what `python ARGV` (or `python -m MODULE ARGV`) does, then exit
    with its code."""
    import runpy
    import traceback

    argv, module = request["argv"], request.get("module")
    os.dup2(os.open(os.devnull, os.O_RDONLY), 0)  # not the requests' pipe
    os.dup2(out, 1)
    os.dup2(err, 2)
    os.chdir(request["cwd"])
    if request.get("env") is not None:
        os.environ.clear()
        os.environ.update(request["env"])
    sys.argv = [module or "", *argv] if module else argv
    sys.path[0] = request["cwd"] if module else str(Path(argv[0]).parent)
    code = 0
    try:
        if module:
            runpy.run_module(module, run_name="__main__", alter_sys=True)
        else:
            runpy.run_path(argv[0], run_name="__main__")
    except SystemExit as exit_:
        code = exit_.code if isinstance(exit_.code, int) else (0 if exit_.code is None else 1)
        if not isinstance(exit_.code, int | None):
            print(exit_.code, file=sys.stderr)
    except BaseException:  # noqa: BLE001  (as python reports an uncaught exception)
        traceback.print_exc()
        code = 1
    atexit._run_exitfuncs()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


def _serve(kind: str) -> None:
    # imported once, before any fork: the point of this process (gradtrace only in the
    # server of its runs: a plain run's interpreter is python's)
    import torch  # noqa: F401

    if kind == "gradtrace":
        import gradtrace.capture.runner  # noqa: F401
        import gradtrace.cli  # noqa: F401

    for line in sys.stdin:
        request: dict[str, Any] = json.loads(line)
        with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
            pid = os.fork()
            if pid == 0:
                _run_in_child(request, out.fileno(), err.fileno())
            code = _wait(pid, request["timeout"])
            out.seek(0)
            err.seek(0)
            # the bytes as they are (latin-1 maps each byte to one character), in ASCII JSON
            answer = {"code": code, "stdout": out.read().decode("latin-1"),
                      "stderr": err.read().decode("latin-1")}
        sys.stdout.write(json.dumps(answer) + "\n")
        sys.stdout.flush()


def _wait(pid: int, timeout: float) -> int:
    """The child's exit code; a child still running after timeout seconds is killed (-9)."""
    done = threading.Event()
    timer = threading.Timer(timeout, lambda: done.is_set() or os.kill(pid, 9))
    timer.start()
    _, status = os.waitpid(pid, 0)
    done.set()
    timer.cancel()
    return os.waitstatus_to_exitcode(status)


if __name__ == "__main__":
    _serve(sys.argv[1])
