"""Odd tensors degrade to "values unavailable (why)" instead of failing the report, and the
trace they make is valid JSON that reads back. Each of these failed before."""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from pathlib import Path

import pytest
from helpers import as_read, invoke

SCENARIOS = {
    "meta": ("x = torch.ones(3, device='meta', requires_grad=True)\ny = (x * 2).sum()\n",
             "a meta tensor has no data"),
    "sparse": ("i = torch.tensor([[0, 1], [1, 0]])\n"
               "w = torch.sparse_coo_tensor(i, torch.tensor([1.0, 2.0]), (2, 2),"
               " requires_grad=True)\ny = torch.sparse.sum(w * 2)\n", None),
    "subclass": ("class Weird(torch.Tensor):\n    def tolist(self):\n"
                 "        raise RuntimeError('no tolist for you')\n"
                 "x = torch.ones(3, requires_grad=True).as_subclass(Weird)\ny = (x * 2).sum()\n",
                 "RuntimeError: no tolist for you"),
    "quantized": ("x = torch.randn(4, requires_grad=True)\n"
                  "q = torch.quantize_per_tensor(torch.randn(4), 0.1, 0, torch.qint8)\n"
                  "y = (x * 2).sum()\n", "quantized"),
    "complex, half, empty": (
        "x = torch.tensor([1 + 2j, 3 - 1j], requires_grad=True)\n"
        "h = torch.ones(3, dtype=torch.float16, requires_grad=True)\n"
        "b = torch.ones(3, dtype=torch.bfloat16, requires_grad=True)\n"
        "e = torch.ones(0, requires_grad=True)\n"
        "y = (x * x.conj()).real.sum() + h.float().sum() + b.float().sum() + e.sum()\n", None),
}


@pytest.mark.parametrize("name", SCENARIOS)
def test_odd_tensors_are_shown_not_crashed_on(name: str, tmp_path: Path) -> None:
    code, note = SCENARIOS[name]
    scenario = tmp_path / "s.py"
    scenario.write_text("import torch\n" + code)
    result = invoke("show", scenario, "--json")
    assert result.exit_code == 0, result.stderr
    saved = tmp_path / "t.json"
    saved.write_text(result.stdout)
    notes = {s.get("note") for t in as_read(result.stdout)["tensors"]
             for s in (t["grad"], t["value"]) if s}
    if note is not None:
        assert f"values unavailable ({note})" in notes
    shown = invoke("show", saved)
    assert shown.exit_code == 0, shown.stderr
    assert "hook changed" not in shown.stdout


def test_complex_gradients_keep_statistics_but_no_values(tmp_path: Path) -> None:
    scenario = tmp_path / "s.py"
    scenario.write_text("import torch\n" + SCENARIOS["complex, half, empty"][0])
    trace = as_read(invoke("show", scenario, "--json").stdout)
    x = next(t for t in trace["tensors"] if t["name"] == "x")
    assert "values" not in x["grad"] and x["grad"]["shape"] == [2]
    h = next(t for t in trace["tensors"] if t["name"] == "h")
    assert h["grad"]["values"] == [1.0, 1.0, 1.0]


def test_a_scenario_raising_a_base_exception_is_exit_2(tmp_path: Path) -> None:
    scenario = tmp_path / "s.py"
    scenario.write_text("class Stop(BaseException):\n    pass\nraise Stop('halt')\n")
    result = invoke("show", scenario)
    assert result.exit_code == 2 and "Traceback" not in result.stderr
    assert f"{scenario}:3: the scenario raised Stop: halt" in result.stderr


def test_a_complex_gradients_range_is_labelled_as_of_magnitudes(tmp_path: Path) -> None:
    # the gradient of a real loss of a complex tensor is complex: its min and max are of |z|
    path = tmp_path / "s.py"
    path.write_text("import torch\ntorch.manual_seed(0)\n"
                    "z = torch.randn(100, dtype=torch.cfloat, requires_grad=True)\n"
                    "w = torch.randn(2, dtype=torch.cfloat, requires_grad=True)\n"
                    "loss = (z * 3).abs().pow(2).sum() + (w * 2).abs().sum()\n"
                    "loss.backward()\n")
    shown = invoke("show", path)
    assert shown.exit_code == 0, shown.stderr
    assert "z.grad  None → [100] norm" in shown.stdout and ", |z| in [" in shown.stdout
    trace = as_read(invoke("show", path, "--json").stdout)
    for name, size in (("z", 100), ("w", 2)):
        g = next(t for t in trace["tensors"] if t["name"] == name)["grad"]
        assert g["complex"] is True and "values" not in g and g["shape"] == [size], name
    flowed = [trace["gradients"][i] for p in trace["passes"] for f in p["flow"].values()
              for i in f["grad_outputs"] if i is not None]
    assert any(g.get("complex") for g in flowed)


