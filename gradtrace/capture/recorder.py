"""The Recorder: what captured code did with autograd, pass by pass (its wrappers on torch
are in patches.py)."""

from __future__ import annotations

import threading
import weakref
from collections.abc import Callable, Sequence
from typing import Any

import torch

from ..compat.cpython import caller_frame
from ..compat.torch import (
    NodeKey,
    compiled_autograd_on,
    error_kind,
    inside_torch_func_transform,
    next_sequence_number,
    node_key,
    sequence_number,
    tensor_version,
)
from ..extract.build import RawCall, RawPass, build_trace
from ..extract.costs import RawCosts
from ..extract.summary import Pending, read_summaries
from ..extract.tensors import Named
from ..extract.walk import (
    SavedCache,
    Walk,
    indexed_walk,
    node_kind,
    release,
    saved_reader,
    snapshot_saved,
    structure,
    walk,
)
from ..gcpause import gc_paused
from ..model.records import LEAF, Finding, GradSummary, PassBy, PassKind, SecondOrder, Source, Trace
from .costs import CostRecorder, replay_call, replay_refusal
from .detail import DetailPlan
from .flow import FlowCapture
from .freed import FreedGraphs
from .grad_changes import changed_grads, grads_before, read_changes
from .higher import second_derivatives
from .inplace import changed_saved, inplace_finding
from .names import ScenarioNames
from .options import CaptureOptions
from .readback import Readback
from .roots import named_tensors, names_of
from .steps import StepLog
from .where import running_line


class PassLimit(BaseException):
    """Raised at the scenario's pass after the last one to record (--passes N): it stops the
    scenario there (not an Exception: its `except Exception` does not swallow it)."""


