"""gradtrace: see what PyTorch autograd actually does.

Importing the package does not import torch; `load_scenario` does.
"""

from __future__ import annotations

from importlib.metadata import PackageNotFoundError, version
from typing import TYPE_CHECKING

try:
    __version__ = version("gradtrace")
except PackageNotFoundError:  # running from a source tree that is not installed
    __version__ = "0+unknown"

if TYPE_CHECKING:
    from .model import Trace

__all__ = ["__version__", "load_scenario"]


def load_scenario(path: str, outputs: list[str] | None = None, backward: bool = True) -> Trace:
    """Run the scenario file at path and return its Trace."""
    from .scenario import run_scenario

    return run_scenario(path, outputs or (), backward)
