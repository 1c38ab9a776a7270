"""The training stacks people use, run unchanged (tests/frameworks/): Lightning's Trainer.fit
(automatic and manual optimization), Hugging Face's Trainer, PEFT LoRA, FSDP1 and FSDP2. Each
exits 0 under `gradtrace show`, records every pass and optimizer step, names parameters by
the user's model, and has plain python's gradients (the script's own prints, run both ways).
"""

from __future__ import annotations

import json
import math
import re
from pathlib import Path
from typing import Any

import pytest
from helpers import as_read
from plain_python import forwarding_command, run_gradtrace, run_plain
from test_distributed import two_ranks

FRAMEWORKS = Path(__file__).parent / "frameworks"
LIMIT = 300  # seconds for one run: Lightning and transformers take seconds to import
# ~10 s a run, most of it the framework's import: .ci/run's slow tier runs them (FSDP's, a
# few seconds and torch's alone, run in the quick one and on every torch of the matrix)
FRAMEWORK = pytest.mark.slow


def recorded(script: str, tmp_path: Path) -> tuple[dict[str, Any], str]:
    """The trace of `gradtrace show SCRIPT -o trace.json` (a process of its own: a framework's
    global state stays there), and what the script printed."""
    out = tmp_path / "trace.json"
    run = run_gradtrace("show", FRAMEWORKS / script, "-o", out, timeout=LIMIT, cwd=tmp_path)
    assert run.returncode == 0, run.stderr
    trace = as_read(out.read_text())
    return trace, trace["stdout"]


def printed(text: str, key: str) -> Any:
    """The value the script printed after KEY on a line of its own."""
    line = next(line for line in text.splitlines() if line.startswith(key + " "))
    return json.loads(line.split(" ", 1)[1])


def plain(script: str) -> str:
    run = run_plain(FRAMEWORKS / script, timeout=LIMIT)
    assert run.returncode == 0, run.stderr
    return run.stdout


def grad_of(trace: dict[str, Any], name: str) -> dict[str, Any]:
    (tensor,) = [t for t in trace["tensors"] if t["name"] == name]
    return tensor["grad"]


def pass_norms(trace: dict[str, Any]) -> list[float]:
    """Each pass's gradient norm over every parameter (what clip_grad_norm_ computes)."""
    return [math.sqrt(sum(g[0] ** 2 for g in grads)) for grads in trace["steps"]["grads"]]


def optimizer_steps(trace: dict[str, Any]) -> int:
    steps = trace["steps"]
    return sum(steps["optimizer_steps"]) + steps["optimizer_steps_after"]


def codes(trace: dict[str, Any]) -> set[str]:
    return {f["code"] for f in trace["findings"]}


@FRAMEWORK
def test_lightning_fit_with_accumulation_clipping_and_a_callback(tmp_path: Path) -> None:
    pytest.importorskip("lightning")
    trace, stdout = recorded("lightning_fit.py", tmp_path)
    expected = plain("lightning_fit.py")
    assert printed(stdout, "BATCHES") == printed(expected, "BATCHES") == 8
    assert len(trace["passes"]) == 8 and optimizer_steps(trace) == 4
    assert trace["steps"]["leaves"] == ["model.net.0.weight", "model.net.0.bias",
                                        "model.net.2.weight", "model.net.2.bias"]
    # the last step's clipped .grad, as Lightning left it
    assert grad_of(trace, "model.net.0.weight")["norm"] == \
        pytest.approx(printed(expected, "NORM"), rel=1e-6)
    assert "grad-accumulating" not in codes(trace)  # Lightning's accumulation is deliberate


@FRAMEWORK
def test_lightning_manual_optimization(tmp_path: Path) -> None:
    pytest.importorskip("lightning")
    trace, _ = recorded("lightning_manual.py", tmp_path)
    assert len(trace["passes"]) == 12 and optimizer_steps(trace) == 12
    assert grad_of(trace, "model.net.0.weight")["norm"] == \
        pytest.approx(printed(plain("lightning_manual.py"), "NORM"), rel=1e-6)


