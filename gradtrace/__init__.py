"""gradtrace: see what PyTorch autograd actually does.

Importing the package does not import torch; `load_scenario` does.
"""

from __future__ import annotations

import os
import sys
from importlib.metadata import PackageNotFoundError, version
from typing import TYPE_CHECKING, Any

try:
    __version__ = version("gradtrace")
except PackageNotFoundError:  # running from a source tree that is not installed
    __version__ = "0+unknown"

if TYPE_CHECKING:
    from .model import Trace

__all__ = ["__version__", "load_scenario", "trace"]


def load_scenario(path: str, outputs: list[str] | None = None, backward: bool = True,
                  saved: bool = True) -> Trace:
    """Run the scenario file at path and return its Trace."""
    from .scenario import run_scenario

    return run_scenario(path, outputs or (), backward, saved=saved)


def trace(*outputs: Any, names: dict[str, Any] | None = None, backward: bool = False,
          saved: bool = True) -> Trace:
    """The Trace of the graph behind output tensors, or of a scenario file given by its path.

    names maps names to tensors or modules for labels; by default the caller's variables are
    used, as a scenario's module-level names are. backward=True also runs backward (ones for
    non-scalar outputs) and records its gradient flow; by default no .grad is touched.
    saved=False skips reading saved tensors, which is faster on big graphs.
    """
    if len(outputs) == 1 and isinstance(outputs[0], (str, os.PathLike)):
        return load_scenario(os.fspath(outputs[0]), backward=backward, saved=saved)
    from .scenario import trace_tensors

    if names is None:
        caller = sys._getframe(1)
        names = {**caller.f_globals, **caller.f_locals}
    return trace_tensors(list(outputs), names, backward, saved)
