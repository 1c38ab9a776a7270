"""Shared helpers: run the real CLI in-process and read its JSON."""

from __future__ import annotations

import fcntl
import functools
import hashlib
import importlib.util
import json
import os
import random
import re
import shutil
from pathlib import Path
from types import ModuleType
from typing import Any, NamedTuple

import pytest
import torch
import typer.testing
from plain_python import run_gradtrace
from typer.testing import CliRunner

from gradtrace.cli import app
from gradtrace.model.compact import SCHEMA_3, expanded
from gradtrace.model.validate import validate_trace

ROOT = Path(__file__).resolve().parent.parent
SCENARIOS = ROOT / "gradtrace" / "examples"  # the bundled examples: example:NAME


def code_files() -> list[Path]:
    """The package's own modules: every .py file of gradtrace/ but the bundled examples,
    which are scenarios (data the package ships), not gradtrace's code."""
    return sorted(p for p in (ROOT / "gradtrace").rglob("*.py") if SCENARIOS not in p.parents)


# examples/distributed/ runs under torchrun, in tests/test_distributed.py: not alone
UNDER_TORCHRUN = "distributed"
DOT = shutil.which("dot")
needs_dot = pytest.mark.skipif(DOT is None, reason="Graphviz is installed by dev.py")


# torch 2.11 and 2.12 crash (SIGSEGV in FakeTensorMode.__enter__) compiling in a thread once
# another thread compiled and ended, under plain python too; gradtrace runs each scenario in
# a thread of its own, so a second compiled run in one process needs torch 2.13 or later.
COMPILE_CRASH = torch.__version__ < "2.13"
compiles_once_per_process = pytest.mark.skipif(
    COMPILE_CRASH, reason="torch < 2.13 crashes compiling in a second thread (plain too); "
    "tests/test_every_torch.py runs the compiled steps in processes of their own")


# A line torch's logging writes to stderr (torch._logging's format: level, date, time, pid,
# file): gradtrace shows both of a script's streams, in the order written, as what it printed
TORCH_LOG_LINE = re.compile(r"^[DIWEC]\d{4} \d\d:\d\d:\d\d\.\d+ +\d+ \S*torch/")


# A warning torch's own code raised, as python shows it ("FILE:LINE: Category: text", then
# the line of source): Python 3.13.0 gets "Guards may run slower" at each guard torch.compile
# builds
TORCH_WARNING = re.compile(r"^\S*torch/\S+\.py:\d+: \w+(Warning|Error): ")


def torch_warnings(lines: list[str]) -> set[int]:
    """The indices of the lines of torch's own warnings (each with its source line)."""
    warned = {i for i, line in enumerate(lines) if TORCH_WARNING.match(line)}
    return warned | {i + 1 for i in warned if lines[i + 1:i + 2] and lines[i + 1].startswith(" ")}


def printed_without_torch_logs(printed: str, plain_stderr: str) -> str:
    """What a script printed under gradtrace, without torch's log lines and warnings,
    asserting each was shown under plain python too (where it went to stderr)."""
    lines = printed.splitlines()
    logs = [line for line in lines if TORCH_LOG_LINE.match(line)]
    plain_logs = [line for line in plain_stderr.splitlines() if TORCH_LOG_LINE.match(line)]
    assert len(logs) <= len(plain_logs), logs
    dropped = torch_warnings(lines)
    assert all(lines[i] in plain_stderr.splitlines() for i in dropped), \
        [lines[i] for i in dropped]
    return "".join(line + "\n" for i, line in enumerate(lines)
                   if i not in dropped and not TORCH_LOG_LINE.match(line))


def write_script(folder: Path, text: str, name: str = "s.py") -> Path:
    """A script file of text in folder."""
    path = folder / name
    path.write_text(text)
    return path


# typer builds the app's click command from its functions' signatures on every invoke
# (~25 ms: most of a small command's run); the app never changes, so it is built once
typer.testing._get_command = functools.cache(typer.testing._get_command)


def read_terminal(leader: int) -> bytes:
    """All a pseudo-terminal's other end wrote until every writer closed it; closes leader."""
    seen = b""
    while True:
        try:
            chunk = os.read(leader, 65536)
        except OSError:  # every writer closed its end
            break
        if not chunk:
            break
        seen += chunk
    os.close(leader)
    return seen


