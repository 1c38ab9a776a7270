"""The wrappers a recording installs on torch while captured code runs: backward and grad
calls become recorded passes; Function.apply, gradcheck, checkpoint, saved_tensors_hooks
(packing.py) and Tensor.register_hook calls are noted.

Inside torch.compile every wrapper is what torch would be: Dynamo never rewrites their frames
(never_compiled), and where it traces a call (or AOTAutograd calls torch.autograd.grad while
it compiles) the wrapper calls the original and records nothing."""

from __future__ import annotations

import contextlib
import functools
import importlib
import inspect
import sys
import threading
from collections.abc import Callable, Iterator
from typing import Any

import torch

from ...compat.torch import (
    compiled_region,
    compiling,
    grad_scaler_scale,
    inside_backward,
    never_compiled,
)
from ...extract.captured import RawCall
from ...model.facts import GradcheckRan
from ...model.records import PassKind
from ..naming.provenance import own_tracer
from ..naming.tracer_off import tracer_set
from ..naming.where import forwards
from ..observers.marks import node_noting
from ..script.scenario_thread import LEFT_BEHIND, StopWindow
from .packing import packing_patches
from .recorder import Recorder


@contextlib.contextmanager
def patched(recorder: Recorder, window: StopWindow) -> Iterator[None]:
    """Install the recording wrappers; restore torch exactly afterwards (window: a time limit
    stops a pass's own backward, never the recording around it)."""
    gradcheck_module = sys.modules["torch.autograd.gradcheck"]
    checkpoint_module = importlib.import_module("torch.utils.checkpoint")
    function_cls = torch.autograd.Function
    patches = [
        *packing_patches(recorder, checkpoint_module),
        # Tensor.backward is left as it is: it calls torch.autograd.backward, recorded here
        # (a script that makes that a no-op runs no pass, and none is recorded)
        (torch.autograd, "backward", _pass_wrapper(recorder, window, "backward",
                                                        torch.autograd.backward)),
        (torch.autograd, "grad", _pass_wrapper(recorder, window, "grad", torch.autograd.grad)),
        (function_cls, "apply", _apply_wrapper(recorder, function_cls.__dict__["apply"])),
        (torch.Tensor, "register_hook", node_noting(recorder.marks.hooked,
                                                      torch.Tensor.register_hook)),
    ]
    owner: Any
    for owner in (torch.autograd, gradcheck_module):
        for name in ("gradcheck", "gradgradcheck"):
            patches.append((owner, name, _checking(recorder, name, getattr(owner, name))))
    spawn_module = importlib.import_module("torch.multiprocessing.spawn")
    for owner in (torch.multiprocessing, spawn_module):
        patches.append((owner, "start_processes",
                        _spawn_noting(recorder, owner.start_processes)))
    patches.append((torch.amp.GradScaler, "scale",
                    _scale_noting(recorder, torch.amp.GradScaler.scale)))
    functional = importlib.import_module("torch.autograd.functional")
    for name in FUNCTIONAL:
        patches.append((functional, name, _handed_noting(recorder, getattr(functional, name))))
    patches.extend(recorder.patches())
    # retain_grad is Tensor's by inheritance (from its C base): restored by deleting it
    saved = [(owner, name, owner.__dict__.get(name, _INHERITED)) for owner, name, _ in patches]
    for owner, name, wrapper in patches:
        setattr(owner, name, wrapper)
    try:
        yield
    finally:
        for owner, name, original in reversed(saved):
            if original is _INHERITED:
                delattr(owner, name)
            else:
                setattr(owner, name, original)


_INHERITED = object()  # a patched attribute the class only inherits


