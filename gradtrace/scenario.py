"""Run a scenario file and record what it does to autograd: passes, Function calls, output."""

from __future__ import annotations

import ast
import contextlib
import functools
import inspect
import io
import sys
import threading
import traceback
import warnings
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import torch

from .errors import ScenarioError
from .extract import (
    Named,
    RawCall,
    RawPass,
    build_trace,
    readable_grad,
    release,
    saved_tensors,
    walk,
)
from .flow import FlowCapture
from .higher import second_derivatives
from .model import Finding, GradChange, GradSummary, SecondOrder, Trace
from .modules import ModuleTracker, module_paths
from .summary import summarize

# Deep graphs are freed recursively by torch; a big stack keeps a 100,000-node graph alive
# through teardown. Only touched pages are committed, so this costs no memory up front.
STACK_SIZE = 1 << 30
_RUN_LOCK = threading.Lock()  # the recorder patches torch globally: one run at a time


def run_scenario(
    path: str | Path, outputs: Sequence[str] = (), backward: bool = True, order: int = 1,
    saved: bool = True, flow: bool = True,
    with_calls: Callable[[list[RawCall]], None] | None = None,
) -> Trace:
    """Run the scenario at path and return its Trace.

    outputs names the roots (else OUTPUT, else the last named tensor with a grad_fn);
    backward=False skips gradtrace's own backward when the scenario runs none;
    order=2 also computes second derivatives of the first backward's (scalar) root;
    saved=False does not read saved tensors, flow=False records no gradient flow (faster,
    for pictures that do not show them). with_calls, if given, is called with the recorded
    Function calls while the scenario's module is still alive (its Functions can run again).
    """
    path = str(path)
    code, lines = _compile(path)
    with _RUN_LOCK:
        return _in_big_stack(
            lambda: _run(path, code, lines, list(outputs), backward, order, saved, flow,
                         with_calls))


def trace_tensors(outputs: list[Any], names: dict[str, Any], backward: bool,
                  saved: bool = True) -> Trace:
    """The Trace of the graph behind live output tensors, labelled from names."""
    for t in outputs:
        if not isinstance(t, torch.Tensor) or t.grad_fn is None:
            raise ScenarioError("gradtrace.trace() takes tensors that have a grad_fn "
                                f"(got {type(t).__name__}"
                                f"{'' if not isinstance(t, torch.Tensor) else ' without one'})",
                                "pass the output of a computation on tensors that require grad")
    # No big-stack thread here: the caller holds the graph, so nothing gradtrace drops can
    # free a deep chain (and release() drops node references root first).
    return _trace_live(outputs, names, backward, saved)


def _trace_live(outputs: list[Any], names: dict[str, Any], backward: bool,
                saved: bool) -> Trace:
    named = named_tensors(names)
    name_of = {id(t): n for n, t in reversed(named)}
    picked = [(name_of.get(id(t), f"output{i}"), t) for i, t in enumerate(outputs)]
    recorder = Recorder("<python>", [], dict(names))
    recorder.read_saved = saved
    if backward:
        _own_backward(recorder, [t for _, t in picked], [])
    return build_trace(
        scenario=None, named=named, outputs=picked, root_reason="passed to gradtrace.trace()",
        passes=recorder.passes, calls=[], findings=pass_findings(recorder.passes),
        saved_before=recorder.saved_before if saved else None,
        grad_before=recorder.grad_before or {},
        modules=module_paths(names, None),
    )


def _compile(path: str) -> tuple[Any, list[str]]:
    p = Path(path)
    if not p.exists():
        raise ScenarioError(f"no such file: {path}", "check the path; scenarios are .py files")
    if p.is_dir():
        raise ScenarioError(f"{path} is a directory, not a scenario file",
                            "pass a .py file, e.g. scenarios/chain_rule.py")
    if p.suffix != ".py":
        raise ScenarioError(
            f"{path} is not a Python file (expected a .py scenario)",
            "a scenario is ordinary Python code that builds tensors; name it *.py",
        )
    try:
        source = p.read_text(encoding="utf-8")
    except UnicodeDecodeError as exc:
        raise ScenarioError(f"{path} is not UTF-8 text: {exc.reason}",
                            "save the scenario as UTF-8") from exc
    except OSError as exc:
        raise ScenarioError(f"cannot read {path}: {exc.strerror}") from exc
    try:
        code = compile(source, path, "exec")
    except SyntaxError as exc:
        where = f"{path}:{exc.lineno}" + (f":{exc.offset}" if exc.offset else "")
        text = (exc.text or "").rstrip("\n")
        shown = f"\n    {text.strip()}" if text.strip() else ""
        raise ScenarioError(
            f"{where}: syntax error: {exc.msg}{shown}",
            f"fix the line; `python {path}` shows the same error",
        ) from exc
    except ValueError as exc:  # e.g. source code with NUL bytes
        raise ScenarioError(f"{path} cannot be compiled: {exc}") from exc
    return code, source.splitlines()


