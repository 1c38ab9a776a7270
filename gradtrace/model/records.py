"""The Trace: a plain, torch-free record of one scenario's autograd graph, tensors and passes.

Built once by the extractor; every renderer, the JSON form and `diff` read only this.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from itertools import repeat
from typing import Any, Final, Literal, NamedTuple

NodeKind = Literal["op", "leaf", "custom"]  # as in the JSON contract
SavedStatus = Literal["ok", "freed", "modified in place", "packed by a hook"]
# made under saved_tensors_hooks (a checkpoint's too): never unpacked, which runs the hook
PACKED: Final = "packed by a hook"
Severity = Literal["error", "warning", "info"]
PassKind = Literal["backward", "grad"]
PassBy = Literal["scenario", "gradtrace"]
CostMethod = Literal["replay", "steps", "once"]  # how --profile timed a pass
# A tensor's sizes; a nested tensor's ragged dimension is the word "ragged"
Shape = tuple[int | str, ...]
COST_METHODS: tuple[CostMethod, ...] = ("replay", "steps", "once")

OP: Final = "op"
LEAF: Final = "leaf"
CUSTOM: Final = "custom"


class SavedTensor(NamedTuple):
    """A tensor a node saved for backward; status says whether it can still be read (a named
    tuple, like Node: a big graph has one per node or more)."""

    name: str
    shape: Shape | None
    dtype: str | None
    bytes: int
    status: SavedStatus = "ok"


class Source(NamedTuple):
    """Where the forward call that made a node is: the scenario's file, line and its text."""

    file: str
    line: int
    code: str


# the node torch puts before a module's forward to run its full backward hooks (an identity)
BACKWARD_HOOK_NODE = "BackwardHookFunctionBackward"
COMPILED_REGION_NODE = "CompiledFunctionBackward"  # torch.compile's region: one Function


def custom_kind_label(node_type: str) -> str:
    """What a node of kind custom is: the code's own autograd.Function, or one torch makes
    (a module's backward hook, a compiled region)."""
    return {BACKWARD_HOOK_NODE: "module hook node",
            COMPILED_REGION_NODE: "compiled region"}.get(node_type, "custom Function")


class Node(NamedTuple):
    """One autograd node (a grad_fn, or the AccumulateGrad of a leaf).

    Node and Edge are named tuples, not dataclasses: a big graph has 100,000s of them, and a
    tuple is built several times faster. Both are immutable all the same.
    """

    id: str
    type: str
    kind: NodeKind
    tensor: str | None
    saved: tuple[SavedTensor, ...] = ()
    module: str | None = None  # dotted path of the nn.Module whose forward made it
    recomputed: bool = False  # made inside torch.utils.checkpoint: backward makes it again
    source: Source | None = None  # the scenario line that made it (None for leaves)
    grad_graph: bool = False  # made while a create_graph=True pass ran: a gradient's graph
    # the module backward hooks that run on it: "model.1 relu_hook (backward hook)"
    hooks: tuple[str, ...] = ()
    # the line of an installed library's model code (transformers, timm…) that made it, when
    # source's line called into one
    library: Source | None = None
    # a node with several outputs (chunk, unbind, an LSTM) where a named tensor is not its
    # output 0: each output's tensor, in output order (None: unnamed; trailing unnamed ones
    # left out), so `a, b = x.chunk(2)` is (a, b). Empty otherwise: tensor names the node.
    output_tensors: tuple[str | None, ...] = ()

    @classmethod
    def from_columns(cls, *, id: Iterable[str], type: Iterable[str], kind: Iterable[NodeKind],
                     tensor: Iterable[str | None], saved: Iterable[tuple[SavedTensor, ...]],
                     module: Iterable[str | None], recomputed: Iterable[bool],
                     source: Iterable[Source | None], grad_graph: Iterable[bool],
                     hooks: Iterable[tuple[str, ...]] = repeat(()),
                     library: Iterable[Source | None] = repeat(None),
                     output_tensors: Iterable[tuple[str | None, ...]] = repeat(())
                     ) -> list[Node]:
        """Nodes made from one iterable per field, as long as id (the others may be endless):
        built as plain tuples, several times faster than Node(...) one by one."""
        rows = zip(id, type, kind, tensor, saved, module, recomputed, source, grad_graph,
                   hooks, library, output_tensors, strict=False)
        return list(map(tuple.__new__, repeat(cls), rows))


class Edge(NamedTuple):
    """Gradient flows dst -> src: src is dst.next_functions[dst_input]."""

    src: str
    dst: str
    dst_input: int
    src_output: int

    @classmethod
    def from_columns(cls, *, src: Iterable[str], dst: Iterable[str], dst_input: Iterable[int],
                     src_output: Iterable[int]) -> list[Edge]:
        """Edges made from one iterable per field, as Node.from_columns makes nodes."""
        rows = zip(src, dst, dst_input, src_output, strict=True)
        return list(map(tuple.__new__, repeat(cls), rows))


