"""A pass's statistics made on its gradients' device: the norm, max |g| and finiteness of
each .grad, and the loss (GradScaler's unscaled one, with its scale), stacked into as few
vectors as the devices and dtypes allow; a leaf's fingerprint (its version and sum) to tell
later whether its values changed."""

from __future__ import annotations

import math
import weakref
from collections.abc import Callable, Sequence
from typing import Any

import torch

from ...compat.torch import foreach_norms, local_shard, saved_value, tensor_version
from ...extract.blocks import norm64, norms64, sum64

# A leaf's .grad as a pass begins or ends: the tensor (weakly: never kept alive for this)
# and its version counter.
GradState = tuple["weakref.ref[torch.Tensor]", int] | None
# The .grads the last pass left and the code changed in place since: by leaf name, the
# tensor (weakly), its version as this pass began, and the slot its non-zero test is read to
Carried = dict[str, tuple["weakref.ref[torch.Tensor]", int, int]]
# A leaf's values when first seen: [the tensor (weakly), its version, the sum of its values
# as text (None until read, or when it has none)]
Fingerprint = list[Any]
# GradScaler.scale()'s latest output (weakly), the loss it was given, its scale (a float64
# copy on the scale's device), and what undivided() makes of that loss (`loss / k` scaled)
Scaled = tuple["weakref.ref[torch.Tensor]", torch.Tensor, torch.Tensor | None,
               tuple[torch.Tensor, float] | None]


def scaled(output: Any, loss: Any, scale: Any, packed: Callable[[Any], bool]
           ) -> Scaled | None:
    """What GradScaler.scale(loss) returning output (loss × scale) is remembered as: None when
    it is not a scaled copy of a tensor (packed: as undivided() asks)."""
    if not isinstance(output, torch.Tensor) or not isinstance(loss, torch.Tensor) \
            or output is loss:
        return None
    # a copy: GradScaler.update() changes its scale in place
    factor = scale.detach().reshape(-1)[:1].to(torch.float64, copy=True) \
        if isinstance(scale, torch.Tensor) else None
    return weakref.ref(output), loss.detach(), factor, undivided(loss, packed)


def divided_of(root: Any, scaled: Scaled | None, packed: Callable[[Any], bool]
               ) -> tuple[torch.Tensor, float] | None:
    """undivided() of a pass's one root (None: not one tensor); of the loss GradScaler was
    given, when the root is its output (`scaler.scale(loss / k)`)."""
    if scaled is not None and root is not None and scaled[0]() is root:
        return scaled[3]
    return undivided(root, packed) if isinstance(root, torch.Tensor) else None


def loss_of(roots: Sequence[Any], scaled: Scaled | None
            ) -> tuple[torch.Tensor | None, torch.Tensor | None]:
    """The pass's one root, when it is one real number, as a 0-d tensor (not a copy: the
    statistics stack it as the pass ends), and the scale its gradients carry: when the root
    is GradScaler.scale()'s latest output, the loss it was given and its scale."""
    if len(roots) != 1 or not isinstance(roots[0], torch.Tensor):
        return None, None
    root, scale = roots[0], None
    if scaled is not None and scaled[0]() is root:
        root, scale = scaled[1], scaled[2]
    if root.numel() != 1 or not root.is_floating_point() or root.is_meta:
        return None, scale
    root = root.detach()
    return (root if not root.dim() else root.reshape(())), scale


# The nodes of a loss as a loss function or a mean makes it: what `loss / k` divides in an
# accumulation loop (a sum divided by n is a mean the code computes, and stays as it is).
_LOSS_NODES = ("Loss", "MeanBackward")


def undivided(loss: torch.Tensor, packed: Callable[[Any], bool],
              ) -> tuple[torch.Tensor, float] | None:
    """(the loss before it, k) when loss is a loss function's (or a mean's) value divided by
    a constant k > 1, or multiplied by 1/k (`loss / accumulation_steps`): what the code
    computed as its loss, and what backward was given of it. The constant is a number the
    code wrote (a CPU scalar): reading it needs no device synchronisation. Not read where a
    hook packed it (packed): unpacking would run the code's hook."""
    node: Any = loss.grad_fn
    kind = type(node).__name__
    if kind not in ("DivBackward0", "MulBackward0") or packed(node):
        return None
    inputs = [f for f, _ in node.next_functions if f is not None]
    other = saved_value(node, "other")
    if len(inputs) != 1 or not any(w in type(inputs[0]).__name__ for w in _LOSS_NODES) \
            or not isinstance(other, torch.Tensor) or other.dim() or other.requires_grad \
            or other.device.type != "cpu":
        return None
    value = float(other)
    k = value if kind == "DivBackward0" else 1 / value if value else 0.0
    if not math.isfinite(k) or k <= 1:  # a loss times 1/k is accumulation's; k < 1 is not
        return None
    return loss.detach() * k, k


