"""Gradient flow: what every node received and sent, hooks, higher order, NaN origin."""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from pathlib import Path

import pytest
import torch
from helpers import SCENARIOS, as_read, flow_entry, grad, invoke, show_json, tensor
from hypothesis import given, settings
from hypothesis import strategies as st
from plain_python import run_plain

from gradtrace.capture.observers.flow import FlowCapture, content_key
from gradtrace.extract.summary import grad_stats, to_summaries
from gradtrace.extract.walk import walk

approx = pytest.approx


def flow_of(trace: dict, name: str, pass_index: int = -1) -> dict:
    """passes[i].flow of the node of a named tensor (its grad_fn, or a leaf's AccumulateGrad),
    its gradients resolved."""
    return flow_entry(trace, tensor(trace, name)["node"], pass_index)


def values(summaries: list) -> list:
    return [None if s is None else s["values"] for s in summaries]


def test_code_4_each_node_received_and_sent() -> None:
    t = show_json("chain_rule.py")
    assert values(flow_of(t, "z")["grad_outputs"]) == approx([1.0])
    assert values(flow_of(t, "z")["grad_inputs"]) == approx([0.008])  # dz/dy
    assert values(flow_of(t, "y")["grad_outputs"]) == approx([0.008])
    assert values(flow_of(t, "y")["grad_inputs"]) == approx([0.6])  # 0.008 * 75
    assert values(flow_of(t, "x")["grad_outputs"]) == approx([0.6])
    assert values(flow_of(t, "x")["grad_inputs"]) == []
    ran = list(t["passes"][-1]["flow"])  # entries in run order
    positions = [ran.index(tensor(t, n)["node"]) for n in ("z", "y", "x")]
    assert positions == [0, 1, 2]  # backward order: from the output down to the leaf


def test_code_4_tree_reads_the_chain_rule() -> None:
    out = invoke("show", SCENARIOS / "chain_rule.py").stdout
    assert "PowBackward0 (y)  n1  line 6  grad in 0.008 = 1 × 0.008" in out
    assert "AccumulateGrad → x  float32[]  n2  grad in 0.6 = 0.008 × 75" in out


def test_code_9_two_paths_add_up_to_1_6() -> None:
    t = show_json("two_paths_add_up.py")
    leaf = tensor(t, "x")["node"]
    assert values(flow_entry(t, leaf, 0)["grad_outputs"]) == approx([1.6])
    sent = sorted(values([flow_entry(t, e["dst"], 0)["grad_inputs"][e["dst_input"]]])[0]
                  for e in t["edges"] if e["src"] == leaf)
    assert sent == approx([0.6, 1.0])
    out = invoke("show", SCENARIOS / "two_paths_add_up.py").stdout
    assert "grad in 1.6  this edge 0.6 = 0.008 × 75" in out
    assert "this edge 1 = 0.1 × 10" in out


def test_code_7_each_pass_has_its_own_flow() -> None:
    t = show_json("retain_graph_accumulates.py")
    assert [values(flow_of(t, "x", i)["grad_outputs"]) for i in (0, 1)] == [approx([0.6])] * 2


def test_code_5_why_grad_is_none() -> None:
    t = show_json("chain_rule.py")
    assert tensor(t, "y")["grad_note"] == "non-leaf: kept only after .retain_grad()"
    assert tensor(t, "x")["grad_note"] is None
    retained = show_json("retain_grad.py")
    assert tensor(retained, "y")["grad_note"] is None
    detached = show_json("detach_then_requires_grad.py")
    assert tensor(detached, "x")["grad_note"] == "not reached by any backward pass"
    cut = show_json("detach_cuts_graph.py")
    assert tensor(cut, "w")["grad_note"] == "requires_grad is False; cut from y by detach()"


