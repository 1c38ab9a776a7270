"""What capture saw, as plain facts: findings/recorded.py phrases each one as a finding."""

from __future__ import annotations

from typing import Literal, NamedTuple

from .records import Source


class GradcheckRan(NamedTuple):
    """The code's own gradcheck (or gradgradcheck) call and its verdict."""

    kind: str  # gradcheck or gradgradcheck
    function: str  # what it checked: `Cube.apply`
    line: int | None
    verdict: Literal["passed", "returned False", "failed"]
    error: str | None = None  # the first lines of its error, when it failed


class SavedChanged(NamedTuple):
    """A tensor saved for backward and changed in place afterwards."""

    tensor: str | None  # its name, when a named tensor is it
    node_type: str  # the node that saved it
    saved: str  # what the node calls it: "result", "self", …
    made: Source | None  # the line that made the node
    changed: Source | None  # the line that changed it, when known
    node: int = 0  # id() of the node, until its module is known
    module: str | None = None  # the nn.Module whose forward made the node
    # the nn.Module built with inplace=True that changed it, called at `changed`: its class
    # ("nn.ReLU") and its dotted path, when a name reaches it
    inplace_module: str | None = None
    inplace_path: str | None = None
    others: int = 0  # how many more tensors saved for backward the same line changed


class GraphFreed(NamedTuple):
    """A pass that reached nodes an earlier pass had freed."""

    number: int
    shared: int  # how many such nodes
    earlier: int  # the pass that freed them
    earlier_line: int | None
    earlier_code: str | None
    tensor: str | None  # the named tensor it entered them through
    node_type: str
    made: Source | None  # the line that made the entry node
    same_root: bool  # both passes started from the same roots: a repeat, not a link


class Stopped(NamedTuple):
    """The code raised, or ran out of time, after recording something."""

    message: str
    hint: str | None
    line: int | None


class PassesCapped(NamedTuple):
    """--passes N stopped the code at its next pass (or --stop-on CODE, once it fired)."""

    limit: int | None
    at: str  # "line 12 `loss.backward()`"
    line: int | None
    by: str | None = None  # the finding code --stop-on stopped it at


class Cut(NamedTuple):
    """How a line took a value without its graph: a call or attribute (`.detach()`, `.item()`,
    `.data`, `torch.tensor(...)` …), a block that turns gradients off and that it ran inside
    (`with torch.no_grad():`), or such a decorator on the function it is in."""

    kind: Literal["call", "block", "decorator"]
    name: str  # detach, item, data, tensor, argmax …; no_grad, inference_mode, set_grad_enabled
    line: int | None = None  # the block's or the call's own line, where it is told
    function: str | None = None  # the function a decorator turns gradients off in


class NoRoot(NamedTuple):
    """No named tensor has a graph: why (the tensors that require grad, the calls that turned
    gradients off or detached, a result bound to no name), and what else was recorded
    instead."""

    wanting: tuple[str, ...]  # the named tensors that require grad
    cutters: tuple[Cut, ...]  # each no_grad, inference_mode, set_grad_enabled or detach
    # call that ran, at its line
    unbound: int | None  # a line that computed from them, its result bound to no name
    code: str | None  # that line's code
    line: int | None
    tensor: str | None
    instead: Literal["passes", "calls", "nothing"]
    # the root of a pass that was a leaf made from values (`torch.tensor(loss.item(),
    # requires_grad=True)`): its name, or "its root"; backward from it reached nothing
    from_values: str | None = None


class PassCut(NamedTuple):
    """A pass whose root had no graph, and the line that left it without one."""

    number: int
    tensor: str
    line: int
    code: str
    cut: Cut


class LeafCut(NamedTuple):
    """Leaves no root reaches, and the line that took a value from them without its graph."""

    leaves: tuple[str, ...]
    owner: str  # the name they share: model for model.0.weight
    line: int
    code: str
    cut: Cut
    through: str  # the tensor the line took: a leaf, or one computed from them
    file: str
    node: str | None = None  # the node of the graph shown where the cut value is used


class CodeCut(NamedTuple):
    """Leaves no root reaches, and a line inside a function (a module's forward) that ran
    and took a value without its graph: the likely cut."""

    leaves: tuple[str, ...]
    line: int
    code: str
    cut: Cut
    file: str
    function: str  # Block.forward
    module: str | None  # the module whose forward it is, when the nodes tell
    node: str | None = None  # the node of the graph shown where the cut value is used


