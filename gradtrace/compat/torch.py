"""torch's private names gradtrace reads, and the torch error texts it recognises: each with
the releases it was checked on (compat.TORCH_CHECKED unless said) and a fallback."""

from __future__ import annotations

import contextlib
import re
import sys
from collections.abc import Callable, Iterator
from operator import attrgetter, methodcaller
from typing import Any, Literal, TypeVar

import torch

from . import probe as _probe_of

NO_SEQUENCE = 2**64 - 1  # the sequence number AccumulateGrad nodes report
SAVED_PREFIX = "_saved_"  # built-in nodes show what they saved only as _saved_<name>
RAW_SAVED_PREFIX = "_raw_saved_"  # and as _raw_saved_<name>: still packed, a hook's result
_TORCH = f"torch {torch.__version__}"


def _probe(path: str, find: Callable[[], Any], without: str) -> Any:
    """What find() returns, or None (said by compat.missing()) when this torch lacks path."""
    return _probe_of(_TORCH, path, find, without)


# Autograd numbers nodes as it makes them; gradtrace tells which call, module and line made a
# node by that number.
_get_sequence_nr = _probe(
    "torch._C._autograd._get_sequence_nr", lambda: torch._C._autograd._get_sequence_nr,
    "modules and source lines of nodes are not shown")


def next_sequence_number() -> int:
    """The sequence number the next autograd node will get (0 without the probe)."""
    return 0 if _get_sequence_nr is None else _get_sequence_nr()


def _no_sequence(node: Any) -> int:
    return NO_SEQUENCE


_sequence_of = methodcaller("_sequence_nr")


def _sequence_or_none(node: Any) -> int:
    try:
        return _sequence_of(node)  # type: ignore[no-any-return]
    except RuntimeError:  # torch 2.11's compiled regions' nodes refuse it (a "legacy access")
        return NO_SEQUENCE


# node -> its sequence number (NO_SEQUENCE for leaves and nodes that refuse it)
sequence_number: Callable[[Any], int] = _sequence_or_none if _probe(
    "torch.autograd.graph.Node._sequence_nr", lambda: torch.autograd.graph.Node._sequence_nr,
    "modules and source lines of nodes are not shown") is not None else _no_sequence


NodeKey = tuple[type, int]


def node_key(node: Any) -> NodeKey:
    """A key for node that outlives its Python object: on torch 2.11 and 2.12 a grad_fn's
    object dies with its last reference and the next read makes another, at the same
    address or another, so id() names no node for long. Nodes of one type made in other
    threads may share a key (and all of one type without the probe): a set of keys can only
    hold too many, never miss one."""
    return type(node), sequence_number(node)


_functorch_level = _probe(
    "torch._C._functorch.maybe_current_level",
    lambda: torch._C._functorch.maybe_current_level,
    "gradients inside torch.func transforms may be summarised as if unbatched")


def inside_torch_func_transform() -> bool:
    """Whether vmap/grad/jacrev is running: its gradients are wrappers without storage."""
    return _functorch_level is not None and _functorch_level() is not None


def compiled_autograd_on() -> bool:
    """Whether a backward started now runs under compiled autograd (torch._dynamo.config.
    compiled_autograd, or compiled_autograd._enable): the engine traces every hook of the
    graph into one compiled graph, so a hook of gradtrace's would be compiled, break the graph
    or fail there. Read only once the script imported it (checked on 2.13)."""
    module = sys.modules.get("torch._dynamo.compiled_autograd")
    return bool(getattr(module, "compiled_autograd_enabled", False))


_graph_task_id = _probe(
    "torch._C._current_graph_task_id", lambda: torch._C._current_graph_task_id,
    "a backward called inside another's hooks on an engine thread may be recorded as a pass")


def inside_backward() -> bool:
    """Whether this thread runs autograd's engine (a hook, a Function's backward): on any
    device thread, not only the one that called backward."""
    return _graph_task_id is not None and _graph_task_id() != -1


# A tensor's version counter: bumped by every in-place change (a .grad zeroed or clipped in
# place keeps its identity, not its version). Without it every read says "changed": a value
# is then said unavailable, never shown stale.
_version_of = _probe("torch.Tensor._version", lambda: (torch.ones(1)._version,
                                                       attrgetter("_version"))[1],
                     "a .grad changed in place is said unavailable more often")
_fresh_versions = iter(range(-2, -(2**62), -1))