class GradSummary(NamedTuple):
    """A gradient in brief; values holds the nested list when it has at most 64 elements.

    A named tuple, like Node: a pass over a big model makes one per gradient.
    """

    shape: Shape
    norm: float
    min: float | None
    max: float | None
    finite: bool
    values: Any = None
    note: str | None = None  # why the statistics are unavailable (meta, quantized …)
    is_complex: bool = False  # a complex gradient: min and max are of |z|, values not kept
    local_shard: bool = False  # a DTensor's: this rank's shard (shape and statistics)
    shards: int = 0  # a local shard's: the ranks the whole is split among, each element on one


@dataclass(frozen=True, slots=True)
class TensorInfo:
    """A named tensor of the scenario, as it stands at the end of the run."""

    name: str
    shape: Shape
    dtype: str
    requires_grad: bool
    is_leaf: bool
    retains_grad: bool
    grad_fn: str | None
    node: str | None
    grad: GradSummary | None
    grad_before: GradSummary | None = None  # .grad before the first backward pass
    value: GradSummary | None = None  # the tensor's own data, summarised like a gradient
    grad_note: str | None = None  # why .grad is None, or that it has a graph of its own


@dataclass(frozen=True, slots=True)
class GradChange:
    """A named tensor whose .grad a pass changed."""

    tensor: str
    before: GradSummary | None
    after: GradSummary | None


class NodeFlow(NamedTuple):
    """What one node received (per output) and sent (per input) during a pass (a named
    tuple: a pass over a big graph makes one per node)."""

    grad_outputs: tuple[GradSummary | None, ...]
    grad_inputs: tuple[GradSummary | None, ...]
    position: int  # where the node ran in the pass: 0 first
    # what the node itself sent, when a module's backward hook replaced it with grad_inputs
    unhooked: tuple[GradSummary | None, ...] | None = None


@dataclass(frozen=True, slots=True)
class Pass:
    """One backward() / autograd.grad() call, by the scenario or by gradtrace."""

    kind: PassKind
    roots: tuple[str, ...]
    retain_graph: bool
    create_graph: bool
    error: str | None
    flow: dict[str, NodeFlow] = field(default_factory=dict)
    by: PassBy = "scenario"
    root_names: tuple[str | None, ...] = ()
    line: int | None = None
    code: str | None = None
    grad_changes: tuple[GradChange, ...] = ()
    graph: int = 0  # which distinct graph it ran over: passes of a loop share one (0, 1, …)
    light: bool = False  # only its light statistics were kept (a repeat of a kept graph)

    def sent(self, edge: Edge) -> GradSummary | None:
        """What edge.dst sent to edge.src in this pass (None if nothing was sent)."""
        f = self.flow.get(edge.dst)
        return f.grad_inputs[edge.dst_input] if f and edge.dst_input < len(f.grad_inputs) else None

    def received(self, edge: Edge) -> GradSummary | None:
        """What edge.src received for the output this edge leaves from, after any hooks."""
        f = self.flow.get(edge.src)
        return f.grad_outputs[edge.src_output] if f and edge.src_output < len(f.grad_outputs) \
            else None


class LeafStep(NamedTuple):
    """A named leaf's .grad after one pass, in brief (a named tuple: a loop makes one per
    leaf and pass)."""

    norm: float
    max_abs: float
    finite: bool
    kept: bool  # the pass added to a .grad nothing had touched since the previous pass


@dataclass(frozen=True, slots=True)
class Steps:
    """Light statistics of every pass, a row per pass: the loss, the optimizer steps taken
    before it, and each named leaf's .grad after it (None: no .grad, or not named yet)."""

    leaves: tuple[str, ...]  # the named leaves that require grad, in the order first seen
    modules: tuple[str | None, ...]  # the nn.Module path each leaf belongs to, else None
    loss: tuple[float | None, ...]  # the pass's root when it is one number
    optimizer_steps: tuple[int, ...]  # torch.optim steps since the previous pass
    # [pass][leaf]: a tuple, or a long watched run's rows in a temporary file (SpilledRows)
    grads: Sequence[tuple[LeafStep | None, ...]]
    optimizer_steps_after: int = 0  # torch.optim steps after the last pass
    # [pass]: the GradScaler scale its .grads were divided by here (None: not scaled); empty
    # when no pass was: the norms are of the gradients the optimizer is meant to see
    loss_scale: tuple[float | None, ...] = ()
    # per pass, the constant k of a root `loss / k` (accumulation): the loss row is the loss
    # before it, as the code computed it; empty unless a pass had one
    loss_divisor: tuple[float | None, ...] = ()
    # per leaf, whether a stepping optimizer holds it (None: unknown); empty unless one
    # stepped
    optimized: tuple[bool | None, ...] = ()
    # per leaf, whether a stepping optimizer holds it whose update does not grow with the
    # gradient's size (Adam's family, RMSprop, Adagrad: divided by its running size; Rprop:
    # its sign): a small gradient learns as fast as a big one (None: unknown); empty unless
    # one stepped
    scale_free: tuple[bool | None, ...] = ()
    # per pass, the call of an optimizer step's closure it ran in, numbered from 1 over the
    # run (L-BFGS calls its closure up to 20 times a step and steps with each call's
    # gradient; None: outside a closure); empty unless a pass ran in one
    closure_call: tuple[int | None, ...] = ()

    @property
    def optimizer_steps_taken(self) -> int:
        """Every torch.optim step of the run: before each pass, and after the last."""
        return sum(self.optimizer_steps) + self.optimizer_steps_after


