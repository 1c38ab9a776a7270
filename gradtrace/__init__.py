"""gradtrace: see what PyTorch autograd actually does.

Importing the package does not import torch; tracing does.
"""

from ._version import __version__
from .api import Recording, TraceView, Watching, load_scenario, record, trace, watch
from .errors import ExportError, GradtraceError, NoGraph, ScenarioError, ScenarioStopped

__all__ = ["ExportError", "GradtraceError", "NoGraph", "Recording", "ScenarioError",
           "ScenarioStopped", "TraceView", "Watching", "__version__", "load_scenario", "record",
           "trace", "watch"]