def invoke(*args: str | Path, env: dict[str, str | None] | None = None) -> Any:
    """Run `gradtrace ARGS` in-process; stdout and stderr are kept apart."""
    return CliRunner().invoke(app, [str(a) for a in args], env=env)


def check_json(*args: str | Path, process: bool = False) -> tuple[int, dict[str, Any]]:
    """The exit code and JSON report of `gradtrace check ARGS --json`; process: in one of its
    own (a check past its --timeout leaves a thread running, to end with the process)."""
    if process:
        done = run_gradtrace("check", *args, "--json")
        return done.returncode, json.loads(done.stdout)
    result = invoke("check", *args, "--json")
    return result.exit_code, json.loads(result.stdout)


def seed() -> None:
    """The RNG state every shared run and every run it is compared with starts from."""
    torch.manual_seed(0)
    random.seed(0)


class SharedResult(NamedTuple):
    """What tests read of a shared run's click Result."""

    exit_code: int
    stdout: str
    stderr: str


# The folder where the workers of one pytest session keep their shared runs (conftest sets it)
SHARED_RUNS = "GRADTRACE_TEST_SHARED_RUNS"


@functools.cache  # many tests read one scenario's run: it is made once per worker
def shared_invoke(*args: str) -> SharedResult:
    """invoke(*args) from seeded RNGs, run once per distinct command line in the session (by
    the first worker that asks; the others read its result): the same result each time. Only
    for commands that read the repository's files and write none."""
    folder = os.environ.get(SHARED_RUNS)
    if folder is None:
        return _seeded_invoke(args)
    key = Path(folder) / hashlib.sha256("\0".join(args).encode()).hexdigest()
    with open(key.with_suffix(".lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # another worker making it: wait for its result
        if key.exists():
            return SharedResult(*json.loads(key.read_text(encoding="utf-8")))
        result = _seeded_invoke(args)
        key.with_suffix(".tmp").write_text(json.dumps(result), encoding="utf-8")
        key.with_suffix(".tmp").replace(key)
    return result


def _seeded_invoke(args: tuple[str, ...]) -> SharedResult:
    seed()
    result = invoke(*args)
    return SharedResult(result.exit_code, result.stdout, result.stderr)


def as_read(text: str) -> dict[str, Any]:
    """A trace's JSON text as data in the /2 shape (a /3 trace's rows and tables expanded, as
    gradtrace reads it), checked as gradtrace checks it."""
    data = json.loads(text)
    if data.get("schema") == SCHEMA_3:
        data = expanded(data)
    validate_trace(data)
    return data


def flow_entry(trace: dict[str, Any], node: str, pass_index: int = -1) -> dict[str, Any]:
    """passes[pass_index].flow[node] with its gradient indexes resolved to the summaries of
    the trace's gradients table."""
    entry = trace["passes"][pass_index]["flow"][node]
    table = trace["gradients"]
    return {**entry, **{key: [None if g is None else table[g] for g in entry[key]]
                        for key in ("grad_outputs", "grad_inputs")}}


# The gallery's scenarios whose own backward() or gradcheck() raises: python stops there, so
# gradtrace shows what they recorded and exits 2 (a scenario-stopped finding says where).
STOPS = frozenset({
    "backward_twice_error.py", "broken/gradcheck_pow_wrong_backward.py",
    "detach_cuts_graph.py", "no_grad_context.py", "second_derivative_without_create_graph.py",
    "explained/cut_by_item.py",
    "explained/eval_then_backward.py", "explained/gan_shared_fake.py",
    "explained/inplace_after_save.py", "explained/inplace_augmented.py",
    "explained/inplace_in_forward.py",
    "bugs/nan_raise_on_loss.py",  # raises at its first NaN loss, as its python run does
    "bugs/inplace_residual.py",  # its first backward raises: a saved tensor changed in place
    "bugs/rnn_hidden_not_detached.py",  # its second backward goes through a freed graph
})


def show_json(scenario: str | Path, *args: str) -> dict[str, Any]:
    """The JSON of `gradtrace show SCENARIO --json`, asserting it succeeded — or, for a
    scenario of STOPS, that it showed the trace and exited 2."""
    path = Path(scenario) if Path(scenario).is_absolute() else SCENARIOS / scenario
    ours = path.is_relative_to(SCENARIOS)  # a gallery scenario: its run is shared
    result = (shared_invoke if ours else invoke)("show", str(path), "--json", *args)
    stops = ours and path.relative_to(SCENARIOS).as_posix() in STOPS
    assert result.exit_code == (2 if stops else 0), result.stderr + result.stdout
    trace = as_read(result.stdout)
    assert any(f["code"] == "scenario-stopped" for f in trace["findings"]) == stops
    return trace


def tensor(trace: dict[str, Any], name: str) -> dict[str, Any]:
    """The tensors[] row of a named tensor."""
    rows = [t for t in trace["tensors"] if t["name"] == name]
    assert rows, f"no tensor {name!r} in {[t['name'] for t in trace['tensors']]}"
    return rows[0]


def grad(trace: dict[str, Any], name: str) -> Any:
    """The final .grad values of a named tensor (None when it has none)."""
    g = tensor(trace, name)["grad"]
    return None if g is None else g["values"]


# Each finding code -> (its gallery scenario, the tensor it names, its line, words it says).
GALLERY_FINDINGS = {
    "pass-failed": ("explained/skip_failed_batch.py", "loss", 16,
                    "line 16 `loss.backward()`"),
    "no-graph": ("explained/eval_then_backward.py", "model.weight", 10,
                 "torch.no_grad() on line 10"),
    "unreached-leaf": ("explained/frozen_by_detach.py", "w_enc", 7, "w_enc requires grad"),
    "detached": ("explained/frozen_by_detach.py", "frozen", 10, "cut from its graph"),
    "updated-copy": ("explained/ema_copy.py", "ema.module.0.weight", 34,
                     "an EMA or target copy?"),
    "hook-changed-gradient": ("tensor_hook.py", "y", 6, "a hook changed the gradient"),
    "grad-changed-after": ("explained/grad_clipped_in_hook.py", "w", 16,
                           "a post-accumulate-grad hook"),
    "nan-gradient": ("explained/norm_of_zero.py", "dist", 10, "SqrtBackward0 (dist, line 10)"),
    "flow-not-recorded": ("real/func_per_sample.py", None, 28, "torch.func"),
    "gradcheck": ("gradcheck_pow.py", None, 26, "gradcheck(MyPow.apply) at line 26 passed"),
    "gradcheck-failed": ("broken/gradcheck_pow_wrong_backward.py", None, 26,
                         "gradcheck(MyPow.apply) at line 26 failed"),
    "scenario-stopped": ("real/raises_after_two_passes.py", None, 24,
                         "raises_after_two_passes.py:24: the scenario raised TypeError"),
    "passes-capped": ("real/polynomial_loop.py", None, 29, "line 29 `loss.backward()`"),
    "inplace-modified": ("explained/inplace_after_save.py", "b", 8, "line 6"),
    "graph-freed": ("explained/gan_shared_fake.py", "fake", 11, "pass 1 (line 13"),
    "nan-value": ("explained/log_of_zero.py", "y", 8, "at line 8"),
    "graph-cut": ("explained/cut_by_item.py", "loss", 7, "line 7"),
    # issue 26's training loops: these pass once the capture fills Trace.steps and the
    # examples/loops/ files land (lines are their loss.backward() lines in the drafts)
    "grad-accumulating": ("loops/forgot_zero_grad.py", "model.0.weight", 26,
                          "zero_grad() is missing"),
    "vanishing-gradient": ("loops/sigmoid_deep.py", "model.0.bias", 35,
                           "model.0's gradient norm is below 1/10,000"),
    "exploding-gradient": ("loops/exploding_rnn.py", "model.rec.weight", 47,
                           "model.rec's gradient norm reached"),
    "dead-parameter": ("loops/dead_relu.py", "model.block.weight", 46,
                       "exactly zero in all 10 passes"),
    # issue 53's bug gallery: the optimizers' use of the gradients
    "grad-discarded": ("bugs/accumulation_zero_grad_every_batch.py", None, 22,
                       "line 22 `optimizer.zero_grad()`"),
    "step-without-gradient": ("bugs/step_before_backward.py", None, 19,
                              "runs before backward at line 20"),
    "clip-without-gradient": ("bugs/clip_before_backward.py", None, 21, "clips nothing"),
    "not-optimized": ("bugs/layers_in_list.py", "model.blocks[0].weight", 15,
                      "set at line 15"),
    "frozen-in-optimizer": ("bugs/frozen_layer_left_in.py", "model.features.0.weight", 25,
                            "frozen by line 25"),
    "leaf-copied": ("bugs/weights_to_double.py", "w", 12, "w.grad stays None"),
    "graph-kept": ("bugs/running_loss_keeps_graph.py", "running_loss", 23,
                   "keeps every step's graph"),
    "nonleaf-grad": ("explained/read_nonleaf_grad.py", "y", 11, "so it reads None"),
}


def gallery_finding(code: str) -> dict[str, Any]:
    """The first finding of code that its gallery scenario gives (`show --json`)."""
    found = [f for f in _gallery_run(GALLERY_FINDINGS[code][0]) if f["code"] == code]
    assert found, f"{GALLERY_FINDINGS[code][0]} gives no {code} finding"
    return found[0]


# What a gallery scenario is run with besides --json (a loop runs to its end unless capped).
GALLERY_ARGS = {"real/polynomial_loop.py": ("--passes", "100")}


def _gallery_run(scenario: str) -> list[dict[str, Any]]:
    result = shared_invoke("show", str(SCENARIOS / scenario), "--json",
                           *GALLERY_ARGS.get(scenario, ()))
    stopped = scenario in STOPS or scenario == GALLERY_FINDINGS["scenario-stopped"][0]
    assert result.exit_code == (2 if stopped else 0), result.stderr
    return json.loads(result.stdout)["findings"]


def stopped_by_its_call(result: Any) -> bool:
    """The run exited 2 because a backward, grad or gradcheck call of the scenario raised
    (python stops there too): its trace shows the failed call and where it stopped."""
    data = json.loads(result.stdout) if result.stdout else {}
    codes = {f["code"] for f in data.get("findings", ())}
    failed_call = any(p["error"] for p in data.get("passes", ())) or "gradcheck-failed" in codes
    return result.exit_code == 2 and "scenario-stopped" in codes and failed_call


def module_from(path: Path) -> ModuleType:
    """The Python file at path imported as a module of its own (dev.py, docs' scripts)."""
    spec = importlib.util.spec_from_file_location(path.stem, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


# One script that reaches every probe's feature: modules and their lines (sequence numbers),
# a custom Function, a hook on a non-leaf, a clip imported by name, .grad zeroed in place, a
# view of a leaf, a thread, warnings, a loop of steps.
EVERY_FEATURE = """import threading
import torch
from torch.nn.utils import clip_grad_norm_

class Square(torch.autograd.Function):
    forward = staticmethod(lambda ctx, x: (ctx.save_for_backward(x), x * x)[1])
    backward = staticmethod(lambda ctx, g: 2 * ctx.saved_tensors[0] * g)

torch.manual_seed(0)
model = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.Tanh(), torch.nn.Linear(8, 1))
opt = torch.optim.SGD(model.parameters(), lr=0.1)
data = torch.randn(16, 4)
calls = []
w = torch.ones(4, requires_grad=True)
head = w[:2]
for step in range(3):
    opt.zero_grad()
    hidden = model[0](data * w)
    hidden.register_hook(lambda g: calls.append(1))
    out = model[2](model[1](hidden))
    loss = Square.apply(out).mean()
    loss.backward()
    clip_grad_norm_(model.parameters(), 0.5)
    opt.step()
    w.grad.zero_()
worker = threading.Thread(target=lambda: None)
worker.start()
worker.join()
print("hook calls", len(calls), round(loss.item(), 6))
"""


def show_without(script: Path, without: str = "", *more: str) -> tuple[dict[str, Any], str]:
    """`gradtrace show script --json` in a process of its own with GRADTRACE_WITHOUT set:
    the trace, and stderr."""
    env = {**os.environ, "GRADTRACE_WITHOUT": without}
    done = run_gradtrace("show", script, "--json", *more, env=env, timeout=120)
    assert done.returncode == 0, done.stderr
    assert "Traceback" not in done.stderr
    return json.loads(done.stdout), done.stderr


def trace_numbers(trace: dict[str, Any]) -> dict[str, Any]:
    """What must not change: each tensor's .grad, the script's output, the steps' statistics
    and each pass's .grad changes."""
    return {"grads": {t["name"]: t["grad"] for t in trace["tensors"]},
            "stdout": trace["stdout"], "steps": trace.get("steps"),
            "changes": [p.get("grad_changes") for p in trace["passes"]]}