def tensor_version(tensor: torch.Tensor) -> int:
    """tensor's version counter (a fresh negative number each call without the probe); a
    DTensor's counts its local shard's too (FSDP2 adds a micro-batch's gradient into the
    .grad's local tensor, which leaves the DTensor's own counter as it was)."""
    if _version_of is None:
        return next(_fresh_versions)
    version: int = _version_of(tensor)
    if type(tensor) is not torch.Tensor and is_dtensor(tensor):
        with torch.no_grad():  # a parameter's to_local() would record a node
            # both counters only grow: their sum changes with either
            version += _version_of(tensor.to_local())  # type: ignore[attr-defined]
    return version


_base_of = _probe("torch.Tensor._base", lambda: (torch.ones(1)._base, attrgetter("_base"))[1],
                  "any tensor sharing a named tensor's memory is taken for a view of it")


def is_view_of(view: torch.Tensor, base: torch.Tensor) -> bool:
    """Whether view was made from base (without the probe: whether they share storage)."""
    if _base_of is None:
        return view.untyped_storage().data_ptr() == base.untyped_storage().data_ptr()
    return _base_of(view) is base  # type: ignore[no-any-return]


def is_function_node(node: Any) -> bool:
    """Whether node is a custom autograd.Function's (its class has _forward_cls; checked on the
    class: a user's ctx may have any attribute)."""
    return hasattr(type(node), "_forward_cls")


_input_metadata = _probe(
    "torch.autograd.graph.Node._input_metadata",
    lambda: ((torch.ones(1, requires_grad=True) * 2).grad_fn._input_metadata,  # type: ignore[union-attr]
             attrgetter("_input_metadata"))[1],
    "every node of a pass in detail gets a gradient hook of its own (slower)")


def input_shapes(node: Any) -> list[tuple[int, ...]] | None:
    """The shape of the gradient each output of node receives in backward (its inputs, in
    autograd's terms), from autograd's private input metadata (None without the probe)."""
    if _input_metadata is None:
        return None
    return [tuple(m.shape) for m in _input_metadata(node)]


# One call for the norms of many tensors: a loop's light statistics read every parameter's
# .grad after every pass, and one call costs about what one norm does.
_foreach_norm = _probe("torch._foreach_norm", lambda: torch._foreach_norm,
                       "a loop's gradient statistics are read one tensor at a time (slower)")


def foreach_norms(tensors: list[torch.Tensor], order: float,
                  dtype: torch.dtype | None = None) -> list[torch.Tensor] | None:
    """The order-norm of each tensor (strided, on one device) in one call; None without it."""
    if _foreach_norm is None:
        return None
    return list(_foreach_norm(tensors, order, dtype=dtype))


def local_shard(t: torch.Tensor) -> torch.Tensor | None:
    """A DTensor's local shard (this rank's part: FSDP2's parameters and their .grad), else
    None. No collective: each rank reads its own part."""
    if type(t) is torch.Tensor or not is_dtensor(t):
        return None
    return t.to_local()  # type: ignore[attr-defined, no-any-return]  # a DTensor's


def is_dtensor(t: torch.Tensor) -> bool:
    """Whether t is a DTensor (looked up, not imported: a script with one has imported it)."""
    dtensor = getattr(sys.modules.get("torch.distributed.tensor"), "DTensor", None)
    return dtensor is not None and isinstance(t, dtensor)


def shard_count(t: torch.Tensor) -> int:
    """How many ranks a DTensor's elements are split among, each element on one of them
    (every placement a Shard: FSDP2's Shard(0)); 0 when any part is replicated or partial,
    where the local shards' norms do not add up to the whole's."""
    try:
        placements = t.placements  # type: ignore[attr-defined]
        if placements and all(p.is_shard() for p in placements):
            return int(t.device_mesh.size())  # type: ignore[attr-defined]
    except Exception:  # noqa: BLE001 - another DTensor's API: no whole norm, never a wrong one
        pass
    return 0


def fsdp_loaded() -> bool:
    """Whether the script imported torch's FSDP (else no module of its is sharded)."""
    return "torch.distributed.fsdp" in sys.modules


def fsdp_parameters(module: Any) -> list[tuple[torch.Tensor, torch.Tensor]]:
    """(sharded, unsharded) of each parameter an FSDP2 fully_shard module manages (its
    FSDPParams' private fields; the graph's leaves are the unsharded ones); [] for any other
    module, or where this torch keeps them otherwise."""
    state_of = getattr(module, "_get_fsdp_state", None)
    if state_of is None:
        return []
    try:
        group = state_of()._fsdp_param_group
        return [(p.sharded_param, p._unsharded_param)
                for p in (group.fsdp_params if group is not None else ())
                if hasattr(p, "_unsharded_param")]
    except Exception:  # noqa: BLE001 - another torch's FSDP2: its leaves stay unnamed
        return []


