"""The torch-free layer: the Trace's records, their JSON form, and the texts analysis shares."""

from .records import (
    CUSTOM,
    LEAF,
    OP,
    Edge,
    Finding,
    FunctionCall,
    GradChange,
    GradSummary,
    Node,
    NodeFlow,
    NodeKind,
    Pass,
    SavedTensor,
    SecondOrder,
    Severity,
    Source,
    TensorInfo,
    Trace,
)

__all__ = [
    "CUSTOM", "LEAF", "OP", "Edge", "Finding", "FunctionCall", "GradChange", "GradSummary",
    "Node", "NodeFlow", "NodeKind", "Pass", "SavedTensor", "SecondOrder", "Severity",
    "Source", "TensorInfo", "Trace",
]
