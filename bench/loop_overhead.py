"""A training loop under gradtrace against the plain script: time, peak RSS, and where it goes.

By default both of these, the loop's own time first:

The loops themselves, in steady state: gradtrace/examples/loops/mlp_1000_steps.py and a
1,000-step MLP (64 wide, AdamW, clip_grad_norm_, a cosine learning rate), each timing its
steps after 50 warm-up steps with time.perf_counter, and a GPT-style model (nanoGPT's layout,
4 layers 128 wide) timing 60 steps after 10, each under `python`, `gradtrace show` and
`gradtrace watch --log FILE`; torch's import and gradtrace's start and report are left out
(whole processes dilute the loop's cost). The goals: 1.3× for the MLPs under show and watch,
1.5× for the GPT-style step under show and 1.05× under watch. --in-loop: these only.

--memory instead runs a model of 100 parameter tensors (50 Linear(4, 4) in a row, SGD) for
2,000 and for 20,000 steps under `python`, `show` and `watch --log FILE`, each a new process,
and prints each one's peak RSS: the goal is that 20,000 steps under watch cost at most 30 MB
more than 2,000 (show's growth is the capture's share of it; about 7 minutes on a 2-core
machine).

Whole processes: gradtrace/examples/loops/mlp_1000_steps.py (a small MLP, Adam, 1,000 steps):
`python mlp_1000_steps.py`, `gradtrace show mlp_1000_steps.py --passes all` and the same with
--json. With --repeat N each runs N times, in turn with the others (so a slow spell of the
machine hits all three), and its best time counts; ratios are against the plain script of the
same run. The design's goal for recording every pass of a loop is 1.3× the plain script.

--profile [show|watch] instead runs `gradtrace show SCENARIO --passes all` (or `watch
SCENARIO --log FILE`) in this process under cProfile
(every thread: the scenario runs in one of its own) and prints the 25 gradtrace functions with
the largest cumulative time, then the largest self time. gradtrace's line log is a
sys.settrace function, which cProfile does not see: its cost lands in the scenario's own
frames, so the wall time is printed next to the plain script's, run the same way.

Tiny models on a shared 2-core machine run far slower with two OpenMP threads than with one
(each step waits for the other thread: ~20 ms a step instead of ~0.4 ms), which would hide
gradtrace's cost: every command runs with OMP_NUM_THREADS=1 unless --threads says otherwise.

    PYTHONPATH=. .venv/bin/python bench/loop_overhead.py [--repeat N] [--threads N]
                                                         [--in-loop] [--memory]
                                                         [--profile [show|watch]]
                                                         [--scenario FILE]
"""

from __future__ import annotations

import argparse
import contextlib
import cProfile
import os
import pstats
import runpy
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

from measure import measured

ROOT = Path(__file__).resolve().parent.parent
SCENARIO = ROOT / "gradtrace" / "examples" / "loops" / "mlp_1000_steps.py"
BUDGET = 1.3  # the design's goal: recording every pass costs at most 30% more than plain
GPT_BUDGET = 1.5  # and a GPT-style model's step at most 50% more
WATCH_GPT_BUDGET = 1.05  # issue 57: a GPT-style step under watch at most 5% more
MEMORY_BUDGET_MB = 30  # issue 57: 20,000 steps under watch within 30 MB of 2,000
OWN = r"[/\\]gradtrace[/\\]"  # pstats restriction: gradtrace's own files


def best(runs: list[tuple[int, float, float]]) -> tuple[int, float, float]:
    """The first exit code, the fastest time and the largest peak RSS of repeated runs."""
    return runs[0][0], min(r[1] for r in runs), max(r[2] for r in runs)


