"""`gradtrace watch`: findings told as they fire (in the run's own log, while it runs), a log
a kill leaves readable, --stop-on at the right step, and a healthy run that tells nothing."""

from __future__ import annotations

import json
import signal
import subprocess
import time
from pathlib import Path

from helpers import SCENARIOS, as_read, invoke, show_json, write_script
from plain_python import run_gradtrace, start_gradtrace
from steps_fixtures import loop_trace, steps_of

from gradtrace.findings.health import step_findings
from gradtrace.findings.live import LiveFindings
from gradtrace.model.records import Steps
from gradtrace.model.run_log import LogFinding

# A tiny MLP loop whose inputs turn NaN at step 1,000; after each step it reads its own log
# (argv[1]) and says at which step it first saw the NaN's finding there.
# A tiny MLP, its optimizer and its data: the loops below start so.
TINY_MLP = """\
import torch
torch.manual_seed(0)
model = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.Tanh(), torch.nn.Linear(8, 1))
optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
x, y = torch.randn(16, 4), torch.randn(16, 1)
"""
NAN_AT_1000 = "import json, sys\n" + TINY_MLP + """\
for step in range(1, 1101):
    inputs = x * float("nan") if step >= 1000 else x
    loss = ((model(inputs) - y) ** 2).mean()
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    if step >= 1000:
        with open(sys.argv[1]) as log:
            kinds = [json.loads(line) for line in log if line.endswith("\\n")]
        if any(k["kind"] == "finding" and k["code"] == "nan-value" for k in kinds):
            print(f"seen at step {step}")
            break
"""

LONG_LOOP = """\
import torch
model = torch.nn.Linear(4, 1)
optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
for step in range(10**7):
    loss = model(torch.randn(8, 4)).pow(2).mean()
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
"""


def _records(log: Path) -> list[dict[str, object]]:
    return [json.loads(line) for line in log.read_text().splitlines()]