@FRAMEWORK
def test_hugging_face_trainer_accumulates_and_clips_as_it_logs(tmp_path: Path) -> None:
    """Trainer logs each step's norm before clipping: the norm over every parameter of the
    step's second (last accumulated) pass."""
    pytest.importorskip("transformers")
    pytest.importorskip("accelerate")
    trace, stdout = recorded("hf_trainer.py", tmp_path)
    logged = printed(plain("hf_trainer.py"), "GRAD_NORMS")
    assert printed(stdout, "GRAD_NORMS") == pytest.approx(logged, rel=1e-6)
    assert len(trace["passes"]) == 6 and optimizer_steps(trace) == 3
    assert pass_norms(trace)[1::2] == pytest.approx(logged, rel=1e-5)
    assert "unreached-leaf" not in codes(trace)
    assert all(name.startswith("model.") for name in trace["steps"]["leaves"])


@FRAMEWORK
def test_peft_lora_trains_its_adapters_and_the_frozen_base_is_no_finding(tmp_path: Path
                                                                         ) -> None:
    pytest.importorskip("peft")
    trace, _ = recorded("peft_lora.py", tmp_path)
    assert len(trace["passes"]) == 3
    # `base`, the script's name for the model PEFT wraps, is the shortest path to its weights
    lora = "base.transformer.h.0.attn.c_attn.lora_B.default.weight"
    assert grad_of(trace, lora)["norm"] == \
        pytest.approx(printed(plain("peft_lora.py"), "NORM"), rel=1e-6)
    frozen = [t for t in trace["tensors"] if t["name"].endswith("c_attn.base_layer.weight")]
    assert frozen and not any(t["requires_grad"] for t in frozen)
    assert not codes(trace) & {"unreached-leaf", "dead-parameter", "graph-cut"}


@pytest.mark.matrix  # FSDP2's parameters are read through torch's private fields
def test_fsdp2_names_the_sharded_parameters_and_reads_their_local_shards(tmp_path: Path
                                                                          ) -> None:
    trace, _ = recorded("fsdp2.py", tmp_path)
    assert len(trace["passes"]) == 3 and optimizer_steps(trace) == 3
    names = ["model.0.weight", "model.0.bias", "model.2.weight", "model.2.bias"]
    # the graph's leaves are FSDP's unsharded parameters, named by the sharded ones' paths
    leaves = {n["tensor"] for n in trace["nodes"] if n["kind"] == "leaf"}
    assert leaves == set(names)
    grads = [grad_of(trace, name) for name in names]
    assert all(g["local_shard"] for g in grads)  # one rank: its shard is the whole tensor
    clipped = math.sqrt(sum(g["norm"] ** 2 for g in grads))
    assert clipped == pytest.approx(printed(plain("fsdp2.py"), "NORM"), rel=1e-6)


def per_pass(text: str, rank: int) -> list[dict[str, float]]:
    """The local .grad norms fsdp2_root.py printed after each pass on rank (its lines may
    interleave with the other rank's)."""
    return [json.loads(norms) for norms in re.findall(rf"PASS{rank} (\{{[^{{}}]*\}})", text)]


def assert_follows_the_sharded_grads(trace: dict[str, Any], expected: list[dict[str, float]]
                                     ) -> None:
    """Each pass's .grad changes and step row have every parameter's local norm as the
    script printed it (the root's own parameters too, swapped during backward); no row says
    only autograd.grad reached it."""
    names = [f"model.{n}" for n in expected[0]]
    assert len(trace["passes"]) == len(expected) == 4
    for number, (p, printed_now, row) in enumerate(
            zip(trace["passes"], expected, trace["steps"]["grads"], strict=True), 1):
        changes = {c["tensor"]: c["after"]["norm"] for c in p["grad_changes"]}
        assert list(changes) == names, number
        assert [changes[n] for n in names] == pytest.approx(list(printed_now.values()),
                                                            rel=1e-6), number
        columns = dict(zip(trace["steps"]["leaves"], row, strict=True))
        assert [columns[n][0] for n in names] == pytest.approx(list(printed_now.values()),
                                                               rel=1e-6), number
    rows = {t["name"]: t for t in trace["tensors"]}  # .grad as the last pass left it
    assert [rows[n]["grad"]["norm"] for n in names] == \
        pytest.approx(list(expected[-1].values()), rel=1e-6)
    assert all(rows[n]["grad"]["local_shard"] for n in names)
    assert not any("autograd.grad" in (t.get("grad_note") or "") for t in trace["tensors"])
    assert not [t["name"] for t in trace["tensors"] if "@" in t["name"]]


@pytest.mark.matrix
def test_fsdp2_changes_follow_the_root_s_parameters_swapped_in_backward(tmp_path: Path
                                                                        ) -> None:
    trace, _ = recorded("fsdp2_root.py", tmp_path)
    assert_follows_the_sharded_grads(trace, per_pass(plain("fsdp2_root.py"), 0))