def table(scenario: Path, repeat: int) -> None:
    gradtrace = [sys.executable, "-m", "gradtrace"]
    with tempfile.TemporaryDirectory() as folder:
        out = Path(folder) / "trace.json"
        commands = {
            "python SCENARIO": [sys.executable, str(scenario)],
            "show --passes all": [*gradtrace, "show", str(scenario), "--passes", "all"],
            "show --passes all --json": ["sh", "-c", f'"$0" "$@" > {out}', *gradtrace, "show",
                                         str(scenario), "--passes", "all", "--json"],
        }
        runs: dict[str, list[tuple[int, float, float]]] = {name: [] for name in commands}
        for _ in range(repeat):
            for name, command in commands.items():
                runs[name].append(measured(command))
        json_bytes = out.stat().st_size if out.exists() else 0
    (_, plain_s, plain_mib) = best(runs["python SCENARIO"])
    print(f"{'command':<26} {'wall s':>7} {'ratio':>6} {'peak MiB':>9} {'rc':>3}  goal")
    for name, kept in runs.items():
        code, seconds, mib = best(kept)
        ratio = seconds / plain_s
        verdict = "" if name == "python SCENARIO" else (
            f"≤ {BUDGET}×: {'ok' if ratio <= BUDGET else 'over'}")
        print(f"{name:<26} {seconds:>7.2f} {ratio:>5.2f}× {mib:>9.0f} {code:>3}  {verdict}")
    print(f"(best of {repeat}; peak RSS over plain: "
          f"{max(r[2] for r in runs['show --passes all']) - plain_mib:.0f} MiB; "
          f"JSON {json_bytes / 1024:.0f} KiB)")


# Each timed loop writes the seconds of its steps after WARM of them to the file named by its
# first argument (its stdout is the report's under show and watch).
SECONDS_TOLD = """
with open(sys.argv[1], "w") as told:
    told.write(str(time.perf_counter() - start))
"""


def timed_mlp_1000() -> str:
    """mlp_1000_steps.py, timing its steps after the first 50."""
    source = SCENARIO.read_text()
    loop, last = "for _ in range(1000):\n", 'print(f"final loss {loss.item():.3g}")\n'
    assert loop in source and source.endswith(last), "mlp_1000_steps.py changed its loop"
    return source.replace(loop, "import sys\nimport time\nfor step in range(1000):\n"
                          "    if step == 50:\n        start = time.perf_counter()\n"
                          ).removesuffix(last) + SECONDS_TOLD


# A small MLP's loop, as the design's goal for show has it.
TIMED_LOOP = """import sys
import time
import torch
import torch.nn as nn
torch.manual_seed(0)
model = nn.Sequential(nn.Linear(64, 64), nn.ReLU(), nn.Linear(64, 64), nn.ReLU(),
                      nn.Linear(64, 1))
opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
sched = torch.optim.lr_scheduler.CosineAnnealingLR(opt, 1000)
x = torch.randn(4096, 64)
y = x[:, :8].sum(dim=1, keepdim=True).sin()
WARM = 50
for step in range(1000):
    if step == WARM:
        start = time.perf_counter()
    batch = torch.randint(0, len(x), (64,))
    opt.zero_grad()
    loss = nn.functional.mse_loss(model(x[batch]), y[batch])
    loss.backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
    opt.step()
    sched.step()
""" + SECONDS_TOLD


# A GPT-style model's steps: nanoGPT's layout as gradtrace's gpt_tiny example has it, 4 layers
# 128 wide, AdamW and clip_grad_norm_, 60 steps timed after 10 warm-up steps.
GPT_SOURCE = (ROOT / "gradtrace" / "examples" / "real" / "gpt_tiny.py").read_text()
TIMED_GPT = GPT_SOURCE[:GPT_SOURCE.index("torch.manual_seed(0)\nmodel = GPT()")] + """
import sys
import time
torch.manual_seed(0)
model = GPT(vocab_size=256, block_size=64, n_layer=4, n_head=4, n_embd=128)
opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
WARM = 10
for step in range(70):
    if step == WARM:
        start = time.perf_counter()
    idx = torch.randint(0, 256, (8, 64))
    opt.zero_grad()
    loss = model(idx, torch.randint(0, 256, (8, 64)))
    loss.backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
    opt.step()
""" + SECONDS_TOLD


