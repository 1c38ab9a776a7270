"""The Recorder: patches torch while a scenario runs, recording passes and Function calls."""

from __future__ import annotations

import contextlib
import functools
import importlib
import inspect
import sys
from collections.abc import Callable, Iterator, Sequence
from typing import Any, NamedTuple

import torch

from ..extract.build import RawCall, RawPass, build_trace
from ..extract.summary import summarize
from ..extract.tensors import Named
from ..extract.walk import (
    SavedCache,
    Walk,
    indexed_walk,
    readable_grad,
    release,
    saved_reader,
    saved_tensors,
)
from ..findings.registry import GRADCHECK, GRADCHECK_FAILED
from ..gcpause import gc_paused
from ..model.records import (
    Finding,
    GradChange,
    GradSummary,
    PassBy,
    PassKind,
    SavedTensor,
    SecondOrder,
    Source,
    Trace,
)
from .flow import FlowCapture
from .freed import FreedGraphs
from .higher import second_derivatives
from .inplace import changed_saved, explain
from .modules import made_since
from .names import ScenarioNames
from .roots import named_tensors


class GradBefore(NamedTuple):
    """A named tensor's .grad as a pass starts, to tell afterwards whether the pass changed it."""

    name: str
    tensor: torch.Tensor
    grad: torch.Tensor | None
    version: int | None
    summary: GradSummary | None


class PassLimit(BaseException):
    """Raised at the scenario's pass after the last one to record (--passes N): it stops the
    scenario there (not an Exception: its `except Exception` does not swallow it)."""