def _in_big_stack(work: Callable[[], Trace]) -> Trace:
    result: list[Trace] = []
    error: list[BaseException] = []

    def target() -> None:
        try:
            result.append(work())
        except BaseException as exc:  # handed to the caller's thread, re-raised there
            error.append(exc)

    old = threading.stack_size(STACK_SIZE)
    try:
        # daemon: Ctrl-C in the main thread ends gradtrace even while a scenario still runs
        thread = threading.Thread(target=target, name="gradtrace-scenario", daemon=True)
        thread.start()
    finally:
        threading.stack_size(old)
    thread.join()
    if error:
        raise error[0]
    return result[0]


def named_tensors(namespace: dict[str, Any]) -> Named:
    """Module-level tensors in binding order, then nn.Module parameters under dotted names."""
    out: Named = []
    for name, value in list(namespace.items()):
        if name.startswith("__"):
            continue
        if isinstance(value, torch.Tensor):
            out.append((name, value))
        elif isinstance(value, torch.nn.Module):
            out.extend((f"{name}.{p}", t) for p, t in value.named_parameters())
    return out


class Recorder:
    """Patches torch while a scenario runs, recording passes and custom Function calls."""

    def __init__(self, path: str, lines: list[str], namespace: dict[str, Any]) -> None:
        self.path = path
        self.lines = lines
        self.namespace = namespace
        self.passes: list[RawPass] = []
        self.calls: list[RawCall] = []
        self.saved_before: dict[int, tuple[Any, Any]] = {}
        self.grad_before: dict[str, GradSummary | None] | None = None
        self.order = 1  # 2: compute second derivatives of the first pass's root
        self.read_saved = True
        self.capture_flow = True
        self.second_order: SecondOrder | None = None
        self.checks: list[Finding] = []  # the scenario's own gradcheck/gradgradcheck calls
        self.failed: BaseException | None = None  # the error of the pass that stopped the run
        self._in_pass = 0
        self._muted = 0  # inside gradcheck: its hundreds of calls are not the scenario's
        self._first_in_check = False

    @contextlib.contextmanager
    def patched(self) -> Iterator[None]:
        """Install the recording wrappers; restore torch exactly afterwards."""
        gradcheck_module = sys.modules["torch.autograd.gradcheck"]
        function_cls = torch.autograd.Function
        patches = [
            (torch.Tensor, "backward", self._pass_wrapper("backward", torch.Tensor.backward)),
            (torch.autograd, "backward", self._pass_wrapper("backward", torch.autograd.backward)),
            (torch.autograd, "grad", self._pass_wrapper("grad", torch.autograd.grad)),
            (function_cls, "apply", self._apply_wrapper(function_cls.__dict__["apply"])),
        ]
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

    def _pass_wrapper(self, kind: str, original: Callable[..., Any]) -> Callable[..., Any]:
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
                    self.checks.append(Finding(
                        "gradcheck-failed", "error",
                        f"{kind}({_callable_name(args)}) at line {line} failed: "
                        + " ".join(str(exc).split("\n")[:3]),
                        hint="the Function's backward disagrees with finite differences: "
                        "compare the numerical and analytical values above, then fix backward",
                    ))
                    self.failed = exc
                raise
            finally:
                self._muted -= 1
                self._first_in_check = False
            if outer:
                verdict = "passed" if result else "returned False"
                self.checks.append(Finding(
                    "gradcheck", "info" if result else "error",
                    f"{kind}({_callable_name(args)}) at line {line} {verdict}"))
            return result

        return checking

    def caller_line(self) -> tuple[int | None, str | None]:
        """The scenario's line that is running now, and its text."""
        frame = sys._getframe(1)
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

    def run_pass(
        self, kind: str, by: str, roots: list[Any], retain: bool, create: bool,
        call: Callable[[], Any], every_leaf: bool = True,
    ) -> Any:
        """Run one backward/grad call, recording its roots, flags, error and .grad changes.

        every_leaf: the call runs every leaf it reaches (a backward without inputs=).
        """
        line, code = self.caller_line()
        root_nodes = [t.grad_fn if isinstance(t, torch.Tensor) else None for t in roots]
        named = named_tensors(self.namespace)
        root_names = self.names_of(roots, named)
        grads = [(name, t, readable_grad(t)) for name, t in named]
        before = [(name, t, g, None if g is None else g._version,
                   None if g is None else summarize(g)) for name, t, g in grads]
        if self.grad_before is None:
            self.grad_before = {name: summary for name, _, _, _, summary in before}
        if self.order == 2 and self.second_order is None and roots:
            self._muted += 1  # gradtrace's own autograd.grad calls are not passes
            try:
                self.second_order = second_derivatives(roots[0], root_names[0], named)
            finally:
                self._muted -= 1
        nodes, edges = walk(root_nodes)
        self._snapshot_saved(nodes)
        record = RawPass(kind, by, root_nodes, root_names, retain, create, line, code)
        self.passes.append(record)
        watched = frozenset(id(t.grad_fn) for _, t in named if t.grad_fn is not None)
        capture = FlowCapture(nodes, edges, leaves_run=every_leaf, watched=watched) \
            if self.capture_flow else None
        self._in_pass += 1
        try:
            return call()
        except Exception as exc:
            record.error = f"{type(exc).__name__}: {exc}"
            self.failed = exc
            raise
        finally:
            self._in_pass -= 1
            if capture is not None:
                capture.remove()
                record.flow = capture.records
                record.flow_failures = capture.failures
            record.grad_changes = _grad_changes(before)
            release(nodes)

    def _snapshot_saved(self, nodes: list[Any]) -> None:
        # Saved tensors are readable only until a backward frees them: read them now.
        if not self.read_saved:
            return
        for node in nodes:
            if id(node) not in self.saved_before:
                self.saved_before[id(node)] = (node, saved_tensors(node))


