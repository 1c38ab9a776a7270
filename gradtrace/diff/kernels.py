"""Node types that name one device's kernel for the same op (CPU's flash attention, cuDNN's
batch norm): told apart, a snapshot taken on a laptop would differ on a GPU."""

from __future__ import annotations

import re
from dataclasses import replace

from ..model.records import Trace

# each device's name for an op's backward -> one name for all of them
_KERNELS = (
    (re.compile(r"ScaledDotProduct\w*Attention\w*Backward\d*"),
     "ScaledDotProductAttentionBackward"),
    (re.compile(r"(Cudnn|Native|Miopen)BatchNormBackward\d*"), "BatchNormBackward"),
    (re.compile(r"(Cudnn|Mkldnn|Miopen)?ConvolutionBackward\d*"), "ConvolutionBackward"),
)


def neutral_type(name: str) -> str:
    """The device-neutral name of a node type (the name itself when it names no kernel)."""
    for pattern, neutral in _KERNELS:
        if pattern.fullmatch(name):
            return neutral
    return name


def device_neutral(a: Trace, b: Trace) -> tuple[Trace, Trace]:
    """a and b, each node type that names a kernel given its device-neutral name when the
    two traces name kernels differently (made on different devices); else as they are."""
    kernels = [{n.type for n in t.nodes if neutral_type(n.type) != n.type} for t in (a, b)]
    if kernels[0] == kernels[1]:
        return a, b
    return _renamed(a), _renamed(b)


def _renamed(trace: Trace) -> Trace:
    return replace(trace, nodes=tuple(n._replace(type=neutral_type(n.type))
                                      for n in trace.nodes))
