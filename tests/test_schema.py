"""The JSON contract, schema gradtrace.trace/3: rows, tables written once, /2 and /1 still
read."""

from __future__ import annotations

import copy
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
    assert data["schema"] == "gradtrace.trace/3"
    # 50 products: 51 distinct gradients (1, then one more per node), each sent and received;
    # one number each, so written as its value
    assert len(data["gradients"]) == 51
    assert data["gradients"][0] == {"shape": [], "values": 1.0}
    flow = data["passes"][0]["flow"]
    assert flow["n0"] == [[0], [1, None]] and flow["n1"] == [[1], [2, None]]  # in run order
    # nodes and edges are rows, sources and saved tensors tables
    assert data["sources"] == [[str(tmp_path / "chain.py"), 5, "y = y * 1.0001"]]
    assert data["saved_tensors"] == [["other", [], "float64", 8, "ok"]]
    assert data["nodes"][1] == ["n1", "MulBackward0", "op", None, [0], None, 0]
    assert data["nodes"][-1] == ["n50", "AccumulateGrad", "leaf", "x", [], None, None]
    assert data["edges"][0] == ["n1", "n0", 0, 0]
    # read, it keeps the design's contract: the /2 shape
    read = as_read(chain_json(tmp_path))
    assert read["gradients"][0] == {"shape": [], "norm": 1.0, "min": 1.0, "max": 1.0,
                                    "finite": True, "values": 1.0}
    assert read["nodes"][1] == {"id": "n1", "type": "MulBackward0", "kind": "op",
                                "tensor": None, "module": None, "saved": [
                                    {"name": "other", "shape": [], "dtype": "float64",
                                     "bytes": 8, "status": "ok"}],
                                "source": {"file": str(tmp_path / "chain.py"), "line": 5,
                                           "code": "y = y * 1.0001"}}
    assert read["edges"][0] == {"src": "n1", "dst": "n0", "dst_input": 0, "src_output": 0}
    assert read["passes"][0]["flow"]["n1"] == {"grad_outputs": [1], "grad_inputs": [2, None]}


def test_a_chain_takes_at_most_250_bytes_a_node(tmp_path: Path) -> None:
    text = chain_json(tmp_path, 2000)
    assert len(text.encode()) / 2001 <= 250


def test_a_schema_2_trace_is_still_read(tmp_path: Path) -> None:
    """A trace of the previous schema, as gradtrace wrote it (tests/data), is shown, and
    written again as /3 it reads back as the same /2 data."""
    old = Path(__file__).parent / "data" / "two_paths_add_up.trace2.json"
    data = json.loads(old.read_text())
    assert data["schema"] == "gradtrace.trace/2"
    shown = invoke("show", old)
    assert shown.exit_code == 0 and "AddBackward0" in shown.stdout
    written = invoke("show", old, "--json").stdout
    assert json.loads(written)["schema"] == "gradtrace.trace/3"
    # the keys added since it was written read as their defaults (empty)
    assert as_read(written) == {**data, "steps": {**data["steps"], "scale_free": [],
                                                  "closure_call": []}}


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
    assert invoke("show", old, "--json").stdout == text  # read /1, written as /3


def test_a_broken_schema_1_gradient_is_named_by_its_schema_1_path(tmp_path: Path) -> None:
    data = as_schema_1(as_read(chain_json(tmp_path, 3)))
    data["passes"][0]["flow"]["n1"]["grad_inputs"][0]["norm"] = "big"
    path = tmp_path / "old.json"
    path.write_text(json.dumps(data))
    result = invoke("show", path)
    assert result.exit_code == 2
    assert "invalid trace: passes[0].flow['n1'].grad_inputs[0].norm: expected a number" \
        in result.stderr


def test_an_index_past_a_table_is_named_by_its_path(tmp_path: Path) -> None:
    data = json.loads(chain_json(tmp_path, 3))
    data["passes"][0]["flow"]["n1"][1][0] = 99
    path = tmp_path / "bad.json"
    path.write_text(json.dumps(data))
    result = invoke("show", path)
    assert result.exit_code == 2
    assert "passes[0].flow['n1'].grad_inputs[0]: points at gradients[99], past the end " \
        "(4 entries)" in result.stderr
    data["passes"][0]["flow"]["n1"][1][0] = "1"
    path.write_text(json.dumps(data))
    result = invoke("show", path)
    assert result.exit_code == 2
    assert "grad_inputs[0]: expected a whole number ≥ 0" in result.stderr


def test_equal_gradients_share_an_entry_and_signed_zeros_do_not(tmp_path: Path) -> None:
    data = as_read(chain_json(tmp_path, 3))
    zero = {"shape": [], "norm": 0.0, "min": 0.0, "max": 0.0, "finite": True, "values": 0.0}
    data["gradients"][1:4] = [zero, dict(zero), {**zero, "min": -0.0, "max": -0.0,
                                                  "values": -0.0}]
    path = tmp_path / "zeros.json"
    path.write_text(json.dumps(data))
    written = as_read(invoke("show", path, "--json").stdout)
    assert written["gradients"][1:] == [zero, {**zero, "min": -0.0, "max": -0.0,
                                               "values": -0.0}]
    assert str(written["gradients"][2]["values"]) == "-0.0"
    flow = written["passes"][0]["flow"]
    assert flow["n0"]["grad_inputs"] == flow["n1"]["grad_inputs"] == [1, None]
    assert flow["n2"]["grad_inputs"] == [2, None]


def test_a_broken_row_or_table_index_is_named_by_its_path(tmp_path: Path) -> None:
    good = json.loads(chain_json(tmp_path, 3))
    path = tmp_path / "bad.json"
    for where, value, said in (
            (("nodes", 1), ["n1", "MulBackward0"], "nodes[1]: expected a list of 7 or 8 items"),
            (("nodes", 1, 4), [5], "nodes[1][4][0]: expected an index into saved_tensors (0 "
                                   "to 0), found 5"),
            (("nodes", 1, 6), True, "nodes[1][6]: expected an index into sources"),
            (("nodes", 1), ["n1", "MulBackward0", "op", None, [], None, None, {"evil": 1}],
             "nodes[1][7]: expected an object of recomputed, grad_graph"),
            (("edges", 0), {"src": "n1"}, "edges[0]: expected a list of 4 items"),
            (("sources",), [["f.py", 1]], "sources[0]: expected a list of 3 items"),
            (("passes", 0, "flow", "n1"), {"grad_outputs": [1]},
             "passes[0].flow['n1']: expected a list of 2 or 3 items"),
            (("gradients", 0), {"shape": [], "values": "big"}, "gradients[0].norm: missing"),
            (("nodes", 1, 1), 7, "nodes[1].type: expected a string, found int")):
        data = copy.deepcopy(good)
        *inner, last = where
        container = data
        for key in inner:
            container = container[key]
        container[last] = value
        path.write_text(json.dumps(data))
        result = invoke("show", path)
        assert result.exit_code == 2, (where, result.stdout)
        assert said in result.stderr and "Traceback" not in result.stderr, result.stderr