def test_a_nan_at_step_1000_is_in_the_log_while_the_loop_still_runs(tmp_path: Path) -> None:
    script = write_script(tmp_path, NAN_AT_1000)
    log = tmp_path / "run.jsonl"
    result = run_gradtrace("watch", script, "--log", log, "--", log, cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert "seen at step 1000" in result.stdout  # the step it was born at, not the end
    (finding,) = [r for r in _records(log) if r["kind"] == "finding"
                  and r["code"] == "nan-value"]
    assert finding["step"] == 1000 and finding["line"] == 9
    assert "step 1000: error [nan-value]" in result.stderr
    assert _records(log)[-1] == {"kind": "end", "steps": 1000, "optimizer_steps_after": 1,
                                 "outcome": "finished"}


def test_a_killed_watch_leaves_a_log_steps_reads(tmp_path: Path) -> None:
    script = write_script(tmp_path, LONG_LOOP)
    log = tmp_path / "run.jsonl"
    process = start_gradtrace("watch", script, "--log", log, cwd=tmp_path)
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and (
            not log.exists() or log.read_text().count('"kind": "steps"') < 3):
        time.sleep(0.2)
    process.send_signal(signal.SIGKILL)
    process.wait(timeout=30)
    assert '"kind": "end"' not in log.read_text()  # killed: no end line
    result = invoke("steps", log)
    assert result.exit_code == 0, result.output
    rows = sum(len(r["grads"]) for r in _records_complete(log) if r["kind"] == "steps")
    assert rows >= 3 and f"{rows} passes" in result.output


def _records_complete(log: Path) -> list[dict[str, object]]:
    text = log.read_text()
    return [json.loads(line) for line in text.split("\n")[:-1]]  # the last: cut or empty


def test_stop_on_ends_the_run_at_the_pass_whose_loss_turned_nan(tmp_path: Path) -> None:
    log, out = tmp_path / "run.jsonl", tmp_path / "stopped.json"
    result = invoke("watch", SCENARIOS / "bugs" / "nan_masked_mean.py", "--log", log,
                    "--stop-on", "nan-value", "-o", out)
    assert result.exit_code == 1, result.output
    trace = json.loads(out.read_text())
    assert len(trace["passes"]) == 5  # the NaN's pass is the last, shown in full
    capped = [f for f in trace["findings"] if f["code"] == "passes-capped"]
    assert capped and capped[0]["message"].endswith("nan-value fired")
    assert _records(log)[-1]["outcome"] == "stopped"
    assert "step 5: error [nan-value]" not in trace["stdout"]  # told on stderr, not the script's


def test_a_healthy_twin_tells_no_finding(tmp_path: Path) -> None:
    log = tmp_path / "run.jsonl"
    result = invoke("watch", SCENARIOS / "bugs" / "nan_masked_mean_fixed.py", "--log", log,
                    "--stop-on", "nan-value,exploding-gradient")
    assert result.exit_code == 0, result.output
    records = _records(log)
    assert not [r for r in records if r["kind"] == "finding"]
    assert records[0]["kind"] == "header" and records[-1]["outcome"] == "finished"
    assert sum(len(r["grads"]) for r in records if r["kind"] == "steps") == 30


def test_bad_input_is_refused_and_nothing_is_written_over(tmp_path: Path) -> None:
    notes = tmp_path / "notes.txt"
    notes.write_text("mine\n")
    scenario = SCENARIOS / "chain_rule.py"
    for args, said in [(("--stop-on", "nan-everything"), "no finding has the code"),
                       (("--log", notes), "is not a gradtrace run log"),
                       (("--log", scenario), "would write over"),
                       (("--log", tmp_path / "none" / "run.jsonl"), "there is no folder")]:
        result = invoke("watch", scenario, *args)
        assert result.exit_code == 2 and said in result.output, result.output
    assert notes.read_text() == "mine\n"
    saved = tmp_path / "trace.json"
    saved.write_text(invoke("show", scenario, "--json").stdout)
    result = invoke("watch", saved)
    assert result.exit_code == 2 and "watch runs a script" in result.output


def test_health_is_told_in_the_batch_that_makes_it_once_and_ends_as_the_report() -> None:
    # model.0 vanishes against model.2 in every pass: the finding's message says in how many
    leaves = {"model.0.weight": "model.0", "model.2.weight": "model.2"}
    whole = steps_of({"model.0.weight": [1e-9] * 2000, "model.2.weight": [1.0] * 2000},
                     dict(leaves), [1.0] * 2000)
    live = LiveFindings("loop.py", [], "2.13")
    records = []
    for first in range(0, 2000, 64):  # read as capture reads them, 64 rows at a time
        part = slice(first, first + 64)
        records += live.read(first + 1, Steps(whole.leaves, whole.modules, whole.loss[part],
                                              whole.optimizer_steps[part], whole.grads[part]))
    records += live.end("finished")
    told = [r for r in records if isinstance(r, LogFinding)]
    # the first batch makes it; the end tells its last words (its counts grew)
    assert [r.step for r in told] == [64, 2000]
    assert "in 64 of 64 passes" in told[0].finding.message
    report = step_findings(loop_trace(whole))
    assert [(f.code, f.message) for f in report] == [
        (r.finding.code, r.finding.message) for r in told if r.step == 2000]


def test_a_gradient_not_finite_is_judged_at_once_however_long_the_run() -> None:
    """A batch holding a .grad that is not finite is judged as it is read, 10,000 rows in:
    what the judgement keeps does not grow with the run."""
    from gradtrace.findings.live import LiveFindings
    from gradtrace.model.records import LeafStep, Steps
    from gradtrace.model.run_log import LogFinding

    live = LiveFindings("loop.py", [], "2.13")
    ok = LeafStep(1.0, 0.5, True, False)
    told = []
    for first in range(1, 10_001, 64):
        rows = 64 if first + 64 <= 10_001 else 10_001 - first
        grads = tuple((ok,) for _ in range(rows))
        told += live.read(first, Steps(("w",), (None,), (1.0,) * rows, (1,) * rows, grads))
    assert not [r for r in told if isinstance(r, LogFinding)]
    bad = LeafStep(float("nan"), float("nan"), False, False)
    told = live.read(10_001, Steps(("w",), (None,), (1.0,), (1,), ((bad,),)))
    (fired,) = [r for r in told if isinstance(r, LogFinding)]
    assert fired.step == 10_001 and fired.finding.code == "exploding-gradient"


def test_a_finding_whose_counts_grow_is_told_once() -> None:
    """A vanishing gradient "in 64 of 64 passes", judged again later "in 1,000 of 1,000": the
    same finding, told once as the run goes, at the step it first fired; the run's end tells
    its last words, which a log's reader keeps."""
    from gradtrace.findings.live import LiveFindings
    from gradtrace.model.records import LeafStep, Steps
    from gradtrace.model.run_log import LogFinding, latest

    live = LiveFindings("loop.py", [], "2.13")
    big, tiny = LeafStep(1.0, 0.5, True, False), LeafStep(1e-9, 1e-9, True, False)
    told = []
    for first in range(1, 2001, 64):
        rows = min(64, 2001 - first)
        losses = tuple(1.0 / (first + i) for i in range(rows))
        told += live.read(first, Steps(("a.weight", "b.weight"), ("a", "b"), losses,
                                       (1,) * rows, tuple((big, tiny) for _ in range(rows))))
    fired = [r for r in told if isinstance(r, LogFinding)]
    assert [(r.step, r.finding.code) for r in fired] == [(64, "vanishing-gradient")]
    assert "in 64 of 64 passes" in fired[0].finding.message
    ending = live.end("finished")
    (last,) = [r for r in ending if isinstance(r, LogFinding)]
    assert "in 2000 of 2000 passes" in last.finding.message
    (kept,) = latest([*fired, last])  # what show LOG shows: the first step, the last words
    assert kept.step == 64 and kept.finding == last.finding


def test_a_small_gradient_stepped_by_adam_is_no_vanishing_one(tmp_path: Path) -> None:
    """A module whose gradient is 10,000 times smaller than another's barely learns under SGD
    (its update is the gradient's size), not under Adam (divided by its running size): a
    freshly made BERT's attention query and key under a Trainer's AdamW warned of it. The
    trace and log mark the leaves; the live rule and the trace's say the same."""
    from gradtrace.findings.live import LiveFindings
    from gradtrace.model.records import LeafStep, Steps
    from gradtrace.model.run_log import LogFinding

    big, tiny = LeafStep(1.0, 0.5, True, False), LeafStep(1e-9, 1e-9, True, False)
    for free, told in (((False, False), ["vanishing-gradient"]), ((True, True), []),
                       ((False, True), [])):  # the small one's own optimizer decides
        live = LiveFindings("loop.py", [], "2.13")
        records = live.read(1, Steps(("a.weight", "b.weight"), ("a", "b"), (0.7,) * 30,
                                     (1,) * 30, ((big, tiny),) * 30, scale_free=free))
        records += live.end("finished")
        assert [r.finding.code for r in records if isinstance(r, LogFinding)] == told, free
    script = write_script(tmp_path, (
        "import sys\n"
        "import torch\n"
        "import torch.nn as nn\n"
        "torch.manual_seed(0)\n"
        "model = nn.Sequential(nn.Linear(8, 16), nn.Tanh(), nn.Linear(16, 1))\n"
        "with torch.no_grad():\n"
        "    model[2].weight.mul_(1e-7)  # model.0's gradient: 1e-7 of model.2's\n"
        "make = torch.optim.Adam if sys.argv[1:] == ['adam'] else torch.optim.SGD\n"
        "opt = make(model.parameters(), lr=1e-5)\n"
        "x, y = torch.randn(64, 8), torch.randn(64, 1)\n"
        "for step in range(30):\n"
        "    opt.zero_grad()\n"
        "    nn.functional.mse_loss(model(x), y).backward()\n"
        "    opt.step()\n"), "small.py")
    for optimizer, free, codes in (("sgd", False, ["vanishing-gradient"]), ("adam", True, [])):
        log = tmp_path / f"{optimizer}.jsonl"
        result = invoke("watch", script, "--log", log, "-o", tmp_path / "t.json", "--",
                        optimizer)
        assert result.exit_code == 0, result.stderr
        trace = as_read((tmp_path / "t.json").read_text())
        assert trace["steps"]["scale_free"] == [free] * 4
        assert [f["code"] for f in trace["findings"]] == codes
        logged = [json.loads(line) for line in log.read_text().splitlines()]
        found = [d for d in logged if d.get("kind") == "finding"]
        # told as the rows came, then again as the trace placed it (at its line): readers
        # keep the last
        assert list(dict.fromkeys(d["code"] for d in found)) == codes
        assert all(d["line"] == 13 for d in found[-len(codes):])


def test_a_finding_judged_only_as_the_run_ends_is_in_the_log_too(tmp_path: Path) -> None:
    # frozen-in-optimizer is judged once the code ended: the log once lacked it, so
    # `steps LOG --strict` passed a run `watch --strict` failed
    log = tmp_path / "run.jsonl"
    result = invoke("watch", SCENARIOS / "bugs" / "frozen_layer_left_in.py", "--log", log,
                    "--strict")
    assert result.exit_code == 1, result.output
    told = [r for r in _records(log) if r["kind"] == "finding"]
    assert [(r["code"], r["step"]) for r in told] == [("frozen-in-optimizer", None)]
    assert told[0]["line"] == 25
    assert _records(log)[-1]["outcome"] == "finished"  # judged at the end: no stop
    assert invoke("steps", log, "--strict").exit_code == 1
    assert invoke("show", log, "--strict").exit_code == 1
    healthy = tmp_path / "healthy.jsonl"
    result = invoke("watch", SCENARIOS / "bugs" / "frozen_layer_left_in_fixed.py", "--log",
                    healthy, "--strict")
    assert result.exit_code == 0, result.output
    assert not [r for r in _records(healthy) if r["kind"] == "finding"]
    assert invoke("steps", healthy, "--strict").exit_code == 0


# A loop whose loss stays finite while its gradients turn infinite at step 10 (the
# derivative of sqrt at 0); {fix} keeps the root's argument away from 0 in the healthy twin.
INF_GRADIENT_AT_10 = TINY_MLP + """\
for step in range(1, 201):
    out = model(x)
    loss = ((out - y) ** 2).mean()
    if step >= 10:
        loss = loss + torch.sqrt(((out - out.detach()) ** 2).sum(){fix})
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
"""


def test_stop_on_nan_gradient_stops_a_run_whose_gradients_turn_infinite(tmp_path: Path) -> None:
    # nan-gradient is judged from a pass's flow: it once fired only in the end's report, so
    # watch told it no sooner and --stop-on nan-gradient never stopped
    log, out = tmp_path / "run.jsonl", tmp_path / "stopped.json"
    script = write_script(tmp_path, INF_GRADIENT_AT_10.format(fix=""))
    result = invoke("watch", script, "--log", log, "--stop-on", "nan-gradient", "-o", out)
    assert result.exit_code == 1, result.output
    told = [r for r in _records(log) if r["kind"] == "finding" and r["code"] == "nan-gradient"]
    # told as the batch holding step 10's row is read: within 64 steps, not at the end
    assert told and isinstance(told[0]["step"], int) and 10 <= told[0]["step"] <= 74
    assert str(told[0]["message"]).startswith("pass 10: the first non-finite gradient is "
                                              "born at SqrtBackward0")
    assert _records(log)[-1]["outcome"] == "stopped"
    trace = json.loads(out.read_text())
    assert len(trace["passes"]) == told[0]["step"]  # stopped at the next pass
    healthy = tmp_path / "healthy.jsonl"
    script = write_script(tmp_path, INF_GRADIENT_AT_10.format(fix=" + 1.0"), "healthy.py")
    result = invoke("watch", script, "--log", healthy, "--stop-on", "nan-gradient")
    assert result.exit_code == 0, result.output
    assert not [r for r in _records(healthy) if r["kind"] == "finding"]


def test_a_nan_born_in_a_light_stretch_is_placed_on_its_line_by_the_next_pass(
        tmp_path: Path) -> None:
    # pass 40's graph is new in a light stretch: its forward ran without the line log, so
    # the birth is told live without a line; pass 41 runs the same forward traced
    script = write_script(tmp_path, TINY_MLP + """\
for step in range(1, 101):
    out = model(x)
    if step >= 40:
        out = out + torch.log(out - 5)
    loss = ((out - y) ** 2).mean()
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
""")
    log, out = tmp_path / "run.jsonl", tmp_path / "trace.json"
    result = invoke("watch", script, "--log", log, "-o", out)
    assert result.exit_code == 0, result.output
    (born,) = [f for f in json.loads(out.read_text())["findings"] if f["code"] == "nan-value"]
    assert born["line"] == 9 and "at line 9 `out = out + torch.log(out - 5)`" in born["message"]
    told = [r for r in _records(log) if r["kind"] == "finding" and r["code"] == "nan-value"]
    assert told[0]["step"] == 40  # told at once, then placed as the run ended
    assert told[-1]["line"] == 9 and told[-1]["step"] is None


def test_the_script_s_own_prints_show_as_it_runs_and_stay_in_the_trace(tmp_path: Path) -> None:
    # a long run's own lines (its epochs, its validation) once showed only in the report's
    # panel at the end; now on stdout (stderr's on stderr) as they are printed
    go = tmp_path / "go"
    script = write_script(tmp_path, f"""\
import pathlib, sys, time
import torch
w = torch.zeros(3, requires_grad=True)
(w * 2).sum().backward()
print("epoch 1 done", flush=True)
print("a note", file=sys.stderr)
deadline = time.monotonic() + 60
while not pathlib.Path({str(go)!r}).exists() and time.monotonic() < deadline:
    time.sleep(0.05)
print("epoch 2 done")
""")
    out = tmp_path / "trace.json"
    process = start_gradtrace("watch", script, "-o", out, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, cwd=tmp_path)
    assert process.stdout is not None
    first = process.stdout.readline()  # before the script may go on: it waits for `go`
    go.touch()
    rest, err = process.communicate(timeout=120)
    assert process.returncode == 0, err
    assert first == b"epoch 1 done\n"
    assert rest.startswith(b"epoch 2 done\n")
    assert b"a note\n" in err
    assert json.loads(out.read_text())["stdout"] == "epoch 1 done\na note\nepoch 2 done\n"


def test_what_the_script_printed_comes_before_the_report_on_a_pipe(tmp_path: Path) -> None:
    # a pipe's stdout is written in blocks: a block still buffered once came after the
    # report (the whole of a short script's output)
    script = write_script(tmp_path, """\
import logging, sys
import torch
logging.getLogger("mylib").addHandler(logging.StreamHandler(sys.stdout))
w = torch.ones(3, requires_grad=True)
for i in range(5):
    (w * 2).sum().backward()
    print("iter", i)
print("LAST LINE")
""")
    result = run_gradtrace("watch", script, cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[:6] == [f"iter {i}" for i in range(5)] + ["LAST LINE"]
    assert lines[6].startswith("scenario ")


def test_the_log_holds_each_finding_of_the_report_once(tmp_path: Path) -> None:
    # nan-gradient told as the rows were read, then by the end's report in more words ("the
    # same in N later passes"), was written twice: `show LOG` listed more than the report
    log, out = tmp_path / "run.jsonl", tmp_path / "trace.json"
    script = write_script(tmp_path, INF_GRADIENT_AT_10.format(fix=""))
    assert invoke("watch", script, "--log", log, "-o", out).exit_code == 0
    reported = [(f["code"], f["message"].split(":")[0])
                for f in json.loads(out.read_text())["findings"]]
    read = json.loads(invoke("show", log, "--json").stdout)["findings"]
    assert sorted((f["code"], f["message"].split(":")[0]) for f in read) == sorted(reported)
    # told as it fired, then again as the end words it (its line, the passes that repeat it)
    told = [r for r in _records(log) if r["kind"] == "finding" and r["code"] == "nan-gradient"]
    assert [r["step"] is None for r in told] == [False, True]
    (reported,) = [f for f in read if f["code"] == "nan-gradient"]
    assert reported["message"] == told[-1]["message"]
    assert "(line 10)" in reported["message"] and "recorded in detail)" in reported["message"]


def test_a_gpu_pass_that_did_not_ask_its_forward_guesses_no_cause_and_gives_way(
        tmp_path: Path) -> None:
    """A watched pass in detail on a GPU does not ask whether its loss is finite (that waits
    for the device), so which of its nodes saved NaN forward values is not known: its
    nan-gradient said "born at LogSoftmaxBackward0" (its derivative) when the parameters were
    already NaN. It now says it was not asked, and a later pass that asked, when there is
    one, is the one told. (Built from a CPU run, whose passes all ask.)"""
    from gradtrace.findings.graph import nan_origins
    from gradtrace.model.codec import trace_from_dict

    script = write_script(tmp_path, TINY_MLP + (
        "for step in range(1, 6):\n"
        "    if step == 3:\n"
        "        with torch.no_grad():\n"
        "            model[0].bias[0] = float('nan')  # the forward is NaN from pass 3 on\n"
        "    loss = ((model(x) - y) ** 2).mean()\n"
        "    optimizer.zero_grad()\n"
        "    loss.backward()\n"
        "    optimizer.step()\n"))
    result = invoke("show", script, "--json")
    assert result.exit_code == 0, result.stderr
    trace = trace_from_dict(json.loads(result.stdout))
    (plain,) = nan_origins(trace, {})  # passes 3 to 5, one graph: one finding
    node = plain.node
    assert node is not None and plain.message.startswith("pass 3:")
    (told,) = nan_origins(trace, {n: frozenset({node}) for n in (3, 4, 5)})
    assert told.message.startswith("pass 3:") and "the NaN came from the forward" in \
        told.message and "(the same in 2 other passes, 4–5 recorded in detail)" in told.message
    (guess,) = nan_origins(trace, {3: None, 4: None, 5: None})
    assert guess.message.startswith("pass 3:") and "was not asked" in guess.message
    assert "born at" not in guess.message and "came from the forward" not in guess.message
    (later,) = nan_origins(trace, {3: None, 4: frozenset({node}), 5: None})
    assert later.message.startswith("pass 4:") and "came from the forward" in later.message
    assert "(the same in 2 other passes, 3–5 recorded in detail)" in later.message


def test_a_closure_without_zero_grad_is_in_the_log_and_read_back(tmp_path: Path) -> None:
    """L-BFGS's closure calls, numbered in the log's rows, are what the live judgement and
    `show LOG` find a closure that never resets .grad by; its healthy twin's log is clean."""
    training = Path(__file__).parent / "training"
    log = tmp_path / "run.jsonl"
    result = invoke("watch", training / "lbfgs_closure_no_zero_grad.py", "--log", log)
    assert result.exit_code == 0, result.output
    rows = [r for r in _records(log) if r["kind"] == "steps"]
    assert [c for r in rows for c in r["closure_call"]] == list(range(1, 41))
    told = [r for r in _records(log) if r["kind"] == "finding"]
    assert "grad-accumulating" in [r["code"] for r in told]
    shown = invoke("show", log)
    assert "across 40 calls of an optimizer step's closure" in " ".join(shown.stdout.split())
    healthy = tmp_path / "healthy.jsonl"
    assert invoke("watch", training / "lbfgs_closure.py", "--log", healthy).exit_code == 0
    assert not [r for r in _records(healthy) if r["kind"] == "finding"]


LEFT_OUT = """import torch
torch.manual_seed(0)
model = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.Tanh(), torch.nn.Linear(8, 1))
opt = torch.optim.SGD(model[2].parameters(), lr=0.1)
x, y = torch.randn(16, 4), torch.randn(16, 1)
for step in range(6):
    opt.zero_grad()
    loss = torch.nn.functional.mse_loss(model(x), y)
    loss.backward()
    opt.step()
"""


def test_a_layer_left_out_of_the_optimizer_is_not_called_zero_grad_missing(
        tmp_path: Path) -> None:
    """opt.zero_grad() never resets model.0's .grad, which the optimizer does not hold: the
    live judgement knows the rows' optimizers as show does (not-optimized, no
    grad-accumulating); the twin that forgets zero_grad() still gets grad-accumulating."""
    script, log = write_script(tmp_path, LEFT_OUT, "left_out.py"), tmp_path / "run.jsonl"
    assert invoke("watch", script, "--log", log).exit_code == 0
    told = [r["code"] for r in _records(log) if r["kind"] == "finding"]
    assert "not-optimized" in told and "grad-accumulating" not in told, told
    assert "grad-accumulating" not in invoke("show", log).stdout
    forgot = write_script(tmp_path, LEFT_OUT.replace(
        "opt = torch.optim.SGD(model[2].parameters(), lr=0.1)",
        "opt = torch.optim.SGD(model.parameters(), lr=0.1)").replace(
        "    opt.zero_grad()\n", ""), "forgot.py")
    assert invoke("watch", forgot, "--log", tmp_path / "forgot.jsonl").exit_code == 0
    assert "grad-accumulating" in [r["code"] for r in _records(tmp_path / "forgot.jsonl")
                                   if r["kind"] == "finding"]


SMALL_MODEL = """import torch
torch.manual_seed(0)
model = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.Tanh(), torch.nn.Linear(8, 1))
opt = torch.optim.SGD(model.parameters(), lr=0.1)
"""
NAN_SAMPLE_AT_3 = SMALL_MODEL + """for step in range(6):
    x, y = torch.randn(16, 4), torch.randn(16, 1)
    if step == 2:
        x[0, 0] = float("nan")
    opt.zero_grad()
    loss = torch.nn.functional.mse_loss(model(x), y)
    loss.backward()
    opt.step()
"""


def test_a_nan_loss_in_a_light_pass_is_chased_though_the_run_ends_before_a_batch(
        tmp_path: Path) -> None:
    """A NaN sample at pass 3 of 6 (light under watch; no batch of rows is read before the
    end): its NaN loss puts the next passes in detail, so the log has nan-gradient as
    show's report has it. The healthy twin's log has no finding."""
    script, log = write_script(tmp_path, NAN_SAMPLE_AT_3, "nan.py"), tmp_path / "run.jsonl"
    assert invoke("watch", script, "--log", log).exit_code == 0
    told = [(r["code"], r["step"]) for r in _records(log) if r["kind"] == "finding"]
    assert ("nan-value", 3) in told and "nan-gradient" in [code for code, _ in told], told
    # the pass in detail is the 4th: it says the gradients turned non-finite in pass 3
    (first, *_) = [r["message"] for r in _records(log)
                   if r["kind"] == "finding" and r["code"] == "nan-gradient"]
    assert first.startswith("pass 4: ") and first.endswith(
        "(pass 4 is the first pass in detail since pass 3, where a .grad turned non-finite: "
        "`gradtrace show SCRIPT --pass 3` records that one)"), first
    shown = [f["message"] for f in show_json(script)["findings"] if f["code"] == "nan-gradient"]
    assert shown[0].startswith("pass 3: ") and "first pass in detail since" not in shown[0]
    healthy = write_script(tmp_path, NAN_SAMPLE_AT_3.replace('float("nan")', "0.5"), "ok.py")
    assert invoke("watch", healthy, "--log", tmp_path / "ok.jsonl").exit_code == 0
    assert not [r for r in _records(tmp_path / "ok.jsonl") if r["kind"] == "finding"]


# pass 40's and pass 100's sqrt at 0 make a .grad NaN (a finite loss); the step is skipped
# then, as GradScaler skips it: pass 100's NaN is born in pass 100 itself
SKIPPED_AT_40_BORN_AT_100 = SMALL_MODEL + """for step in range(100):
    x, y = torch.randn(16, 4), torch.randn(16, 1)
    opt.zero_grad()
    scale = 0.0 if step in (39, 99) else 1.0
    loss = torch.nn.functional.mse_loss(model(x), y) \\
        + 1e-3 * torch.sqrt(model[0].weight.pow(2).sum() * scale)
    loss.backward()
    if all(bool(torch.isfinite(p.grad).all()) for p in model.parameters()):
        opt.step()
"""


def test_a_nan_born_in_its_own_pass_names_no_earlier_pass(tmp_path: Path) -> None:
    """The twin of the test above: pass 100's NaN is its own (born at SqrtBackward0), long
    after light pass 40's: its finding says nothing of pass 40."""
    script = write_script(tmp_path, SKIPPED_AT_40_BORN_AT_100, "skip.py")
    shown = [f["message"] for f in show_json(script)["findings"] if f["code"] == "nan-gradient"]
    assert shown == [shown[0]] and shown[0].startswith(
        "pass 100: the first non-finite gradient is born at SqrtBackward0"), shown
    assert "since pass" not in shown[0]


IN_PLACE_IN_FORWARD = """import torch
import torch.nn.functional as F


class Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = torch.nn.Linear(4, 3)

    def forward(self, x):
        out = F.log_softmax(self.fc(x), dim=1)
        out.clamp_(min=-100)
        return out


torch.manual_seed(0)
model = Net()
x, y = torch.randn(16, 4), torch.randint(0, 3, (16,))
loss = F.nll_loss(model(x), y)
loss.backward()
"""


def test_a_finding_the_trace_places_in_a_module_is_told_once(tmp_path: Path) -> None:
    """inplace-modified is told as the pass fails ("(line 11)"), and the trace adds the
    module its line is in ("(line 11, in model)"): the same finding, told once."""
    script, log = write_script(tmp_path, IN_PLACE_IN_FORWARD, "net.py"), tmp_path / "run.jsonl"
    invoke("watch", script, "--log", log)
    told = [r for r in _records(log) if r["kind"] == "finding"]
    assert [r["code"] for r in told].count("inplace-modified") == 1, told
    assert " ".join(invoke("show", log).stdout.split()).count("[inplace-modified]") == 1