def in_loop(repeat: int) -> None:
    """Each loop's own steady-state time under python, show and watch, best of repeat runs
    taken in turn."""
    for label, text, steps, goals in (
            ("mlp_1000_steps.py, 950 steps after 50 warm-up", timed_mlp_1000(), 950,
             {"show": BUDGET, "watch": BUDGET}),
            ("MLP 64 wide, 950 steps after 50 warm-up", TIMED_LOOP, 950,
             {"show": BUDGET, "watch": BUDGET}),
            ("GPT-style, 60 steps after 10 warm-up", TIMED_GPT, 60,
             {"show": GPT_BUDGET, "watch": WATCH_GPT_BUDGET})):
        seconds = timed_in_loop(text, repeat)
        plain = seconds["python"]
        said = [f"{command} {seconds[command]:.2f} s: {seconds[command] / plain:.2f}× "
                f"({(seconds[command] - plain) / steps * 1e3:.2f} ms a step of gradtrace's "
                f"own), goal ≤ {goal}×: {'ok' if seconds[command] / plain <= goal else 'over'}"
                for command, goal in goals.items()]
        print(f"in-loop, {label} (best of {repeat}): python {plain:.2f} s; " + "; ".join(said))


def timed_in_loop(text: str, repeat: int) -> dict[str, float]:
    """The best seconds a timed loop's steps take under python, show and watch --log, runs
    taken in turn."""
    with tempfile.TemporaryDirectory() as folder:
        script, told = Path(folder) / "timed_loop.py", Path(folder) / "seconds"
        script.write_text(text)
        gradtrace = [sys.executable, "-m", "gradtrace"]
        commands = {
            "python": [sys.executable, str(script), str(told)],
            "show": [*gradtrace, "show", str(script), "--", str(told)],
            "watch": [*gradtrace, "watch", str(script), "--log", str(Path(folder) / "run.jsonl"),
                      "--", str(told)],
        }
        runs: dict[str, list[float]] = {name: [] for name in commands}
        for _ in range(repeat):
            for name, command in commands.items():
                subprocess.run(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                               check=True)
                runs[name].append(float(told.read_text()))
    return {name: min(kept) for name, kept in runs.items()}


# 50 Linear layers in a row, 100 parameter tensors, trained for as many steps as its argument.
DEEP = """import sys
import torch
import torch.nn as nn
torch.manual_seed(0)
model = nn.Sequential(*(nn.Linear(4, 4) for _ in range(50)))
opt = torch.optim.SGD(model.parameters(), lr=1e-3)
x = torch.randn(16, 4)
for _ in range(int(sys.argv[1])):
    opt.zero_grad()
    model(x).square().mean().backward()
    opt.step()
"""


def memory() -> None:
    """Peak RSS of 2,000 and 20,000 steps of a model of 100 parameter tensors under python
    and under watch --log, each a new process."""
    with tempfile.TemporaryDirectory() as folder:
        script, log = Path(folder) / "deep.py", Path(folder) / "run.jsonl"
        script.write_text(DEEP)
        gradtrace = [sys.executable, "-m", "gradtrace"]
        commands = {"python": [sys.executable, str(script)],  # the steps follow each
                    "show": [*gradtrace, "show", str(script), "--"],
                    "watch --log": [*gradtrace, "watch", str(script), "--log", str(log), "--"]}
        print(f"{'command':<12} {'steps':>6} {'wall s':>7} {'peak MB':>8} {'rc':>3}")
        peaks: dict[str, list[float]] = {name: [] for name in commands}
        for steps in (2000, 20000):
            for name, command in commands.items():
                code, seconds, mib = measured([*command, str(steps)])
                peaks[name].append(mib * 1.048576)  # MiB to MB, as the goal counts
                print(f"{name:<12} {steps:>6} {seconds:>7.1f} {peaks[name][-1]:>8.0f} "
                      f"{code:>3}", flush=True)
        log_mb = log.stat().st_size / 1e6
    for name, (small, large) in peaks.items():
        verdict = (f"; goal ≤ {MEMORY_BUDGET_MB} MB: "
                   f"{'ok' if large - small <= MEMORY_BUDGET_MB else 'over'}"
                   if name == "watch --log" else "")
        print(f"{name}: 20,000 steps take {round(large - small)} MB more than 2,000{verdict}")
    print(f"(the 20,000 steps' log: {log_mb:.1f} MB)")