def briefs_now(grads: list[torch.Tensor], loss: torch.Tensor | None
                ) -> list[tuple[torch.Tensor | list[torch.Tensor], list[int], bool]]:
    """(norms..., (min, max) of each..., the loss, if it is in this one) of the gradients
    as vectors on their devices (or parts of one, joined as float64 when read), each with
    the indices into grads it covers (a gradient whose values cannot be read: in none) and
    whether it holds the loss (one does, if given)."""
    groups: list[tuple[torch.Tensor | list[torch.Tensor], list[int], bool]] = []
    taken: set[int] = set()
    device = grads[0].device if grads else None if loss is None else loss.device
    plain = [i for i, g in enumerate(grads) if _plain(g, device)]
    with_loss = loss is not None and loss.device == device
    together = _together([grads[i] for i in plain], loss if with_loss else None) \
        if plain else None
    if together is not None:
        groups.append((together, plain, with_loss))
        taken.update(plain)
    else:
        with_loss = False
    by_device: dict[torch.device, list[tuple[int, torch.Tensor]]] = {}
    for i, g in enumerate(grads):
        if i in taken:
            continue
        try:
            brief = _norm_and_ends(g)
        # Any tensor may be a .grad (nested, a subclass whose methods raise): none may stop
        # the run; its row says it has no statistics.
        except Exception:  # noqa: BLE001
            brief = None
        if brief is not None:
            by_device.setdefault(brief.device, []).append((i, brief))
    for briefs in by_device.values():
        try:
            stacked = torch.stack([brief for _, brief in briefs])  # a (norm, min, max) row each
            groups.append((torch.cat((stacked[:, 0], stacked[:, 1:].reshape(-1))),
                           [i for i, _ in briefs], False))
        except Exception:  # noqa: BLE001 - subclasses that refuse: no statistics for them
            continue
    if loss is not None and not with_loss:  # the loss alone
        try:
            groups.append((loss.reshape(1).to(torch.float64, copy=True), [], True))
        except Exception:  # noqa: BLE001 - a subclass's that refuses: no loss
            pass
    return groups


def norms_now(grads: list[torch.Tensor]) -> list[tuple[torch.Tensor, list[int]]]:
    """The gradients' norms as float64 vectors on their devices, each with the indices into
    grads it covers (a gradient whose values cannot be read: in none)."""
    by_device: dict[torch.device, list[int]] = {}
    for i, g in enumerate(grads):
        by_device.setdefault(g.device, []).append(i)
    groups: list[tuple[torch.Tensor, list[int]]] = []
    for device, indices in by_device.items():
        plain = [i for i in indices if _plain(grads[i], device)]
        try:
            norms = norms64([grads[i] for i in plain]) \
                if plain else None
        except Exception:  # noqa: BLE001 - one tensor at a time then
            norms = None
        if norms is not None:
            groups.append((torch.stack(norms), plain))
        rest = [i for i in indices if norms is None or i not in plain]
        try:
            briefs = [(i, _norm_and_ends(grads[i])) for i in rest]
            read = [(i, b) for i, b in briefs if b is not None]
            if read:
                groups.append((torch.stack([b[0] for _, b in read]), [i for i, _ in read]))
        except Exception:  # noqa: BLE001 - a subclass's that refuses: not read
            continue
    return groups


def _plain(g: torch.Tensor, device: torch.device | None) -> bool:
    """A dense tensor of real numbers on device, of torch's own type: its norms can be made
    with the others' in one call."""
    return type(g) is torch.Tensor and g.layout == torch.strided and g.device == device \
        and g.is_floating_point() and g.numel() > 0 and not g.is_meta


