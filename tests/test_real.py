"""Scripts adapted from public code (gradtrace/examples/real/): gradtrace runs them unchanged, with
the exit code `python` would have (2 where they raise), and the gradients it records are the
ones plain PyTorch computes."""

from __future__ import annotations

import json
import math
import os
import subprocess
from collections.abc import Callable
from typing import Any

import pytest
from helpers import (
    SCENARIOS,
    as_read,
    compiles_once_per_process,
    invoke,
    printed_without_torch_logs,
    tensor,
    write_script,
)
from plain_python import run_gradtrace, run_plain

REAL = SCENARIOS / "real"
Traced = Callable[..., dict[str, Any]]  # the `traced` fixture


def plain(script: str, *args: str, code: int = 0) -> subprocess.CompletedProcess[str]:
    """The script under plain `python`, in its own folder (asserting its exit code)."""
    run = run_plain(REAL / script, *args)
    assert run.returncode == code, run.stderr[-2000:]
    return run


def printed_norms(stdout: str) -> dict[str, float]:
    """The gradient norms a script printed as its last JSON line."""
    line = [x for x in stdout.splitlines() if x.startswith("{")][-1]
    return {k: v for k, v in json.loads(line).items() if k.startswith("model.")}


@pytest.fixture
def traced(shared_trace: Traced) -> Traced:
    """The trace of `gradtrace show scenarios/real/TARGET --json ARGS`, run once a session
    (test_dot draws the same scenarios and reads the same traces)."""
    return lambda target, *args, code=0: shared_trace(REAL / target, *args, code=code)


def assert_same_norms(trace: dict[str, Any], expected: dict[str, float]) -> None:
    assert expected
    for name, norm in expected.items():
        assert tensor(trace, name)["grad"]["norm"] == pytest.approx(norm, rel=1e-5), name


@pytest.mark.parametrize("script", ["gpt_tiny.py", "checkpointed.py", "func_per_sample.py",
                                    "fused_conv_bn.py"])
@pytest.mark.matrix
def test_module_level_models_match_plain_pytorch(script: str, traced: Traced) -> None:
    expected = printed_norms(plain(script).stdout)
    assert_same_norms(traced(script), expected)


def test_torch_func_passes_are_said_once_not_warned_per_pass(traced: Traced) -> None:
    trace = traced("func_per_sample.py")
    assert '"mean_matches": true' in trace["stdout"]
    (said,) = [f for f in trace["findings"] if f["code"] == "flow-not-recorded"]
    assert said["severity"] == "info" and "torch.func" in said["message"]


def test_an_argparse_script_gets_its_arguments(traced: Traced) -> None:
    expected = printed_norms(plain("train_args.py", "--epochs", "1").stdout)
    trace = traced("train_args.py", "--", "--epochs", "1")
    assert len(trace["passes"]) == 4  # one epoch: 64 samples in batches of 16
    assert_same_norms(trace, expected)  # parameters named from main()'s local `model`
    assert len(traced("train_args.py", "--", "--epochs", "2")["passes"]) == 8


@pytest.mark.matrix
def test_a_training_loop_runs_to_its_end_unless_capped_with_passes(traced: Traced) -> None:
    full = traced("polynomial_loop.py")
    assert len(full["passes"]) == 1000 and len(full["steps"]["grads"]) == 1000
    assert_same_norms(full, printed_norms(plain("polynomial_loop.py").stdout))
    # one step's graph; full flow for the first and the last pass, light statistics for all
    assert [i for i, p in enumerate(full["passes"]) if p["flow"]] == [0, 999]
    assert {p["graph"] for p in full["passes"]} == {0}
    capped = traced("polynomial_loop.py", "--passes", "100")
    assert len(capped["passes"]) == 100
    assert [f["code"] for f in capped["findings"]] == ["passes-capped"]
    assert len(traced("polynomial_loop.py", "--passes", "3")["passes"]) == 3


def test_a_script_that_raises_after_two_passes_keeps_them(traced: Traced) -> None:
    run = plain("raises_after_two_passes.py", code=1)
    assert "TypeError" in run.stderr
    trace = traced("raises_after_two_passes.py", code=2)
    assert len(trace["passes"]) == 2
    line = next(x for x in run.stdout.splitlines() if x.startswith("b.grad"))
    expected = json.loads(line.removeprefix("b.grad "))
    assert tensor(trace, "b")["grad"]["values"] == pytest.approx(expected, rel=1e-6)


