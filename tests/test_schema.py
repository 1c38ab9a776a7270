"""The JSON contract, schema gradtrace.trace/2: tables written once, /1 still read."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from helpers import SCENARIOS, as_read, invoke


def chain_json(tmp_path: Path, n: int = 50) -> str:
    path = tmp_path / "chain.py"
    path.write_text("import torch\nx = torch.tensor(1.0, requires_grad=True)\ny = x\n"
                    f"for _ in range({n}):\n    y = y * 1.0001\ny.backward()\n")
    result = invoke("show", path, "--json")
    assert result.exit_code == 0, result.stderr
    return result.stdout


def test_each_gradient_is_written_once(tmp_path: Path) -> None:
    data = json.loads(chain_json(tmp_path))
    assert data["schema"] == "gradtrace.trace/2"
    # 50 products: 51 distinct gradients (1, then one more per node), each sent and received
    assert len(data["gradients"]) == 51
    assert data["gradients"][0] == {"shape": [], "norm": 1.0, "min": 1.0, "max": 1.0,
                                    "finite": True, "values": 1.0}
    flow = data["passes"][0]["flow"]
    assert flow["n0"]["grad_inputs"][0] == flow["n1"]["grad_outputs"][0] == 1
    assert "order" not in flow["n1"]  # entries are in run order
    # the rest keeps the design's contract
    assert set(data["nodes"][1]) == {"id", "type", "kind", "tensor", "saved", "module",
                                     "source"}
    assert data["edges"][0] == {"src": "n1", "dst": "n0", "dst_input": 0, "src_output": 0}


def as_schema_1(data: dict[str, Any]) -> dict[str, Any]:
    """A /2 trace in the /1 shape older gradtraces wrote: each flow gradient written out where
    it is used (no gradients table), and each flow entry's order."""
    table = data["gradients"]

    def entry(f: dict[str, Any], position: int) -> dict[str, Any]:
        return {"order": position, **f, **{
            key: [None if g is None else table[g] for g in f[key]]
            for key in ("grad_outputs", "grad_inputs")}}

    passes = [{**p, "flow": {node: entry(f, i) for i, (node, f) in enumerate(p["flow"].items())}}
              for p in data["passes"]]
    return {key: value for key, value in {**data, "schema": "gradtrace.trace/1",
                                          "passes": passes}.items() if key != "gradients"}


def test_a_schema_1_trace_is_still_read(tmp_path: Path) -> None:
    text = invoke("show", SCENARIOS / "two_paths_add_up.py", "--json").stdout
    old = tmp_path / "old.json"
    old.write_text(json.dumps(as_schema_1(as_read(text))))
    new = tmp_path / "new.json"
    new.write_text(text)
    assert invoke("show", old).stdout == invoke("show", new).stdout
    assert invoke("show", old, "--json").stdout == text  # read /1, written as /2


def test_a_broken_schema_1_gradient_is_named_by_its_schema_1_path(tmp_path: Path) -> None:
    data = as_schema_1(json.loads(chain_json(tmp_path, 3)))
    data["passes"][0]["flow"]["n1"]["grad_inputs"][0]["norm"] = "big"
    path = tmp_path / "old.json"
    path.write_text(json.dumps(data))
    result = invoke("show", path)
    assert result.exit_code == 2
    assert "invalid trace: passes[0].flow['n1'].grad_inputs[0].norm: expected a number" \
        in result.stderr


def test_an_index_past_a_table_is_named_by_its_path(tmp_path: Path) -> None:
    data = json.loads(chain_json(tmp_path, 3))
    data["passes"][0]["flow"]["n1"]["grad_inputs"][0] = 99
    path = tmp_path / "bad.json"
    path.write_text(json.dumps(data))
    result = invoke("show", path)
    assert result.exit_code == 2
    assert "passes[0].flow['n1'].grad_inputs[0]: points at gradients[99], past the end " \
        "(4 entries)" in result.stderr
    data["passes"][0]["flow"]["n1"]["grad_inputs"][0] = "1"
    path.write_text(json.dumps(data))
    result = invoke("show", path)
    assert result.exit_code == 2
    assert "grad_inputs[0]: expected a whole number ≥ 0" in result.stderr


def test_equal_gradients_share_an_entry_and_signed_zeros_do_not(tmp_path: Path) -> None:
    data = json.loads(chain_json(tmp_path, 3))
    zero = {"shape": [], "norm": 0.0, "min": 0.0, "max": 0.0, "finite": True, "values": 0.0}
    data["gradients"][1:4] = [zero, dict(zero), {**zero, "min": -0.0, "max": -0.0,
                                                  "values": -0.0}]
    path = tmp_path / "zeros.json"
    path.write_text(json.dumps(data))
    written = json.loads(invoke("show", path, "--json").stdout)
    assert written["gradients"][1:] == [zero, {**zero, "min": -0.0, "max": -0.0,
                                               "values": -0.0}]
    assert str(written["gradients"][2]["values"]) == "-0.0"
    flow = written["passes"][0]["flow"]
    assert flow["n0"]["grad_inputs"] == flow["n1"]["grad_inputs"] == [1, None]
    assert flow["n2"]["grad_inputs"] == [2, None]