def _pass_wrapper(recorder: Recorder, window: StopWindow, kind: PassKind,
                  original: Callable[..., Any]) -> Callable[..., Any]:
    signature = inspect.signature(original)
    root_param = next(iter(signature.parameters))  # self / tensors / outputs
    bind = _binder(signature)

    @functools.wraps(original)
    @never_compiled
    @forwards
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        if recorder.gate.thread == threading.get_ident() or inside_backward() \
                or recorder.gate.muted or compiling() or recorder.gate.elsewhere() \
                or threading.current_thread() in LEFT_BEHIND:
            return original(*args, **kwargs)
        given = bind(args, kwargs)
        roots = given[root_param]
        roots = [roots] if isinstance(roots, torch.Tensor) else list(roots)
        create = bool(given.get("create_graph", False))
        retain = given.get("retain_graph")
        retain = create if retain is None else bool(retain)
        every_leaf = kind == "backward" and given.get("inputs") is None
        batched = bool(given.get("is_grads_batched", False))  # the legacy vmap's
        # The line log's tracer is off while the pass is recorded, and in its backward too
        # unless that makes a graph (create_graph): only then can a line of the code's own
        # hooks or Functions make a node.
        ours = own_tracer()
        recording = None if ours is not None else sys.gettrace()  # a debugger's stays on
        backward = ours if ours is not None and create else recording

        call = functools.partial(_forwarded, window, backward, original, args, kwargs)
        # another thread's pass is recorded whole first (without the lock, one that started
        # while another was recorded ran unrecorded)
        try:
            with recorder.gate.one_pass_at_a_time, window.held(), tracer_set(recording):
                return recorder.run_pass(kind, "scenario", roots, retain, create, call,
                                         every_leaf, batched, given)
        finally:  # what the steps up to the next pass record
            recorder.host.detail(recorder.plan.next)

    return wrapper


def _binder(signature: inspect.Signature
            ) -> Callable[[tuple[Any, ...], dict[str, Any]], dict[str, Any]]:
    """signature.bind(*args, **kwargs) with its defaults applied, as a dict by name; a call
    of plain parameters by position and name (every pass's: Tensor.backward calls
    torch.autograd.backward with four by position and one by name) without inspect's
    binding, which takes longer than the rest of the pass's start."""
    names = tuple(signature.parameters)
    known = frozenset(names)
    defaults = {name: p.default for name, p in signature.parameters.items()
                if p.default is not inspect.Parameter.empty}
    plain = all(p.kind is p.POSITIONAL_OR_KEYWORD for p in signature.parameters.values())

    def bind(args: tuple[Any, ...], kwargs: dict[str, Any]) -> dict[str, Any]:
        given = dict(zip(names, args, strict=False))  # more args than names: refused below
        if plain and len(args) <= len(names) and given.keys().isdisjoint(kwargs) \
                and kwargs.keys() <= known:
            given.update(kwargs)
            if given.keys() | defaults.keys() >= known:  # every parameter has its value
                return {name: given[name] if name in given else defaults[name]
                        for name in names}
        bound = signature.bind(*args, **kwargs)  # raises as python would for a bad call
        bound.apply_defaults()
        return bound.arguments
    return bind


@forwards
def _forwarded(window: StopWindow, tracer: Callable[..., Any] | None,
               original: Callable[..., Any], args: tuple[Any, ...], kwargs: dict[str, Any]
               ) -> Any:
    """The script's own backward or grad call, which a stop may cut, with tracer set."""
    with window.released(), tracer_set(tracer):
        return original(*args, **kwargs)


def _apply_wrapper(recorder: Recorder, original: Any) -> classmethod:  # type: ignore[type-arg]
    """Function.apply, noting each call (original: the classmethod as Function's __dict__
    holds it: a Python classmethod before torch 2.14, a C classmethod_descriptor since)."""

    @functools.wraps(original.__get__(None, torch.autograd.Function))
    @never_compiled
    @forwards
    def apply(cls: type, *args: Any, **kwargs: Any) -> Any:
        out = original.__get__(None, cls)(*args, **kwargs)
        if compiling() or compiled_region(cls) or recorder.gate.elsewhere() \
                or threading.current_thread() in LEFT_BEHIND:
            return out  # torch.compile's, not the code's Function; or no run's (or thread's)
        if not recorder.gate.muted or recorder.gate.first_in_check:
            recorder.gate.first_in_check = False  # the Function a gradcheck call is about
            first = out[0] if isinstance(out, (tuple, list)) and out else out
            node = first.grad_fn if isinstance(first, torch.Tensor) else None
            copies = tuple(
                a.detach().clone() if isinstance(a, torch.Tensor) else a for a in args
            )
            recorder.calls.append(RawCall(cls, node, recorder.caller_line()[0], copies, kwargs))
        return out

    return classmethod(apply)