def test_a_script_pickles_the_class_it_defines(traced: Traced) -> None:
    trace = traced("pickle_model.py")
    assert "restored RNNModel" in trace["stdout"]
    expected = float(plain("pickle_model.py").stdout.split()[-1])
    assert tensor(trace, "model.decoder.weight")["grad"]["norm"] == pytest.approx(expected)


@pytest.mark.parametrize(("function", "grads"), [
    ("test_sanity_check", {"x": [46.0]}),
    ("test_more_ops", {"a": [138.83381924198252], "b": [645.5772594752186]}),
])
def test_test_functions_run_one_by_one(function: str, grads: dict[str, list[float]],
                                       traced: Traced) -> None:
    trace = traced(f"test_value_grads.py::{function}")
    assert trace["scenario"].endswith(f"test_value_grads.py::{function}")
    for name, values in grads.items():
        assert tensor(trace, name)["grad"]["values"] == pytest.approx(values)


def test_a_test_file_runs_as_a_script_and_names_nothing() -> None:
    result = invoke("show", REAL / "test_value_grads.py")
    assert result.exit_code == 2 and "names no tensors" in result.stderr
    assert "FILE::FUNC" in result.stderr


def test_what_a_function_returns_is_the_root(tmp_path: Any) -> None:
    path = tmp_path / "f.py"
    path.write_text("import torch\n"
                    "def make():\n"
                    "    a = torch.tensor([1.0, 2.0], requires_grad=True)\n"
                    "    b = a * a\n"
                    "    return b.sum(), {'b': b}\n"
                    "def needs(x):\n    return x\n")
    trace = as_read(invoke("show", f"{path}::make", "--json").stdout)
    assert "what make returned" in trace["root_reason"]
    assert tensor(trace, "a")["grad"]["values"] == [2.0, 4.0]
    needs = invoke("show", f"{path}::needs")
    assert needs.exit_code == 2 and "needs arguments (x)" in needs.stderr
    missing = invoke("show", f"{path}::nope")
    assert missing.exit_code == 2 and "functions in it: make, needs" in missing.stderr


def test_a_gpt_style_model_fits_a_screen_with_module_names() -> None:
    result = invoke("show", REAL / "gpt_tiny.py", "--tree")  # piped: 120 columns
    lines = result.stdout.splitlines()
    assert result.exit_code == 0 and len(lines) <= 120
    assert max(len(line) for line in lines) <= 120
    assert "MmBackward0 · model.lm_head" in result.stdout
    assert "more nodes not shown (--max-nodes N, or --all)" in result.stdout
    everything = invoke("show", REAL / "gpt_tiny.py", "--all").stdout
    assert len(everything.splitlines()) > 200 and "more nodes not shown" not in everything
    assert "AddmmBackward0 · model.transformer.h.0.attn.c_attn" in everything


def test_by_module_is_one_row_per_module_on_one_screen() -> None:
    result = invoke("show", REAL / "gpt_tiny.py", "--by-module")
    lines = result.stdout.splitlines()
    assert result.exit_code == 0 and len(lines) <= 40
    row = next(x for x in lines if "│ model.transformer.h.0.mlp.c_fc " in x)
    cells = [c.strip() for c in row.strip("│").split("│")]
    assert cells[1:3] == ["6", "4,224"]  # nodes; parameters: 128 x 32 weight + 128 bias
    assert cells[5].endswith("KB")  # the bytes its nodes saved for backward


def test_checkpointed_nodes_are_marked_recomputed(traced: Traced) -> None:
    trace = traced("checkpointed.py")
    marked = {n["module"] for n in trace["nodes"] if n.get("recomputed")}
    assert marked == {"model.1.0", "model.1.1", "model.1.2", "model.1.3"}
    text = invoke("show", REAL / "checkpointed.py", "--saved").stdout
    assert "TanhBackward0 (h) · model.1.3  ↻ checkpointed" in text
    assert "(recomputed in backward)" in text
    by_module = invoke("show", REAL / "checkpointed.py", "--by-module").stdout
    row = next(x for x in by_module.splitlines() if "│ model.1 " in x)
    # checkpoint's own saved_tensors_hooks packed what its nodes saved: never unpacked
    assert [c.strip() for c in row.strip("│").split("│")][5:] == ["0 B", "not read"]


