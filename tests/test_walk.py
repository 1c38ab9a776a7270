"""The graph walk: equal to an independent traversal, linear on DAGs, alive on deep chains."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest
import torch
from helpers import as_read
from hypothesis import given, settings
from hypothesis import strategies as st
from plain_python import run_gradtrace

from gradtrace.extract.walk import Walk, indexed_walk, walk

UNARY = [torch.sin, torch.exp, lambda t: t * 2.0, lambda t: t**2, torch.tanh]
BINARY = [torch.add, torch.mul, torch.sub]


@st.composite
def expressions(draw: st.DrawFn) -> list[torch.Tensor]:
    """A random expression DAG over a few leaves; returns its output tensors."""
    n_leaves = draw(st.integers(1, 4))
    pool = [torch.randn(2, requires_grad=draw(st.booleans()) or i == 0) for i in range(n_leaves)]
    for _ in range(draw(st.integers(1, 25))):
        if draw(st.booleans()):
            op = draw(st.sampled_from(UNARY))
            pool.append(op(draw(st.sampled_from(pool))))
        else:
            op = draw(st.sampled_from(BINARY))
            pool.append(op(draw(st.sampled_from(pool)), draw(st.sampled_from(pool))))
    outs = [t for t in pool if t.grad_fn is not None]
    k = draw(st.integers(1, max(1, len(outs))))
    return outs[-k:] if outs else []


def reference(roots: list) -> tuple[set, set]:
    """Independent traversal: a depth-first stack, comparing nodes by identity."""
    nodes: dict[int, object] = {}
    edges = set()
    stack = [r for r in roots if r is not None]
    while stack:
        node = stack.pop()
        if id(node) in nodes:
            continue
        nodes[id(node)] = node
        for slot, (child, k) in enumerate(node.next_functions):
            if child is not None:
                edges.add((id(child), id(node), slot, k))
                stack.append(child)
    return set(nodes), edges


@settings(max_examples=60, deadline=None)
@given(expressions())
def test_walk_matches_independent_traversal(outputs: list[torch.Tensor]) -> None:
    roots = [t.grad_fn for t in outputs]
    order, edges = walk(roots)
    ref_nodes, ref_edges = reference(roots)
    assert {id(n) for n in order} == ref_nodes
    assert len(order) == len(ref_nodes)  # each node once
    assert {(id(order[s]), id(order[d]), slot, k) for s, d, slot, k in edges} == ref_edges
    assert len(edges) == len(ref_edges)  # each edge once
    # breadth-first from the outputs in order: the roots come first, in their order
    distinct_roots = list({id(r): r for r in roots if r is not None})
    assert [id(n) for n in order[: len(distinct_roots)]] == distinct_roots


def test_autograd_nodes_compare_by_identity() -> None:
    """The walk keys its index by node objects: that is identity only while no node class
    overrides == or hash (ops, leaves, custom Functions, a transformer's nodes)."""

    class Twice(torch.autograd.Function):
        @staticmethod
        def forward(ctx: object, a: torch.Tensor) -> torch.Tensor:
            return a * 2

        @staticmethod
        def backward(ctx: object, g: torch.Tensor) -> torch.Tensor:
            return g * 2

    x = torch.randn(4, 6, 16, requires_grad=True)
    layer = torch.nn.TransformerEncoderLayer(16, 2, 32, batch_first=True)
    out = Twice.apply(layer(x)).sum() + x.sum()
    order, _ = walk([out.grad_fn])
    classes = {type(node) for node in order}
    assert {"AccumulateGrad", "TwiceBackward", "AddmmBackward0"} <= {c.__name__ for c in classes}
    for cls in classes:
        assert cls.__eq__ is object.__eq__ and cls.__hash__ is object.__hash__, cls


def test_walk_is_deterministic_by_structure() -> None:
    def build() -> list:
        x = torch.tensor([1.0, 2.0], requires_grad=True)
        y = torch.tensor([3.0, 4.0], requires_grad=True)
        z = (x * y).sin() + (x + y).exp()
        order, edges = walk([z.grad_fn])
        return [type(n).__name__ for n in order], edges

    assert build() == build()


def test_later_root_groups_are_walked_after_the_first() -> None:
    x = torch.tensor(1.0, requires_grad=True)
    a = x * 2
    b = a.exp()
    order, _ = walk([a.grad_fn], [b.grad_fn])
    assert [type(n).__name__ for n in order] == ["MulBackward0", "AccumulateGrad",
                                                 "ExpBackward0"]


def test_a_real_diamond_dag_has_each_node_once() -> None:
    """Autograd's own nodes are told apart by identity. 2**16 paths: a walk without that
    fails here at once (the linear bound is asserted on counted nodes below)."""
    x = torch.tensor(1.0, requires_grad=True)
    h = x
    for _ in range(16):
        h = h * 2 + h * 3
    order, edges = walk([h.grad_fn])
    assert len(order) == 3 * 16 + 1
    assert len(edges) == 4 * 16


class Ops:
    """What a walk does to the nodes of a graph, counted; past budget of one kind it raises,
    so a walk that is not linear fails at once instead of running for ages."""

    def __init__(self, budget: int) -> None:
        self.budget = budget
        self.counts: dict[str, int] = {"next_functions": 0, "hash": 0, "eq": 0}

    def tick(self, what: str) -> None:
        self.counts[what] += 1
        if self.counts[what] > self.budget:
            raise AssertionError(f"over {self.budget} {what} calls: the walk is not linear")


class CountedNode:
    """A node of plain Python, as autograd's are to the walker (next_functions: (node or
    None, output_nr) pairs), that counts reads of next_functions, hashes and comparisons."""

    def __init__(self, ops: Ops) -> None:
        self.ops = ops
        self.children: tuple[tuple[CountedNode | None, int], ...] = ()

    @property
    def next_functions(self) -> tuple[tuple[CountedNode | None, int], ...]:
        self.ops.tick("next_functions")
        return self.children

    def __hash__(self) -> int:
        self.ops.tick("hash")
        return id(self) >> 4

    def __eq__(self, other: object) -> bool:
        self.ops.tick("eq")
        return self is other


def counted_diamonds(levels: int, ops: Ops) -> CountedNode:
    """The graph of `h = h * 2 + h * 3`, levels times over one leaf: 2**levels paths."""
    h = CountedNode(ops)  # the leaf's AccumulateGrad
    for _ in range(levels):
        twice, thrice, add = CountedNode(ops), CountedNode(ops), CountedNode(ops)
        twice.children = thrice.children = ((h, 0), (None, 0))  # the constant needs no grad
        add.children = ((twice, 0), (thrice, 0))
        h = add
    return h


@pytest.mark.parametrize("levels", [40, 3000])
def test_diamond_dag_walk_is_linear_in_nodes_and_edges(levels: int) -> None:
    """Each node's next_functions is read once, and finding whether a node was seen costs
    O(1) hashes: a walk that follows every path (2**levels) or scans a list of the nodes
    seen (quadratic) goes over budget and fails."""
    nodes, edges = 3 * levels + 1, 4 * levels
    ops = Ops(budget=3 * (nodes + edges))
    order, found = walk([counted_diamonds(levels, ops)])
    assert len(order) == nodes and len(found) == edges
    assert len(set(map(id, order))) == nodes
    assert ops.counts["next_functions"] == nodes
    assert ops.counts["hash"] + ops.counts["eq"] <= 3 * (nodes + edges)


def run_show_json(tmp_path: Path, body: str) -> dict:
    """`gradtrace show --json` on a scenario, in a subprocess (a crash is an exit code)."""
    scenario = tmp_path / "scenario.py"
    scenario.write_text("import torch\n" + textwrap.dedent(body))
    proc = run_gradtrace("show", scenario, "--json", timeout=600)
    assert proc.returncode == 0, proc.stderr[-2000:]
    return as_read(proc.stdout)


@pytest.mark.slow
def test_100000_op_chain_goes_through_show_json(tmp_path: Path) -> None:
    trace = run_show_json(tmp_path, """
        x = torch.tensor(1.0, requires_grad=True)
        y = x
        for _ in range(100_000):
            y = y * 1.0001
    """)
    assert len(trace["nodes"]) == 100_001
    assert len(trace["edges"]) == 100_000
    assert trace["nodes"][-1]["tensor"] == "x" and trace["nodes"][0]["tensor"] == "y"
    x = next(t for t in trace["tensors"] if t["name"] == "x")
    assert x["grad"]["values"] == pytest.approx(1.0001**100_000, rel=1e-2)  # float32 product


def test_50_layer_diamond_goes_through_show_json(tmp_path: Path) -> None:
    trace = run_show_json(tmp_path, """
        x = torch.tensor(1.0, requires_grad=True)
        h = x
        for _ in range(50):
            h = torch.sin(h) + torch.cos(h)
    """)
    assert len(trace["nodes"]) == 3 * 50 + 1
    assert len(trace["edges"]) == 4 * 50


def test_a_kept_walk_serves_only_the_same_roots() -> None:
    """A pass's walk is used again for the trace when it starts from the same roots and
    reaches every other root; a root beyond it needs a new walk."""
    x = torch.ones(2, requires_grad=True)
    y = x * 2
    z = (y * 3).sum()
    other = (x + 1).sum()
    roots = [z.grad_fn]
    kept = Walk(roots, *indexed_walk(roots))
    assert kept.covers([z.grad_fn, None], [y.grad_fn, z.grad_fn, None])
    assert not kept.covers([y.grad_fn], [])  # other first roots: another order
    assert not kept.covers([z.grad_fn], [other.grad_fn])  # a root it never reached
