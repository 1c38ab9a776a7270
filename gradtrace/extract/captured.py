"""The capture record: what one recording gathered (its passes, calls, facts and the
observers' parts), torch objects still, as build_trace takes it."""

from __future__ import annotations

from collections.abc import Callable, Sequence, Set
from dataclasses import dataclass, field, replace
from typing import Any, NamedTuple, Protocol

from ..model.facts import CodeCut, Fact, LeafCut
from ..model.records import (
    Edge,
    GradChange,
    GradSummary,
    Node,
    PassBy,
    PassKind,
    Ranks,
    SecondOrder,
    Source,
    Steps,
)
from .frozen import FrozenGraph
from .profile import RawCosts
from .summary import RawStats
from .tensors import Named
from .walk import SavedCache, Walk


class FlowRecord(NamedTuple):
    """What one node received (per output) and sent (per input) in a pass, as raw stats."""

    node: Any
    # where it ran: records sorted by it, stably, are in run order (a record read off a
    # neighbour's takes its position and comes after it)
    position: int
    received: list[RawStats | None]
    sent: list[RawStats | None]
    # what it sent before a module's backward hook replaced it (None: no hook changed it)
    unhooked: list[RawStats | None] | None = None


# A long loop makes one RawPass per pass: slots, and its parts shared empties until the pass
# has some (each is set whole, never added to), keep a light step's at a few hundred bytes.
@dataclass(slots=True)
class RawPass:
    """A backward/grad call as it ran: torch node objects, not yet ids."""

    kind: PassKind
    by: PassBy
    roots: list[Any]
    root_names: list[str | None]
    retain_graph: bool
    create_graph: bool
    line: int | None = None
    code: str | None = None
    error: str | None = None
    error_kind: str | None = None  # what torch_compat.error_kind made of the error
    grad_changes: Sequence[GradChange] = ()
    flow: dict[int, FlowRecord] = field(default_factory=dict)  # by id(node)
    flow_failures: Sequence[str] = ()  # nodes whose flow is not recorded
    batched: bool = False  # inside a torch.func transform: its gradients are not summarised
    compiled: bool = False  # under compiled autograd: no hook of gradtrace's in its graph
    signature: int = 0  # its graph's structure: passes over graphs alike have equal ones
    nodes: list[Any] = field(default_factory=list)  # its graph, held while its detail is kept
    thinned: bool = False  # its detail was let go of (a repeat of a later pass's graph)
    keep: bool = False  # its detail is kept whatever passes follow (first, failed, asked for)
    # .grad changes summarised as the pass ended, not read yet: (name, before, after)
    pending_changes: Sequence[tuple[str, Any, Any]] = ()
    row: int | None = None  # its row of the steps' statistics (None: none was made)
    closure_call: int | None = None  # the optimizer closure call it ran in (Steps says)
    from_leaves: bool = False  # every root was a leaf (roots are let go of; this stays)
    lone_leaf: bool = False  # no root named, its graph reached one leaf alone, no Parameter
    first_not_finite: bool = False  # the first pass whose root held a NaN or Inf (chased)
    # id() of the nodes whose values saved for backward were not finite, read as it began
    # (only when its root was not finite): what their gradients carry came from the forward;
    # None: a pass in detail whose roots on a device were not asked (DetailPlan.may_wait)
    carriers: Set[int] | None = frozenset()
    # its graph as plain data, made as the code let go of it (its nodes were let go of then)
    frozen: FrozenGraph | None = None


@dataclass
class RawCall:
    """A custom Function.apply call: the class, its output's node, and detached input copies."""

    function: type
    node: Any
    line: int | None
    args: tuple[Any, ...]
    kwargs: dict[str, Any]


class SourceCuts(Protocol):
    """What the code's own lines tell of a graph lost, asked once the graph is built (capture's
    naming/cuts.py answers from the statements that ran)."""

    @property
    def file(self) -> str:
        """The file whose statements bound the named tensors."""

    def bound_at(self, tensor: str) -> int | None:
        """The line of file that bound tensor (model for model.fc.weight), if one did."""

    def cuts(self, lost: Sequence[str], copies: frozenset[str], nodes: Sequence[Node],
             edges: Sequence[Edge]) -> list[LeafCut | CodeCut]:
        """The lines that took a value of the lost leaves (no root reaches them; copies were
        cut on purpose) without its graph, told where the graph shown uses it."""


