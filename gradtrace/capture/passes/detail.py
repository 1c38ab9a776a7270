"""Which passes of a loop are recorded in detail (graph, saved tensors, flow, and their
forward's lines and modules) and which are light (their statistics only, made on the device
and read in batches), and when a repeated pass's detail is let go of."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol

from ...extract.captured import RawPass
from ..observers.readback import Readback
from ..options import CaptureOptions

# The passes in detail: the first ones, then one in every DETAILED_EVERY.
DETAILED_FIRST = 32
DETAILED_EVERY = 100
# A watched run (a RunListener told as it goes: `watch`, gradtrace.watch()) is a long one: its
# detail goes to its first pass and the first over a .grad a step left, every DETAILED_EVERY-th
# and those after a .grad read not finite, not to its first 32 (each costs a GPT-style step
# ~20% more than a light one).
WATCHED_FIRST = 2
# Once a light step's .grad is read not finite (or its root is), the next passes are in
# detail, so that one whose gradients are not finite most likely keeps its flow (told where
# NaN or inf arose); again for a later batch's, CHASES times in all.
DETAILED_AFTER_NOT_FINITE = 8
CHASES = 4
# The passes in detail repeated since, held until their statistics are read (say whether
# their .grads were finite): past this many, read now.
UNDECIDED = 8


class StepStatistics(Protocol):
    """What the plan reads of the steps' statistics (the StepLog's)."""

    readback: Readback  # the statistics made on the device, read in batches
    not_finite_read: int  # rows read so far that hold a .grad not finite

    def finite(self, row: int) -> bool | None:
        """Whether the .grads of a row were all finite (None: not read yet)."""


class DetailPlan:
    """Plans each pass as detailed or light, and keeps the latest pass over each graph."""

    def __init__(self, options: CaptureOptions, steps: StepStatistics,
                 let_go: Callable[[RawPass], None]) -> None:
        self.options = options
        self.steps = steps
        self.readback = steps.readback
        self.let_go = let_go  # drops a pass's detail, keeping its statistics
        # whether the next pass is in detail (its forward's lines and modules too, when the
        # recorder tells the session so after each pass)
        self.next = True
        self.latest_of: dict[int, RawPass] = {}  # the latest pass in detail over each graph
        self.last_of: dict[int, RawPass] = {}  # the latest pass over each graph, light or not
        self._signatures: set[int] = set()  # graphs some pass showed in detail
        self._undecided: list[RawPass] = []  # repeated passes in detail, not read yet
        self._chase_until: int | None = None  # in detail up to this pass: see above
        self._chases = 0
        self._not_finite_chased = 0  # the not-finite rows read when the last chase began
        self._settled_at = 0  # the readback's batches when settle() last ran

    def asked_for(self, number: int) -> bool:
        """Whether the pass numbered so is one whose graph is to be shown in full."""
        return self.options.graph_pass in (number, "all")

    def new_graph(self, signature: int) -> bool:
        """Whether no pass in detail ran over a graph alike yet."""
        return signature not in self._signatures

    def detailed(self, number: int, hooked: bool) -> bool:
        """Whether the pass numbered so is planned to be recorded in detail (hooked: the code
        has tensor or module hooks, which every pass records)."""
        first = DETAILED_FIRST if self.options.listener is None else WATCHED_FIRST
        return number <= first or number % DETAILED_EVERY == 0 \
            or self.asked_for(number) or hooked or number <= (self._chase_until or 0)

    def may_wait(self, detailed: bool) -> bool:
        """Whether a pass may wait for its device (a GPU's) to ask whether its roots are
        finite: one in detail, unless watched and no .grad was read not finite yet (a long
        run on a GPU waits for nothing of gradtrace's own; a NaN in it is chased)."""
        return detailed and (self.options.listener is None or self.steps.not_finite_read > 0)

    def began(self, record: RawPass) -> None:
        """A pass in detail began: the detail of the previous one over its graph is let go
        of, unless that pass is kept (the first, a failed one, one asked for, one whose
        gradients were not finite, or any while the code has tensor hooks); its light
        statistics stay. So memory does not grow with a loop's steps."""
        self._signatures.add(record.signature)
        previous = self.latest_of.get(record.signature)
        self.latest_of[record.signature] = record
        if previous is not None and not previous.keep:
            self._undecided.append(previous)
        self.settle()

    def ended(self, record: RawPass, number: int, new_graph: bool, hooked: bool) -> None:
        """After pass `number`: the latest over its graph; chase a .grad read not finite,
        let go of what was read finite, and plan the next pass."""
        last = self.last_of.get(record.signature)
        if last is not None and last.thinned:
            last.roots = []
        self.last_of[record.signature] = record
        # a root not finite is chased as the .grads it makes are, before they are read
        if (self.steps.not_finite_read > self._not_finite_chased or record.first_not_finite) \
                and number > (self._chase_until or 0) and self._chases < CHASES:
            self._not_finite_chased = self.steps.not_finite_read
            self._chase_until = number + DETAILED_AFTER_NOT_FINITE
            self._chases += 1
        if len(self._undecided) > UNDECIDED or self.readback.batches != self._settled_at:
            if len(self._undecided) > UNDECIDED:
                self.readback.read()  # rare: a loop's first passes, all in detail
            self._settled_at = self.readback.batches
            self.settle()
        # a new graph met in a light stretch: the next pass (most likely its repeat) is
        # recorded in detail, its lines and modules too
        self.next = self.detailed(number + 1, hooked) or (new_graph and not self.next)

    def settle(self) -> None:
        """Let go of the detail of each pass repeated since, as soon as its statistics are
        read (in their batch: never a read of its own) and say its .grads were finite."""
        waiting = []
        for p in self._undecided:
            finite = True if p.row is None else self.steps.finite(p.row)
            if finite is None:
                waiting.append(p)
            elif finite:
                self.let_go(p)
        self._undecided = waiting

    def shown(self, passes: list[RawPass]) -> list[RawPass]:
        """The passes whose graphs the trace shows: by default the latest pass over each
        distinct graph (a loop's last step); the one asked for (--pass N); or every one."""
        asked = self.options.graph_pass
        if asked == "all":
            return list(passes)
        if isinstance(asked, int):
            return passes[asked - 1:asked]
        return [p for p in passes if self.last_of.get(p.signature) is p]

    def fold(self, passes: list[RawPass]) -> None:
        """A loop's settled light step is kept as the step before's record when the two are
        alike (their numbers are the steps' rows): a record per pass, not a long run's ~1 KB
        a step. The latest over its graph stays its own (the trace shows its graph)."""
        if len(passes) < 3 or passes[-2] is passes[-3]:
            return
        older, step = passes[-3], passes[-2]
        if self.last_of.get(step.signature) is not step and _settled(older) \
                and _settled(step) and _alike(older) == _alike(step):
            passes[-2] = older

    def clear(self) -> None:
        self.latest_of.clear()
        self.last_of.clear()
        self._undecided.clear()


def _settled(p: RawPass) -> bool:
    """A light step with nothing of its own left: no roots, detail, error or changes."""
    return p.thinned and not (p.keep or p.roots or p.nodes or p.frozen or p.error
                              or p.grad_changes or p.pending_changes or p.carriers or p.flow
                              or p.flow_failures)


def _alike(p: RawPass) -> tuple[Any, ...]:
    """What a settled light step's record says of it."""
    return (p.kind, p.by, p.root_names, p.retain_graph, p.create_graph, p.line, p.code,
            p.signature, p.batched, p.compiled, p.error_kind)