@contextlib.contextmanager
def every_thread_profiled(profiles: list[cProfile.Profile]):  # type: ignore[no-untyped-def]
    """A cProfile.Profile for this thread and for each thread started meanwhile."""
    run = threading.Thread.run

    def profiled_run(self: threading.Thread) -> None:
        profile = cProfile.Profile()
        profiles.append(profile)
        profile.enable()
        try:
            run(self)
        finally:
            profile.disable()

    threading.Thread.run = profiled_run  # type: ignore[method-assign]
    main = cProfile.Profile()
    profiles.append(main)
    main.enable()
    try:
        yield
    finally:
        main.disable()
        threading.Thread.run = run  # type: ignore[method-assign]


def profile(scenario: Path, threads: int, command_name: str) -> None:
    import torch

    from gradtrace.cli import app

    torch.set_num_threads(threads)
    folder = tempfile.TemporaryDirectory()
    command = (["show", str(scenario), "--passes", "all"] if command_name == "show"
               else ["watch", str(scenario), "--log", str(Path(folder.name) / "run.jsonl")])
    with folder, open(os.devnull, "w") as null, contextlib.redirect_stdout(null):
        runpy.run_path(str(scenario), run_name="__main__")  # warm up: the optimizer's imports
        start = time.perf_counter()
        runpy.run_path(str(scenario), run_name="__main__")
        plain = time.perf_counter() - start
        start = time.perf_counter()
        code = app(command, standalone_mode=False)
        unprofiled = time.perf_counter() - start
        profiles: list[cProfile.Profile] = []
        start = time.perf_counter()
        with every_thread_profiled(profiles):
            app(command, standalone_mode=False)
        traced = time.perf_counter() - start
    print(f"in-process, imports done: plain script {plain:.2f} s; {command_name} "
          f"{unprofiled:.2f} s ({unprofiled / plain:.1f}×, exit {code or 0}); "
          f"{traced:.2f} s under cProfile, {len(profiles)} threads profiled (the totals below "
          "count the main thread's wait for the scenario's thread too)")
    stats = pstats.Stats(profiles[0])
    for more in profiles[1:]:
        stats.add(more)
    stats.sort_stats("cumulative").print_stats(OWN, 25)
    stats.sort_stats("tottime").print_stats(OWN, 15)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3,
                        help="run each command this many times in turn and keep the best")
    parser.add_argument("--threads", type=int, default=1,
                        help="OMP_NUM_THREADS for every run (default 1: see the docstring)")
    parser.add_argument("--in-loop", action="store_true",
                        help="time only the loop itself, in steady state (see above)")
    parser.add_argument("--memory", action="store_true",
                        help="peak RSS of 2,000 against 20,000 steps under watch instead")
    parser.add_argument("--profile", nargs="?", const="show", choices=("show", "watch"),
                        help="profile show --passes all (or watch --log) in this process "
                        "instead")
    parser.add_argument("--scenario", type=Path, default=SCENARIO)
    args = parser.parse_args()
    os.environ["OMP_NUM_THREADS"] = str(args.threads)  # read by torch as it is imported
    scenario = args.scenario.resolve()
    print(f"{scenario.relative_to(ROOT) if scenario.is_relative_to(ROOT) else scenario}"
          f"  ·  OMP_NUM_THREADS={args.threads}")
    if args.profile:
        profile(scenario, args.threads, args.profile)
        return
    if args.memory:
        memory()
        return
    in_loop(args.repeat)
    if not args.in_loop:
        table(scenario, args.repeat)


if __name__ == "__main__":
    main()