@dataclass(frozen=True)
class Captured:
    """What one recording gathered, whole: build_trace's one argument.

    saved_before holds saved tensors read before a backward freed them; None means saved
    tensors are not read at all (faster; the Trace says so in saved_read). modules maps
    id(node), or a leaf's id(variable), to the path of the nn.Module that made or owns it;
    recomputed holds the nodes (by id) made inside torch.utils.checkpoint regions; hooks the
    module backward hooks that run on a node (by id); lines_of(node) is the scenario line
    that made a node and the line of an installed library's model code below it, if one
    did. walked: a pass's walk, used again when it starts from the same
    roots. grad_graph tells the nodes made while a create_graph pass ran. earlier: leaves
    named in passes under names the code bound again since: they label their nodes, and have
    rows when the graph shows them. updated: the leaves whose values changed during the run;
    handed: those given to torch.autograd.functional; reduced: those DistributedDataParallel
    averages: over how many ranks, and whether it waits for their gradients
    (find_unused_parameters off).
    """

    scenario: str | None
    named: Named
    outputs: Named
    root_reason: str
    facts: Sequence[Fact] = ()
    optimizer_facts: Sequence[Fact] = ()  # what optimizers did: told after the others
    passes: Sequence[RawPass] = ()
    calls: Sequence[RawCall] = ()
    graph_passes: Sequence[RawPass] | None = None  # the passes shown (None: every one)
    earlier: Sequence[tuple[str, Any]] = ()
    stdout: str = ""
    ranks: Ranks | None = None  # the rank of a multi-process run's process
    grad_before: dict[str, GradSummary | None] = field(default_factory=dict)
    second_order: SecondOrder | None = None
    saved_before: SavedCache | None = None
    modules: dict[int, str] = field(default_factory=dict)
    recomputed: dict[int, Any] = field(default_factory=dict)
    hooks: dict[int, tuple[str, ...]] = field(default_factory=dict)
    lines_of: Callable[[Any], tuple[Source | None, Source | None]] | None = None
    walked: Walk | None = None
    leaf_aliases: dict[int, int] = field(default_factory=dict)  # FSDP2: unsharded -> sharded
    grad_graph: Callable[[Any], bool] | None = None
    steps: Steps | None = None
    held: frozenset[int] | None = None  # id() of the leaves stepping optimizers hold
    scale_free: frozenset[int] = frozenset()  # of those, the ones Held.scale_free says
    objects: Sequence[tuple[str, Any]] = ()  # the named objects: their modules hold leaves
    updated: frozenset[str] = frozenset()
    fresh: frozenset[str] = frozenset()  # leaves bound again after the last pass named them
    step_leaf_ids: tuple[int, ...] = ()  # id() of each steps column's tensor, the last pass's
    handed: frozenset[str] = frozenset()
    reduced: dict[str, tuple[int, bool]] = field(default_factory=dict)
    costs: RawCosts | None = None
    root_pass: RawPass | None = None  # the pass whose roots are the outputs, when the
    # code let go of them (its graph frozen, or held still)
    source: SourceCuts | None = None  # the code's lines, where a file holds them

    def optimized_steps(self) -> Steps | None:
        """The steps, each leaf marked held by a stepping optimizer or not (when one did):
        the tensor the last pass read under its name (the code may bind the name again
        after it: `model = torch.load(best)`), else the one named now."""
        if self.steps is None or self.held is None:
            return self.steps
        ids = {name: id(t) for name, t in self.named}
        read = dict(zip(self.steps.leaves, self.step_leaf_ids, strict=False))
        leaves = [read.get(name, ids.get(name)) for name in self.steps.leaves]
        return replace(self.steps, optimized=tuple(
            None if i is None else i in self.held for i in leaves), scale_free=tuple(
            None if i is None else i in self.scale_free for i in leaves))
