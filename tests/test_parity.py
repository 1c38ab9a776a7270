"""One capture session behind every entry point: a gallery scenario run by the CLI, its code
recorded by gradtrace.record() and its output traced by gradtrace.trace() report the same
finding codes and the same gradients."""

from __future__ import annotations

import ast
import json
import runpy
import textwrap
from pathlib import Path
from typing import Any

import pytest
import torch
from helpers import SCENARIOS, UNDER_TORCHRUN, seed, shared_invoke, stopped_by_its_call

import gradtrace
from gradtrace.model.values import flat_values
from gradtrace.render.json import to_json

# What only one entry point can know, by code: the line log of a run names the line that
# cut a graph (graph-cut); trace() gets tensors whose code ran before it was called.
ONLY_WITH_LINES = {"graph-cut"}
# A with-block cannot express these: they read sys.argv, stop the run, or run as pytest does.
NOT_A_BLOCK = {"real/train_args.py", "real/raises_after_two_passes.py",
               "real/polynomial_loop.py", "real/test_value_grads.py",
               "loops/mlp_1000_steps.py",  # its 30-step twin is compared; 1,000 cost seconds
               "real/compile_tutorial.py", "real/compiled_model.py",
               "real/compiled_autograd.py",
               "bugs/nan_raise_on_loss.py"}  # stops the run: raises at its first NaN loss
GALLERY = sorted(str(p.relative_to(SCENARIOS)) for p in SCENARIOS.rglob("*.py")
                 if "no_graph" not in p.parts and UNDER_TORCHRUN not in p.parts)
BLOCKS = [s for s in GALLERY if s not in NOT_A_BLOCK]
# The calls that run a pass of the code's own (trace() takes a graph no pass ran yet)
PASS_CALLS = {"backward", "grad", "gradcheck", "gradgradcheck", "jacobian", "hessian", "vjp",
              "jvp", "hvp", "vhp", "grad_and_value", "jacrev", "jacfwd", "vmap",
              "manual_backward"}  # Lightning's, in a training_step fit() runs


def _runs_no_pass(scenario: str) -> bool:
    """Whether the scenario's own code calls nothing that runs a backward pass."""
    tree = ast.parse((SCENARIOS / scenario).read_text(encoding="utf-8"))
    return not any(isinstance(node, ast.Call) and (
        isinstance(node.func, ast.Attribute) and node.func.attr in PASS_CALLS
        or isinstance(node.func, ast.Name) and node.func.id in PASS_CALLS)
        for node in ast.walk(tree))


UNRUN = [s for s in BLOCKS if _runs_no_pass(s)]


# The CLI says where a scenario stopped (a backward or gradcheck that raised, exit 2); a
# with-block whose code raised has no script to stop: the error goes up through record().
ONLY_FROM_A_RUN = {"scenario-stopped"}


def _cli(scenario: str) -> dict[str, Any] | None:
    """`gradtrace show --json` of the scenario (None when it does not exit 0, or 2 after a
    call it recorded raised): the run other tests share, from seeded RNGs."""
    result = shared_invoke("show", str(SCENARIOS / scenario), "--json")
    return json.loads(result.stdout) if result.exit_code == 0 or stopped_by_its_call(result) \
        else None


def _codes(data: dict[str, Any], dropped: set[str] = frozenset()) -> list[str]:
    return sorted({f["code"] for f in data["findings"]} - dropped)


def _grads(data: dict[str, Any]) -> dict[str, Any]:
    return {t["name"]: t["grad"] for t in data["tensors"] if t["grad"] is not None}


def _same_grads(cli: dict[str, Any], other: dict[str, Any]) -> None:
    """Every gradient the CLI reports, the other entry point reports equal (same run, same
    seed: the same numbers)."""
    theirs = _grads(other)
    for name, g in _grads(cli).items():
        assert name in theirs, f"{name} has a .grad in the CLI's trace only"
        if isinstance(g["norm"], str):
            assert theirs[name]["norm"] == g["norm"], name
        else:
            assert theirs[name]["norm"] == pytest.approx(g["norm"], rel=1e-6, abs=1e-12), name
        if "values" in g:
            mine, cli_values = flat_values(theirs[name]["values"]), flat_values(g["values"])
            if any(isinstance(v, str) for v in cli_values):  # "nan", "inf": exactly
                assert mine == cli_values, name
            else:
                assert mine == pytest.approx(cli_values, rel=1e-6, abs=1e-12), name


def _as_block(scenario: str, tmp_path: Path, backward_of: str | None) -> Path:
    """The scenario's code, unchanged, inside `with gradtrace.record() as REC:` (and, when
    the scenario runs no backward of its own, the backward the CLI runs for it)."""
    source = (SCENARIOS / scenario).read_text(encoding="utf-8")
    if backward_of is not None:
        source += (f"\n{backward_of}.backward(None if {backward_of}.numel() == 1 "
                   f"else torch.ones_like({backward_of}))\n")
    path = tmp_path / Path(scenario).name
    # a backward or gradcheck that raises is recorded by the CLI and stops the script there;
    # out of a block it would go up through record()
    path.write_text("import gradtrace\nimport torch\nwith gradtrace.record() as REC:\n"
                    "    try:\n" + textwrap.indent(source, "        ", lambda line: True)
                    + "\n    except Exception as error:\n        STOPPED_BY = error\n",
                    encoding="utf-8")
    return path