def test_code_19_hook_before_and_after() -> None:
    t = show_json("tensor_hook.py")
    log = flow_of(t, "z")
    pow_ = flow_of(t, "y")
    assert values(log["grad_inputs"]) == approx([0.008])  # sent by log
    assert values(pow_["grad_outputs"]) == approx([0.016])  # arrived, after the hook
    assert grad(t, "x") == approx(1.2)
    (finding,) = [f for f in t["findings"] if f["code"] == "hook-changed-gradient"]
    assert finding["tensor"] == "y" and "0.008 was sent, 0.016 arrived" in finding["message"]
    out = invoke("show", SCENARIOS / "tensor_hook.py").stdout
    assert "grad in 0.016  (sent 0.008 = 1 × 0.008; a hook changed it)" in out


def test_code_18_create_graph_gradient_has_a_graph() -> None:
    t = show_json("second_derivative.py")
    assert tensor(t, "x")["grad_note"].startswith("has a graph")
    t2 = show_json("second_derivative.py", "--root", "x.grad")
    assert t2["output_names"] == ["x.grad"]
    types = [n["type"] for n in t2["nodes"]]
    assert types[0] == "CopyBackwards" and "AccumulateGrad" in types


def test_order_2_code_18() -> None:
    t = show_json("chain_rule.py", "--order", "2")
    s = t["second_order"]
    assert s["root"] == "z" and s["wrt"] == ["x"] and s["error"] is None
    assert s["blocks"][0]["values"] == approx(-0.12)
    assert grad(t, "x") == approx(0.6)  # the second derivative changed no .grad


def test_order_2_hessian_of_a_vector_leaf(tmp_path: Path) -> None:
    path = tmp_path / "h.py"
    path.write_text("import torch\nx = torch.tensor([1.0, 2.0], requires_grad=True)\n"
                    "z = (x[0] ** 2) * x[1] + x[1] ** 3\n")
    t = show_json(path, "--order", "2")
    (block,) = t["second_order"]["blocks"]
    assert block["values"] == [approx([4.0, 2.0]), approx([2.0, 12.0])]
    out = invoke("show", path, "--order", "2").stdout
    assert "d²z/dx² =" in out and "[2, 12]" in out


def test_order_2_mixed_leaves() -> None:
    t = show_json("tensor_exponent.py", "--order", "2")  # z = q * ln(x)
    blocks = {(b["a"], b["b"]): b["values"] for b in t["second_order"]["blocks"]}
    assert blocks[("x", "x")] == approx(-0.12)
    assert blocks[("x", "q")] == approx(0.2) and blocks[("q", "x")] == approx(0.2)
    assert blocks[("q", "q")] == approx(0.0)


def test_order_2_of_a_vector_root_says_why(tmp_path: Path) -> None:
    path = tmp_path / "v.py"
    path.write_text("import torch\nx = torch.ones(3, requires_grad=True)\ny = x * 2\n")
    assert "not a scalar" in show_json(path, "--order", "2")["second_order"]["error"]


@pytest.mark.parametrize("expr,op", [("torch.sqrt(y)", "SqrtBackward0"),
                                     ("torch.log(y)", "LogBackward0"),
                                     ("y / y", "DivBackward0")])
def test_nan_origin_names_the_first_bad_node(tmp_path: Path, expr: str, op: str) -> None:
    path = tmp_path / "nan.py"
    path.write_text("import torch\nx = torch.tensor([0.0, 4.0], requires_grad=True)\n"
                    f"y = x * 2\nw = {expr}\nz = (w * 3).sum()\n")
    t = show_json(path)
    (finding,) = [f for f in t["findings"] if f["code"] == "nan-gradient"]
    assert finding["tensor"] == "w" and op in finding["message"]
    assert "MulBackward0 (y)" in finding["message"]
    assert not tensor(t, "x")["grad"]["finite"]


def test_finite_gradients_have_no_nan_finding() -> None:
    t = show_json("two_paths_add_up.py")
    assert not [f for f in t["findings"] if f["code"] == "nan-gradient"]