SWAPS = """import json
import torch

torch.manual_seed(0)
model = torch.nn.Linear(3, 1)
fresh = torch.nn.Parameter(model.weight.detach().clone())


def swap(module, grad_input, grad_output):  # the weight's role goes to a fresh parameter
    fresh.grad = torch.full_like(fresh, 7.0)
    module.weight = fresh


model.register_full_backward_hook(swap)
model(torch.ones(4, 3, requires_grad=True)).sum().backward()
print("GRADS", json.dumps({n: p.grad.tolist() for n, p in model.named_parameters()}))
"""


def test_a_parameter_a_hook_swaps_during_backward_is_the_one_whose_grad_changed(
        tmp_path: Path) -> None:
    script = tmp_path / "swaps.py"
    script.write_text(SWAPS)
    expected = printed(run_plain(script).stdout, "GRADS")
    trace = json.loads(run_gradtrace("show", script, "--json", cwd=tmp_path).stdout)
    changes = {c["tensor"]: c["after"]["values"] for c in trace["passes"][0]["grad_changes"]}
    assert changes["model.weight"] == expected["weight"] == [[7.0, 7.0, 7.0]]
    assert changes["model.bias"] == expected["bias"]
    row = dict(zip(trace["steps"]["leaves"], trace["steps"]["grads"][0], strict=True))
    assert row["model.weight"][0] == pytest.approx(math.sqrt(3 * 49))


@pytest.mark.matrix
def test_fsdp1_runs_with_its_flat_parameter(tmp_path: Path) -> None:
    trace, _ = recorded("fsdp1.py", tmp_path)
    assert len(trace["passes"]) == 3
    grads = [grad_of(trace, f"net.{i}.{p}") for i in (0, 2) for p in ("weight", "bias")]
    assert math.sqrt(sum(g["norm"] ** 2 for g in grads)) == \
        pytest.approx(printed(plain("fsdp1.py"), "NORM"), rel=1e-6)


# torch 2.13's gloo ranks abort now and then as the process exits, after all their work, in
# plain python too (an FSDP2 script of two ranks: 1 run in 16 here)
EXIT_ABORT = "terminate called without an active exception"


def two_ranks_to_their_end(*command: str | Path, cwd: Path) -> Any:
    """two_ranks(COMMAND), run again (twice at most) where a rank aborted as it exited."""
    for _ in range(2):
        run = two_ranks(*command, cwd=cwd)
        if run.returncode == 0 or EXIT_ABORT not in run.stderr:
            return run
    return two_ranks(*command, cwd=cwd)


@pytest.mark.slow  # two processes that start torch and connect
def test_fsdp2_changes_on_two_ranks_follow_each_rank_s_sharded_grads(tmp_path: Path) -> None:
    script = FRAMEWORKS / "fsdp2_root.py"
    expected = two_ranks_to_their_end(script, cwd=tmp_path)
    assert expected.returncode == 0, expected.stderr
    ours = two_ranks_to_their_end("--no-python", forwarding_command(), "show", script, "-o",
                                  "t-{rank}.json", cwd=tmp_path)
    assert ours.returncode == 0, ours.stderr
    assert "rank 1: 4 pass(es)" in ours.stdout + ours.stderr
    assert "not reduced" not in ours.stdout + ours.stderr  # the shards differ by design
    for rank in (0, 1):
        trace = json.loads((tmp_path / f"t-{rank}.json").read_text())
        assert_follows_the_sharded_grads(trace, per_pass(expected.stdout, rank))
        assert all(t["grad"]["shards"] == 2 for t in trace["tensors"] if t["grad"])
    # rank 0's report adds up every rank's shard: each whole .grad's norm (no collective)
    whole = json.loads(re.findall(r"WHOLE0 (\{[^{}]*\})", expected.stdout)[0])
    told = re.search(r"\.grad norm of each sharded parameter, over every rank's shard: (.*)",
                     ours.stdout + ours.stderr)
    assert told is not None, ours.stdout + ours.stderr
    shown = dict(pair.rsplit(" ", 1) for pair in told[1].split(", "))
    assert list(shown) == [f"model.{n}" for n in whole]
    assert [float(v) for v in shown.values()] == pytest.approx(list(whole.values()), rel=1e-5)
