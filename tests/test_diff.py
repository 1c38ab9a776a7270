"""`gradtrace diff`: nodes matched by what they are, and every kind of change reported."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from helpers import SCENARIOS, as_read, invoke, needs_dot

from gradtrace.diff.compare import compare
from gradtrace.diff.match import match_nodes
from gradtrace.model.records import Edge, Node, Source, Trace

RELU = SCENARIOS / "diff" / "mlp_relu.py"
TANH = SCENARIOS / "diff" / "mlp_tanh.py"


def saved(scenario: Path, folder: Path, name: str) -> Path:
    path = folder / name
    result = invoke("show", scenario, "--json")
    assert result.exit_code == 0, result.stderr
    path.write_text(result.stdout)
    return path


def variant(folder: Path, name: str, old: str, new: str, source: Path = RELU) -> Path:
    path = folder / name
    text = source.read_text()
    assert old in text
    path.write_text(text.replace(old, new))
    return path


def diff_json(*args: str | Path) -> tuple[int, dict[str, Any]]:
    result = invoke("diff", *args, "--json")
    assert result.exit_code in (0, 1), result.stderr
    return result.exit_code, json.loads(result.stdout)


def test_a_scenario_and_its_saved_trace_are_the_same(tmp_path: Path) -> None:
    result = invoke("diff", saved(RELU, tmp_path, "relu.json"), RELU)
    assert result.exit_code == 0, result.stdout + result.stderr
    assert "same: 11 nodes match, 1 pass(es)" in result.stdout


def test_relu_swapped_for_tanh_names_both_ops_and_the_module() -> None:
    result = invoke("diff", RELU, TANH)
    assert result.exit_code == 1
    assert "ReluBackward0 → TanhBackward0 in model.1 (A n4, B n4, line 9)" in result.stdout
    code, data = diff_json(RELU, TANH)
    assert code == 1 and data["schema"] == "gradtrace.diff/1" and data["same"] is False
    assert [(c["change"], c["a"]["type"], c["b"]["type"], c["b"]["module"])
            for c in data["nodes"]] == [("changed", "ReluBackward0", "TanhBackward0", "model.1")]
    assert data["modules"] == ["model.1"] and data["edges"] == [] and data["tensors"] == []
    # the gradients below the swapped op moved: each parameter's, named, in pass 1
    assert {(g["tensor"], g["pass"]) for g in data["gradients"]} == {
        ("model.0.weight", 1), ("model.0.bias", 1), ("model.2.weight", 1), ("model.2.bias", 1)}


def renumbered(data: dict[str, Any]) -> dict[str, Any]:
    """The same trace with every node id changed (reversed order)."""
    ids = [n["id"] for n in data["nodes"]]
    new = dict(zip(ids, reversed(ids), strict=True))
    data["nodes"] = [{**n, "id": new[n["id"]]} for n in reversed(data["nodes"])]
    data["edges"] = [{**e, "src": new[e["src"]], "dst": new[e["dst"]]} for e in data["edges"]]
    data["outputs"] = [new[o] for o in data["outputs"]]
    for t in data["tensors"]:
        t["node"] = new.get(t["node"])
    for p in data["passes"]:
        p["roots"] = [new[r] for r in p["roots"]]
        p["flow"] = {new[k]: {key: v for key, v in f.items() if key != "order"}
                     for k, f in p["flow"].items()}
    for f in data["findings"]:
        if "node" in f:
            f["node"] = new[f["node"]]
    return data


def test_a_renumbered_but_equal_graph_is_the_same(tmp_path: Path) -> None:
    path = saved(RELU, tmp_path, "relu.json")
    moved = tmp_path / "renumbered.json"
    moved.write_text(json.dumps(renumbered(as_read(path.read_text()))))
    assert json.loads(moved.read_text())["nodes"][0]["type"] == "AccumulateGrad"
    result = invoke("diff", path, moved)
    assert result.exit_code == 0, result.stdout + result.stderr
    assert "same: 11 nodes match" in result.stdout


def test_gradient_drift_beyond_the_tolerance_names_the_parameter(tmp_path: Path) -> None:
    drifted = variant(tmp_path, "drifted.py", "x = torch.randn(8, 3)",
                      "x = torch.randn(8, 3) * 1.001")
    code, data = diff_json(RELU, drifted)
    assert code == 1 and data["nodes"] == [] and data["edges"] == []
    weight = [g for g in data["gradients"] if g["tensor"] == "model.0.weight"]
    assert weight[0]["pass"] == 1 and weight[0]["change"] == "changed"
    assert weight[0]["detail"].startswith("norm ")
    result = invoke("diff", RELU, drifted)
    assert "model.0.weight, pass 1: norm " in result.stdout
    # within a looser tolerance: the same
    assert invoke("diff", RELU, drifted, "--rtol", "0.1").exit_code == 0


def test_an_inserted_layer_is_added_and_the_rest_still_matches(tmp_path: Path) -> None:
    deeper = variant(tmp_path, "deeper.py", "nn.ReLU(), nn.Linear(4, 1)",
                     "nn.ReLU(), nn.Linear(4, 4), nn.Sigmoid(), nn.Linear(4, 1)")
    code, data = diff_json(RELU, deeper)
    assert code == 1
    added = sorted((c["b"]["type"], c["b"]["module"]) for c in data["nodes"])
    assert {c["change"] for c in data["nodes"]} == {"added"}
    assert added == [("AccumulateGrad", "model.4"), ("AccumulateGrad", "model.4"),
                     ("AddmmBackward0", "model.4"), ("SigmoidBackward0", "model.3"),
                     ("TBackward0", "model.4")]
    assert data["modules"] == ["model.2", "model.3", "model.4"]
    assert {(t["name"], t["change"]) for t in data["tensors"]} == {
        ("model.4.weight", "added"), ("model.4.bias", "added")}
    # model.2 now feeds the Sigmoid, not the loss: one edge removed, one added between
    # nodes both sides have
    rewired = [(e["change"], e["src_type"], e["dst_type"]) for e in data["edges"]
               if e["dst_type"] == "PowBackward0"]
    assert sorted(rewired) == [("added", "AddmmBackward0", "PowBackward0"),
                               ("removed", "AddmmBackward0", "PowBackward0")]


def test_new_and_fixed_findings(tmp_path: Path) -> None:
    healthy = tmp_path / "healthy.py"
    healthy.write_text("import torch\nx = torch.tensor([1.0, 4.0], requires_grad=True)\n"
                       "y = x.sqrt().sum()\ny.backward()\n")
    broken = variant(tmp_path, "broken.py", "[1.0, 4.0]", "[0.0, 4.0]", healthy)
    code, data = diff_json(healthy, broken)
    assert code == 1 and data["nodes"] == []
    assert [f["code"] for f in data["findings"]["new"]] == ["nan-gradient"]
    assert data["findings"]["fixed"] == []
    assert [(g["tensor"], g["detail"]) for g in data["gradients"]][0][0] == "x"
    _, back = diff_json(broken, healthy)
    assert [f["code"] for f in back["findings"]["fixed"]] == ["nan-gradient"]


def test_github_annotations_point_at_the_changed_line() -> None:
    result = invoke("diff", RELU, TANH, "--format", "github")
    assert result.exit_code == 1
    first = result.stdout.splitlines()[0]
    assert first.startswith("::error file=") and "mlp_tanh.py,line=9," in first
    assert first.endswith("::ReluBackward0 → TanhBackward0 in model.1 (A n4, B n4, line 9)")
    assert "title=gradtrace diff%3A gradient changed::model.0.weight, pass 1" in result.stdout


@needs_dot
def test_the_union_picture_colours_what_changed(tmp_path: Path) -> None:
    deeper = variant(tmp_path, "deeper.py", "nn.ReLU(), nn.Linear(4, 1)",
                     "nn.Tanh(), nn.Linear(4, 1), nn.Sigmoid()")
    out = tmp_path / "changes.svg"
    result = invoke("diff", RELU, deeper, "-o", out)
    assert result.exit_code == 1, result.stderr
    svg = out.read_text()
    assert "ReluBackward0 → TanhBackward0" in svg and "SigmoidBackward0 (added)" in svg
    assert 'fill="#ffe082"' in svg and 'fill="#a5d6a7"' in svg  # changed amber, added green
    assert "only in B (added)" in svg and "in both, changed" in svg  # the legend
    dot = tmp_path / "changes.dot"
    invoke("diff", RELU, deeper, "-o", dot)
    assert "(removed)" not in dot.read_text()
    back = tmp_path / "back.dot"
    invoke("diff", deeper, RELU, "-o", back)
    assert 'label="SigmoidBackward0 (removed)"' in back.read_text()
    assert 'fillcolor="#ef9a9a"' in back.read_text()


def test_dash_o_json_writes_the_diff(tmp_path: Path) -> None:
    out = tmp_path / "diff.json"
    result = invoke("diff", RELU, TANH, "-o", out)
    assert result.exit_code == 1
    assert json.loads(out.read_text())["modules"] == ["model.1"]


def test_bad_input_exits_2_and_inputs_are_never_overwritten(tmp_path: Path) -> None:
    missing = invoke("diff", RELU, tmp_path / "nope.py")
    assert missing.exit_code == 2 and "no such file" in missing.stderr
    assert "Traceback" not in missing.stderr
    trace = saved(RELU, tmp_path, "relu.json")
    before = trace.read_bytes()
    clash = invoke("diff", trace, TANH, "-o", trace)
    assert clash.exit_code == 2 and trace.read_bytes() == before
    assert invoke("diff", RELU, TANH, "--format", "xml").exit_code == 2
    page = invoke("diff", RELU, TANH, "-o", tmp_path / "d.html")
    assert page.exit_code == 2 and "not made for a diff" in page.stderr
    assert not (tmp_path / "d.html").exists()
    broken = as_read(trace.read_text())
    broken["nodes"][2]["type"] = 7  # diff reads nodes: checked as show checks them
    bad_node = tmp_path / "bad_node.json"
    bad_node.write_text(json.dumps(broken))
    result = invoke("diff", bad_node, RELU)
    assert result.exit_code == 2 and "nodes[2].type: expected a string, found int" in result.stderr
    garbage = tmp_path / "garbage.json"
    garbage.write_text('{"schema": "gradtrace.trace/2", "nodes": 3}')
    bad = invoke("diff", garbage, RELU)
    assert bad.exit_code == 2 and "error:" in bad.stderr


# Hand-built traces (no torch): the matching itself.

def chain(n: int, ids: list[str] | None = None, types: dict[int, str] | None = None) -> Trace:
    """A leaf x, then n MulBackward0 nodes; position 0 is the root. ids renames positions."""
    ids = ids or [f"n{i}" for i in range(n + 1)]
    types = types or {}
    nodes = [Node(ids[i], types.get(i, "MulBackward0"), "op", None,
                  source=Source("s.py", 5, "y = y * 1.0001")) for i in range(n)]
    nodes.append(Node(ids[n], "AccumulateGrad", "leaf", "x"))
    edges = [Edge(ids[i + 1], ids[i], 0, 0) for i in range(n)]
    order = sorted(range(n + 1), key=lambda i: ids[i])  # nodes listed in id order
    return Trace("s.py", "0", "2", (ids[0],), ("y",), "r", tuple(nodes[i] for i in order),
                 tuple(edges), (), (), ())


def test_a_long_chain_renumbered_matches_whole_in_linear_time() -> None:
    n = 100_000
    a = chain(n)
    b = chain(n, ids=[f"n{(i * 7919) % (n + 1)}" for i in range(n + 1)])  # shuffled ids
    m = match_nodes(a, b)
    assert len(m.pairs) == n + 1 and not m.only_a and not m.only_b
    assert compare(a, b, "a", "b").same


def test_a_changed_op_in_a_chain_is_matched_in_place() -> None:
    a, b = chain(50), chain(50, types={20: "DivBackward0"})
    d = compare(a, b, "a", "b")
    assert [(c.kind, c.a.type, c.b.type, c.a.id) for c in d.nodes  # type: ignore[union-attr]
            ] == [("changed", "MulBackward0", "DivBackward0", "n20")]
    assert d.edges == () and d.matched == 51


@pytest.mark.parametrize("n", [0, 1, 3])
def test_tiny_and_empty_graphs(n: int) -> None:
    assert compare(chain(n), chain(n), "a", "b").same


def test_the_guides_transcript_is_what_diff_prints() -> None:
    readme = (Path(__file__).parent.parent / "docs" / "guide.md").read_text()
    block = readme.split("$ gradtrace diff example:diff/mlp_relu example:diff/mlp_tanh\n",
                         1)[1].split("```", 1)[0]
    shown = [line for line in block.splitlines() if line.strip() != "…"]
    printed = invoke("diff", "example:diff/mlp_relu", "example:diff/mlp_tanh",
                     env={"COLUMNS": "100"}).stdout.splitlines()
    assert shown == [line for line in printed if line in shown] and len(shown) > 8


def test_a_frozen_weight_flips_requires_grad_and_its_gradient_vanishes(tmp_path: Path) -> None:
    frozen = tmp_path / "frozen.py"
    frozen.write_text(RELU.read_text().replace(
        "x = torch.randn(8, 3)", "model[2].weight.requires_grad_(False)\nx = torch.randn(8, 3)"))
    code, data = diff_json(RELU, frozen)
    assert code == 1
    assert {"name": "model.2.weight", "change": "requires_grad", "before": True,
            "after": False} in data["tensors"]
    vanished = [(g["tensor"], g["pass"]) for g in data["gradients"] if g["change"] == "vanished"]
    assert ("model.2.weight", 1) in vanished
    # the weight's AccumulateGrad and the TBackward0 over it are gone from the graph
    assert sorted(c["a"]["type"] for c in data["nodes"] if c["change"] == "removed") == [
        "AccumulateGrad", "TBackward0"]


def test_file_func_sides() -> None:
    target = f"{SCENARIOS / 'real' / 'test_value_grads.py'}::test_sanity_check"
    result = invoke("diff", target, target)
    assert result.exit_code == 0, result.stdout + result.stderr
    assert "same:" in result.stdout


def test_the_script_s_arguments_after_dashes_go_to_each_side_that_is_a_script(
        tmp_path: Path) -> None:
    script = SCENARIOS / "real" / "train_args.py"
    saved = tmp_path / "one_epoch.json"
    assert invoke("show", script, "-o", saved, "--", "--epochs", "1").exit_code == 0
    same = invoke("diff", saved, script, "--", "--epochs", "1")
    assert same.exit_code == 0, same.stdout + same.stderr
    assert invoke("diff", script, script, "--", "--epochs", "1").exit_code == 0
    # without them the script runs its default 3 epochs: a different run
    assert "passes 4 → 12" in invoke("diff", saved, script).stdout