def test_pass_option_picks_the_pass_shown() -> None:
    first = invoke("show", SCENARIOS / "backward_across_detach.py", "--pass", "1").stdout
    assert "gradients of pass 1 at line 11 `z.backward()`" in first
    assert "AccumulateGrad → w  float32[3]  n1  grad in [4, 7, 9]" in first
    assert "→ x" not in first.split("tensors")[0]  # pass 1's graph alone: x is not on it
    last = invoke("show", SCENARIOS / "backward_across_detach.py").stdout
    assert "gradients of pass 2 at line 12" in last and "n1  grad in 74" in last
    assert invoke("show", SCENARIOS / "chain_rule.py", "--pass", "5").exit_code == 2


def grads_after(build, capture: bool) -> list[torch.Tensor]:
    outputs, leaves = build()
    roots = [o for o in outputs if o.grad_fn is not None]
    hooks = FlowCapture(*walk([o.grad_fn for o in roots])) if capture else None
    torch.autograd.backward(roots, [torch.ones_like(o) for o in roots])
    if hooks is not None:
        assert hooks.records  # the capture did see the pass
        hooks.remove()
    return [leaf.grad for leaf in leaves]


OPS = [torch.sin, torch.exp, torch.tanh, lambda t: t * t, lambda t: t / (1 + t * t)]


@settings(max_examples=40, deadline=None)
@given(st.lists(st.tuples(st.integers(0, len(OPS) - 1), st.integers(0, 50), st.integers(0, 50)),
                min_size=1, max_size=20), st.integers(0, 2**31 - 1))
def test_capture_changes_no_gradient_on_random_graphs(recipe: list, seed: int) -> None:
    def build() -> tuple[list[torch.Tensor], list[torch.Tensor]]:
        g = torch.Generator().manual_seed(seed)
        leaves = [torch.randn(3, generator=g, requires_grad=True) for _ in range(3)]
        pool = list(leaves)
        for op, i, j in recipe:  # each step: op(pool[i]) + pool[j], a DAG with shared nodes
            pool.append(OPS[op](pool[i % len(pool)]) + pool[j % len(pool)])
        return pool[len(leaves):], leaves

    plain, captured = grads_after(build, False), grads_after(build, True)
    for p, c in zip(plain, captured, strict=True):
        if p is None or c is None:
            assert p is c
        else:  # bit for bit, NaN included
            torch.testing.assert_close(c, p, rtol=0, atol=0, equal_nan=True)


def test_capture_changes_no_gradient_on_a_transformer() -> None:
    def build() -> tuple[list[torch.Tensor], list[torch.Tensor]]:
        torch.manual_seed(0)
        layer = torch.nn.TransformerEncoderLayer(d_model=32, nhead=4, dim_feedforward=64,
                                                 dropout=0.0, batch_first=True)
        model = torch.nn.TransformerEncoder(layer, num_layers=2, enable_nested_tensor=False)
        loss = model(torch.randn(2, 5, 32)).pow(2).mean()
        return [loss], list(model.parameters())

    plain, captured = grads_after(build, False), grads_after(build, True)
    assert len(plain) > 10
    assert all(torch.equal(p, c) for p, c in zip(plain, captured, strict=True))


def test_capture_keeps_summaries_not_gradients() -> None:
    x = torch.randn(1000, requires_grad=True)
    y = (x * 2).exp().sum()
    capture = FlowCapture(*walk([y.grad_fn]))
    y.backward()
    capture.remove()
    for outs, ins in ((r.received, r.sent) for r in capture.records.values()):
        for _shape, stats, kept, *_ in [s for s in outs + ins if s is not None]:
            if stats is not None:  # a row of a table of floats: (squared norm, min, max)
                table, row = stats
                assert all(isinstance(v, float) for v in table.row(row))
            # a 0-d gradient is kept as its number, a small one as a copy
            assert kept is None or isinstance(kept, float) or kept.numel() <= 64
    calls = len(capture.records)
    z = (x * 3).sum()
    z.backward()
    assert len(capture.records) == calls  # removed hooks no longer fire