def _json(view: Any) -> dict[str, Any]:
    return json.loads(to_json(view.trace))


@pytest.mark.parametrize("scenario", BLOCKS)
def test_record_reports_what_the_cli_reports(scenario: str, tmp_path: Path,
                                             monkeypatch: pytest.MonkeyPatch) -> None:
    cli = _cli(scenario)
    assert cli is not None, "the CLI does not trace it"
    own = [p for p in cli["passes"] if p.get("by") == "gradtrace"]
    assert not own or len(cli["output_names"]) == 1, "gradtrace's own backward, several roots"
    backward_of = cli["output_names"][0] if own else None
    wrapped = _as_block(scenario, tmp_path, backward_of)
    monkeypatch.syspath_prepend(str((SCENARIOS / scenario).parent))
    monkeypatch.chdir(tmp_path)
    seed()
    ran = runpy.run_path(str(wrapped), run_name="__main__")
    failed = [p for p in cli["passes"] if p["error"]]
    if "STOPPED_BY" in ran:  # only as the CLI's run stopped: at a pass that failed
        assert failed or any(f["code"] == "gradcheck-failed" for f in cli["findings"])
    recorded = _json(ran["REC"])
    expected = set(_codes(cli, ONLY_FROM_A_RUN))
    if "STOPPED_BY" in ran and failed:  # the CLI's stop is the finding of the pass it failed
        expected.add("pass-failed")
    assert _codes(recorded) == sorted(expected)
    _same_grads(cli, recorded)


@pytest.mark.parametrize("scenario", UNRUN)
def test_trace_reports_what_the_cli_reports(scenario: str,
                                            monkeypatch: pytest.MonkeyPatch) -> None:
    cli = _cli(scenario)
    assert cli is not None, "the CLI does not trace it"
    assert [p.get("by") for p in cli["passes"]] == ["gradtrace"], "a pass of the code's own"
    path = SCENARIOS / scenario
    monkeypatch.syspath_prepend(str(path.parent))
    seed()
    namespace: dict[str, Any] = {"__name__": "__main__", "__file__": str(path)}
    exec(compile(path.read_text(encoding="utf-8"), str(path), "exec"), namespace)
    outputs = [namespace[n] for n in cli["output_names"]]
    traced = _json(gradtrace.trace(*outputs, names=namespace, backward=True))
    assert _codes(traced) == _codes(cli, ONLY_WITH_LINES)
    _same_grads(cli, traced)


def test_the_inplace_change_is_found_by_all_three(tmp_path: Path) -> None:
    """The review's case: a saved tensor changed in place — inplace-modified from the CLI,
    from trace() and from record()."""
    source = (SCENARIOS / "explained/inplace_after_save.py").read_text(encoding="utf-8")
    cli = _cli("explained/inplace_after_save.py")
    assert cli is not None and "inplace-modified" in _codes(cli)
    namespace: dict[str, Any] = {}
    exec(source.replace("c.sum().backward()", ""), namespace)
    traced = _json(gradtrace.trace(namespace["c"].sum(), names=namespace, backward=True))
    assert "inplace-modified" in _codes(traced)
    recorded = _json(runpy.run_path(str(_as_block("explained/inplace_after_save.py",
                                                  tmp_path, None)))["REC"])
    # the CLI's run stops at the failed pass: its stop is that pass's finding
    assert _codes(traced) == _codes(recorded) == sorted({*_codes(cli, ONLY_FROM_A_RUN),
                                                         "pass-failed"})


def test_record_names_no_tensor_from_before_the_block_that_it_did_not_use() -> None:
    unused = torch.ones(2, requires_grad=True)  # noqa: F841  (a leaf the block never uses)
    model = torch.nn.Linear(2, 1)
    head = torch.nn.Linear(2, 1)  # noqa: F841  (a module the block never calls)
    x = torch.ones(2, requires_grad=True)
    with gradtrace.record() as rec:
        loss = (model(x) * 2).sum()
        loss.backward()
    names = {t.name for t in rec.tensors}
    assert {"x", "model.weight", "model.bias", "loss"} <= names
    assert not names & {"unused", "head.weight", "head.bias"}
    assert "unreached-leaf" not in {f.code for f in rec.findings}


def test_record_still_finds_a_module_part_the_block_left_unused() -> None:
    model = torch.nn.ModuleDict({"used": torch.nn.Linear(2, 1),
                                 "aux": torch.nn.Linear(2, 1)})
    with gradtrace.record() as rec:
        model["used"](torch.ones(2)).sum().backward()
    unreached = [f.tensor for f in rec.findings if f.code == "unreached-leaf"]
    assert unreached == ["model.aux.weight", "model.aux.bias"]
