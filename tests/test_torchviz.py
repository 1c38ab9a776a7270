"""Cross-check: gradtrace's DOT draws the same node types and edges as torchviz.make_dot."""

from __future__ import annotations

import re
import runpy
from collections import Counter
from pathlib import Path

import pytest
from helpers import SCENARIOS, invoke, show_json

torchviz = pytest.importorskip("torchviz")  # a test extra: the matrix's venvs go without

NODE = re.compile(r'^\s*(\w+) \[label="?(.*?)"?(?: fillcolor=(\S+?))?\]$')
EDGE = re.compile(r"^\s*(\w+) -> (\w+)(.*)$")


def torchviz_graph(tensor) -> tuple[Counter, Counter]:
    """Backward-node types and typed edges of torchviz's picture (tensor boxes left out)."""
    dot = torchviz.make_dot(tensor)
    types: dict[str, str] = {}
    for line in dot.body:
        m = NODE.match(line)
        if m and m.group(3) is None:  # grey boxes are backward nodes; coloured ones tensors
            types[m.group(1)] = m.group(2)
    edges = Counter()
    for line in dot.body:
        m = EDGE.match(line)
        if m and m.group(1) in types and m.group(2) in types:
            edges[(types[m.group(1)], types[m.group(2)])] += 1
    return Counter(types.values()), edges


def gradtrace_graph(scenario: Path) -> tuple[Counter, Counter]:
    """The same from `gradtrace dot`: a leaf box is its AccumulateGrad node."""
    result = invoke("dot", scenario, "--no-fold", "--no-backward")
    assert result.exit_code == 0, result.stderr
    types: dict[str, str] = {}
    for line in result.stdout.splitlines():
        m = re.match(r'^\s*(n\d+) \[label="([^"\\]*)', line)
        if m:
            leaf = 'fillcolor="#bbdefb"' in line
            types[m.group(1)] = "AccumulateGrad" if leaf else m.group(2)
    edges = Counter()
    for line in result.stdout.splitlines():
        m = EDGE.match(line)
        if m and m.group(1) in types and m.group(2) in types:
            edges[(types[m.group(1)], types[m.group(2)])] += 1
    return Counter(types.values()), edges


@pytest.mark.parametrize("name", ["chain_rule", "two_paths_add_up", "tensor_exponent",
                                  "shopping_apple_tangerine",
                                  "chunk_multi_output", "vector_fan_out", "mlp_modules"])
def test_same_graph_as_torchviz(name: str) -> None:
    scenario = SCENARIOS / f"{name}.py"
    output = show_json(scenario)["output_names"][0]
    namespace = runpy.run_path(str(scenario))
    ours = gradtrace_graph(scenario)
    theirs = torchviz_graph(namespace[output])
    assert ours[0] == theirs[0]  # node types, with multiplicity
    assert ours[1] == theirs[1]  # edges, as (input type, consumer type), with multiplicity
    assert sum(ours[0].values()) > 2


def test_same_graph_as_torchviz_on_a_transformer(tmp_path: Path) -> None:
    scenario = tmp_path / "transformer.py"
    scenario.write_text(
        "import torch\ntorch.manual_seed(0)\n"
        "layer = torch.nn.TransformerEncoderLayer(d_model=16, nhead=2, dim_feedforward=32, "
        "batch_first=True)\n"
        "model = torch.nn.TransformerEncoder(layer, num_layers=2, enable_nested_tensor=False)\n"
        "loss = model(torch.randn(2, 3, 16)).pow(2).mean()\n")
    namespace = runpy.run_path(str(scenario))
    ours, theirs = gradtrace_graph(scenario), torchviz_graph(namespace["loss"])
    assert ours == theirs
    assert sum(ours[0].values()) > 100


def test_custom_function_before_and_after_backward(tmp_path: Path) -> None:
    source = (SCENARIOS / "custom_pow_function.py").read_text()
    before = tmp_path / "custom_pow_before_backward.py"
    before.write_text(source.replace("z.backward()", ""))
    ours, theirs = gradtrace_graph(before), torchviz_graph(runpy.run_path(str(before))["z"])
    assert ours == theirs and ours[0]["MyPowBackward"] == 1
    # After backward the custom node's saved tensors are freed: torchviz raises, gradtrace
    # still draws the graph (saved tensors shown as "freed" with --saved).
    after = runpy.run_path(str(SCENARIOS / "custom_pow_function.py"))
    with pytest.raises(RuntimeError, match="backward through the graph a second time"):
        torchviz.make_dot(after["z"])
    assert gradtrace_graph(SCENARIOS / "custom_pow_function.py") == ours
