"""gradtrace: see what PyTorch autograd actually does.

Importing the package does not import torch; tracing does.
"""

from ._version import __version__
from .api import TraceView, load_scenario, trace

__all__ = ["TraceView", "__version__", "load_scenario", "trace"]
