"""What `gradtrace diff` found between two traces: plain records, read by its renderers."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from .profile import ModuleCost
from .records import Edge, Finding, GradSummary, Node, Ranks

NodeChangeKind = Literal["added", "removed", "changed"]
TensorChangeKind = Literal["added", "removed", "requires_grad", "is_leaf"]
GradientChangeKind = Literal["appeared", "vanished", "changed"]


@dataclass(frozen=True, slots=True)
class NodeChange:
    """A node only in A (removed), only in B (added), or matched but of another type or
    module (changed)."""

    kind: NodeChangeKind
    a: Node | None
    b: Node | None


@dataclass(frozen=True, slots=True)
class EdgeChange:
    """An edge only in A (removed, A's node ids) or only in B (added, B's node ids); src and
    dst are the nodes at its ends, for its text."""

    kind: Literal["added", "removed"]
    edge: Edge
    src: Node
    dst: Node


@dataclass(frozen=True, slots=True)
class TensorChange:
    """A named tensor only on one side, or whose requires_grad or is_leaf flipped."""

    name: str
    kind: TensorChangeKind
    before: bool | None = None
    after: bool | None = None


@dataclass(frozen=True, slots=True)
class GradientChange:
    """A tensor's gradient in one pass (pass_number None: its final .grad) that appeared,
    vanished, or moved beyond the tolerance; detail says which number moved."""

    tensor: str
    pass_number: int | None
    kind: GradientChangeKind
    a: GradSummary | None
    b: GradSummary | None
    detail: str


@dataclass(frozen=True, slots=True)
class RankGradient:
    """A tensor whose own gradient differed between two ranks of one run: its .grad on each,
    and whether those are equal (DDP averaged the ranks' gradients into it)."""

    tensor: str
    a: GradSummary | None
    b: GradSummary | None
    equal: bool


@dataclass(frozen=True, slots=True)
class TraceDiff:
    """Everything that differs between trace A and trace B (empty tuples: the same)."""

    a: str  # what each side was (a scenario, a trace file)
    b: str
    matched: int  # nodes found on both sides
    nodes: tuple[NodeChange, ...]
    edges: tuple[EdgeChange, ...]
    modules: tuple[str, ...]  # modules whose subgraph changed, sorted
    tensors: tuple[TensorChange, ...]
    gradients: tuple[GradientChange, ...]
    new_findings: tuple[Finding, ...]
    fixed_findings: tuple[Finding, ...]
    passes: tuple[int, int]  # how many passes each side recorded
    rtol: float
    atol: float
    ranks: tuple[Ranks, Ranks] | None = None  # both sides are ranks of a multi-process run
    across_ranks: tuple[RankGradient, ...] = ()  # with ranks: the .grad of what moved
    costs: tuple[ModuleCost, ...] = ()  # backward time per module, when both have costs

    @property
    def same(self) -> bool:
        return not (self.nodes or self.edges or self.tensors or self.gradients
                    or self.new_findings or self.fixed_findings
                    or self.passes[0] != self.passes[1])