def test_a_hook_on_a_leaf_is_seen(tmp_path: Path) -> None:
    path = tmp_path / "leaf_hook.py"
    path.write_text("import torch\nx = torch.tensor(2.0, requires_grad=True)\n"
                    "x.register_hook(lambda g: g * 10)\ny = x * 3\n")
    t = show_json(path)
    assert values(flow_of(t, "y")["grad_inputs"])[0] == approx(3.0)  # sent to x
    assert values(flow_of(t, "x")["grad_outputs"]) == approx([30.0])  # after x's hook
    assert grad(t, "x") == approx(30.0)
    assert any(f["code"] == "hook-changed-gradient" for f in t["findings"])


def test_leaves_that_do_not_run_have_no_record(tmp_path: Path) -> None:
    path = tmp_path / "grad_only.py"
    path.write_text("import torch\nx = torch.tensor(2.0, requires_grad=True)\n"
                    "w = torch.tensor(5.0, requires_grad=True)\ny = x * w\n"
                    "(gx,) = torch.autograd.grad(y, x)\n"
                    "y2 = x * w\ny2.backward(inputs=[w])\n")
    t = show_json(path)
    assert tensor(t, "gx")["value"]["values"] == approx(5.0)
    leaves = {tensor(t, name)["node"] for name in ("x", "w")}
    assert not leaves & set(t["passes"][0]["flow"])  # autograd.grad runs no AccumulateGrad
    ran = set(t["passes"][1]["flow"])
    assert tensor(t, "w")["node"] in ran and tensor(t, "x")["node"] not in ran
    assert grad(t, "x") is None and grad(t, "w") == approx(2.0)


def _records(make_loss: Callable[[], torch.Tensor], skip: bool) -> tuple[list, int]:
    """Summaries of every node's flow in one full backward, and how many hooks it took."""
    loss = make_loss()
    nodes, edges = walk([loss.grad_fn])
    capture = FlowCapture(nodes, edges, leaves_run=skip, skip_relayout=skip)
    hooked = len(capture._handles)
    loss.backward()
    capture.remove()
    # sorted stably by order, the records are in a run order: each node after the node it
    # receives from
    ran = sorted(capture.records.values(), key=lambda r: r.position)
    position = {id(r.node): i for i, r in enumerate(ran)}
    assert all(position[id(nodes[src])] > position[id(nodes[dst])] for src, dst, _, _ in edges)
    out = []
    for node in nodes:
        record = capture.records[id(node)]
        outs, ins = record.received, record.sent
        out.append([len(outs), *((s.shape, s.norm, s.min, s.max) if s else None
                                 for s in to_summaries(outs + ins))])
    return out, hooked


def _assert_same_records(make_loss: Callable[[], torch.Tensor]) -> tuple[int, int]:
    hooked_all, every = _records(make_loss, skip=False)
    read_off, fewer = _records(make_loss, skip=True)
    for a, b in zip(hooked_all, read_off, strict=True):
        assert a[0] == b[0]  # as many gradients received
        for sa, sb in zip(a[1:], b[1:], strict=True):
            assert (sa is None) == (sb is None)
            if sa is not None:
                assert sa[0] == sb[0]
                # float32 sums may differ in the last bits between two runs of a backward;
                # NaN must stay NaN
                assert sb[1:] == approx(sa[1:], rel=1e-4, abs=1e-6, nan_ok=True)
    return every, fewer


def test_skipped_relayout_and_leaf_hooks_change_no_record() -> None:
    """Records read off neighbours (views, selects, single-edge leaves) equal hooked ones."""
    layer = torch.nn.TransformerEncoderLayer(d_model=32, nhead=4, dim_feedforward=64,
                                             dropout=0.0, batch_first=True)
    model = torch.nn.TransformerEncoder(layer, num_layers=2, enable_nested_tensor=False)
    x = torch.randn(4, 6, 32)

    def loss() -> torch.Tensor:
        model.zero_grad(set_to_none=True)
        return model(x).pow(2).mean()

    every, fewer = _assert_same_records(loss)
    assert fewer < every / 2  # most hooks are not needed


@pytest.mark.parametrize("sign", [1.0, -1.0, float("nan")])
def test_selects_and_slices_read_off_add_zeros(sign: float) -> None:
    """What a select or slice sends is what it received plus zeros: min/max take in 0."""
    x = torch.randn(5, 80, requires_grad=True)

    def loss() -> torch.Tensor:
        x.grad = None
        picked = x[2] * 3 + x[1:4, ::2].expand(3, 40).reshape(-1)[:80]
        return picked.sum() * sign  # gradients of one sign: zeros change min or max

    every, fewer = _assert_same_records(loss)
    assert fewer < every