def grad_scaler_scale(scaler: Any) -> torch.Tensor | None:
    """A GradScaler's scale as the tensor it multiplies by (get_scale() would read it to the
    host, a synchronisation); None when it has none (disabled, or not a GradScaler's)."""
    scale = getattr(scaler, "_scale", None)
    return scale if isinstance(scale, torch.Tensor) else None


def has_tensor_hooks(variable: Any) -> bool:
    """Whether a leaf tensor has hooks of its own (registered with Tensor.register_hook)."""
    return bool(getattr(variable, "_backward_hooks", None))


def backward_hooks_of(module: Any) -> tuple[list[Any], list[Any]]:
    """The (full, non-full) backward hooks torch will run for module: its own and the global
    ones (register_module_full_backward_hook), from Module._get_backward_hooks."""
    if _get_backward_hooks is None or not (module._backward_hooks or _global_backward_hooks):
        return [], []
    full, old = _get_backward_hooks(module)
    return list(full), list(old)


_global_backward_hooks = _probe(
    "torch.nn.modules.module._global_backward_hooks",
    lambda: torch.nn.modules.module._global_backward_hooks,
    "module backward hooks are not marked in the graph")
_get_backward_hooks = _probe(
    "torch.nn.Module._get_backward_hooks", lambda: torch.nn.Module._get_backward_hooks,
    "module backward hooks are not marked in the graph")


def saved_attributes(node: Any) -> tuple[tuple[str, str], ...]:
    """(attribute, saved name) of each tensor a built-in node saved for backward."""
    return tuple((a, a[len(SAVED_PREFIX):]) for a in dir(node) if a.startswith(SAVED_PREFIX))


# BatchNorm's running statistics as its node saves them: in training, written by the op
_RUNNING = frozenset({SAVED_PREFIX + "running_mean", SAVED_PREFIX + "running_var"})


def saved_own_output(node: Any, attribute: str) -> bool:
    """Whether a built-in node's saved attribute is a value of its own forward's making, not
    one of its inputs: a `result` (LayerNorm's mean and rstd need no grad, so they carry no
    .grad_fn), or a training BatchNorm's running statistics, which it writes and never reads
    (checked on 2.13: NativeBatchNormBackward0's `training`)."""
    return attribute.startswith(SAVED_PREFIX + "result") or attribute in _RUNNING \
        and getattr(node, SAVED_PREFIX + "training", False) is True


def _top_saved_hooks() -> Callable[[], Any]:
    top = torch._C._autograd._top_saved_tensors_default_hooks
    try:
        top(False)  # (ignore_is_tracing), checked on 2.13
    except TypeError as exc:
        raise AttributeError("another signature") from exc
    return lambda: top(False)


_top_saved = _probe(
    "torch._C._autograd._top_saved_tensors_default_hooks", _top_saved_hooks,
    "what a graph saved under saved_tensors_hooks entered before gradtrace.record() may be "
    "read through their unpack hook")


def saved_hooks_pushed() -> bool:
    """Whether saved_tensors_hooks are pushed in this thread now (False where not known)."""
    return _top_saved is not None and _top_saved() is not None


def packed_saved(node: Any) -> list[tuple[str, Any]]:
    """(saved name, torch's packed SavedTensor or a list of them) of each tensor a node saved
    for backward, not unpacked: reading them runs no saved_tensors_hooks unpack hook (checked
    on torch 2.11 to 2.13: a custom Function's node has _raw_saved_tensors, which raises once
    backward freed them). Without _raw_saved_ attributes, none are listed."""
    return [(a[len(RAW_SAVED_PREFIX):], getattr(node, a)) for a in dir(node)
            if a.startswith(RAW_SAVED_PREFIX)]


_no_torch_function = _probe(
    "torch._C.DisableTorchFunction", lambda: torch._C.DisableTorchFunction,
    "a torch function mode of the script's also sees gradtrace's own read of a CPU loss")


def unseen_by_modes() -> contextlib.AbstractContextManager[Any]:
    """A block whose tensor calls the script's torch function modes do not see (gradtrace's
    own reads: under python they would not happen at all)."""
    return contextlib.nullcontext() if _no_torch_function is None else _no_torch_function()