@dataclass(frozen=True, slots=True)
class Finding:
    """Something worth telling the user; codes and severities come from findings.registry."""

    code: str
    severity: Severity
    message: str
    tensor: str | None = None
    node: str | None = None
    hint: str | None = None
    file: str | None = None  # the scenario line it is about, when one is
    line: int | None = None


@dataclass(frozen=True, slots=True)
class FunctionCall:
    """A custom autograd.Function.apply call the scenario made."""

    function: str
    node: str | None
    line: int | None
    inputs: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class SecondOrder:
    """Second derivatives of a scalar root: blocks[(a, b)] is d2 root / da db, nested lists."""

    root: str
    wrt: tuple[str, ...]
    blocks: dict[tuple[str, str], Any]
    error: str | None = None


class Ranks(NamedTuple):
    """A process's rank among world processes of one run (torchrun's RANK and WORLD_SIZE)."""

    rank: int
    world: int


class NodeCost(NamedTuple):
    """One node's backward: the median time (µs) over the profiled timings and their
    spread (max − min), the bytes its computation left allocated, and the bytes freed
    when it finished (the gradients it received, its saved tensors when freed)."""

    time_us: float
    spread_us: float
    allocated: int
    freed: int


class ModuleSaved(NamedTuple):
    """The saved tensors of one module's nodes still held at the peak of memory."""

    module: str
    bytes: int


@dataclass(frozen=True, slots=True)
class Costs:
    """--profile's measurements of one pass: each node's median time and memory, the
    timings they are checked against, the peak of memory (docs/profiling.md)."""

    pass_number: int  # 1-based
    method: CostMethod  # replay: run again before the code's call; steps: a loop's; once
    device: str  # cpu or cuda (then times are device times)
    nodes: dict[str, NodeCost]  # by node id
    wall_us: tuple[float, ...]  # each timing of the pass without the profiler
    profiled_us: tuple[float, ...]  # and with it: the node times come from these
    op_total_us: tuple[float, ...] = ()  # torch.profiler's total self time of each
    peak_bytes: int | None = None  # the most held above the start of backward
    peak_node: str | None = None  # the node that ran then
    peak_saved: tuple[ModuleSaved, ...] = ()  # the saved tensors still held then
    forward_us: dict[str, float] = field(default_factory=dict)  # own forward, per module
    accumulate_us: float = 0.0  # AccumulateGrad nodes, all leaves together
    accumulate_spread_us: float = 0.0  # its spread over the timings (max − min)
    engine_us: float = 0.0  # of the node times: the engine's work between evaluations
    outside_us: float | None = None  # the call's own start and end, outside every node
    ops_us: dict[str, float] = field(default_factory=dict)  # torch.profiler's, per op name
    recomputed_us: float | None = None  # time of nodes made again by checkpoint regions
    recomputed_saved: int | None = None  # bytes their saved tensors did not hold
    note: str | None = None  # what was not possible (no replay, why), in words


@dataclass(frozen=True, slots=True)
class Trace:
    """Graph + tensors + passes + findings of one scenario run."""

    scenario: str | None
    gradtrace_version: str
    torch_version: str
    outputs: tuple[str, ...]
    output_names: tuple[str, ...]
    root_reason: str
    nodes: tuple[Node, ...]
    edges: tuple[Edge, ...]
    tensors: tuple[TensorInfo, ...]
    passes: tuple[Pass, ...]
    findings: tuple[Finding, ...]
    functions: tuple[FunctionCall, ...] = ()
    stdout: str = ""
    second_order: SecondOrder | None = None
    saved_read: bool = True  # False: saved tensors were not read, so every saved is empty
    steps: Steps | None = None  # light statistics of every pass (None: no pass ran)
    ranks: Ranks | None = None  # the rank this trace's process was, in a multi-process run
    costs: Costs | None = None  # what backward cost, node by node (--profile)

    def shown_pass(self) -> Pass | None:
        """The pass whose gradients the graph shows by default: the last with a recorded
        flow among those run from the graph's outputs (a loss's backward, not the
        torch.autograd.grad a library ran inside its own code), else the last with one."""
        with_flow = [p for p in self.passes if p.flow]
        outputs = set(self.outputs)
        return next((p for p in reversed(with_flow) if outputs.intersection(p.roots)),
                    with_flow[-1] if with_flow else None)
