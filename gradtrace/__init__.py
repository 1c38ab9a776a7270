"""gradtrace: see what PyTorch autograd actually does.

Importing the package does not import torch; tracing does.
"""

from ._version import __version__
from .api import Recording, TraceView, load_scenario, record, trace

__all__ = ["Recording", "TraceView", "__version__", "load_scenario", "record", "trace"]