def _callable_name(args: tuple[Any, ...]) -> str:
    fn = args[0] if args else None
    owner = getattr(fn, "__self__", None)
    if isinstance(owner, type):  # a Function's apply, bound to its class
        return f"{owner.__name__}.{getattr(fn, '__name__', 'apply')}"
    return getattr(fn, "__qualname__", type(fn).__name__)


def _grad_changes(before: list[tuple[str, Any, Any, int | None, Any]]) -> list[GradChange]:
    changes = []
    for name, t, old, version, summary in before:
        new = readable_grad(t)
        if new is old and (new is None or new._version == version):
            continue
        changes.append(GradChange(name, summary, None if new is None else summarize(new)))
    return changes


def _run(path: str, code: Any, lines: list[str], requested: list[str], backward: bool,
         order: int, saved: bool, flow: bool,
         with_calls: Callable[[list[RawCall]], None] | None = None) -> Trace:
    namespace: dict[str, Any] = {
        "__name__": "__main__", "__file__": path, "__builtins__": __builtins__,
    }
    recorder = Recorder(path, lines, namespace)
    recorder.order = order
    recorder.read_saved = saved
    recorder.capture_flow = flow
    tracker = ModuleTracker()
    output = io.StringIO()
    findings: list[Finding] = []
    try:
        with _scenario_process_state(path, output), recorder.patched(), tracker.tracking():
            try:
                exec(code, namespace)
            except SystemExit as exc:
                if exc.code not in (None, 0):
                    raise ScenarioError(
                        f"{path}: the scenario called sys.exit({exc.code!r})") from exc
            except Exception as exc:
                if exc is not recorder.failed:
                    raise _scenario_error(path, lines, exc) from exc
        named = named_tensors(namespace)
        if not named:
            raise ScenarioError(
                f"{path} binds no tensors at module level",
                "assign the tensors you want to see to module-level names, "
                "e.g. `x = torch.tensor(5.0, requires_grad=True)`",
            )
        outputs, reason = choose_outputs(path, namespace, named, requested)
        if not outputs:
            why = why_no_root(named, lines)
            if recorder.passes:
                findings.append(Finding("no-graph", "warning", f"no autograd graph: {why}"))
            elif recorder.calls or recorder.checks:
                findings.append(Finding(
                    "no-graph", "info",
                    "no named tensor has a grad_fn, so there is no graph to show; "
                    "the scenario's gradcheck and Function calls are reported instead"))
            else:
                raise ScenarioError(
                    f"{path}: no output to trace: {why}",
                    "an output is a tensor with a grad_fn; see `gradtrace show --help`")
        if outputs and backward and not recorder.passes:
            _own_backward(recorder, [t for _, t in outputs], lines)
        if order == 2 and recorder.second_order is None and outputs:
            recorder.second_order = second_derivatives(outputs[0][1], outputs[0][0], named)
        findings.extend(recorder.checks)
        findings.extend(pass_findings(recorder.passes))
        if with_calls is not None:
            with_calls(recorder.calls)
        return build_trace(
            scenario=path,
            named=named,
            outputs=outputs,
            root_reason=reason,
            passes=recorder.passes,
            calls=recorder.calls,
            findings=findings,
            saved_before=recorder.saved_before if saved else None,
            grad_before=recorder.grad_before or {},
            stdout=output.getvalue(),
            second_order=recorder.second_order,
            modules=module_paths(namespace, tracker),
        )
    finally:
        # Drop the scenario's objects here, in the big-stack thread, not in the caller's.
        recorder.saved_before.clear()
        tracker.owner.clear()
        namespace.clear()


