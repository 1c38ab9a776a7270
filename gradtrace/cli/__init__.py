"""The `gradtrace` command: a module per command, registered on one app.

torch is imported only when a command runs a scenario, so `--help` stays fast.
"""

import signal
import sys
from typing import Any

from . import check, dot, show  # noqa: F401  (each module registers its command)
from .core import ExitCode, app

__all__ = ["ExitCode", "app", "main"]


def _terminated(signum: int, frame: Any) -> None:
    sys.exit(128 + signum)  # unwinds like Ctrl-C does: temporary files are removed


def main() -> None:
    """Console entry point."""
    signal.signal(signal.SIGTERM, _terminated)
    app()