# Each odd kind through every output: the trace (show -o t.json) read back and shown, drawn in
# each format, compared with its own script, its steps, and --order 2. Before, a jagged nested
# tensor's SymInt size failed every JSON output, a strided nested tensor's .shape every
# command, and --order 2 crashed on a sparse, nested, complex or empty leaf.
ODD = {
    "sparse": "x = torch.tensor([[1.0, 0.0], [2.0, 3.0]]).to_sparse().requires_grad_()\n"
              "w = torch.tensor([[1.0], [2.0]], requires_grad=True)\n"
              "y = (torch.sparse.mm(x, w) ** 2).sum()\ny.backward()\n",
    "nested strided": "a = torch.nested.nested_tensor([torch.ones(2, 3), torch.ones(1, 3)],"
                      " requires_grad=True)\n"
                      "y = torch.nested.to_padded_tensor(a * a, 0.0).sum()\n",
    "nested jagged": "a = torch.nested.nested_tensor([torch.ones(2, 3), torch.ones(1, 3)],"
                     " layout=torch.jagged, requires_grad=True)\n"
                     "b = (a * 2).transpose(1, 2)\ny = (b * b).values().sum()\n",
    "complex": "x = torch.tensor([1 + 2j, 3 - 1j], requires_grad=True)\n"
               "y = (x * x.conj()).real.sum()\n",
    "empty": "e = torch.ones(0, 3, requires_grad=True)\nx = torch.ones(2, requires_grad=True)\n"
             "y = (e ** 2).sum() + (x ** 3).sum()\n",
}
# what --order 2 says of each: its Hessian's blocks, or why there is none
SECOND = {"sparse": "blocks", "nested strided": "a is a nested tensor",
          "nested jagged": "a is a nested tensor", "complex": "x is complex", "empty": "blocks"}
SHAPES = {"nested strided": ["2", "ragged", "3"], "nested jagged": ["2", "ragged", "3"]}
OUTPUTS = ("json", "show", "dot", "mmd", "html", "svg", "diff", "steps", "order 2")


@pytest.fixture(scope="module")
def odd_trace(tmp_path_factory: pytest.TempPathFactory) -> Callable[[str], tuple[Path, Path]]:
    """(script, its trace written by show -o t.json) of an odd kind, made once."""
    made: dict[str, tuple[Path, Path]] = {}

    def trace(kind: str) -> tuple[Path, Path]:
        if kind not in made:
            folder = tmp_path_factory.mktemp(kind.replace(" ", "_"))
            script = folder / "s.py"
            script.write_text("import torch\n" + ODD[kind])
            result = invoke("show", script, "-o", folder / "t.json")
            assert result.exit_code == 0, result.stderr
            made[kind] = (script, folder / "t.json")
        return made[kind]

    return trace


@pytest.mark.parametrize("output", OUTPUTS)
@pytest.mark.parametrize("kind", ODD)
def test_every_output_takes_odd_tensors(kind: str, output: str, tmp_path: Path,
                                        odd_trace: Callable[[str], tuple[Path, Path]]) -> None:
    script, saved = odd_trace(kind)
    if output == "json":
        trace = as_read(saved.read_text())
        assert not [f for f in trace["findings"] if f["code"] == "flow-not-recorded"]
        named = {t["name"]: t for t in trace["tensors"]}
        if kind in SHAPES:  # a ragged size is a word (not torch's "j1": it counts per process)
            assert [str(d) for d in named["a"]["shape"]] == SHAPES[kind]
            assert named["a"]["grad"]["norm"] == pytest.approx(6.0 if "strided" in kind
                                                               else 24.0)
        return
    if output == "order 2":
        result = invoke("show", script, "--order", "2", "--json")
        assert result.exit_code == 0, result.stderr
        second = as_read(result.stdout)["second_order"]
        assert second["blocks"] if SECOND[kind] == "blocks" else \
            SECOND[kind] in second["error"], second
        return
    if output == "show":
        result = invoke("show", saved)
    elif output == "diff":
        result = invoke("diff", script, saved, "--json")
        assert result.exit_code == 0 and json.loads(result.stdout)["same"], result.stdout
        result = invoke("diff", script, saved, "-o", tmp_path / "d.svg")
    elif output == "steps":
        result = invoke("steps", saved, "--json")
    else:
        if output == "svg" and shutil.which("dot") is None:
            pytest.skip("Graphviz is not installed")
        result = invoke("dot", saved, "-o", tmp_path / f"g.{output}")
    assert result.exit_code == 0, result.stderr
    assert "a bug in gradtrace" not in result.stderr
    if kind in SHAPES and output in ("show", "dot", "mmd", "html"):
        text = result.stdout if output == "show" else (tmp_path / f"g.{output}").read_text()
        assert f"float32[{', '.join(SHAPES[kind])}]" in text