def test_a_reentrant_checkpoint_is_one_recomputed_node(tmp_path: Any) -> None:
    path = tmp_path / "reentrant.py"
    path.write_text("import torch\nfrom torch.utils.checkpoint import checkpoint\n"
                    "w = torch.ones(3, requires_grad=True)\n"
                    "h = checkpoint(lambda v: (v * 2).sin(), w, use_reentrant=True)\n"
                    "loss = h.sum()\nloss.backward()\n")
    result = invoke("show", path, "--json")
    trace = as_read(result.stdout)
    marked = [n["type"] for n in trace["nodes"] if n.get("recomputed")]
    assert marked == ["CheckpointFunctionBackward"], result.stderr


def test_saved_memory_has_a_total_and_the_top_holders() -> None:
    text = invoke("show", REAL / "gpt_tiny.py", "--saved").stdout
    line = next(x for x in text.splitlines() if x.startswith("saved for backward: "))
    assert " KB in " in line and "most: AddmmBackward0 · model.transformer.h." in line


COMPILED = {"compiled_model.py": 3, "compile_tutorial.py": 4}  # script -> its passes


def assert_like_plain_python(script: str, trace: dict[str, Any], *args: str) -> None:
    """The passes, .grad values and printed lines of `python SCRIPT ARGS`, and nothing of
    gradtrace's or torch.compile's own in what the script printed."""
    run = plain(script, *args)
    assert_same_norms(trace, printed_norms(run.stdout))
    assert len(trace["passes"]) == COMPILED[script]
    assert {p["kind"] for p in trace["passes"]} == {"backward"}  # no AOTAutograd grad calls
    assert all(p["error"] is None for p in trace["passes"])
    # torch's own warnings and log lines, which python showed too, left out (Python 3.13.0's
    # "Guards may run slower" comes from a matrix venv under ~/.cache/gradtrace/)
    printed = printed_without_torch_logs(trace["stdout"], run.stderr)
    assert printed == run.stdout
    for word in ("gradtrace", "Warning", "Traceback", "graph break"):
        assert word not in printed, word
    assert not [f for f in trace["findings"] if f["severity"] != "info"], trace["findings"]
    assert trace["functions"] == []  # a compiled region is no Function of the script's
    (region,) = [n for n in trace["nodes"] if n["type"] == "CompiledFunctionBackward"]
    assert region["kind"] == "custom"


@pytest.mark.matrix
@compiles_once_per_process
def test_a_compiled_model_is_traced_as_it_runs(traced: Traced) -> None:
    trace = traced("compiled_model.py")
    assert_like_plain_python("compiled_model.py", trace)
    # the node that ran (not the eager graph's AddmmBackward0s), labelled with its module and
    # the line that called the compiled model
    types = [n["type"] for n in trace["nodes"]]
    assert types[:2] == ["MseLossBackward0", "CompiledFunctionBackward"]
    assert "AddmmBackward0" not in types
    region = trace["nodes"][1]
    assert region["module"] == "model" and region["source"]["line"] == 28


@pytest.mark.matrix
@compiles_once_per_process
def test_a_compiled_train_step_records_every_backward(traced: Traced) -> None:
    trace = traced("compile_tutorial.py")
    assert_like_plain_python("compile_tutorial.py", trace)
    assert {p["line"] for p in trace["passes"]} == {51}  # loss.backward() inside train()
    # inside a compiled function no line runs as such: the region is labelled with the first
    # line its graph differentiates as torch noted it (MyModule.forward's, called at line 49)
    (region,) = [n for n in trace["nodes"] if n["type"] == "CompiledFunctionBackward"]
    assert region["source"]["line"] == 40
    assert region["source"]["code"] == "return self.out(torch.nn.functional.relu(self.lin(x)))"


INDUCTOR_STEP = """\
import json, threading
import torch

torch.manual_seed(0)
model = torch.nn.Sequential(torch.nn.Linear(8, 4), torch.nn.ReLU(), torch.nn.Linear(4, 1))


@torch.compile(backend="inductor")
def step(x, y):
    loss = torch.nn.functional.mse_loss(model(x), y)
    loss.backward()
    return loss


for _ in range(2):
    step(torch.randn(16, 8), torch.randn(16, 1))
print("pool open:", any(t.name.startswith("ThreadPoolExecutor") for t in threading.enumerate()))
print(json.dumps({f"model.{n}": p.grad.norm().item() for n, p in model.named_parameters()}))
"""