@contextlib.contextmanager
def _scenario_process_state(path: str, output: io.StringIO) -> Iterator[None]:
    """Run as `python path` would: its folder on sys.path, argv, and its output captured."""
    saved = (sys.argv, list(sys.path), sys.stdin)
    sys.argv = [path]
    sys.path.insert(0, str(Path(path).resolve().parent))
    sys.stdin = io.StringIO()
    try:
        with contextlib.redirect_stdout(output), contextlib.redirect_stderr(output), \
                warnings.catch_warnings():
            # Warnings are part of what the scenario prints, whoever else listens for them.
            warnings.simplefilter("default")
            warnings.showwarning = _warning_to(output)
            yield
    finally:
        sys.argv, sys.path[:], sys.stdin = saved[0], saved[1], saved[2]


def _warning_to(output: io.StringIO) -> Callable[..., None]:
    def show(message: Any, category: Any, filename: str, lineno: int, file: Any = None,
             line: str | None = None) -> None:
        output.write(warnings.formatwarning(message, category, filename, lineno, line))

    return show


def _own_backward(recorder: Recorder, roots: list[torch.Tensor], lines: list[str]) -> None:
    roots = list({id(t): t for t in roots}.values())
    grads = [None if t.numel() == 1 else torch.ones_like(t) for t in roots]
    try:
        recorder.run_pass("backward", "gradtrace", roots, False, False,
                          lambda: torch.autograd.backward(roots, grads))
    except Exception as exc:  # recorded as the pass's error; where in the scenario, if it was
        where = _scenario_frame(recorder.path, exc)
        if where is not None:
            recorder.passes[-1].error += f" (at {recorder.path}:{where})"


def choose_outputs(
    path: str, namespace: dict[str, Any], named: Named, requested: list[str]
) -> tuple[Named, str]:
    """The roots: --output names, else OUTPUT, else the last named tensor with a grad_fn."""
    by_name = dict(named)
    name_of = {}
    for name, t in named:
        name_of.setdefault(id(t), name)

    def lookup(name: str, source: str) -> tuple[str, torch.Tensor]:
        base = name.removesuffix(".grad")
        if name != base and base in by_name:  # the gradient of a named tensor, e.g. x.grad
            gradient = readable_grad(by_name[base])
            if gradient is None:
                raise ScenarioError(f"{source} names {name!r}, but {base} has no .grad",
                                    "a .grad exists after a backward pass reaches the tensor")
            return name, gradient
        if name not in by_name:
            raise ScenarioError(
                f"{source} names {name!r}, but {path} has no tensor of that name",
                "named tensors: " + ", ".join(by_name) + " (and NAME.grad for their gradients)",
            )
        return name, by_name[name]

    if requested:
        picked = [lookup(n, "--output") for n in requested]
        reason = "chosen with --output"
    elif "OUTPUT" in namespace:
        value = namespace["OUTPUT"]
        items = value if isinstance(value, (list, tuple)) else [value]
        picked = []
        for item in items:
            if isinstance(item, str):
                picked.append(lookup(item, "OUTPUT"))
            elif isinstance(item, torch.Tensor):
                picked.append((name_of.get(id(item), "OUTPUT"), item))
            else:
                raise ScenarioError(
                    f"{path}: OUTPUT must be a tensor, a tensor's name, or a list of them, "
                    f"not {type(item).__name__}",
                )
        reason = "the scenario's OUTPUT"
    else:
        candidates = [(n, t) for n, t in named if t.grad_fn is not None]
        return candidates[-1:], "the last named tensor with a grad_fn"
    for name, t in picked:
        if t.grad_fn is None:
            raise ScenarioError(
                f"output {name!r} has no grad_fn, so there is no graph to walk from it: "
                + _why_no_grad_fn(t),
                "choose a tensor computed from inputs that require grad",
            )
    return picked, reason