def saved_value(node: Any, name: str) -> Any:
    """What a built-in node saved for backward under name ("other": DivBackward0's divisor),
    or None when it saved none or backward freed it."""
    try:
        return getattr(node, SAVED_PREFIX + name, None)
    except RuntimeError:  # freed by a backward without retain_graph
        return None


_device_context_holder = _probe(
    "torch._GLOBAL_DEVICE_CONTEXT", lambda: torch._GLOBAL_DEVICE_CONTEXT,
    "a default device a scenario sets is not reset after it")


def default_device_mode() -> Any:
    """The DeviceContext mode torch.set_default_device entered in this thread, if any."""
    return getattr(_device_context_holder, "device_context", None)


_mode_stacks = _probe(
    "torch._C._len_torch_function_stack",
    lambda: (torch._C._len_torch_function_stack, torch._C._pop_torch_function_stack,
             torch._C._len_torch_dispatch_stack, torch._C._pop_torch_dispatch_stack),
    "torch function/dispatch modes a scenario leaves entered are not popped")


def mode_stack_depths() -> tuple[int, int]:
    """How many torch function and dispatch modes this thread has entered."""
    if _mode_stacks is None:
        return 0, 0
    return _mode_stacks[0](), _mode_stacks[2]()


def pop_modes_to(depths: tuple[int, int]) -> None:
    """Pop the modes entered since mode_stack_depths() said depths.

    Modes left entered live in the thread's C++ state, which the thread frees after Python
    has let go of it: a Python object freed then aborted the process (exit 134).
    """
    if _mode_stacks is None:
        return
    length, pop, dispatch_length, dispatch_pop = _mode_stacks
    while length() > depths[0]:
        pop()
    while dispatch_length() > depths[1]:
        dispatch_pop()


# torch.compile. Dynamo rewrites the frames of Python functions called while a compiled
# function runs (after a graph break too: a backward's hooks, a trace function), and inlines
# the Python functions a traced call reaches (global module hooks, a patched Tensor.backward).
# gradtrace's hooks and wrappers must be neither: traced, they are compiled away, break the
# graph, or fail inside Dynamo and blame the scenario (issue 29).
_Callable = TypeVar("_Callable", bound=Callable[..., Any])

# Public since torch 2.3; true while Dynamo traces, and on torch 2.13 and later for the whole
# compile session. Dynamo folds it to True when it inlines a function that asks: a traced call
# takes the branch plain torch would.
_is_compiling: Callable[[], bool] = _probe(
    "torch.compiler.is_compiling", lambda: torch.compiler.is_compiling,
    "torch.compile may record its own tracing as passes") or (lambda: False)

# is_compiling() reads one flag for the whole process: while another thread compiles (one the
# script started, one left behind), this thread's passes and calls are still the code's. The
# compile session of this thread is in Dynamo's thread-local CompileContext (checked on 2.13;
# 2.11-2.15 set it around each frame's compile).
# is_dynamo_compiling() is False at run time, and folded to True where Dynamo traces the call:
# it answers first, so that Dynamo never traces the thread-local read (a graph break).
_compile_context = _probe(
    "torch._guards.CompileContext.try_get", lambda: torch._guards.CompileContext.try_get,
    "while a thread compiles, another thread's passes may go unrecorded")
_dynamo_tracing = _probe(
    "torch.compiler.is_dynamo_compiling", lambda: torch.compiler.is_dynamo_compiling,
    "while a thread compiles, another thread's passes may go unrecorded")


def _this_thread_compiles() -> bool:
    """Whether the compile session is this thread's (True where either probe is missing)."""
    if _dynamo_tracing is None or _compile_context is None:
        return True
    return _dynamo_tracing() or _compile_context() is not None


# On torch 2.11 and 2.12 is_compiling() is False while AOTAutograd traces the joint graph (its
# own torch.autograd.grad call among it): what says so there is the fake-tensor or proxy mode
# that tracing runs under (checked on 2.11–2.15).
_tracing_modes = _probe(
    "torch._C._get_dispatch_mode",
    lambda: (torch._C._get_dispatch_mode, torch._C._TorchDispatchModeKey.FAKE,
             torch._C._TorchDispatchModeKey.PROXY),
    "torch.compile's graph tracing on torch 2.11 and 2.12 may meet gradtrace's wrappers")


def compiling() -> bool:
    """Whether torch.compile is tracing or compiling on this thread: gradtrace's wrappers
    and hooks then do only what torch would do without them."""
    if _is_compiling() and _this_thread_compiles():
        return True
    if _tracing_modes is None:
        return False
    get_mode, fake, proxy = _tracing_modes
    return get_mode(fake) is not None or get_mode(proxy) is not None


