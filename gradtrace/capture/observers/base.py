"""The pass as its observers see it, and what an observer is: each per-pass concern (flow,
steps, profile, .grad changes, in-place, freed graphs, second derivatives, roots) is one,
listed once in table.py."""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from contextlib import AbstractContextManager
from dataclasses import dataclass, field, fields, replace
from typing import Any, NamedTuple, Protocol

from ...extract.captured import Captured, RawPass
from ...extract.frozen import FrozenGraph
from ...extract.tensors import Named
from ...extract.walk import RawEdge
from ...model.facts import Fact
from ...model.records import Node, Source
from ..options import CaptureOptions
from .gate import Gate
from .marks import Marks


class InplaceModule(NamedTuple):
    """An nn.Module built with inplace=True (nn.ReLU(inplace=True)…): its class and its
    dotted path, when a name reaches it."""

    kind: str  # "nn.ReLU" (torch.nn's), else its class name
    path: str | None


class Host(Protocol):
    """What the recorder asks of the session it records for."""

    def lines_of(self, node: Any) -> tuple[Source | None, Source | None]:
        """The line that made node, and the line of a library's model code below it."""

    def source_of(self, node: Any) -> Source | None:
        """The line that made node (lines_of's first)."""

    def module_of(self, node: Any) -> str | None:
        """The dotted path of the nn.Module whose forward made node, when known now."""

    def inplace_module_of(self, node: Any) -> InplaceModule | None:
        """The nn.Module built with inplace=True whose forward made node (None: another
        module's, or none followed)."""

    def owns(self, filename: str) -> bool:
        """Whether a file is one of the scenario's own (not a library's)."""

    def forget(self, nodes: list[Any]) -> None:
        """The detail of a pass over these nodes is let go of."""

    def captured_now(self) -> Captured:
        """What the session knows now of names and modules (a graph the code let go of is
        made plain data)."""

    def detail(self, on: bool) -> None:
        """Whether the forwards from now on are noted in detail (lines, modules)."""


def lines_made(host: Host, node: Any, twin: Any) -> tuple[Source | None, Source | None]:
    """The line and the library's line that made node, as the host knows them, else as its
    twin's (a frozen twin's node record says its own)."""
    source, library = host.lines_of(node)
    if twin is None or (source and library):
        return source, library
    theirs = (twin.source, twin.library) if isinstance(twin, Node) else host.lines_of(twin)
    return source or theirs[0], library or theirs[1]


class Recording(Protocol):
    """What observers read of the Recorder, and the one thing they add to it: facts."""

    options: CaptureOptions
    host: Host
    gate: Gate
    marks: Marks
    passes: list[RawPass]
    facts: list[Fact]  # told so far, in order (an observer may tell one of its own better)
    script: Any  # the file whose lines the recording cites: .path, .lines

    def caller_line(self) -> tuple[int | None, str | None]:
        """The code's line that is running now, and its text."""

    def tell(self, fact: Fact) -> None:
        """One more fact of the recording's, in the order facts are met."""

    def frozen_of(self, p: RawPass) -> FrozenGraph:
        """p's graph as plain data, as the session knows it now (p's raw flow let go of)."""


# A wrapper an observer sets on torch while the code runs: (owner, attribute, wrapper).
Patch = tuple[Any, str, Callable[..., Any]]


@dataclass(frozen=True)
class Part:
    """An observer's part of the capture record: its fields are Captured's, set on it as
    the trace is built (a test holds that no two observers' parts share a field)."""


class Ending(NamedTuple):
    """How the recording ended, as the observers are told before the trace is built."""

    outputs: Named  # the roots of the trace's graph (none: the code let go of them)
    named: Named  # every tensor named as the code ended
    stopped: bool  # the code stopped part-way (an error): only what it did is shown


@dataclass
class PassState:
    """One backward or grad call while it is recorded."""

    record: RawPass  # what the trace keeps of it
    number: int  # its number among the run's passes, from 1
    roots: list[Any]  # the call's root tensors
    nodes: list[Any]  # its graph, breadth-first from the roots
    edges: list[RawEdge]
    named: Named  # the tensors named now (a light pass's: the leaves named before)
    detailed: bool  # recorded in detail (else light: its statistics only)
    # may wait for its device to ask whether its roots are finite (DetailPlan.may_wait)
    may_wait: bool
    leaves_only: bool  # named gives the leaves alone (a loop's light step)
    every_leaf: bool  # the call runs every leaf it reaches (a backward without inputs=)
    given: dict[str, Any] | None  # the call's arguments by name
    call: Callable[[], Any]  # the call itself (an observer may wrap it)
    plain: bool  # the call runs without gradtrace's hooks (batched, compiled, a timed step)
    error: Exception | None = None  # what the call raised
    # each name whose tensor, as the pass ended, is another than named as it began (a
    # parameter a hook swapped; the other of FSDP2's two): .grad is read off that one
    swapped: dict[str, Any] = field(default_factory=dict)


class Observer:
    """One per-pass concern. Made with the Recorder; told as each pass starts and finishes;
    asked for its part of the capture record when the trace is built."""

    def __init__(self, recorder: Recording) -> None:
        self.recorder = recorder

    def start(self, p: PassState) -> None:
        """Before the call runs (in the order of the table)."""

    def finish(self, p: PassState) -> None:
        """After it ran or raised (p.error)."""

    def forget(self, nodes: list[Any]) -> None:
        """The detail of a pass over these nodes is let go of."""

    def recording(self) -> AbstractContextManager[None]:
        """Around the whole recording: its own hooks on torch (an optimizer's step…)."""
        return contextlib.nullcontext()

    def patches(self) -> list[Patch]:
        """Its wrappers on torch while the code runs (set and taken off with the others)."""
        return []

    def ended(self, end: Ending) -> None:
        """The code ended: the last of what it tells (in the reverse order of the table)."""

    def captured(self, given: Captured) -> Part | None:
        """Its part of the capture record build_trace reads (given: the session's)."""
        return None

    def release(self) -> None:
        """Let go of every torch object held."""


def with_parts(given: Captured, *parts: Part | None) -> Captured:
    """given, with the observers' parts set on it (each part's fields are Captured's)."""
    return replace(given, **{f.name: getattr(part, f.name) for part in parts
                             if part is not None for f in fields(part)})

