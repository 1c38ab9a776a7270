"""The `gradtrace` command: a module per command, registered on one app.

torch is imported only when a command runs a scenario, so `--help` stays fast.
"""

import os
import signal
import sys
from typing import Any

from ..capture.script.scenario_thread import ProcessEnd
from ..compat.cpython import exit_status, run_exit_handlers
from . import check, diff, dot, examples, show, steps, watch  # noqa: F401  (each module registers its command)
from .core import ExitCode, app
from .output import flush_streams, main_thread_streams

__all__ = ["ExitCode", "app", "main"]


def _terminated(signum: int, frame: Any) -> None:
    sys.exit(128 + signum)  # unwinds like Ctrl-C does: temporary files are removed


def main() -> None:
    """Console entry point."""
    signal.signal(signal.SIGTERM, _terminated)
    main_thread_streams()
    ProcessEnd.by_os_exit = True  # _leave() ends the process so
    try:
        app()
        status = 0
    except SystemExit as exc:
        status = exit_status(exc.code)
    _leave(status)


def _leave(status: int) -> None:
    """Exit without the interpreter's teardown, after atexit handlers and a flush: a scenario
    thread left running by a time limit is not waited for, and no thread still ending (its
    C++ thread-locals freed after Python let go of it) races the shutdown."""
    run_exit_handlers()
    flush_streams()
    os._exit(status)