# A code object's frame action for Dynamo's frame evaluator: (SKIP, SKIP) runs the frame,
# and every frame it calls, as plain Python, as torch.compiler.disable does, with no wrapper
# to pay for on every call (checked on 2.13: torch._dynamo.eval_frame.skip_code uses it).
_skip_recursively = _probe(
    "torch._C._dynamo.eval_frame.set_code_exec_strategy",
    lambda: (torch._C._dynamo.eval_frame.set_code_exec_strategy,
             torch._C._dynamo.eval_frame._FrameExecStrategy(
                 torch._C._dynamo.eval_frame._FrameAction.SKIP,
                 torch._C._dynamo.eval_frame._FrameAction.SKIP)),
    "torch.compile may trace gradtrace's hooks (a compiled step may be recorded as eager)")


def never_compiled(function: _Callable) -> _Callable:
    """Mark function (a def: every closure made from it shares its code) so Dynamo never
    rewrites a frame of it, nor of anything it calls: it runs as plain Python inside compiled
    code. A call Dynamo inlines while tracing is no frame: such a function asks compiling()
    first and then does what torch would do without gradtrace."""
    if _skip_recursively is not None:
        set_strategy, skip = _skip_recursively
        set_strategy(function.__code__, skip)
    return function


class CompileCallbacks:
    """began() and ended() called around each torch.compile compilation (Dynamo's compile
    callbacks, checked on 2.11 to 2.15: torch._dynamo.callback_handler), from when Dynamo is
    imported (importing it takes a second: never for this) until close()."""

    def __init__(self, began: Callable[[], None], ended: Callable[[], None]) -> None:
        self._began = lambda *args: began()  # told a CallbackArgs
        self._ended = lambda *args: ended()
        self._handler: Any = None

    def look(self) -> None:
        """Be called from now on, if Dynamo was imported since (costs a lookup till then)."""
        if self._handler is not None:
            return
        handler: Any = getattr(sys.modules.get("torch._dynamo"), "callback_handler", None)
        if hasattr(handler, "register_start_callback") and hasattr(handler, "remove_end_callback"):
            handler.register_start_callback(self._began)
            handler.register_end_callback(self._ended)
            self._handler = handler

    def close(self) -> None:
        """Be called no more."""
        handler, self._handler = self._handler, None
        if handler is not None:
            with contextlib.suppress(ValueError):
                handler.remove_start_callback(self._began)
                handler.remove_end_callback(self._ended)


def compiled_region(function_class: type) -> bool:
    """Whether an autograd.Function class is a compiled region's (AOTAutograd makes one
    CompiledFunction class per compiled graph; its node is CompiledFunctionBackward), not the
    user's own Function (checked on 2.13: torch._functorch._aot_autograd.runtime_wrappers)."""
    return function_class.__name__ == "CompiledFunction" \
        and function_class.__module__.startswith("torch._functorch.")


def is_compiled_region(node: Any) -> bool:
    """Whether an autograd node is a compiled region's backward (CompiledFunctionBackward)."""
    function_class = getattr(type(node), "_forward_cls", None)  # one lookup: asked of 100,000s
    return function_class is not None and compiled_region(function_class)


_FRAME = re.compile(r'File "([^"]+)", line (\d+)')


def compiled_region_frames(node: Any) -> Iterator[list[tuple[str, int]]]:
    """For each op of a compiled region's backward graph, latest forward op first: the frames
    (file, line; innermost last) of the forward call it differentiates, from the ops'
    stack_trace meta (checked on 2.13: CompiledFunction._lazy_backward_info.bw_module, kept
    after its backward is compiled); nothing when torch keeps none."""
    info = getattr(type(node)._forward_cls, "_lazy_backward_info", None)
    graph = getattr(getattr(info, "bw_module", None), "graph", None)
    for op in () if graph is None else graph.nodes:
        frames = _FRAME.findall(op.meta.get("stack_trace") or "")
        if frames:
            yield [(file, int(line)) for file, line in frames]


def compiled_module(module: Any) -> Any:
    """The module torch.compile(module) compiled, for its OptimizedModule (its private
    _orig_mod, checked on 2.13); else module itself."""
    original = getattr(module, "_orig_mod", None) \
        if type(module).__name__ == "OptimizedModule" else None
    return original if isinstance(original, torch.nn.Module) else module