@pytest.mark.slow
def test_a_compiled_train_step_under_inductor_from_a_cold_cache(tmp_path: Any) -> None:
    """inductor compiles C++ in a thread pool it leaves open: the run hung (> 600 s) waiting
    for the pool's idle workers, which python's exit stops. A cold cache makes it compile (a
    small step: 20 s, where the tutorial's takes 50 s and leaves the same pool)."""
    script = tmp_path / "inductor_step.py"
    script.write_text(INDUCTOR_STEP)
    env = {**os.environ, "TORCHINDUCTOR_CACHE_DIR": str(tmp_path / "inductor")}
    run = run_gradtrace("show", script, "--json", "--timeout", "600", cwd=tmp_path, env=env,
                        timeout=900)
    assert run.returncode == 0, run.stderr[-2000:]
    trace = json.loads(run.stdout)
    assert trace["stdout"].startswith("pool open: True\n")  # what the test is about
    python = run_plain(script, env=env)  # from the cache the run above filled: seconds
    assert python.returncode == 0, python.stderr[-2000:]
    assert_same_norms(trace, printed_norms(python.stdout))
    assert len(trace["passes"]) == 2 and all(p["error"] is None for p in trace["passes"])


@pytest.mark.slow
def test_a_time_limit_stops_a_compiled_train_step(tmp_path: Any) -> None:
    """--timeout reaches code that runs inside a compiled function (its passes recorded)."""
    path = tmp_path / "forever.py"
    path.write_text("import torch\n"
                    "w = torch.ones(3, requires_grad=True)\n"
                    "@torch.compile(backend='aot_eager')\n"
                    "def step(x):\n"
                    "    loss = (w * x).sin().sum()\n"
                    "    loss.backward()\n"
                    "while True:\n"
                    "    step(torch.ones(3))\n")
    for limit in (12, 90):  # a loaded machine may still be compiling the first step at 12 s
        run = run_gradtrace("show", path, "--json", "--timeout", str(limit), timeout=limit + 90)
        if run.stdout:  # else nothing was recorded yet: the error alone, no trace
            break
    assert run.returncode == 2, run.stderr[-2000:]
    assert f"did not finish within {limit} s: it was at" in run.stderr
    trace = as_read(run.stdout)
    assert len(trace["passes"]) > 1 and trace["findings"][0]["code"] == "scenario-stopped"
    assert any(n["type"] == "CompiledFunctionBackward" for n in trace["nodes"])
    assert "gradtrace/" not in run.stderr


@pytest.mark.matrix
@compiles_once_per_process
def test_compiled_autograd_runs_as_under_python_with_no_hook_of_gradtrace_s() -> None:
    """Compiled autograd traces every hook of the backward graph: gradtrace's flow hooks broke
    its graph (Tensor.item()) and failed under fullgraph=True, blaming itself (exit 2). In a
    process of its own: the compiler it installs is torch's one for the process, and a
    backward in any other thread of a test worker (one an earlier test left) is then nested
    compiled autograd to torch (NotImplementedError, seen once in CI)."""
    run = plain("compiled_autograd.py")
    printed = json.loads(run.stdout.splitlines()[-1])
    shown = run_gradtrace("show", REAL / "compiled_autograd.py", "--json", cwd=REAL)
    assert shown.returncode == 0, shown.stderr[-2000:]
    trace = as_read(shown.stdout)
    assert printed_without_torch_logs(trace["stdout"], run.stderr) == run.stdout
    names = {"model.linear.weight": "basic.linear.weight", "model.linear.bias":
             "basic.linear.bias", "model2.linear.weight": "ctx.linear.weight",
             "model2.linear.bias": "ctx.linear.bias", "xh": "hook.xh"}
    for name, key in names.items():
        assert tensor(trace, name)["grad"]["norm"] == pytest.approx(printed[key], rel=1e-6)
    assert len(trace["passes"]) == 4 and all(p["error"] is None for p in trace["passes"])
    (finding,) = trace["findings"]
    assert (finding["code"], finding["severity"]) == ("flow-not-recorded", "info")
    assert finding["message"].startswith("4 pass(es) ran under compiled autograd, from pass 1")