def _scale_noting(recorder: Recorder, original: Callable[..., Any]) -> Callable[..., Any]:
    """GradScaler.scale, noting the scaled loss it returns: the steps' loss is the script's."""

    @functools.wraps(original)
    @never_compiled
    @forwards
    def scale(scaler: Any, outputs: Any) -> Any:
        scaled = original(scaler, outputs)
        if not compiling() and not recorder.gate.elsewhere():
            recorder.note_scaled(scaled, outputs, grad_scaler_scale(scaler))
        return scaled

    return scale


# torch.autograd.functional's calls: each differentiates detached copies of its inputs.
FUNCTIONAL = ("jacobian", "hessian", "vjp", "jvp", "hvp", "vhp")


def _spawn_noting(recorder: Recorder, original: Callable[..., Any]) -> Callable[..., Any]:
    """torch.multiprocessing.spawn / start_processes, noting the line that started processes:
    their work runs in them, where nothing records it."""

    @functools.wraps(original)
    @forwards
    def spawning(fn: Any, args: Any = (), nprocs: int = 1, *rest: Any, **kwargs: Any) -> Any:
        line, code = recorder.caller_line()
        at = "a line outside the script" if line is None else f"line {line} `{code}`"
        recorder.spawned.append(f"{at} started {nprocs} process(es) running {fn.__name__}")
        return original(fn, args, nprocs, *rest, **kwargs)

    return spawning


def _handed_noting(recorder: Recorder, original: Callable[..., Any]) -> Callable[..., Any]:
    """A torch.autograd.functional call, noting the tensors handed to it as inputs: no graph
    of the code's reaches them, and none is meant to."""

    @functools.wraps(original)
    @never_compiled
    @forwards
    def handed(func: Any, inputs: Any, *args: Any, **kwargs: Any) -> Any:
        for t in (inputs,) if isinstance(inputs, torch.Tensor) else inputs:
            if isinstance(t, torch.Tensor):
                recorder.marks.handed[id(t)] = t
        return original(func, inputs, *args, **kwargs)

    return handed


def _checking(recorder: Recorder, kind: str, original: Callable[..., Any]) -> Callable[..., Any]:
    """Record the scenario's own gradcheck calls; mute what they do inside."""

    @functools.wraps(original)
    @never_compiled
    @forwards
    def checking(*args: Any, **kwargs: Any) -> Any:
        if compiling() or recorder.gate.elsewhere():
            return original(*args, **kwargs)
        outer = not recorder.gate.muted
        line = recorder.caller_line()[0] if outer else None
        recorder.gate.first_in_check = outer
        try:
            with recorder.gate.own_calls():
                result = original(*args, **kwargs)
        except Exception as exc:
            if outer:
                recorder.tell(GradcheckRan(kind, _callable_name(args), line, "failed",
                                           " ".join(str(exc).split("\n")[:3])))
                recorder.failed = exc
            raise
        finally:
            recorder.gate.first_in_check = False
        if outer:
            recorder.tell(GradcheckRan(kind, _callable_name(args), line,
                                       "passed" if result else "returned False"))
        return result

    return checking


def _callable_name(args: tuple[Any, ...]) -> str:
    fn = args[0] if args else None
    owner = getattr(fn, "__self__", None)
    if isinstance(owner, type):  # a Function's apply, bound to its class
        return f"{owner.__name__}.{getattr(fn, '__name__', 'apply')}"
    return getattr(fn, "__qualname__", type(fn).__name__)