# The warning torch.compile(module) gives when global module hooks exist (gradtrace's
# module tracker is one), on every call of the compiled module (torch 2.13's wording).
GLOBAL_HOOKS_WARNING = "Using `torch.compile(module)` when there are global hooks"


# What torch's error texts mean, matched by a phrase each (torch 2.13's wording).
ErrorKind = Literal["graph-freed", "inplace", "no-grad-fn", "needs-no-grad", "non-scalar",
                    "wrong-count", "invalid-gradient", "needless-gradient"]
_ERROR_PHRASES: tuple[tuple[ErrorKind, tuple[str, ...]], ...] = (
    ("graph-freed", ("backward through the graph a second time",)),
    ("inplace", ("modified by an inplace operation", "inplace operation")),
    ("no-grad-fn", ("does not require grad and does not have a grad_fn",)),
    ("needs-no-grad", ("does not require grad",)),  # an input of autograd.grad, say
    ("non-scalar", ("grad can be implicitly created only for scalar outputs",)),
    ("wrong-count", ("incorrect number of gradients",)),
    ("invalid-gradient", ("returned an invalid gradient",)),
    ("needless-gradient", ("gradient different than None", "is not differentiable")),
)


def error_kind(error: BaseException | str) -> ErrorKind | None:
    """What a torch error says, as one of ErrorKind (None: not one gradtrace explains)."""
    text = str(error)
    return next((kind for kind, phrases in _ERROR_PHRASES
                 if any(phrase in text for phrase in phrases)), None)


# --profile's light timings: torch's profiler limited to autograd nodes' own events (the
# RecordScope.BACKWARD_FUNCTION scope), one event a node instead of one an op, so its own
# cost stays small. Private: torch.profiler has no public way to pick scopes.
NodeEvent = tuple[str, int, float, float]  # name, sequence number, start and end (µs)


def _node_scope_profiler() -> Any:
    try:
        from torch._C._profiler import ProfilerActivity, RecordScope, _ExperimentalConfig
        from torch.autograd import profiler
    except ImportError as exc:
        raise AttributeError(str(exc)) from exc

    config = profiler.ProfilerConfig(profiler.ProfilerState.KINETO, False, False, False,
                                     False, False, _ExperimentalConfig())
    return (profiler._prepare_profiler, profiler._enable_profiler,
            profiler._disable_profiler, config, {ProfilerActivity.CPU},
            {RecordScope.BACKWARD_FUNCTION})


_node_profiler = _probe("torch.autograd.profiler._enable_profiler with scopes",
                        _node_scope_profiler,
                        "--profile times nodes with the full profiler (more of its own cost)")


def light_timings() -> bool:
    """Whether node_events() can limit the profiler to autograd nodes' events."""
    return _node_profiler is not None


def node_events(run: Callable[[], Any]) -> tuple[Any, list[NodeEvent]] | None:
    """run() with only autograd nodes' events recorded: what it returned, and each event
    (None when this torch cannot limit the profiler to them)."""
    if _node_profiler is None:
        return None
    prepare, enable, disable, config, activities, scopes = _node_profiler
    prepare(config, activities)
    enable(config, activities, scopes)
    try:
        result = run()
    finally:
        events = disable().events()
    return result, [(e.name(), e.sequence_nr(), e.start_ns() / 1e3, e.end_ns() / 1e3)
                    for e in events]


def _graph_only_references() -> int:
    """sys.getrefcount() of a leaf, read off its AccumulateGrad node, once nothing but the
    graph holds it (torch keeps such a tensor's Python object alive through its C++ one)."""
    leaf = torch.ones(1, requires_grad=True)
    root = (leaf * 2).sum()
    accumulate: Any = root.grad_fn.next_functions[0][0].next_functions[0][0]  # type: ignore[union-attr]
    held = sys.getrefcount(accumulate.variable)
    del leaf
    alone = sys.getrefcount(accumulate.variable)
    if alone >= held:
        raise AttributeError("a leaf's references do not show who holds it")
    return alone


_GRAPH_ONLY = _probe("sys.getrefcount of AccumulateGrad.variable", _graph_only_references,
                     "gradtrace holds a graph the script let go of until the run ends")


def only_the_graph_holds(accumulate: Any) -> bool:
    """Whether nothing but its graph holds the leaf of an AccumulateGrad node (python frees
    it with the graph); False when that cannot be told."""
    return _GRAPH_ONLY is not None and sys.getrefcount(accumulate.variable) <= _GRAPH_ONLY
