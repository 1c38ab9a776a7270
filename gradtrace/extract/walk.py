"""The only graph walker (iterative, each node once by identity), and what it reads off nodes."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from itertools import islice
from typing import Any, NamedTuple

import torch

from ..compat.torch import (
    NO_SEQUENCE,
    error_kind,
    is_function_node,
    packed_saved,
    saved_attributes,
    saved_own_output,
    sequence_number,
)
from ..model.records import CUSTOM, LEAF, OP, PACKED, NodeKind, SavedStatus, SavedTensor
from .summary import shape_of

# An edge of the walk as positions in its node list: (src, dst, dst_input, src_output).
# Plain tuples, not named ones: the hot loop of a 1,000,000-node walk makes one per edge.
RawEdge = tuple[int, int, int, int]


def walk(*root_groups: Iterable[Any]) -> tuple[list[Any], list[RawEdge]]:
    """Breadth-first walk over next_functions, each node once by identity.

    Each group of roots is walked to the end before the next one starts (the outputs first,
    then the roots of the passes). Returns the nodes in discovery order and the edges as
    (src, dst, dst_input, src_output) indexes into that list.
    """
    order, edges, _ = indexed_walk(*root_groups)
    return order, edges


def indexed_walk(*root_groups: Iterable[Any]) -> tuple[list[Any], list[RawEdge], dict[Any, int]]:
    """walk(), and the index it keeps: node -> its position in the list.

    Nodes are keyed by identity (autograd nodes keep object's hash and ==), which saves an
    id() call per edge.
    """
    index: dict[Any, int] = {}
    order: list[Any] = []
    edges: list[RawEdge] = []
    find, add, link = index.get, order.append, edges.append  # bound once: the loop is hot
    start = 0
    for roots in root_groups:
        for root in roots:
            if root is not None and root not in index:
                index[root] = len(order)
                add(root)
        # The list is the queue: no recursion, no deque. A list iterator sees the items
        # appended while it runs, so this loop goes on until nothing new is found.
        for i, node in enumerate(islice(order, start, None), start):
            try:
                inputs = node.next_functions
            except RuntimeError:  # a Function's node whose graph was freed: it holds none
                continue
            for slot, (child, output_nr) in enumerate(inputs):
                if child is None:  # an input that needs no gradient: no edge, the slot counts
                    continue
                j = find(child)
                if j is None:
                    j = index[child] = len(order)
                    add(child)
                link((j, i, slot, output_nr))
        start = len(order)
    return order, edges, index


class Walk(NamedTuple):
    """An indexed_walk() kept with the roots it started from, to be used again."""

    roots: list[Any]
    order: list[Any]
    edges: list[RawEdge]
    positions: dict[Any, int]  # indexed_walk's index

    def covers(self, roots: list[Any], more: list[Any]) -> bool:
        """Whether indexed_walk(roots, more) would give this walk: the same first roots, and
        every further root already reached (a graph never changes below a node)."""
        return _distinct(self.roots) == _distinct(roots) \
            and all(r is None or r in self.positions for r in more)


def structure(order: list[Any], edges: list[RawEdge]) -> int:
    """A number equal for walks of graphs alike (the same node classes in the same order,
    the same edges): one step of a loop and the next."""
    return hash((tuple(map(type, order)), tuple(edges)))


def _distinct(roots: list[Any]) -> list[Any]:
    return list(dict.fromkeys(r for r in roots if r is not None))


def release(nodes: list[Any]) -> None:
    """Drop node references root first, so torch frees a deep graph one node at a time.

    Freed leaf-first, the last reference to the root would free the whole chain recursively
    in C++ and overflow the stack on graphs of 60,000+ nodes (torch 2.13).
    """
    nodes.reverse()  # a list frees its items from the end
    del nodes[:]


def lone_leaf(order: list[Any]) -> bool:
    """Whether a graph reaches one leaf alone, a plain tensor (no nn.Parameter): a loss
    rebuilt from values (`torch.tensor(loss.item(), requires_grad=True)`), then divided."""
    # a second leaf settles it: a big graph's other nodes are not looked at
    leaves = list(islice((node for node in order if hasattr(node, "variable")), 2))
    return len(leaves) == 1 and not isinstance(leaves[0].variable, torch.nn.Parameter)


def node_type(node: Any) -> str:
    """The node's class name: "MulBackward0", "AccumulateGrad", "MyPowBackward"."""
    return type(node).__name__


_KINDS: dict[type, NodeKind] = {}


def node_kind(node: Any) -> NodeKind:
    """"leaf" for AccumulateGrad, "custom" for an autograd.Function's node, else "op".

    The kind is a property of the node's class, so it is worked out once per class.
    """
    known = _KINDS.get(type(node))
    if known is not None:
        return known
    kind: NodeKind
    if is_function_node(node):  # first: a user's ctx may have any attribute
        kind = CUSTOM
    elif hasattr(node, "variable"):
        kind = LEAF
    else:
        kind = OP
    _KINDS[type(node)] = kind
    return kind


# Per node class: its (attribute, name) pairs of saved tensors, or None for a custom
# Function's node (its saved_tensors property). Looked up once per class: hasattr and dir
# on a node cost more than reading what it saved.
_SAVED_ATTRS: dict[type, tuple[tuple[str, str], ...] | None] = {}


def saved_tensors(node: Any) -> tuple[SavedTensor, ...]:
    """The tensors a node saved for backward; a freed or changed buffer is reported, not raised.

    Built-in nodes show them only as private attributes (torch_compat.saved_attributes);
    this is the one place that reads them.
    """
    kind = type(node)
    if kind in _SAVED_ATTRS:
        attrs = _SAVED_ATTRS[kind]
    else:  # a class saving nothing caches () too: dir() of it is not read again
        attrs = _SAVED_ATTRS[kind] = None if is_function_node(node) \
            else saved_attributes(node)
    if attrs is None:
        return _read_saved("saved_tensors", lambda: node.saved_tensors)
    out: list[SavedTensor] = []
    for attr, name in attrs:
        try:
            value = getattr(node, attr)
        except RuntimeError as exc:
            out.append(_unreadable(name, exc))
            continue
        if type(value) is torch.Tensor:  # the common case, first
            out.append(_one_saved(name, value))
        elif value is not None:
            out.extend(_each_saved(name, value))
    return tuple(out)


def saved_values(node: Any) -> list[tuple[torch.Tensor, bool]]:
    """The tensors themselves that a node saved for backward (unpacked: a saved input carries
    its producer as .grad_fn, a saved output this node), each with whether it is one of the
    node's own outputs (a built-in op's `result`: LayerNorm's mean and rstd need no grad, so
    they carry no .grad_fn, yet they are no input; a training BatchNorm's running statistics,
    which it writes and does not read); those that cannot be read (freed by a backward,
    changed in place) are left out. Reading runs any saved_tensors_hooks unpack
    hook, as backward would: callers leave out nodes that recompute (checkpointing)."""
    names: tuple[str, ...] = ("saved_tensors",)
    if not is_function_node(node):
        attrs = _SAVED_ATTRS.get(type(node))
        if attrs is None:
            attrs = _SAVED_ATTRS[type(node)] = saved_attributes(node)
        names = tuple(attr for attr, _ in attrs)
    found: list[tuple[torch.Tensor, bool]] = []
    for attr in names:
        try:
            value = getattr(node, attr)
        except RuntimeError:  # freed or changed in place: its value is not there to read
            continue
        output = saved_own_output(node, attr)
        if isinstance(value, torch.Tensor):
            found.append((value, output))
        elif isinstance(value, (list, tuple)):
            found.extend((t, output) for t in value if isinstance(t, torch.Tensor))
    return found


# Whether a node was made while a saved_tensors_hooks pack hook was pushed (a checkpoint's
# among them): what it saved is never unpacked by gradtrace, which would run the code's unpack
# hook, or recompute a checkpointed region, once more than python does.
Packed = Callable[[Any], bool]


class SavedCache(dict[Any, tuple[SavedTensor, ...]]):
    """Saved tensors by node (autograd nodes hash by identity), read before a backward freed
    them; packed tells the nodes whose saved tensors are named, never read."""

    def __init__(self, packed: Packed | None = None) -> None:
        super().__init__()
        self.packed = packed


def snapshot_saved(seen: SavedCache, nodes: list[Any]) -> None:
    """Read what each node not in seen saved, into seen: saved tensors are readable only
    until a backward frees them. Equal records are one object (a chain's nodes save alike)."""
    alike: dict[tuple[SavedTensor, ...], tuple[SavedTensor, ...]] = {}
    read = saved_reader(SavedCache(seen.packed))
    for node in nodes:
        if node not in seen:
            saved = read(node)
            seen[node] = alike.setdefault(saved, saved)


def saved_reader(cache: SavedCache) -> Callable[[Any], tuple[SavedTensor, ...]]:
    """A node's saved tensors, from what was read before a backward freed them (cache) or
    read now; those of a node cache.packed tells are named, not read."""
    packed = cache.packed

    def saved_of(node: Any) -> tuple[SavedTensor, ...]:
        cached = cache.get(node)
        if cached is not None:
            return cached
        return unpacked_saved(node) if packed is not None and packed(node) \
            else saved_tensors(node)

    return saved_of


def unpacked_saved(node: Any) -> tuple[SavedTensor, ...]:
    """The names of what a node saved, each "packed by a hook": its values are not read."""
    try:
        raw = packed_saved(node)
    except RuntimeError as exc:  # a custom Function's, freed by a backward
        return (_unreadable("saved_tensors", exc),)
    prefix = "saved_" if is_function_node(node) else ""  # its saved_tensors, as when read
    out: list[SavedTensor] = []
    for name, value in raw:
        if isinstance(value, (list, tuple)):
            out.extend(SavedTensor(f"{prefix}{name}[{i}]", None, None, 0, PACKED)
                       for i, one in enumerate(value) if one is not None)
        elif value is not None:
            out.append(SavedTensor(prefix + name, None, None, 0, PACKED))
    return tuple(out)


def _read_saved(name: str, read: Callable[[], Any]) -> tuple[SavedTensor, ...]:
    try:
        value = read()
    except RuntimeError as exc:
        return (_unreadable(name, exc),)
    return _each_saved(name, value)


def _unreadable(name: str, exc: RuntimeError) -> SavedTensor:
    # Reading raises once backward freed the buffers, or when a saved tensor was changed in
    # place; both are facts worth showing.
    status: SavedStatus = "modified in place" if error_kind(exc) == "inplace" else "freed"
    return SavedTensor(name, None, None, 0, status)


def _each_saved(name: str, value: Any) -> tuple[SavedTensor, ...]:
    if isinstance(value, torch.Tensor):
        return (_one_saved(name, value),)
    if isinstance(value, (list, tuple)) and value and isinstance(value[0], torch.Tensor):
        return tuple(
            _one_saved(f"{name}[{i}]", t) for i, t in enumerate(value)
            if isinstance(t, torch.Tensor)
        )
    return ()  # a saved scalar, size or flag: not a tensor


def _one_saved(name: str, t: torch.Tensor) -> SavedTensor:
    return SavedTensor(name, shape_of(t), dtype_name(t.dtype), t.numel() * t.element_size())


_DTYPE_NAMES: dict[torch.dtype, str] = {}


def dtype_name(dtype: torch.dtype) -> str:
    """ "float32" rather than "torch.float32"."""
    name = _DTYPE_NAMES.get(dtype)
    if name is None:  # str(dtype) is slow for a call made once per saved tensor
        name = _DTYPE_NAMES[dtype] = str(dtype).removeprefix("torch.")
    return name


def readable_grad(t: torch.Tensor) -> torch.Tensor | None:
    """t.grad, without torch's warning for non-leaf tensors that do not retain it."""
    if t.is_leaf or t.retains_grad:
        return t.grad
    return None


class NodeIds:
    """The node id ("n<position in the walk>") of an autograd node, or of a leaf tensor."""

    def __init__(self, index: dict[Any, int], leaf_index: dict[int, int],
                 ids: list[str]) -> None:
        self.index, self.leaf_index, self.ids = index, leaf_index, ids

    def node(self, node: Any) -> str | None:
        """The id of node, or None if the walk did not reach it."""
        i = self.index.get(node)
        return None if i is None else self.ids[i]

    def of(self, node: Any) -> str:
        """The id of a node the walk surely reached (a root or a recorded node)."""
        return self.ids[self.index[node]]

    def __contains__(self, node: Any) -> bool:
        return node in self.index

    def leaf(self, t: torch.Tensor) -> str | None:
        """The id of t's AccumulateGrad node, found by t itself (t.grad_fn is None)."""
        i = self.leaf_index.get(id(t))
        return None if i is None else self.ids[i]


def made_since(output: Any, start: int) -> Iterator[Any]:
    """The nodes behind output (tensors, or tuples, lists and dicts of them) that autograd
    made since its sequence number was start: what one call created."""
    seen: set[int] = set()
    todo = [t.grad_fn for t in tensors_in(output) if t.grad_fn is not None]
    while todo:
        node = todo.pop()
        if id(node) in seen:
            continue
        seen.add(id(node))
        number = sequence_number(node)
        if number < start or number == NO_SEQUENCE:
            continue  # made before the call began, or a leaf
        yield node
        todo.extend(child for child, _ in node.next_functions if child is not None)


def tensors_in(value: Any) -> list[torch.Tensor]:
    """The tensors in a value: a tensor, or tuples, lists and dicts of them."""
    found, todo = [], [value]
    while todo:
        item = todo.pop()
        if isinstance(item, torch.Tensor):
            found.append(item)
        elif isinstance(item, (tuple, list)):
            todo.extend(item)
        elif isinstance(item, dict):
            todo.extend(item.values())
    return found