def _together(chosen: list[torch.Tensor], loss: torch.Tensor | None
              ) -> list[torch.Tensor] | None:
    """(norms..., (min, max) of each..., loss) of plain gradients (at least one) on one
    device (and the loss, when given, on it too) in few calls, as parts the batch joins;
    None when this torch cannot."""
    try:
        norms = norms64(chosen)  # float64: a norm cannot overflow
        if norms is None:
            return None
        if chosen[0].is_cpu:
            # no fused kernels on the CPU: min and max in one pass over each gradient cost
            # less than the foreach max |g| (itself a pass over each, several times slower)
            ends = [end for g in chosen for end in torch.aminmax(g)]
        else:  # one fused kernel: max |g|, which is both ends as far as statistics go
            tops = foreach_norms(chosen, math.inf)  # exact in any dtype; NaN propagates
            if tops is None:
                return None
            ends = [end for top in tops for end in (-top, top)]
        if loss is not None and loss.dtype == ends[0].dtype:  # stacked exactly, with them
            ends, loss = [*ends, loss], None
        parts = [torch.stack(norms), torch.stack(ends)]  # joined (as float64) in the batch
        if loss is not None:
            parts.append(loss.reshape(1).to(torch.float64, copy=True))
        return parts
    except Exception:  # noqa: BLE001 - one tensor at a time then, as for any odd .grad
        return None


def _norm_and_ends(g: torch.Tensor) -> torch.Tensor | None:
    """A gradient's (norm, min, max) as float64 on its device (of |g| when complex; of the
    stored values when sparse; of this rank's shard of a DTensor; NaN propagates); None for a
    meta or quantized one."""
    local = local_shard(g)
    g = g if local is None else local
    if g.is_meta or g.is_quantized:
        return None
    g = g.detach()
    if g.layout != torch.strided:
        g = g.coalesce().values() if g.is_sparse else g.values()
    if g.is_complex():
        g = g.abs()
    if not g.numel():
        return torch.zeros(3, dtype=torch.float64, device=g.device)
    flat = g.reshape(-1)
    lo, hi = torch.aminmax(flat if g.is_floating_point() else flat.double())
    return torch.stack((norm64(flat),
                        lo.to(torch.float64), hi.to(torch.float64)))


def fingerprint(t: torch.Tensor) -> tuple[int, str | None]:
    """The tensor's version, and the sum of its values as text ("nan" equals itself):
    `.data` writes keep the version, so the sum tells those apart."""
    total = sum_now(t)
    try:
        return tensor_version(t), None if total is None else repr(float(total))
    except Exception:  # noqa: BLE001 - a subclass whose float() raises: no sum to compare
        return tensor_version(t), None


def moved(now: Sequence[Any], then: Sequence[Any]) -> bool:
    """Whether a tensor's values changed from fingerprint then to now: by its sum where both
    are known (L-BFGS adds zeros to a parameter backward never reached, a new version of the
    same values), else by its version."""
    if now[1] is not None and then[1] is not None:
        return bool(now[1] != then[1])
    return bool(now[0] != then[0])


def sum_now(t: torch.Tensor) -> torch.Tensor | None:
    """The sum of t's values as a float64 tensor on its device (None: no values to sum)."""
    d = t.detach()
    local = local_shard(d)  # a DTensor's sum would be a collective
    d = d if local is None else local
    if d.is_meta:
        return None
    try:
        d = torch.view_as_real(d) if d.is_complex() else d  # (casting would warn)
        return sum64(d)
    except (RuntimeError, TypeError, NotImplementedError):  # meta, quantized
        return None


def fill_scale(scales: list[float | None], at: int, values: list[float]) -> None:
    """A pass's scale, read: one that divides nothing (0, NaN, inf) is left out."""
    scales[at] = values[0] if math.isfinite(values[0]) and values[0] > 0 else None


def fill_sums(first: list[list[Any]], values: list[float]) -> None:
    """Put each read sum, as text, into its fingerprint."""
    for first_seen, total in zip(first, values, strict=True):
        first_seen[2] = repr(total)


def grad_state(g: torch.Tensor) -> GradState:
    """A .grad as it is now: a weak reference and its version."""
    return weakref.ref(g), tensor_version(g)


def as_left(leaves: list[tuple[str, torch.Tensor]], at_end: dict[str, GradState]
        ) -> tuple[list[GradState], list[tuple[str, torch.Tensor]]]:
    """Each leaf's .grad as this pass begins, when nothing changed it since the last pass
    ended (no zero_grad, no reset; else None); and, by name, the .grads the last pass
    left that the code changed in place since (clipped, unscaled, zeroed)."""
    states: list[GradState] = []
    changed: list[tuple[str, torch.Tensor]] = []
    for name, t in leaves:
        g, end = t.grad, at_end.get(name)
        if g is None or end is None or end[0]() is not g:  # reset, or a new tensor
            states.append(None)
        elif end[1] == tensor_version(g):
            states.append(grad_state(g))
        else:
            states.append(None)
            changed.append((name, g))
    return states, changed
