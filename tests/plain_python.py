"""`python SCRIPT ARGS` without gradtrace, for comparison: each run is a fork of one process
that imported torch once (2-3 s saved per run), so each script still starts from a fresh
interpreter state, as under `python`.

The tests call run_plain(); this file run as a script is the process it forks from: it reads
one JSON request per line and answers one JSON line each."""

from __future__ import annotations

import atexit
import json
import os
import subprocess
import sys
import tempfile
import threading
from pathlib import Path
from typing import Any

_server: subprocess.Popen[str] | None = None
_lock = threading.Lock()


def run_plain(script: str | Path, *args: str, cwd: str | Path | None = None,
              timeout: float = 300) -> subprocess.CompletedProcess[str]:
    """The script run as `python SCRIPT ARGS` in cwd (default: the script's folder)."""
    global _server
    script = Path(script).resolve()
    request = {"argv": [str(script), *args], "cwd": str(cwd or script.parent),
               "timeout": timeout}
    with _lock:
        if _server is None or _server.poll() is not None:
            _server = subprocess.Popen([sys.executable, __file__], stdin=subprocess.PIPE,
                                       stdout=subprocess.PIPE, text=True)
            atexit.register(_server.kill)
        assert _server.stdin is not None and _server.stdout is not None
        _server.stdin.write(json.dumps(request) + "\n")
        _server.stdin.flush()
        answer = json.loads(_server.stdout.readline())
    return subprocess.CompletedProcess(request["argv"], answer["code"], answer["stdout"],
                                       answer["stderr"])


def _run_in_child(argv: list[str], cwd: str, out: int, err: int) -> None:
    """In the forked child: what `python ARGV` does, then exit with its code."""
    import runpy
    import traceback

    os.dup2(os.open(os.devnull, os.O_RDONLY), 0)  # not the requests' pipe
    os.dup2(out, 1)
    os.dup2(err, 2)
    os.chdir(cwd)
    sys.argv = argv
    sys.path[0] = str(Path(argv[0]).parent)
    code = 0
    try:
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


def _serve() -> None:
    import torch  # noqa: F401  (imported once, before any fork: the point of this process)

    for line in sys.stdin:
        request: dict[str, Any] = json.loads(line)
        with tempfile.TemporaryFile("w+") as out, tempfile.TemporaryFile("w+") as err:
            pid = os.fork()
            if pid == 0:
                _run_in_child(request["argv"], request["cwd"], out.fileno(), err.fileno())
            code = _wait(pid, request["timeout"])
            out.seek(0)
            err.seek(0)
            answer = {"code": code, "stdout": out.read(), "stderr": err.read()}
        print(json.dumps(answer), flush=True)


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
    _serve()
