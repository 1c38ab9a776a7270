"""Which tensors a scenario names, and which of them are the roots of its graph."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch

from ...errors import ScenarioError
from ...extract.build import no_graph
from ...extract.tensors import Named
from ...extract.walk import readable_grad
from ...model.facts import Fact
from .reach import is_module, is_tensor
from .sharded import Pairs, fsdp_pairs, grad_holder
from .statements import no_root


def named_tensors(namespace: dict[str, Any], pairs: Pairs | None = None) -> Named:
    """Named tensors in binding order, and nn.Module parameters under dotted names (a
    parameter under the first module path that reaches it; a plain name for a parameter, as
    `for p in model.parameters()` leaves, is no second row of it). An FSDP2 parameter is
    the one of its two tensors that holds its .grad (pairs: fsdp_pairs', if read already)."""
    items = [(name, value) for name, value in list(namespace.items())
             if not name.startswith("__")]
    # each module's parameters, read once (this runs at every pass of a loop)
    of_module = {name: list(value.named_parameters()) for name, value in items
                 if is_module(value)}
    if pairs is None:
        pairs = fsdp_pairs(items) if of_module else {}
    if pairs:
        of_module = {name: [(p, grad_holder(t, pairs)) for p, t in parameters]
                     for name, parameters in of_module.items()}
    in_modules = {id(t) for parameters in of_module.values() for _, t in parameters}
    in_modules.update(pairs)  # a plain name for either of FSDP2's two is no second row
    out: Named = []
    params: set[int] = set()
    for name, value in items:
        if is_tensor(value):
            if id(value) not in in_modules:
                out.append((name, value))
        for p, t in of_module.get(name, ()):
            if id(t) not in params:
                params.add(id(t))
                out.append((f"{name}.{p}", t))
    return out


def names_of(tensors: Sequence[Any], named: Named) -> list[str | None]:
    """The scenario name of each tensor, "x.grad" for a gradient, else None."""
    names: dict[int, str] = {}
    for name, t in named:
        names.setdefault(id(t), name)
        grad = readable_grad(t)
        if grad is not None:
            names.setdefault(id(grad), f"{name}.grad")
    return [names.get(id(t)) for t in tensors]


def choose_outputs(
    path: str, namespace: dict[str, Any], named: Named, requested: Sequence[str],
    fallback: tuple[list[tuple[str | None, torch.Tensor]], str] = ([], ""),
) -> tuple[Named, str]:
    """The roots: the requested names, else OUTPUT, else the fallback (tensors, why: what a
    function returned, the last pass's roots), else the last named tensor with a grad_fn."""
    by_name = dict(named)
    name_of: dict[int, str] = {}
    for name, t in named:
        name_of.setdefault(id(t), name)

    def lookup(name: str, source: str) -> tuple[str, torch.Tensor]:
        base = name.removesuffix(".grad")
        if name != base and base in by_name:  # the gradient of a named tensor, e.g. x.grad
            gradient = readable_grad(by_name[base])
            if gradient is None:
                raise ScenarioError(f"{source} {name!r}: {base} has no .grad",
                                    "a .grad exists after a backward pass reaches the tensor")
            return name, gradient
        if name not in by_name:
            raise ScenarioError(
                f"{source} {name!r}: {path} has no tensor of that name",
                "named tensors: " + ", ".join(by_name) + " (and NAME.grad for their gradients)",
            )
        return name, by_name[name]

    if requested:
        picked = [lookup(n, "root") for n in requested]
        reason = "picked by name"
    elif "OUTPUT" in namespace:
        value = namespace["OUTPUT"]
        items = value if isinstance(value, (list, tuple)) else [value]
        picked = []
        for item in items:
            if isinstance(item, str):
                picked.append(lookup(item, "OUTPUT names"))
            elif isinstance(item, torch.Tensor):
                picked.append((name_of.get(id(item), "OUTPUT"), item))
            else:
                raise ScenarioError(
                    f"{path}: OUTPUT must be a tensor, a tensor's name, or a list of them, "
                    f"not {type(item).__name__}",
                )
        reason = "the scenario's OUTPUT"
    elif any(t.grad_fn is not None for _, t in fallback[0]):
        roots, reason = fallback
        picked = [(name or name_of.get(id(t), "root" if len(roots) == 1 else f"root{i}"), t)
                  for i, (name, t) in enumerate(roots) if t.grad_fn is not None]
        return picked, reason
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
    """Why a tensor asked for as a root has no grad_fn."""
    if t.requires_grad:
        return "it is a leaf (created by you, not computed)"
    return "it does not require grad"


def nothing_to_trace(label: str | None, spawned: list[str], passes: bool, named: Named,
                     empty_ok: bool, exited: bool) -> None:
    """Raise the error for a run with nothing to trace: its work in processes it started, or
    no tensor named (a sys.exit(0) before any); return when there is something."""
    if spawned and not passes and not any(t.grad_fn for _, t in named):
        raise ScenarioError(
            f"{label}: {spawned[0]}: their work, backward passes included, "
            "is not recorded (gradtrace records the process it runs, not its children)",
            "run the worker once per rank instead, reading RANK and WORLD_SIZE as "
            "torchrun sets them: torchrun --nproc-per-node N --no-python gradtrace "
            f"show {label}")
    if not named and not passes and not empty_ok:
        if exited:  # its output (a --help text) goes with the error
            raise ScenarioError(f"{label} called sys.exit(0) before it made any "
                                "tensor: there is nothing to trace",
                                "give the script the arguments that make it compute, "
                                "after `--`")
        raise ScenarioError(
            f"{label} names no tensors",
            "assign tensors to module-level names, call backward() in the functions "
            "that make them, or run one function with FILE::FUNC")


def no_root_facts(label: str | None, named: Named, lines: list[str], ran: set[int] | None,
                  passes: bool, recorded: bool, empty_ok: bool,
                  from_values: str | None = None) -> list[Fact]:
    """Why there is no root, as a fact when something else was recorded (passes; recorded:
    Function calls or facts) or empty_ok, else the NoGraph error (ran: the lines that ran;
    from_values: the root of a pass that was a leaf made from values)."""
    why = no_root(named, lines, ran, passes)
    if passes:
        return [why._replace(tensor=next(iter(why.wanting), None), instead="passes",
                             from_values=from_values)]
    if recorded:
        return [why._replace(line=None, instead="calls")]
    if empty_ok:
        return [why]
    raise no_graph(label, why)
