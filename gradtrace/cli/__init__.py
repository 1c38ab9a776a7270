"""The `gradtrace` command: a module per command, registered on one app.

torch is imported only when a command runs a scenario, so `--help` stays fast.
"""

from . import check, dot, show  # noqa: F401  (each module registers its command)
from .app import ExitCode, app

__all__ = ["ExitCode", "app", "main"]


def main() -> None:
    """Console entry point."""
    app()