class Recorder:
    """Patches torch while a scenario runs, recording passes and custom Function calls."""

    def __init__(self, path: str, lines: list[str], names: ScenarioNames,
                 options: CaptureOptions, source_of: Callable[[Any], Source | None],
                 forget: Callable[[list[Any]], None] = lambda nodes: None) -> None:
        self.path = path
        self.lines = lines
        self.names = names
        self.options = options
        self.source_of = source_of  # the line that made a node
        self.forget = forget  # told of the nodes of a pass whose detail is let go of
        self.passes: list[RawPass] = []
        # roots of the code's latest pass (the default graph), and of the one asked for
        self.last_roots: list[tuple[str | None, Any]] = []  # the default roots, and
        self.last_roots_batched = False  # whether a torch.func pass gave them,
        self.last_roots_line: int | None = None  # at this line of the scenario
        self.asked_roots: list[tuple[str | None, Any]] = []
        self.calls: list[RawCall] = []
        self.saved_before: SavedCache = {}  # holds the nodes: released by release()
        self.grad_before: dict[str, Pending | None] | None = None  # read with the trace
        self.second_order: SecondOrder | None = None
        # the code's own gradcheck calls, and saved tensors changed in place
        self.findings: list[Finding] = []
        self.hooked: set[NodeKey] = set()  # the nodes of tensors given a hook (node_key)
        # the inputs of torch.autograd.functional calls, while they live
        self.handed: weakref.WeakValueDictionary[int, Any] = weakref.WeakValueDictionary()
        # a node with a module's (non-full) backward hook -> what it sent before the hook
        self.unhooked: dict[int, tuple[Any, ...]] = {}
        self._inplace_nodes: dict[int, Any] = {}  # checked nodes (held: their ids stay unique)
        self._inplace_told: set[tuple[str | None, int | None]] = set()  # (tensor, line)
        self.freed = FreedGraphs()
        self.last_walk: Walk | None = None  # the latest pass's walk (released by release())
        self.failed: BaseException | None = None  # the error of the pass that stopped the run
        self.recomputed: dict[int, Any] = {}  # nodes made inside torch.utils.checkpoint
        self.capped_at: str | None = None  # where the pass limit stopped it: "line 12 `…`"
        self.capped_line: int | None = None
        self.spawned: list[str] = []  # "line 12 `mp.spawn(…)` started 2 processes"
        self.readback = Readback()
        self.steps = StepLog(self.readback)
        self.plan = DetailPlan(options, self.steps, self.readback, self._let_go)
        # told after each pass whether the next is in detail: its forward's lines and modules
        self.detail: Callable[[bool], None] = lambda on: None
        # the leaves the latest full naming found (a light step names no more than these)
        self._leaf_names: list[tuple[str, weakref.ref[torch.Tensor]]] | None = None
        # the sequence numbers of nodes made while create_graph passes ran: [start, end)
        self.grad_graph_spans: list[tuple[int, int]] = []
        self.scenario_passes = 0
        # the thread whose pass is being recorded (backward calls within are not passes);
        # other threads' passes wait for it to end, each recorded whole
        self.recording: int | None = None
        self.one_pass_at_a_time = threading.Lock()
        self._forward: dict[int, float] = {}  # --profile: module forward times of the pass
        self.muted = 0  # inside gradcheck: its hundreds of calls are not the code's
        self.first_in_check = False  # the next Function call is the one gradcheck checks
        # --profile's timings (None: not profiling); torch.autograd.grad as torch has it
        self.costs = CostRecorder(options.graph_pass if isinstance(options.graph_pass, int)
                                  else None) if options.profile else None
        self.original_grad: Callable[..., Any] = torch.autograd.grad

    def caller_line(self) -> tuple[int | None, str | None]:
        """The scenario's line that is running now, and its text."""
        return running_line(self.path, self.lines)

    @gc_paused  # the walk and the saved tensors of a big graph: 100,000s of small objects
    def run_pass(
        self, kind: PassKind, by: PassBy, roots: list[Any], retain: bool, create: bool,
        call: Callable[[], Any], every_leaf: bool = True, batched: bool = False,
        given: dict[str, Any] | None = None,
    ) -> Any:
        """Run one backward/grad call, recording its roots, flags, error and .grad changes.

        every_leaf: the call runs every leaf it reaches (a backward without inputs=).
        batched: its gradients are batched (autograd.grad's is_grads_batched=True).
        given: the call's arguments by name (--profile replays the pass from them).
        """
        line, code = self.caller_line()
        if by == "scenario":
            if self.scenario_passes == self.options.pass_limit:
                self.capped_at = f"line {line} `{code}`" if line else "outside its own lines"
                self.capped_line = line
                raise PassLimit
            self.scenario_passes += 1
        root_nodes = [t.grad_fn if isinstance(t, torch.Tensor) else None for t in roots]
        # inside vmap/grad/jacrev the gradients are functorch wrappers without storage: such
        # a pass is no step of a loop over an eager graph of the same ops, and its roots (the
        # transform's own graph) are the default ones only while no eager pass ran
        batched = batched or inside_torch_func_transform()
        walked = Walk(root_nodes, *indexed_walk(root_nodes))
        nodes, edges = walked.order, walked.edges
        signature = structure(nodes, edges)
        signature = hash((signature, batched)) if batched else signature
        number = len(self.passes) + 1
        new_graph = self.plan.new_graph(signature)
        detailed = self.plan.next or self.plan.asked_for(number) or bool(self.hooked) \
            or new_graph
        self.names.look(caller_frame())
        named = None if detailed or self.second_order is None \
            and self.options.derivative_order == 2 else self._light_named(nodes)
        leaves_only = named is not None
        if named is None:
            merged = self.names.merged()
            named = named_tensors(merged)
            self.names.remember(named, merged, line)
            self._leaf_names = [(n, weakref.ref(t)) for n, t in named
                                if t.is_leaf and t.requires_grad]
            root_names = names_of(roots, named)
        else:  # a loop's light step over the leaves named before: its roots by a quick look
            root_names = [self.names.name_of(t) for t in roots]
        if by == "scenario":
            here = [(n, t) for n, t in zip(root_names, roots, strict=True)
                    if isinstance(t, torch.Tensor)]
            if not batched or self.last_roots_batched or not self.last_roots:
                self.last_roots, self.last_roots_batched = here, batched
                self.last_roots_line = line
            if self.options.graph_pass == number:
                self.asked_roots = here
        if self.options.derivative_order == 2 and self.second_order is None and roots:
            # of the root asked for (--root), once it exists; else of this pass's first root
            asked = self.options.roots[0] if self.options.roots else None
            root, name = (roots[0], root_names[0]) if asked is None else next(
                ((t, n) for n, t in named if n == asked and t.grad_fn is not None),
                (None, None))
            if root is not None:
                self.muted += 1  # gradtrace's own autograd.grad calls are not passes
                try:
                    self.second_order = second_derivatives(root, name, named)
                finally:
                    self.muted -= 1
        record = RawPass(kind, by, root_nodes, root_names, retain, create, line, code,
                         signature=signature, nodes=list(nodes), batched=batched)
        before = grads_before(named) if detailed else []  # a light step keeps no changes
        if self.grad_before is None:  # the first pass's (read with the trace)
            self.grad_before = {b.name: b.summary for b in before}
        if detailed:
            self.plan.began(record)
        if self.options.saved and detailed:
            snapshot_saved(self.saved_before, nodes)
        if not leaves_only:  # (a leaf changed in place fails autograd itself)
            self._check_inplace(nodes, named, detailed=detailed)  # before the pass: pre-flight
        self.passes.append(record)
        leaves = self.steps.leaves_of(named)
        untouched = self.steps.untouched(leaves)
        record.compiled = compiled_autograd_on()
        # batched gradients have no storage; compiled autograd would compile gradtrace's hooks
        unhookable = record.batched or record.compiled
        timing = self._timing(record, kind, roots, create, given) \
            if self.costs is not None and not unhookable else None
        capture = None
        if self.options.flow and detailed and not unhookable and timing != "step":
            watched = frozenset(id(t.grad_fn) for _, t in named if t.grad_fn is not None) \
                | self._hooked_in(nodes)
            capture = FlowCapture(nodes, edges, every_leaf, watched, self.unhooked)
        self.recording = threading.get_ident()
        start = next_sequence_number() if create else 0
        try:
            if timing is None or self.costs is None:
                result = call()
            else:
                result = self.costs.timed(record.signature, len(self.passes), nodes, call,
                                          self.costs.cuda, self._forward, timing == "step")
        except Exception as exc:
            record.error = f"{type(exc).__name__}: {exc}"
            self.failed = exc
            record.error_kind = error_kind(exc)
            if not detailed:  # the findings name what they can
                named = named_tensors(self.names.merged())
            if record.error_kind == "inplace":
                self._check_inplace(nodes, named, force=True)
            elif record.error_kind == "graph-freed":
                freed = self.freed.finding(nodes, len(self.passes), root_nodes, named,
                                           self.source_of)
                if freed is not None:
                    self.findings.append(freed)
            raise
        finally:
            self.recording = None
            if create:
                self.grad_graph_spans.append((start, next_sequence_number()))
            if capture is not None:
                capture.remove()
                record.flow = capture.records
                record.flow_failures = capture.failures
            changed = changed_grads(before) if detailed else []
            # inside torch.func transforms the root is a batched wrapper: no loss read
            record.row = len(self.steps.rows)
            self.steps.add(leaves, untouched, () if record.batched else roots)
            record.keep = number == 1 or record.error is not None \
                or self.plan.asked_for(number) or bool(self.hooked)
            if detailed:  # read with the trace, if it is shown then
                record.pending_changes = changed
            else:  # a loop's light step: its statistics (and its roots, while it is the
                # latest pass over its graph: the trace's graph, if it is the last) are all
                # it keeps
                record.nodes, record.thinned = [], True
            if not retain and record.error is None:  # its saved tensors are gone now
                self.freed.note(nodes, number, line, code, root_nodes)
            if self.last_walk is not None:
                release(self.last_walk.order)
            self.last_walk = walked  # the trace's walk, when it starts from the same roots
            self.plan.ended(record, number, new_graph, bool(self.hooked))
        return result

    def _light_named(self, nodes: list[Any]) -> Named | None:
        """The leaves the latest full naming named, when they live and every leaf this pass
        reaches is one of them (None: name everything again: a model built anew)."""
        if self._leaf_names is None:
            return None
        named = [(name, ref()) for name, ref in self._leaf_names]
        known = {id(t) for _, t in named if t is not None}
        if len(known) != len(named):
            return None
        for node in nodes:
            if node_kind(node) == LEAF and id(node.variable) not in known:
                return None
        return named  # type: ignore[return-value]  # each one lives: checked above

    def _timing(self, record: RawPass, kind: PassKind, roots: list[Any], create: bool,
                given: dict[str, Any] | None) -> str | None:
        """--profile: time this pass by replays now (None after them: the call runs as it
        is), or time the call itself: "step" (a loop's repeat, without gradtrace's flow
        hooks) or "once" (it could not be replayed)."""
        costs = self.costs
        assert costs is not None
        number, nodes = len(self.passes), record.nodes
        self._forward = costs.clock.take()  # the forward that built this pass's graph
        if any(isinstance(t, torch.Tensor) and t.is_cuda for t in roots):
            costs.cuda = True
        if costs.step_sample(record.signature, number):
            return "step"
        if not costs.wanted(record.signature, number):
            return None
        refusal = replay_refusal(nodes, kind, create, record.batched, self.hooked,
                                 costs.retaining, self.recomputed, given)
        replay = None if refusal is not None or given is None else \
            replay_call(kind, given, roots, nodes, self.original_grad)
        self.muted += 1  # the replays are gradtrace's, not passes
        try:
            replayed = costs.replay(record.signature, number, nodes, replay, refusal,
                                    costs.cuda, self._forward)
        finally:
            self.muted -= 1
        return None if replayed else "once"

    def _let_go(self, p: RawPass) -> None:
        for node in p.nodes:
            self.saved_before.pop(node, None)
        self.forget(p.nodes)
        release(p.nodes)
        p.roots, p.flow, p.grad_changes, p.pending_changes = [], {}, [], []
        p.thinned = True

    def _read_pending(self) -> dict[str, GradSummary | None]:
        """Read what passes in detail summarised as they ran: .grad changes, and the .grads
        before the first pass (returned)."""
        self.readback.read()
        self.plan.settle()
        for p in self.passes:
            if p.pending_changes:
                p.grad_changes, p.pending_changes = read_changes(p.pending_changes), []
        before = self.grad_before or {}
        read = iter(read_summaries([s for s in before.values() if s is not None]))
        return {name: None if s is None else next(read) for name, s in before.items()}

    def trace(self, scenario: str | None, named: Named, outputs: Named, reason: str,
              findings: list[Finding], modules: dict[int, str], stdout: str = "",
              hooks: dict[int, tuple[str, ...]] | None = None,
              earlier: Sequence[tuple[str, Any]] = (),
              reduced: dict[str, tuple[int, bool]] | None = None,
              module_objects: dict[int, str] | None = None) -> Trace:
        """The Trace of what was recorded: the graph from outputs, the passes, the calls
        (earlier: leaves named in passes under names bound again since; reduced: DDP's)."""
        walked, self.last_walk = self.last_walk, None  # build_trace releases its nodes
        grad_before = self._read_pending()
        shown = self.plan.shown(self.passes)
        twins = self._twins(shown)
        if twins:  # graphs made in a light stretch: their lines and modules are their twins'
            modules = {**{key: modules[id(t)] for key, t in twins.items() if id(t) in modules},
                       **modules}

        def source_of(node: Any) -> Source | None:
            twin = twins.get(id(node))
            return self.source_of(node) or (None if twin is None else self.source_of(twin))

        return build_trace(
            scenario=scenario, named=named, earlier=earlier, outputs=outputs,
            root_reason=reason,
            passes=self.passes, calls=self.calls, findings=findings,
            saved_before=self.saved_before if self.options.saved else None,
            grad_before=grad_before, stdout=stdout, second_order=self.second_order,
            modules=modules, recomputed=self.recomputed, source_of=source_of, hooks=hooks,
            walked=walked, graph_passes=shown,
            grad_graph=self._in_grad_graph if self.grad_graph_spans else None,
            steps=self.steps.steps(modules), updated=self.steps.changed(named),
            handed=frozenset(n for n, t in named if self.handed.get(id(t)) is t),
            reduced=reduced or {}, costs=self._raw_costs(module_objects or {}))

    def _twins(self, shown: list[RawPass]) -> dict[int, Any]:
        """id(node) -> its twin, for the nodes of each shown graph a light pass ran over: the
        i-th node of the latest pass in detail over a graph alike, whose lines and modules
        were noted (a light step's forward runs without the line log and tracker)."""
        twins: dict[int, Any] = {}
        for p in shown:
            twin = self.plan.latest_of.get(p.signature) if p.thinned and p.roots else None
            if twin is None or not twin.nodes:
                continue
            order = walk(p.roots)[0]  # its nodes live while p holds its roots
            if len(order) == len(twin.nodes):
                twins.update((id(node), same) for node, same in zip(order, twin.nodes,
                                                                    strict=True))
            release(order)
        return twins

    def _raw_costs(self, paths: dict[int, str]) -> RawCosts | None:
        """--profile's samples for the pass asked for (--pass N), else the last pass."""
        if self.costs is None or not self.passes:
            return None
        asked = self.options.graph_pass
        number = asked if isinstance(asked, int) and asked <= len(self.passes) \
            else len(self.passes)
        chosen = self.passes[number - 1]
        if not chosen.nodes:
            return None
        raw = self.costs.raw(chosen.signature, chosen.nodes, chosen.retain_graph, paths)
        if raw is not None:
            raw.pass_number = number
        return raw

    def _in_grad_graph(self, node: Any) -> bool:
        """Whether node was made while a create_graph pass ran: part of a gradient's graph."""
        number = sequence_number(node)
        return any(start <= number < end for start, end in self.grad_graph_spans)

    def release(self) -> None:
        """Drop every torch object held (the scenario's graph dies with its run)."""
        self.saved_before.clear()
        if self.last_walk is not None:
            release(self.last_walk.order)
            self.last_walk = None
        for p in self.passes:  # root first, as release() frees: a deep graph dies node by node
            release(p.nodes)
        self.plan.clear()
        self.recomputed.clear()
        self.last_roots.clear()
        self.asked_roots.clear()
        self._inplace_nodes.clear()
        self.hooked.clear()
        self.unhooked.clear()

    def _hooked_in(self, nodes: list[Any]) -> frozenset[int]:
        """The ids of the nodes of this walk that have a hook of the code's (ids are stable
        while the walk holds the nodes)."""
        if not self.hooked:
            return frozenset()
        return frozenset(id(n) for n in nodes if node_key(n) in self.hooked)

    def check_inplace_from(self, roots: list[Any], named: Named) -> None:
        """A finding for each saved tensor changed in place in the graph behind roots."""
        order = walk([t.grad_fn for t in roots if isinstance(t, torch.Tensor)])[0]
        self._check_inplace(order, named, force=True)
        release(order)

    def _check_inplace(self, nodes: list[Any], named: Named, force: bool = False,
                       detailed: bool = True) -> None:
        """A finding for each saved tensor changed in place: read when saved tensors are read
        anyway (a pass in detail), when a named non-leaf was changed in place, or when the
        pass failed so."""
        if not (force or (self.options.saved and detailed)
                or any(tensor_version(t) and not t.is_leaf for _, t in named)):
            return
        changed = changed_saved(nodes, saved_reader(self.saved_before))
        # a tensor saved twice (its op's output, another op's input): one finding, the
        # "output of" one, which says where it was made
        for node, saved in sorted(changed, key=lambda c: c[1] != "result"):
            if id(node) in self._inplace_nodes:
                continue
            self._inplace_nodes[id(node)] = node
            finding = inplace_finding(node, saved, named, self.source_of)
            key = (finding.tensor, finding.line)
            if finding.tensor is None or key not in self._inplace_told:
                self._inplace_told.add(key)
                self.findings.append(finding)