@settings(max_examples=40, deadline=None)
@given(st.lists(st.tuples(st.integers(0, len(OPS) - 1), st.integers(0, 50), st.booleans()),
                min_size=1, max_size=30), st.integers(0, 2**31 - 1), st.booleans())
def test_records_read_off_neighbours_equal_hooked_ones(recipe: list, seed: int,
                                                      scalar: bool) -> None:
    """Chains, views and single-edge leaves without hooks: on random graphs (runs of single
    edges, sums, shared nodes; 0-d or not) every record and run order is the hooked one."""
    def loss() -> torch.Tensor:
        g = torch.Generator().manual_seed(seed)
        shape = () if scalar else (3,)
        pool = [torch.randn(shape, generator=g, requires_grad=True) for _ in range(2)]
        for op, i, chain in recipe:  # a link of a chain, or a sum with an earlier tensor
            t = OPS[op](pool[-1])
            pool.append(t * 1.5 if chain else t + pool[i % len(pool)])
        return pool[-1].sum()

    _assert_same_records(loss)


def test_a_hook_on_a_named_view_is_seen(tmp_path: Path) -> None:
    path = tmp_path / "view_hook.py"
    path.write_text("import torch\nx = torch.ones(100, requires_grad=True)\n"
                    "y = x.view(10, 10)\ny.register_hook(lambda g: g * 2)\n"
                    "z = (y * 3).sum()\n")
    t = show_json(path)
    assert tensor(t, "y")["grad_fn"] == "ViewBackward0"
    assert flow_of(t, "y")["grad_outputs"][0]["max"] == approx(6.0)  # after the hook
    assert tensor(t, "x")["grad"]["max"] == approx(6.0)
    assert any(f["code"] == "hook-changed-gradient" and f["tensor"] == "y"
               for f in t["findings"])


def test_sparse_gradients_are_summarised(tmp_path: Path) -> None:
    """An nn.Embedding(sparse=True) sends a sparse gradient: summarised, the pass unharmed."""
    path = tmp_path / "sparse.py"
    path.write_text("import torch\ntorch.manual_seed(0)\n"
                    "emb = torch.nn.Embedding(10, 3, sparse=True)\n"
                    "loss = emb(torch.tensor([1, 2, 2, 5])).pow(2).sum()\n")
    t = show_json(path)
    assert t["passes"][0]["error"] is None
    node = tensor(t, "emb.weight")["node"]
    received = flow_entry(t, node, 0)["grad_outputs"][0]
    after = tensor(t, "emb.weight")["grad"]
    assert received["shape"] == after["shape"] == [10, 3]
    assert received["norm"] == approx(after["norm"]) and after["norm"] > 0
    assert not [f for f in t["findings"] if f["code"] == "flow-not-recorded"]