@pytest.mark.matrix
def test_torch_compile_compiles_with_the_line_tracer_off_its_nodes_at_their_line(
        tmp_path: Any) -> None:
    """Dynamo and Inductor run millions of Python lines: under the line log's tracer a cold
    compile took 1.9× as long on Python 3.12 (the GPU check's compiled.py: 2.6× its loop).
    The tracer is off while torch.compile compiles (its backend sees none); the nodes the
    compiled code makes keep the line they had."""
    path = tmp_path / "backend.py"
    path.write_text("import sys\n"
                    "import torch\n"
                    "tracers = []\n"
                    "def backend(graph, inputs):\n"
                    "    tracers.append(sys.gettrace())\n"
                    "    return graph.forward\n"
                    "@torch.compile(backend=backend)\n"
                    "def scaled(x):\n"
                    "    return (x * 3).sin()\n"
                    "w = torch.ones(3, requires_grad=True)\n"
                    "loss = scaled(w).sum()\n"
                    "loss.backward()\n"
                    "print('tracers while compiling:', tracers)\n")
    run = run_gradtrace("show", path, "--json")
    assert run.returncode == 0, run.stderr[-2000:]
    trace = as_read(run.stdout)
    assert trace["stdout"] == "tracers while compiling: [None]\n"
    sources = {n["type"]: n["source"] for n in trace["nodes"] if n["source"]}
    assert sources["SumBackward0"]["line"] == 11
    assert sources.keys() == {"SumBackward0", "SinBackward0", "MulBackward0"}  # the compiled
    # function's, in the script's file
    assert {s["file"] for s in sources.values()} == {str(path)}
    assert tensor(trace, "w")["grad"]["norm"] == pytest.approx(  # d sin(3w)/dw = 3 cos(3w)
        3 * abs(math.cos(3)) * math.sqrt(3), rel=1e-6)


@pytest.mark.matrix
@compiles_once_per_process
def test_an_error_inside_compiled_code_blames_the_script_not_gradtrace(tmp_path: Any) -> None:
    path = tmp_path / "bad.py"
    path.write_text("import torch\n"
                    "w = torch.ones(3, requires_grad=True)\n"
                    "def step(x):\n"
                    "    loss = (w * x).sum()\n"
                    "    loss.backward()\n"
                    "    return torch.mm(x, x)\n"
                    "torch.compile(step, backend='aot_eager')(torch.ones(3))\n")
    result = invoke("show", path)
    assert result.exit_code == 2, result.stderr
    # the line is inside step(): the part of it after the graph break at backward() (its
    # resume function) runs from line 5, as plain python's traceback says too
    assert "the scenario raised TorchRuntimeError" in result.stderr
    assert "bad.py:5" in result.stderr or "bad.py:6" in result.stderr
    assert "gradtrace/" not in result.stderr and "bug in gradtrace" not in result.stderr