def _why_no_grad_fn(t: torch.Tensor) -> str:
    if t.requires_grad:
        return "it is a leaf (created by you, not computed)"
    return "it does not require grad"


_GRAD_CUTTERS = {
    "no_grad": "torch.no_grad()",
    "inference_mode": "torch.inference_mode()",
    "set_grad_enabled": "torch.set_grad_enabled()",
    "detach": ".detach()",
}


def why_no_root(named: Named, lines: list[str]) -> str:
    """Why no named tensor has a grad_fn, in words a learner can act on."""
    wanting = [n for n, t in named if t.requires_grad]
    if not wanting:
        return ("no tensor requires grad; create the inputs with requires_grad=True, "
                "e.g. torch.tensor(5.0, requires_grad=True)")
    calls: dict[str, list[str]] = {}
    with contextlib.suppress(SyntaxError):  # it compiled once; parse it to find the cutters
        for node in ast.walk(ast.parse("\n".join(lines))):
            if isinstance(node, ast.Call) and isinstance(node.func, (ast.Attribute, ast.Name)):
                called = getattr(node.func, "attr", None) or getattr(node.func, "id", "")
                if called in _GRAD_CUTTERS:
                    calls.setdefault(_GRAD_CUTTERS[called], []).append(str(node.lineno))
    causes = [f"{what} on line {', '.join(sorted(set(at), key=int))}"
              for what, at in calls.items()]
    told = f" ({'; '.join(causes)})" if causes else ""
    return (f"{', '.join(wanting)} require grad, but nothing was computed from them with "
            f"gradients enabled: the computation ran under torch.no_grad() or was detached{told}")


_PASS_HINTS = (
    ("backward through the graph a second time",
     "the first backward() freed the graph's saved tensors; pass retain_graph=True to every "
     "backward() but the last"),
    ("does not require grad and does not have a grad_fn",
     "the root is not part of any graph: it was computed under torch.no_grad(), from "
     ".detach()ed tensors, or from tensors without requires_grad=True"),
    ("grad can be implicitly created only for scalar outputs",
     "backward() of a non-scalar needs a gradient: pass gradient=torch.ones_like(t), "
     "or reduce it first (t.sum())"),
    ("modified by an inplace operation",
     "a tensor saved for backward was changed in place; use the out-of-place op "
     "(x = x + 1, not x += 1) or clone() it first"),
)


def pass_findings(passes: Sequence[RawPass]) -> list[Finding]:
    """A finding for every pass that raised, with a hint for the errors learners meet, and
    for every pass whose gradient flow gradtrace could not fully record."""
    findings = []
    for i, p in enumerate(passes, 1):
        if p.flow_failures:
            findings.append(Finding(
                "flow-not-recorded", "warning",
                f"pass {i}: gradtrace could not summarise the gradients of "
                f"{len(p.flow_failures)} node(s), so their flow is not shown (the pass itself "
                f"ran as usual): {p.flow_failures[0]}",
                hint="please report this with the scenario: it is a gradtrace limitation"))
        if p.error is None:
            continue
        hint = next((h for key, h in _PASS_HINTS if key in p.error), None)
        if any(n and n.endswith(".grad") for n in p.root_names) and "grad_fn" in p.error:
            hint = ("a .grad has no graph of its own unless the backward() that made it "
                    "was called with create_graph=True")
        where = f" at line {p.line} `{p.code}`" if p.line else ""
        first_line = p.error.splitlines()[0]
        findings.append(Finding("pass-failed", "error",
                                f"pass {i} ({p.kind}){where} failed: {first_line}", hint=hint))
    return findings


def _scenario_frame(path: str, exc: BaseException) -> int | None:
    line = None
    for frame, lineno in traceback.walk_tb(exc.__traceback__):
        if frame.f_code.co_filename == path:
            line = lineno
    return line


def _scenario_error(path: str, lines: list[str], exc: BaseException) -> ScenarioError:
    line = _scenario_frame(path, exc)
    where = f"{path}:{line}" if line else path
    text = lines[line - 1].strip() if line and line <= len(lines) else ""
    shown = f"\n    {text}" if text else ""
    return ScenarioError(
        f"{where}: the scenario raised {type(exc).__name__}: {exc}{shown}",
        f"fix the scenario; `python {path}` shows the full traceback",
    )