class Recorder:
    """Patches torch while a scenario runs, recording passes and custom Function calls."""

    def __init__(self, path: str, lines: list[str], names: ScenarioNames) -> None:
        self.path = path
        self.lines = lines
        self.names = names
        self.passes: list[RawPass] = []
        # the (name, tensor) roots of the scenario's latest pass: the default graph
        self.last_roots: list[tuple[str | None, Any]] = []
        self.calls: list[RawCall] = []
        self.saved_before: SavedCache = {}  # holds the nodes: released by release()
        self.grad_before: dict[str, GradSummary | None] | None = None
        self.order = 1  # 2: compute second derivatives of the first pass's root
        self.order_root: str | None = None  # … or of this named tensor (--root)
        self.read_saved = True
        self.capture_flow = True
        self.second_order: SecondOrder | None = None
        # the scenario's own gradcheck calls, and saved tensors changed in place
        self.findings: list[Finding] = []
        self.source_of: Callable[[Any], Source | None] = lambda node: None  # its line
        self.hooked: set[int] = set()  # ids of the nodes of tensors given a hook
        self._inplace_nodes: dict[int, Any] = {}  # checked nodes (held: their ids stay unique)
        self._inplace_told: set[tuple[str | None, int | None]] = set()  # (tensor, line)
        self.freed = FreedGraphs()
        self.last_walk: Walk | None = None  # the latest pass's walk (released by release())
        self.failed: BaseException | None = None  # the error of the pass that stopped the run
        self.recomputed: dict[int, Any] = {}  # nodes made inside torch.utils.checkpoint
        self.pass_limit: int | None = None  # stop the scenario at its pass after this many
        self.capped_at: str | None = None  # where it was stopped for that: "line 12 `…`"
        self.capped_line: int | None = None
        self._scenario_passes = 0
        self._in_pass = 0
        self._muted = 0  # inside gradcheck: its hundreds of calls are not the scenario's
        self._first_in_check = False

    @contextlib.contextmanager
    def patched(self) -> Iterator[None]:
        """Install the recording wrappers; restore torch exactly afterwards."""
        gradcheck_module = sys.modules["torch.autograd.gradcheck"]
        checkpoint_module = importlib.import_module("torch.utils.checkpoint")
        function_cls = torch.autograd.Function
        patches = [
            (checkpoint_module, "checkpoint", self._checkpointing(checkpoint_module.checkpoint)),
            (torch.Tensor, "backward", self._pass_wrapper("backward", torch.Tensor.backward)),
            (torch.autograd, "backward", self._pass_wrapper("backward", torch.autograd.backward)),
            (torch.autograd, "grad", self._pass_wrapper("grad", torch.autograd.grad)),
            (function_cls, "apply", self._apply_wrapper(function_cls.__dict__["apply"])),
            (torch.Tensor, "register_hook", self._hook_noting(torch.Tensor.register_hook)),
        ]
        owner: Any
        for owner in (torch.autograd, gradcheck_module):
            for name in ("gradcheck", "gradgradcheck"):
                patches.append((owner, name, self._checking(name, getattr(owner, name))))
        saved = [(owner, name, owner.__dict__[name]) for owner, name, _ in patches]
        for owner, name, wrapper in patches:
            setattr(owner, name, wrapper)
        try:
            yield
        finally:
            for owner, name, original in reversed(saved):
                setattr(owner, name, original)

    def _pass_wrapper(self, kind: PassKind, original: Callable[..., Any]) -> Callable[..., Any]:
        signature = inspect.signature(original)
        root_param = next(iter(signature.parameters))  # self / tensors / outputs

        @functools.wraps(original)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            if self._in_pass or self._muted:
                return original(*args, **kwargs)
            bound = signature.bind(*args, **kwargs)
            bound.apply_defaults()
            given = bound.arguments
            roots = given[root_param]
            roots = [roots] if isinstance(roots, torch.Tensor) else list(roots)
            create = bool(given.get("create_graph", False))
            retain = given.get("retain_graph")
            retain = create if retain is None else bool(retain)
            every_leaf = kind == "backward" and given.get("inputs") is None
            return self.run_pass(kind, "scenario", roots, retain, create,
                                 lambda: original(*args, **kwargs), every_leaf)

        return wrapper

    def _apply_wrapper(self, original: classmethod) -> classmethod:  # type: ignore[type-arg]
        func = original.__func__

        @functools.wraps(func)
        def apply(cls: type, *args: Any, **kwargs: Any) -> Any:
            out = func(cls, *args, **kwargs)
            if not self._muted or self._first_in_check:
                self._first_in_check = False  # the Function a gradcheck call is about
                first = out[0] if isinstance(out, (tuple, list)) and out else out
                node = first.grad_fn if isinstance(first, torch.Tensor) else None
                copies = tuple(
                    a.detach().clone() if isinstance(a, torch.Tensor) else a for a in args
                )
                self.calls.append(RawCall(cls, node, self.caller_line()[0], copies, kwargs))
            return out

        return classmethod(apply)

    def _hook_noting(self, original: Callable[..., Any]) -> Callable[..., Any]:
        """Tensor.register_hook, noting the node of every non-leaf tensor given a hook: its
        gradient may change on its way, so the flow capture never reads it off a neighbour."""

        @functools.wraps(original)
        def register_hook(tensor: torch.Tensor, hook: Callable[..., Any]) -> Any:
            if tensor.grad_fn is not None:
                # its id, not the node: holding it would keep its graph (and what it saved)
                # alive; a reused id only costs another node a hook
                self.hooked.add(id(tensor.grad_fn))
            return original(tensor, hook)

        return register_hook

    def _checkpointing(self, original: Callable[..., Any]) -> Callable[..., Any]:
        """Note the nodes a torch.utils.checkpoint call makes: backward recomputes them."""

        @functools.wraps(original)
        def checkpoint(*args: Any, **kwargs: Any) -> Any:
            start = torch._C._autograd._get_sequence_nr()
            out = original(*args, **kwargs)
            for node in made_since(out, start):
                self.recomputed.setdefault(id(node), node)  # the node keeps its id unique
            return out

        return checkpoint

    def _checking(self, kind: str, original: Callable[..., Any]) -> Callable[..., Any]:
        """Record the scenario's own gradcheck calls; mute what they do inside."""

        @functools.wraps(original)
        def checking(*args: Any, **kwargs: Any) -> Any:
            outer = not self._muted
            line = self.caller_line()[0] if outer else None
            self._first_in_check = outer
            self._muted += 1
            try:
                result = original(*args, **kwargs)
            except Exception as exc:
                if outer:
                    self.findings.append(GRADCHECK_FAILED.finding(
                        f"{kind}({_callable_name(args)}) at line {line} failed: "
                        + " ".join(str(exc).split("\n")[:3]),
                        hint="the Function's backward disagrees with finite differences: "
                        "compare the numerical and analytical values above, then fix backward",
                        line=line,
                    ))
                    self.failed = exc
                raise
            finally:
                self._muted -= 1
                self._first_in_check = False
            if outer:
                verdict = "passed" if result else "returned False"
                self.findings.append(GRADCHECK.finding(
                    f"{kind}({_callable_name(args)}) at line {line} {verdict}",
                    severity="info" if result else "error", line=line))
            return result

        return checking

    def caller_line(self) -> tuple[int | None, str | None]:
        """The scenario's line that is running now, and its text."""
        frame: Any = sys._getframe(1)
        while frame is not None and frame.f_code.co_filename != self.path:
            frame = frame.f_back
        if frame is None:
            return None, None
        lineno = frame.f_lineno
        text = self.lines[lineno - 1].strip() if 0 < lineno <= len(self.lines) else None
        return lineno, text

    def names_of(self, tensors: Sequence[Any], named: Named) -> list[str | None]:
        """The scenario name of each tensor, "x.grad" for a gradient, else None."""
        names: dict[int, str] = {}
        for name, t in named:
            names.setdefault(id(t), name)
            grad = readable_grad(t)
            if grad is not None:
                names.setdefault(id(grad), f"{name}.grad")
        return [names.get(id(t)) for t in tensors]

    @gc_paused  # the walk and the saved tensors of a big graph: 100,000s of small objects
    def run_pass(
        self, kind: PassKind, by: PassBy, roots: list[Any], retain: bool, create: bool,
        call: Callable[[], Any], every_leaf: bool = True,
    ) -> Any:
        """Run one backward/grad call, recording its roots, flags, error and .grad changes.

        every_leaf: the call runs every leaf it reaches (a backward without inputs=).
        """
        line, code = self.caller_line()
        if by == "scenario":
            if self._scenario_passes == self.pass_limit:
                self.capped_at = f"line {line} `{code}`" if line else "outside its own lines"
                self.capped_line = line
                raise PassLimit
            self._scenario_passes += 1
        root_nodes = [t.grad_fn if isinstance(t, torch.Tensor) else None for t in roots]
        self.names.look(sys._getframe(1))
        named = named_tensors(self.names.merged())
        root_names = self.names_of(roots, named)
        if by == "scenario":
            self.last_roots = [(n, t) for n, t in zip(root_names, roots, strict=True)
                               if isinstance(t, torch.Tensor)]
        grads = [(name, t, readable_grad(t)) for name, t in named]
        before = [GradBefore(name, t, g, None if g is None else g._version,
                             None if g is None else summarize(g)) for name, t, g in grads]
        if self.grad_before is None:
            self.grad_before = {b.name: b.summary for b in before}
        if self.order == 2 and self.second_order is None and roots:
            # of the root asked for (--root), once it exists; else of this pass's first root
            root, name = (roots[0], root_names[0]) if self.order_root is None else next(
                ((t, n) for n, t in named if n == self.order_root and t.grad_fn is not None),
                (None, None))
            if root is not None:
                self._muted += 1  # gradtrace's own autograd.grad calls are not passes
                try:
                    self.second_order = second_derivatives(root, name, named)
                finally:
                    self._muted -= 1
        walked = Walk(root_nodes, *indexed_walk(root_nodes))
        nodes, edges = walked.order, walked.edges
        self._snapshot_saved(nodes)
        self._check_inplace(nodes, named)  # before the pass runs: a pre-flight finding
        record = RawPass(kind, by, root_nodes, root_names, retain, create, line, code)
        self.passes.append(record)
        watched = frozenset(id(t.grad_fn) for _, t in named if t.grad_fn is not None) \
            | self.hooked
        # inside vmap/grad/jacrev the gradients are functorch wrappers without storage
        record.batched = torch._C._functorch.maybe_current_level() is not None
        capture = FlowCapture(nodes, edges, leaves_run=every_leaf, watched=watched) \
            if self.capture_flow and not record.batched else None
        self._in_pass += 1
        try:
            result = call()
        except Exception as exc:
            record.error = f"{type(exc).__name__}: {exc}"
            self.failed = exc
            if "inplace operation" in str(exc):
                self._check_inplace(nodes, named, force=True)
            elif "backward through the graph a second time" in str(exc):
                freed = self.freed.explain(nodes, len(self.passes), root_nodes, named,
                                           self.source_of)
                if freed is not None:
                    self.findings.append(freed)
            raise
        finally:
            self._in_pass -= 1
            if capture is not None:
                capture.remove()
                record.flow = capture.records
                record.flow_failures = capture.failures
            record.grad_changes = _grad_changes(before)
            if not retain and record.error is None:  # its saved tensors are gone now
                self.freed.note(nodes, len(self.passes), line, code, root_nodes)
            if self.last_walk is not None:
                release(self.last_walk.order)
            self.last_walk = walked  # the trace's walk, when it starts from the same roots
        return result

    def trace(self, scenario: str | None, named: Named, outputs: Named, reason: str,
              findings: list[Finding], modules: dict[int, str], stdout: str = "") -> Trace:
        """The Trace of what was recorded: the graph from outputs, the passes, the calls."""
        walked, self.last_walk = self.last_walk, None  # build_trace releases its nodes
        return build_trace(
            scenario=scenario, named=named, outputs=outputs, root_reason=reason,
            passes=self.passes, calls=self.calls, findings=findings,
            saved_before=self.saved_before if self.read_saved else None,
            grad_before=self.grad_before or {}, stdout=stdout, second_order=self.second_order,
            modules=modules, recomputed=self.recomputed, source_of=self.source_of,
            walked=walked)

    def release(self) -> None:
        """Drop every torch object held (the scenario's graph dies with its run)."""
        self.saved_before.clear()
        if self.last_walk is not None:
            release(self.last_walk.order)
            self.last_walk = None
        self.recomputed.clear()
        self.last_roots.clear()
        self._inplace_nodes.clear()
        self.hooked.clear()

    def _check_inplace(self, nodes: list[Any], named: Named, force: bool = False) -> None:
        """A finding for each saved tensor changed in place: read when saved tensors are read
        anyway, when a named non-leaf was changed in place, or when the pass failed so."""
        if not (force or self.read_saved or any(t._version and not t.is_leaf
                                                for _, t in named)):
            return
        changed = changed_saved(nodes, saved_reader(self.saved_before))
        # a tensor saved twice (its op's output, another op's input): one finding, the
        # "output of" one, which says where it was made
        for node, saved in sorted(changed, key=lambda c: c[1] != "result"):
            if id(node) in self._inplace_nodes:
                continue
            self._inplace_nodes[id(node)] = node
            finding = explain(node, saved, named, self.source_of)
            key = (finding.tensor, finding.line)
            if finding.tensor is None or key not in self._inplace_told:
                self._inplace_told.add(key)
                self.findings.append(finding)

    def _snapshot_saved(self, nodes: list[Any]) -> None:
        # Saved tensors are readable only until a backward frees them: read them now.
        if not self.read_saved:
            return
        seen = self.saved_before
        alike: dict[tuple[SavedTensor, ...], tuple[SavedTensor, ...]] = {}
        for node in nodes:
            if node not in seen:
                saved = saved_tensors(node)
                # one record for equal ones: a chain's nodes mostly save alike
                seen[node] = alike.setdefault(saved, saved)


def _callable_name(args: tuple[Any, ...]) -> str:
    fn = args[0] if args else None
    owner = getattr(fn, "__self__", None)
    if isinstance(owner, type):  # a Function's apply, bound to its class
        return f"{owner.__name__}.{getattr(fn, '__name__', 'apply')}"
    return getattr(fn, "__qualname__", type(fn).__name__)


def _grad_changes(before: list[GradBefore]) -> list[GradChange]:
    changes = []
    for b in before:
        new = readable_grad(b.tensor)
        if new is b.grad and (new is None or new._version == b.version):
            continue
        changes.append(GradChange(b.name, b.summary, None if new is None else summarize(new)))
    return changes