def test_a_failing_summary_never_fails_the_pass(tmp_path: Path,
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    """Whatever goes wrong inside gradtrace's hook, the user's backward runs as usual."""
    def broken(*_: object) -> None:
        raise RuntimeError("cannot summarise this")

    monkeypatch.setattr("gradtrace.capture.observers.flow.grad_stats", broken)
    path = tmp_path / "plain.py"
    path.write_text("import torch\nx = torch.ones(100, requires_grad=True)\n"
                    "y = (x * 3).sin().sum()\n")
    t = show_json(path)
    assert t["passes"][0]["error"] is None
    # x.grad is 3 cos(3) in each of its 100 elements, as without gradtrace
    assert tensor(t, "x")["grad"]["norm"] == approx(30 * abs(math.cos(3.0)), rel=1e-5)
    finding = next(f for f in t["findings"] if f["code"] == "flow-not-recorded")
    assert "cannot summarise this" in finding["message"] and finding["severity"] == "warning"


def test_order_2_of_a_requested_root_not_the_first_pass_root(tmp_path: Path) -> None:
    """Regression: `--order 2 --root gg` differentiated the first pass's vector root."""
    scenario = tmp_path / "s.py"
    scenario.write_text("import torch\nx = torch.tensor([1.0, 2.0], requires_grad=True)\n"
                        "y = x**2\ny.backward(torch.ones(2))\ngg = (x**3).sum()\n")
    trace = show_json(scenario, "--order", "2", "--root", "gg")
    second = trace["second_order"]
    assert second["error"] is None and second["root"] == "gg"
    assert second["blocks"] == [{"a": "x", "b": "x", "values": [[6.0, 0.0], [0.0, 12.0]]}]


def test_an_earlier_pass_graph_shows_that_pass_gradients(tmp_path: Path) -> None:
    """Regression: the graph of loop iteration 1 said "(no gradient in this pass)" though
    pass 1 carried gradients through it."""
    scenario = tmp_path / "loop.py"
    scenario.write_text("import torch\nw = torch.tensor(2.0, requires_grad=True)\n"
                        "for k in (1.0, 3.0):\n    loss = w * k\n    loss.backward()\n")
    out = invoke("show", scenario, "--pass", "all").stdout
    assert "root of pass 1: loss  ·  gradients of pass 1" in out
    first = out.split("root of pass 1")[1]
    assert "MulBackward0  n2  line 4  grad in 1" in first and "no gradient" not in first
    # by default one step's graph, pass 1's flow placed on it (the same structure)
    shown = show_json(scenario)
    assert len(shown["nodes"]) == 2 and [p["graph"] for p in shown["passes"]] == [0, 0]
    assert [sorted(p["flow"]) for p in shown["passes"]] == [["n0", "n1"], ["n0", "n1"]]


def test_a_stale_sent_key_is_not_taken_for_a_new_gradient() -> None:
    """What was sent to a node may be copied on its way (a view without a hook reshapes a
    transposed gradient) and freed; a gradient the node then makes can take its memory, and
    so its content key. Only the received tensor itself may reuse the sent summary: here the
    stale key is the key of the very gradient the node sends on."""
    a = torch.randn(32, 32, requires_grad=True)
    b = a * 2
    nodes, edges = walk([b.grad_fn])
    capture = FlowCapture(nodes, edges, leaves_run=False)
    mul = b.grad_fn
    received = torch.full((32, 32), 3.0)
    made = torch.full((32, 32), 6.0)  # what MulBackward0 sends: received * 2
    stale = torch.full((32, 32), -1.0)  # what "was sent" to it, now gone, at made's address
    capture._sent[id(mul), 0] = (content_key(made), grad_stats(stale, capture._table))
    capture._summarise(mul, (), (made, None), (received,))
    record = capture.records[id(mul)]
    got, sent = to_summaries([*record.received, *record.sent[:1]])
    capture.remove()
    assert (got.min, got.max) == (3.0, 3.0)
    assert (sent.min, sent.max) == (6.0, 6.0)  # its own statistics, not the stale -1.0


def test_scalar_gradients_are_one_entry_per_edge_and_keep_their_sign(tmp_path: Path) -> None:
    """A 0-d gradient is summarised as its number: what a node sends and its input receives
    is one table entry, a hook's change is still seen, and -0.0 stays apart from 0.0."""
    path = tmp_path / "numbers.py"
    path.write_text("import torch\nx = torch.tensor(2.0, requires_grad=True)\n"
                    "w = torch.tensor(1.0, requires_grad=True)\n"
                    "y = x * 3\ny.register_hook(lambda g: g * 10)\n"
                    "z = y * 4 + (w * -1.0) * 0.0\nz.backward()\n")
    result = invoke("show", path, "--json")
    assert result.exit_code == 0, result.stderr
    raw = as_read(result.stdout)
    ids = {t["name"]: t["node"] for t in raw["tensors"]}
    flow = raw["passes"][0]["flow"]
    table = raw["gradients"]
    y_in, x_in = flow[ids["y"]]["grad_inputs"][0], flow[ids["x"]]["grad_outputs"][0]
    assert y_in == x_in and table[x_in]["values"] == 120.0  # one entry, both ends
    assert table[flow[ids["y"]]["grad_outputs"][0]]["values"] == 40.0  # after the hook
    assert any(f["code"] == "hook-changed-gradient" for f in raw["findings"])
    w_got = table[flow[ids["w"]]["grad_outputs"][0]]["values"]
    assert w_got == 0.0 and math.copysign(1.0, w_got) == -1.0
    assert any(g.get("values") == 0.0 and math.copysign(1.0, g["values"]) == 1.0
               for g in table)  # the 0.0 that the multiplication by -1 received


def test_a_chain_needs_a_hook_on_every_other_node() -> None:
    x = torch.tensor(0.5, requires_grad=True)

    def loss() -> torch.Tensor:
        x.grad = None
        y = x
        for k in range(100):  # ones - y sends to its second input: a slot without an edge
            y = y.sin() if k % 2 else y * 1.5 if k % 3 else torch.ones(()) - y
        return y

    every, fewer = _assert_same_records(loss)
    assert every == 101 and fewer <= 51  # the leaf too is read off its sender


def test_a_hook_on_a_tensor_inside_a_function_is_seen(tmp_path: Path) -> None:
    """A gradient-scaling hook on a tensor no name reaches (made inside a function, in the
    middle of a chain) keeps its node hooked: the change is seen, nothing is read across it."""
    path = tmp_path / "inner_hook.py"
    path.write_text("import torch\n"
                    "def scaled(t):\n"
                    "    h = (t * 2).sin() * 3\n"
                    "    h.register_hook(lambda g: g * 10)\n"
                    "    return (h * 5).cos() * 7\n"
                    "x = torch.tensor(0.3, requires_grad=True)\n"
                    "loss = scaled(x * 1.5)\n"
                    "loss.backward()\n")
    raw = show_json(path)
    changed = [f for f in raw["findings"] if f["code"] == "hook-changed-gradient"]
    assert len(changed) == 1 and "MulBackward0" in changed[0]["message"]
    x = torch.tensor(0.3, requires_grad=True)
    h = ((x * 1.5) * 2).sin() * 3
    h.register_hook(lambda g: g * 10)
    ((h * 5).cos() * 7).backward()
    assert grad(raw, "x") == approx(x.grad.item())


SPARSE_STEPS = '''
import json, torch
torch.manual_seed({seed})
emb = torch.nn.Embedding(10, 8, sparse=True)
opt = torch.optim.SparseAdam(emb.parameters(), lr=0.01)
norms = []
for step in range(6):
    opt.zero_grad()
    loss = sum(emb(torch.randint(0, 10, (31, k))).pow(p).sum() for k, p in {uses})
    loss.backward()
    norms.append(emb.weight.grad.coalesce().values().norm().item())
    opt.step()
print(json.dumps(norms))
'''


@pytest.mark.parametrize(("seed", "uses"), [(0, [(1, 2), (5, 1)]), (1, [(2, 1)]),
                                            (2, [(1, 2), (3, 1), (4, 3)])])
def test_a_sparse_gradients_flow_is_its_own_sum_in_every_step(
        tmp_path: Path, seed: int, uses: list[tuple[int, int]]) -> None:
    # word2vec's pattern: one sparse Embedding used k times a step; the engine sums the
    # sparse gradients, and the sum must be summarised from its values (its id may be a
    # freed gradient's)
    script = tmp_path / "sparse.py"
    script.write_text(SPARSE_STEPS.format(seed=seed, uses=uses))
    plain = run_plain(script)
    assert plain.returncode == 0, plain.stderr
    trace = show_json(script, "--pass", "all")
    into = [trace["gradients"][flow["grad_outputs"][0]]["norm"]
            for p in trace["passes"] for nid, flow in p["flow"].items()
            if next(n for n in trace["nodes"] if n["id"] == nid)["type"] == "AccumulateGrad"]
    assert into == pytest.approx(json.loads(plain.stdout), rel=1e-5)