class Detached(NamedTuple):
    """A tensor sharing memory with another but cut from its graph (.detach(), .data)."""

    tensor: str
    source: str


class GradDiscarded(NamedTuple):
    """A zero_grad() line that reset gradients a backward made before any optimizer step
    used them: micro-batches thrown away, or a reset between backward and step."""

    line: int | None
    code: str | None
    passes: int  # backward passes whose gradients it threw away
    trained: int  # of them, those from a backward line whose passes a step used elsewhere
    backwards: int  # backward passes in all
    steps: int  # optimizer steps in all
    before_step: int  # of its resets, those right before a step, with no backward between
    held: bool  # what it threw away an optimizer holds (else a loop trained by hand)
    backward_line: int | None  # the backward of the first pass thrown away
    backward_code: str | None
    step_line: int | None  # a step a reset came right before
    step_code: str | None


class StepWithoutGradient(NamedTuple):
    """An optimizer step line that ran while none of its parameters had a .grad."""

    line: int | None
    code: str | None
    empty: int  # such steps
    steps: int  # optimizer steps in all
    after_backward: int  # of them, those after a backward since the step before


class ClipWithoutGradient(NamedTuple):
    """A gradient-clipping line that ran while none of its parameters had a .grad."""

    line: int | None
    code: str | None
    empty: int
    clips: int


class NotOptimized(NamedTuple):
    """Named leaves that got gradients from backward but no stepping optimizer holds."""

    tensors: tuple[str, ...]
    steps: int
    line: int | None  # the line that set the attribute they hang on (model.head = …)
    code: str | None
    optimizer_line: int | None  # the line that built a stepping optimizer
    optimizer_code: str | None


class FrozenHeld(NamedTuple):
    """Parameters a stepping optimizer holds that do not require grad: never trained."""

    tensors: tuple[str, ...]
    steps: int
    line: int | None  # the line that most likely froze them
    code: str | None
    on_purpose: bool  # the code says it freezes them on purpose


class NonFiniteBorn(NamedTuple):
    """Where the first NaN or Inf of a forward was made, read off the values its graph saved
    for backward when a root (the loss) was not finite: the op that made it of finite inputs,
    or a parameter or an input that held it already."""

    number: int | None  # the pass whose root was not finite (None: a named tensor no
    # backward ran from, at the end of the run)
    root: str | None  # that root's name
    root_kind: Literal["NaN", "Inf"]
    kind: Literal["NaN", "Inf"]  # what the op made
    origin: Literal["op", "parameter", "input"]  # input: one without grad (data)
    node_type: str  # the op (for a parameter its AccumulateGrad, for an input its user)
    made: Source | None  # the line that made the op (in the code's own files)
    library: Source | None  # the line of a library's model code below it, if one did
    module: str | None  # the nn.Module whose forward made it
    tensor: str | None  # the named tensor it made, or the parameter
    certain: bool  # every input of the op was read, and finite
    stopped: bool  # the code stopped (raised) with the root not finite
    after: int  # how many passes ran before it (none: a leaf held it from the start)
    node: int = 0  # id() of the node (held until the trace is built)
    box: str | None = None  # its node id in the trace's graph, when that shows it
    # the ops above it whose outputs nothing kept for backward: any of them may have made it
    unread_above: int = 0


class LeafCopied(NamedTuple):
    """A name bound to a conversion of the leaf its line asked for (requires_grad=True then
    .double()): the name holds a non-leaf, whose .grad stays None."""

    tensor: str
    line: int
    code: str
    method: str  # double, to, cuda…
    node_type: str  # ToCopyBackward0


class GraphKept(NamedTuple):
    """A name that adds each backward pass's root to itself with its graph (total += loss):
    every step's graph stays in memory."""

    tensor: str
    line: int
    code: str
    root: str  # the passes' root it adds: loss
    passes: int


class NonLeafGradRead(NamedTuple):
    """A line that read .grad of a non-leaf that keeps none (no retain_grad()): None."""

    tensor: str
    line: int
    code: str
    node_type: str  # the node that made it


Fact = (GradcheckRan | SavedChanged | GraphFreed | Stopped | PassesCapped | NoRoot | PassCut
        | LeafCut | CodeCut | Detached | GradDiscarded | StepWithoutGradient
        | ClipWithoutGradient | NotOptimized | FrozenHeld | NonFiniteBorn
        | LeafCopied | GraphKept | NonLeafGradRead)