@pytest.mark.matrix
@compiles_once_per_process
def test_a_compile_failure_that_gradtrace_caused_is_said_to_be_gradtrace_s(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """As on torch 2.11 and 2.12, whose is_compiling() is False while AOTAutograd traces:
    the pass wrapper touched real Parameters under FakeTensorMode and the compile failed.
    That is gradtrace's fault, said so with its own file and line, never "fix the scenario"."""
    from gradtrace.capture.passes import patches

    monkeypatch.setattr(patches, "compiling", lambda: False)
    result = invoke("show", REAL / "compile_tutorial.py")
    assert result.exit_code == 2
    assert "gradtrace failed while running this line (in its own gradtrace/capture/" \
        in result.stderr
    assert "BackendCompilerFailed" in result.stderr and "train_opt(model, inp)" in result.stderr
    assert "bug in gradtrace, not in your script" in result.stderr
    assert "fix the scenario" not in result.stderr


def test_module_backward_hooks_are_marked_with_what_they_changed(traced: Traced) -> None:
    printed = json.loads(plain("guided_backprop.py").stdout.splitlines()[-1])
    trace = traced("guided_backprop.py")
    for name in ("prep_img", "full_img"):  # the old and the full module hook API
        assert tensor(trace, name)["grad"]["norm"] == pytest.approx(printed[name], rel=1e-5)
    hooked = {n["id"]: (n["type"], n["hooks"]) for n in trace["nodes"] if n.get("hooks")}
    assert sorted(hooked.values()) == sorted([
        ("ReluBackward0", ["relu_hook_function of model.features.3"]),
        ("ReluBackward0", ["relu_hook_function of model.features.1"]),
        ("ConvolutionBackward0", ["hook_function of model.features.0"]),
        *[("BackwardHookFunctionBackward", [f"relu_hook_function of full_model.features.{i}"])
          for i in (1, 3)],
        ("BackwardHookFunctionBackward", ["hook_function of full_model.features.0"])])
    changed = [f for f in trace["findings"] if f["code"] == "hook-changed-gradient"]
    assert {hooked[f["node"]][1][0] for f in changed} == {
        f"relu_hook_function of {m}.features.{i}" for m in ("model", "full_model")
        for i in (1, 3)}  # hook_function returns None: it changes nothing
    # the old-style hook's node: what ReLU itself sent is kept next to what the hook sent
    relu = next(k for k, v in hooked.items() if v[1] == [
        "relu_hook_function of model.features.3"])
    flow = trace["passes"][0]["flow"][relu]
    own, sent = (trace["gradients"][flow[k][0]] for k in ("unhooked", "grad_inputs"))
    assert own["min"] < 0 and sent["min"] == 0
    shown = invoke("show", REAL / "guided_backprop.py", "--all").stdout
    assert "⚓ module hook relu_hook_function of model.features.3 changed what it sends" in shown


def test_vectorized_autograd_functional_is_batched_said_once_as_info(traced: Traced) -> None:
    printed = json.loads(plain("functional_jacobian.py").stdout.splitlines()[-1])
    assert printed["same"] and printed["vjp_is_grad"]
    trace = traced("functional_jacobian.py")
    assert tensor(trace, "inputs")["grad"]["norm"] == pytest.approx(printed["inputs"], rel=1e-5)
    (said,) = [f for f in trace["findings"] if f["code"] == "flow-not-recorded"]
    assert said["severity"] == "info" and "vectorized" in said["message"]
    assert all(f["severity"] == "info" for f in trace["findings"]), trace["findings"]


def step_norms(trace: dict[str, Any], name: str) -> list[float | None]:
    """The norm of the named leaf's .grad after each pass (the light statistics)."""
    column = trace["steps"]["leaves"].index(name)
    return [None if row[column] is None else row[column][0] for row in trace["steps"]["grads"]]


def leaf_names(trace: dict[str, Any]) -> list[str | None]:
    return [n["tensor"] for n in trace["nodes"] if n["kind"] == "leaf"]


def test_parameters_only_in_a_list_are_named_by_their_path(traced: Traced) -> None:
    # d2l's RNN from scratch: params = [W_xh, W_hh, b_h, W_hq, b_q] from a get_params()
    # whose frame is gone, kept as net.params of a plain object
    expected = json.loads(plain("rnn_scratch.py").stdout)["norms"]
    trace = traced("rnn_scratch.py")
    names = [f"net.params[{i}]" for i in range(5)]
    assert sorted(leaf_names(trace)) == names  # every leaf of the graph named
    assert [c["tensor"] for c in trace["passes"][0]["grad_changes"]] == names
    for i, name in enumerate(names):  # each pass, right after its backward
        assert step_norms(trace, name) == pytest.approx([step[i] for step in expected],
                                                        rel=1e-5), name
    first = {c["tensor"]: c["after"]["norm"] for c in trace["passes"][0]["grad_changes"]}
    assert [first[n] for n in names] == pytest.approx(expected[0], rel=1e-5)


def test_modules_held_by_a_plain_object_are_named_and_cluster_nodes(traced: Traced) -> None:
    # soft actor-critic: the networks are attributes of `agent`, an instance of SAC(object)
    expected = json.loads(plain("sac_agent.py").stdout)
    trace = traced("sac_agent.py")
    assert None not in leaf_names(trace)
    assert "agent.critic.Q1.linear1.weight" in leaf_names(trace)
    modules = {n.get("module") for n in trace["nodes"]}
    assert {"agent.critic.Q1.linear1", "agent.critic.Q2.linear3",
            "agent.policy.mean_linear"} <= modules
    # passes per update: critic, policy, alpha
    assert step_norms(trace, "agent.critic.Q1.linear1.weight")[0::3] == pytest.approx(
        expected["critic"], rel=1e-5)
    assert step_norms(trace, "agent.policy.mean_linear.weight")[1::3] == pytest.approx(
        expected["policy"], rel=1e-5)
    assert step_norms(trace, "agent.log_alpha")[2::3] == pytest.approx(expected["alpha"],
                                                                       rel=1e-5)
    changed = [c["tensor"] for c in trace["passes"][0]["grad_changes"]]
    assert changed[0] == "agent.critic.Q1.linear1.weight" and len(changed) == 12
    column = trace["steps"]["leaves"].index("agent.critic.Q1.linear1.weight")
    assert trace["steps"]["modules"][column] == "agent.critic.Q1.linear1"
    # the target critic is used under no_grad and soft-updated through .data: info, once
    (copy,) = [f for f in trace["findings"] if f["code"] in ("updated-copy", "unreached-leaf")]
    assert copy["code"] == "updated-copy" and copy["severity"] == "info"
    assert "agent.critic_target (12)" in copy["message"]


def test_a_dqn_s_target_network_is_an_updated_copy_not_a_graph_cut(traced: Traced) -> None:
    # the tutorial's DQN: target_net used under no_grad and soft-updated by state_dict
    expected = json.loads(plain("dqn_tutorial.py").stdout.splitlines()[-1])
    trace = traced("dqn_tutorial.py")
    assert_same_norms(trace, expected)
    assert len(trace["passes"]) == 8  # of 23 steps, one a step once memory holds 16
    assert not [f for f in trace["findings"] if f["severity"] != "info"], trace["findings"]
    (copy,) = trace["findings"]
    assert copy["code"] == "updated-copy" and "target_net (6)" in copy["message"]


def test_inputs_handed_to_autograd_functional_are_not_unreached(traced: Traced) -> None:
    # the documentation's hessian and vjp, on inputs made with requires_grad=True: the
    # functional API differentiates detached copies, so no graph reaches them, as meant
    expected = json.loads(plain("functional_hessian.py").stdout)
    trace = traced("functional_hessian.py")
    assert {"inputs[0]", "inputs[1]"} <= {t["name"] for t in trace["tensors"]}
    assert trace["findings"] == []
    assert tensor(trace, "scale")["grad"]["values"] == pytest.approx(expected["scale"])


def test_tensors_in_a_dict_are_named_by_their_key(traced: Traced) -> None:
    # aymericdamien's raw neural network: weights = {'h1': …}, biases = {'b1': …}
    expected = json.loads(plain("mlp_dict_weights.py").stdout)
    trace = traced("mlp_dict_weights.py")
    assert sorted(leaf_names(trace)) == sorted(expected)  # 'weights["h1"]', …
    assert_same_norms(trace, expected)
    last = trace["passes"][-1]["grad_changes"]
    assert {c["tensor"]: c["after"]["norm"] for c in last} == pytest.approx(expected, rel=1e-5)


def test_a_rebound_name_keeps_naming_what_it_named_in_earlier_passes(traced: Traced) -> None:
    # the nn tutorial binds `model` three times; the first model's graph is still shown
    expected = json.loads(plain("nn_tutorial_rebound.py").stdout)
    trace = traced("nn_tutorial_rebound.py")
    leaves = {n["tensor"]: n.get("module") for n in trace["nodes"] if n["kind"] == "leaf"}
    assert leaves == {"model.weights": "model", "model.bias": "model",
                      "model.lin.weight": "model.lin", "model.lin.bias": "model.lin"}
    assert [c["tensor"] for c in trace["passes"][0]["grad_changes"]] == ["model.weights",
                                                                           "model.bias"]
    for name in ("model.weights", "model.bias", "model.lin.weight", "model.lin.bias"):
        assert [n for n in step_norms(trace, name) if n is not None] == pytest.approx(
            [step[name] for step in expected if name in step], rel=1e-5), name
    # the first model's leaves have rows (their .grad: None after its zero_grad)
    assert tensor(trace, "model.weights")["node"] is not None
    text = invoke("show", REAL / "nn_tutorial_rebound.py").stdout
    assert "AccumulateGrad → model.weights" in text and "(unnamed leaf)" not in text


def test_word2vec_sparse_gradients_match_plain_pytorch_in_every_step(traced: Traced) -> None:
    # Andras7/word2vec-pytorch's skip-gram: v_embeddings is used twice a step, so the
    # engine sums two sparse gradients into its .grad
    expected = json.loads(plain("word2vec_sparse.py").stdout)
    trace = traced("word2vec_sparse.py")
    prefix = "w2v.skip_gram_model."
    for name in ("u_embeddings.weight", "v_embeddings.weight"):
        assert step_norms(trace, prefix + name) == pytest.approx(
            [step[name] for step in expected], rel=1e-5), name
    # the flow into each embedding, in the passes kept in full, is its .grad
    nodes = {n["id"]: n for n in trace["nodes"]}
    kept = [(i, p) for i, p in enumerate(trace["passes"]) if p["flow"]]
    assert [i for i, _ in kept] == [0, 7]
    for i, p in kept:
        into = {nodes[nid]["tensor"]: trace["gradients"][flow["grad_outputs"][0]]["norm"]
                for nid, flow in p["flow"].items()
                if nid in nodes and nodes[nid]["type"] == "AccumulateGrad"}
        assert into == pytest.approx({prefix + k: v for k, v in expected[i].items()},
                                     rel=1e-5)


def test_a_torch_func_pass_after_an_eager_one_is_its_own_graph(tmp_path: Any) -> None:
    """The per-sample-gradients tutorial's grad(functional_call) after a plain backward: the
    transform's pass ran over ops alike, but it is no step of the eager graph, and its root
    is the transform's own graph: the default view is the eager pass's, named."""
    path = tmp_path / "func_after.py"
    path.write_text("import torch\nfrom torch.func import functional_call, grad\n"
                    "torch.manual_seed(0)\nmodel = torch.nn.Linear(3, 2)\n"
                    "x = torch.randn(4, 3)\nloss = model(x).pow(2).mean()\nloss.backward()\n"
                    "params = {k: v.detach() for k, v in model.named_parameters()}\n"
                    "g = grad(lambda p: functional_call(model, p, (x,)).pow(2).mean())(params)\n")
    trace = as_read(invoke("show", path, "--json").stdout)
    assert [p["graph"] for p in trace["passes"]] == [0, 1]
    assert trace["output_names"] == ["loss"]
    assert trace["root_reason"] == "the roots of the scenario's last backward pass, at line 7"
    leaves = {n["tensor"] for n in trace["nodes"] if n["kind"] == "leaf"}
    assert {"model.weight", "model.bias"} <= leaves


@pytest.mark.parametrize(("hooked", "module"), [("model[1]", "model.1"), ("model", "model")])
def test_a_full_backward_hook_s_nodes_belong_to_its_module(tmp_path: Any, hooked: str,
                                                           module: str) -> None:
    """Grad-CAM's register_full_backward_hook: the hook node on the module's outputs is made
    after its forward returned, and was labelled with the parent module (or none)."""
    path = tmp_path / "cam.py"
    path.write_text("import torch, torch.nn as nn\ntorch.manual_seed(0)\n"
                    "model = nn.Sequential(nn.Conv2d(1, 2, 3), nn.Conv2d(2, 4, 3), nn.ReLU())\n"
                    f"{hooked}.register_full_backward_hook(lambda m, gi, go: None)\n"
                    "out = model(torch.randn(1, 1, 6, 6)).sum()\nout.backward()\n")
    trace = as_read(invoke("show", path, "--json").stdout)
    hook_nodes = [n for n in trace["nodes"] if n["type"] == "BackwardHookFunctionBackward"]
    # model's input needs no grad: only its outputs' hook node is made
    assert [n["module"] for n in hook_nodes] == [module] * (2 if hooked != "model" else 1)
    # torch's own Function, not the code's: the tree says what it is
    assert f"BackwardHookFunctionBackward · {module}  module hook node" in \
        invoke("show", path).stdout


COMPILING_BESIDE = '''import threading

import torch

started, release = threading.Event(), threading.Event()


def waiting_backend(gm, example_inputs):
    started.set()
    release.wait()
    return gm.forward


@torch.compile(backend=waiting_backend)
def double(x):
    return x * 2


compiler = threading.Thread(target=lambda: double(torch.ones(2)))
compiler.start()
started.wait()  # the other thread compiles until release
w = torch.ones(3, requires_grad=True)
for _ in range(3):
    (w * w).sum().backward()
release.set()
compiler.join()
print(w.grad.tolist())
'''


@compiles_once_per_process
def test_a_thread_compiling_beside_leaves_this_thread_s_passes_recorded(tmp_path: Any) -> None:
    """torch.compiler.is_compiling() is one flag for the process: while another thread
    compiled, no pass of this thread was recorded ("names no tensors"; in the suite, a thread
    left behind compiling emptied later runs of the same worker)."""
    path = write_script(tmp_path, COMPILING_BESIDE)
    run = run_gradtrace("show", path, "--json", timeout=120)
    assert run.returncode == 0, run.stderr[-2000:]
    trace = json.loads(run.stdout)
    assert trace["stdout"] == "[6.0, 6.0, 6.0]\n"  # as python prints it: 3 passes of 2w
    assert len(trace["passes"]) == 3
    assert tensor(trace, "w")["grad"]["values"] == [6.0, 6.0, 6.0]
