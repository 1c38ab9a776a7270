"""Multi-process runs (issue 30): torchrun with DistributedDataParallel on gloo, two ranks on
free ports of 127.0.0.1, each run under a time limit; and a script that spawns its own."""

from __future__ import annotations

import json
import os
import socket
import subprocess
from pathlib import Path

import pytest
from helpers import ROOT, SCENARIOS, as_read, invoke, tensor, write_script
from plain_python import forwarding_command, run_gradtrace, run_module

from gradtrace.model.run_log import read_log

CHAIN = SCENARIOS / "chain_rule.py"

DISTRIBUTED = SCENARIOS / "distributed"
LIMIT = 240  # seconds for one launch: two ranks start torch, then gloo connects them
# Two processes that start torch and connect: ~9 s a launch, run by .ci/run's slow tier (the
# tests of one rank alone, RANK and WORLD_SIZE set by hand, stay in the quick one).
LAUNCHES = pytest.mark.slow


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def two_ranks(*command: str | Path, cwd: Path, env: dict[str, str] | None = None
              ) -> subprocess.CompletedProcess[str]:
    """`torchrun --nproc-per-node 2 COMMAND` in cwd on free ports of 127.0.0.1 (the
    launcher forked: its ranks are processes it starts, as under torchrun)."""
    return run_module("torch.distributed.run", "--nproc-per-node", "2", "--master-addr",
                      "127.0.0.1", "--master-port", str(free_port()), *command, cwd=cwd,
                      env={**os.environ, **(env or {})}, timeout=LIMIT)


def torchrun(*args: str | Path, env: dict[str, str] | None = None
             ) -> subprocess.CompletedProcess[str]:
    """`torchrun --nproc-per-node 2 --no-python gradtrace ARGS` in the distributed
    scenarios' folder (each rank's gradtrace forked: seconds of imports saved a rank)."""
    return two_ranks("--no-python", forwarding_command(), *args, cwd=DISTRIBUTED, env=env)


@LAUNCHES
def test_torchrun_prints_rank_0_s_report_and_a_line_for_rank_1() -> None:
    """As docs/distributed.md's transcript says: its lines (… stands for those left out) in
    the order the real output has them, at the docs' width."""
    docs = (ROOT / "docs" / "distributed.md").read_text()
    command = "$ torchrun --nproc-per-node 2 --no-python gradtrace show "
    target, shown = docs.split(command, 1)[1].split("```", 1)[0].split("\n", 1)
    run = torchrun("show", target, env={"COLUMNS": "100"})
    assert run.returncode == 0, run.stderr[-3000:]
    wanted = [line.rstrip() for line in shown.splitlines() if line.strip() != "…"]
    printed = [line.rstrip() for line in run.stdout.splitlines()]
    assert wanted == [line for line in printed if line in wanted] and len(wanted) > 10
    assert run.stdout.count(f"scenario {target}") == 1  # one report, nothing interleaved
    assert "rank 0 of 2" in run.stdout and "on rank 0." in run.stdout
    assert "on rank 1." not in run.stdout
    assert "rank 1: 1 pass(es), 10 nodes, 1 info; its graph is rank 0's" in run.stdout
    # the gradient that reached AccumulateGrad is rank 0's own; .grad is the ranks' mean
    assert "DistributedDataParallel averaged it over 2 ranks" in " ".join(run.stdout.split())


@LAUNCHES
def test_one_trace_per_rank_and_their_diff(tmp_path: Path) -> None:
    run = torchrun("show", "ddp_train.py", "-o", tmp_path / "trace-{rank}.json")
    assert run.returncode == 0, run.stderr[-3000:]
    assert run.stdout == ""  # the traces went to their files; rank 1's line to stderr
    assert "rank 1: 1 pass(es), 10 nodes, 1 info; its graph is rank 0's" in run.stderr
    traces = [as_read((tmp_path / f"trace-{r}.json").read_text()) for r in (0, 1)]
    for rank, trace in enumerate(traces):
        printed = json.loads(trace["stdout"].splitlines()[1])  # what the script printed
        (accumulate,) = [n["id"] for n in trace["nodes"] if n["tensor"] == "model.net1.weight"]
        received = trace["passes"][0]["flow"][accumulate]["grad_outputs"][0]
        arrived = trace["gradients"][received]["norm"]  # flow entries index the gradients
        for name, norm in printed.items():  # .grad is the mean, as plain python has it
            assert tensor(trace, name)["grad"]["norm"] == pytest.approx(norm, rel=1e-5)
        assert arrived != pytest.approx(printed["model.net1.weight"], rel=1e-3), rank
        assert f"on rank {rank}." in trace["stdout"]
    result = invoke("diff", tmp_path / "trace-0.json", tmp_path / "trace-1.json")
    assert result.exit_code == 1, result.stderr
    # the same graph; the ranks' own gradients differ
    assert "different: 4 gradient(s) moved\n" in result.stdout
    assert "node" not in result.stdout  # nothing added, removed or changed in the graph
    # the merged view: each rank's own gradient above, and .grad, the same on both ranks
    said = " ".join(result.stdout.split())
    assert ".grad after the ranks' reduction (4)" in said
    grad = tensor(traces[0], "model.net1.weight")["grad"]["norm"]
    assert f"model.net1.weight: .grad norm {grad:.6g} on both ranks: their own gradients " \
        "were averaged into it (DDP's allreduce)" in said


@LAUNCHES
def test_every_rank_s_report_in_rank_order() -> None:
    run = torchrun("show", "ddp_train.py", "--ranks", "all")
    assert run.returncode == 0, run.stderr[-3000:]
    first, second = run.stdout.index("rank 0 of 2"), run.stdout.index("rank 1 of 2")
    assert first < run.stdout.index("on rank 0.") < second < run.stdout.index("on rank 1.")
    assert run.stdout.count("scenario ddp_train.py") == 2


@LAUNCHES
def test_an_unused_parameter_is_named_with_its_module_and_the_ddp_option() -> None:
    run = torchrun("show", "ddp_unused.py")
    assert run.returncode != 0  # the script fails as under python, on both ranks
    said = " ".join(run.stdout.split())  # the report's lines as one
    assert "2 parameter(s) of a DistributedDataParallel model get no gradient, first " \
        "model.net3.weight; by module: model.net3 (2)" in said
    assert "find_unused_parameters=True" in said
    assert "Expected to have finished reduction" in said
    assert run.stdout.count("scenario ddp_unused.py") == 1
    assert run.stderr.count("error: ddp_unused.py:39") == 1  # rank 1's is its line on rank 0


RANK_1_FAILS_FIRST = (
    "import os, time, torch\n"
    "if os.environ['RANK'] == '1':\n"
    "    raise ValueError('rank 1 gives up at once')\n"
    "time.sleep(4)  # rank 0 is still running when rank 1 has failed\n"
    "w = torch.ones(3, requires_grad=True)\n"
    "(w * 2).sum().backward()\n")


@LAUNCHES
def test_a_rank_that_fails_first_does_not_cut_the_shown_rank_s_report(tmp_path: Path) -> None:
    """torchrun stops every rank once one exits with an error: the failed rank waits at its
    exit for the others, so rank 0's report and its -o file are whole (they were lost)."""
    script = tmp_path / "first.py"
    script.write_text(RANK_1_FAILS_FIRST)
    run = torchrun("show", script, "-o", tmp_path / "t-{rank}.json")
    # rank 1's failure is still torchrun's verdict (which may then stop rank 0 as it exits:
    # by then all it printed and wrote is out)
    assert run.returncode != 0
    assert f"rank 1: failed: {script}:3: the scenario raised ValueError" in run.stderr, \
        run.stderr[-3000:]
    assert tensor(as_read((tmp_path / "t-0.json").read_text()), "w")["grad"]["norm"] == \
        pytest.approx(2 * 3 ** 0.5)


@LAUNCHES
def test_a_rank_whose_graph_differs_is_said() -> None:
    run = torchrun("show", "ddp_branch.py")
    assert run.returncode == 0, run.stderr[-3000:]
    assert "rank 1: 1 pass(es), 14 nodes, 1 info; its graph differs from rank 0's " \
        "(14 nodes, rank 0: 10)" in run.stdout


@LAUNCHES
def test_a_script_that_spawns_its_workers_is_told_what_is_not_recorded() -> None:
    # gloo's shutdown aborts a child now and then: 1 in 8 under python, more often under a
    # loaded CI machine (three aborts in a row failed a run)
    for _ in range(8):
        run = run_gradtrace("show", "ddp_spawn.py", "--", str(free_port()), cwd=DISTRIBUTED,
                            timeout=LIMIT)
        if "terminated with signal SIGABRT" not in run.stderr:
            break
    assert run.returncode == 2
    assert "error: ddp_spawn.py: line 60 `mp.spawn(demo_fn, args=(world_size,), " \
        "nprocs=world_size, join=True)` started 2 process(es) running demo_basic: their " \
        "work, backward passes included, is not recorded" in run.stderr
    assert "torchrun --nproc-per-node N --no-python gradtrace show ddp_spawn.py" in run.stderr
    assert "names no tensors" not in run.stderr


def test_another_launcher_s_rank_prints_only_when_shown() -> None:
    """RANK and WORLD_SIZE without torchrun's store (mpirun, a scheduler): the shown rank
    prints its report and says the others' lines are not available; the others print none."""
    alone = invoke("show", CHAIN, env={"RANK": "1", "WORLD_SIZE": "2"})
    assert alone.exit_code == 0 and alone.stdout == "", alone.stderr
    shown = invoke("show", CHAIN, env={"RANK": "0", "WORLD_SIZE": "2"})
    assert shown.exit_code == 0, shown.stderr
    assert "rank 0 of 2" in shown.stdout and "chain_rule.py  ·  3 nodes" in shown.stdout
    assert shown.stdout.rstrip().endswith(
        "other ranks: not shown (only torchrun's store carries their summaries)")


MARKS_ITS_RUN = """import pathlib
import torch

pathlib.Path("ran").write_text("1")


class Twice(torch.autograd.Function):  # for check to check
    @staticmethod
    def forward(ctx, x):
        return x * 2

    @staticmethod
    def backward(ctx, grad):
        return grad * 2


x = torch.tensor(2.0, requires_grad=True, dtype=torch.float64)
Twice.apply(x * 3).backward()
"""
EVERY_OUTPUT = {  # each command's output option, as a file name with {rank}
    "dot": ["-o", "g-{rank}.svg"], "steps": ["-o", "s-{rank}.svg"],
    "check": ["--junit", "j-{rank}.xml"], "diff": ["s.py", "-o", "d-{rank}.svg"],
    "show": ["-o", "t-{rank}.json"],
}


@pytest.mark.parametrize("command", EVERY_OUTPUT)
def test_rank_in_every_output_option_names_each_rank_s_file(command: str, tmp_path: Path,
                                                            monkeypatch: pytest.MonkeyPatch
                                                            ) -> None:
    """{rank} in -o (check: --junit) is this rank's number; a rank other than the shown one
    prints nothing on stdout (its findings neither)."""
    monkeypatch.chdir(tmp_path)
    write_script(tmp_path, MARKS_ITS_RUN)
    option, name = EVERY_OUTPUT[command][-2:]
    result = invoke(command, "s.py", *EVERY_OUTPUT[command],
                    env={"RANK": "1", "WORLD_SIZE": "2"})
    assert result.exit_code in (0, 1), result.stderr  # diff: 1, the same graph is no change
    assert (tmp_path / name.replace("{rank}", "1")).is_file()
    assert not (tmp_path / name).exists() and result.stdout == ""


def test_a_rank_field_takes_a_format_spec_and_a_bad_one_is_refused_before_the_run(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """`{rank:02d}` is Python's format of the rank (it was left as it is: every rank wrote
    one file named `t-{rank:02d}.json`)."""
    monkeypatch.chdir(tmp_path)
    write_script(tmp_path, MARKS_ITS_RUN)
    ranked = {"RANK": "1", "WORLD_SIZE": "2"}
    result = invoke("show", "s.py", "-o", "t-{rank:02d}.json", env=ranked)
    assert result.exit_code == 0, result.stderr
    assert [p.name for p in tmp_path.glob("t-*")] == ["t-01.json"]
    (tmp_path / "ran").unlink()
    refused = invoke("show", "s.py", "-o", "t-{rank:zz}.json", env=ranked)
    assert refused.exit_code == 2 and "{rank:zz} in t-{rank:zz}.json: not a format for a " \
        "number" in refused.stderr
    assert not (tmp_path / "ran").exists()  # refused before the script ran


@pytest.mark.parametrize("command", [c for c in EVERY_OUTPUT if c != "show"])
def test_one_file_for_every_rank_is_refused_before_the_run(command: str, tmp_path: Path,
                                                          monkeypatch: pytest.MonkeyPatch
                                                          ) -> None:
    """Each rank writing one path (their files overwriting each other) is refused, exit 2,
    before the script runs; `show -o FILE` writes the shown rank's alone."""
    monkeypatch.chdir(tmp_path)
    write_script(tmp_path, MARKS_ITS_RUN)
    args = [a.replace("-{rank}", "") for a in EVERY_OUTPUT[command]]
    result = invoke(command, "s.py", *args, env={"RANK": "0", "WORLD_SIZE": "2"})
    assert result.exit_code == 2 and "each of the 2 ranks would write it" in result.stderr
    assert "{rank}" in result.stderr and not (tmp_path / "ran").exists()


@pytest.mark.parametrize("which", ["x", "-1", "1.5"])
def test_a_rank_that_is_no_number_is_refused(which: str) -> None:
    result = invoke("show", CHAIN, "--ranks", which)
    assert result.exit_code == 2 and result.stdout == ""
    assert f"--ranks {which!r}: give a rank number (0, 1, …) or all" in result.stderr


def test_ranks_all_refuses_one_file_for_every_rank(tmp_path: Path,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    write_script(tmp_path, MARKS_ITS_RUN)
    result = invoke("show", "s.py", "--ranks", "all", "-o", "t.json",
                    env={"RANK": "0", "WORLD_SIZE": "2"})
    assert result.exit_code == 2 and "each of the 2 ranks would write it" in result.stderr
    assert not (tmp_path / "ran").exists() and not (tmp_path / "t.json").exists()


def test_ranks_all_refuses_json_on_stdout() -> None:
    result = invoke("show", CHAIN, "--ranks", "all", "--json",
                    env={"RANK": "0", "WORLD_SIZE": "2"})
    assert result.exit_code == 2 and result.stdout == ""
    assert "-o trace-{rank}.json" in result.stderr


RANK_OWN_GRADIENT = (
    "import os, sys, torch\n"
    "w = torch.ones(3, requires_grad=True)\n"
    "(w * (int(os.environ['RANK']) + 1)).sum().backward()  # each rank's own gradient\n"
    "if sys.argv[1:] == ['reduce']:\n"
    "    w.grad.fill_(1.5)  # what an allreduce's mean of ranks 0 and 1 makes of it\n")


@pytest.mark.parametrize("reduced", [True, False])
def test_diff_of_two_ranks_says_what_reduced_their_gradients(tmp_path: Path,
                                                             reduced: bool) -> None:
    """Two ranks' traces (RANK and WORLD_SIZE as any launcher sets them): each rank's own
    gradient, then whether .grad is the same on both, as an allreduce makes it."""
    script = tmp_path / "ranked.py"
    script.write_text(RANK_OWN_GRADIENT)
    for rank in (0, 1):
        run = invoke("show", script, "-o", tmp_path / "t-{rank}.json", "--",
                     *(["reduce"] if reduced else []),
                     env={"RANK": str(rank), "WORLD_SIZE": "2"})
        assert run.exit_code == 0, run.stderr
        assert as_read((tmp_path / f"t-{rank}.json").read_text())["ranks"] == \
            {"rank": rank, "world": 2}
    result = invoke("diff", tmp_path / "t-0.json", tmp_path / "t-1.json")
    assert result.exit_code == 1, result.stderr
    text = " ".join(result.stdout.split())
    assert "(rank 0 of 2) → B" in text and "(rank 1 of 2)" in text
    assert "each rank's own gradients (what reached AccumulateGrad) beyond rtol" in text
    assert "w, pass 1: norm 1.73205 → 3.4641" in text
    if reduced:
        assert "w: .grad norm 2.59808 on both ranks: their own gradients were averaged " \
            "into it (DDP's allreduce)" in text
    else:
        assert "w: .grad norm 1.73205 on rank 0, norm 3.4641 on rank 1: not reduced across " \
            "the ranks" in text
    data = json.loads(invoke("diff", tmp_path / "t-0.json", tmp_path / "t-1.json",
                             "--json").stdout)
    assert data["ranks"] == {"a": 0, "b": 1, "world": 2}
    assert [(c["tensor"], c["equal"]) for c in data["across_ranks"]] == [("w", reduced)]


@pytest.mark.parametrize("ranks", [{"rank": 2, "world": 2}, {"rank": -1, "world": 2},
                                   {"rank": 0}, [0, 2]])
def test_a_trace_with_a_broken_rank_is_refused(tmp_path: Path, ranks: object) -> None:
    data = json.loads(invoke("show", CHAIN, "--json").stdout)
    data["ranks"] = ranks
    path = tmp_path / "bad.json"
    path.write_text(json.dumps(data))
    result = invoke("show", path)
    assert result.exit_code == 2 and "invalid trace: ranks" in result.stderr, result.stderr


@LAUNCHES
def test_parameters_a_reentrant_checkpoint_hides_from_ddp_are_said_unreduced(
        tmp_path: Path) -> None:
    """net1, used twice under reentrant checkpointing, keeps each rank's own .grad (plain
    python prints the same norms): rank 1's line and the ranks' diff say which parameters."""
    run = torchrun("show", "ddp_reentrant.py", "-o", tmp_path / "t-{rank}.json")
    assert run.returncode == 0, run.stderr[-3000:]
    said = " ".join(run.stderr.split())
    assert "rank 1: 2 pass(es), 9 nodes, 1 info; its graph is rank 0's; .grad differs from " \
        "rank 0's for 2 of 4 parameter(s), not reduced across the ranks: model.net1.weight, " \
        "model.net1.bias; a reentrant checkpoint's parameters escape DDP's reducer: " \
        "checkpoint(..., use_reentrant=False) or DDP(..., static_graph=True)" in said
    traces = [as_read((tmp_path / f"t-{r}.json").read_text()) for r in (0, 1)]
    printed = [json.loads(t["stdout"].replace("'", '"').splitlines()[-1]) for t in traces]
    assert printed[0]["net1.weight"] != pytest.approx(printed[1]["net1.weight"], rel=1e-3)
    assert printed[0]["net2.weight"] == pytest.approx(printed[1]["net2.weight"], rel=1e-6)
    for trace, norms in zip(traces, printed, strict=True):
        for name, norm in norms.items():
            assert tensor(trace, f"model.{name}")["grad"]["norm"] == pytest.approx(norm,
                                                                                 abs=1e-6)
    result = invoke("diff", tmp_path / "t-0.json", tmp_path / "t-1.json")
    lines = [" ".join(x.split()) for x in result.stdout.splitlines()]
    assert [x.split(":")[0] for x in lines if "not reduced across the ranks" in x] == \
        ["model.net1.weight", "model.net1.bias"]
    assert [x.split(":")[0] for x in lines if "averaged into it" in x] == \
        ["model.net2.weight", "model.net2.bias"]


def test_a_rank_line_compares_grads_whose_statistics_one_side_lacks() -> None:
    """A .grad's min and max are null where they could not be read (an empty or unreadable
    gradient): the comparison said nothing or crashed on None."""
    from gradtrace.render.ranks import rank_line

    def told(grads: dict[str, list[float | None]]) -> str:
        return json.dumps({"passes": 1, "nodes": 3, "graph": "g", "findings": {},
                           "failed": None, "grads": grads, "reentrant": False})

    shown = told({"w": [1.0, None, None], "b": [2.0, 0.5, 1.5]})
    assert rank_line(1, told({"w": [1.0, None, None], "b": [2.0, 0.5, 1.5]}), 0, shown) \
        == "rank 1: 1 pass(es), 3 nodes, no findings; its graph is rank 0's"
    assert rank_line(1, told({"w": [1.0, -1.0, 1.0], "b": [2.0, 0.5, 1.5]}), 0, shown) \
        .endswith("; .grad differs from rank 0's for 1 of 2 parameter(s), not reduced across "
                  "the ranks: w")


def _shards_told(shards: object, passes: int = 3, failed: str | None = None) -> str:
    return json.dumps({"passes": passes, "nodes": 3, "graph": "g", "findings": {},
                       "failed": failed, "grads": {}, "shards": shards, "reentrant": False})


def test_the_whole_norm_adds_up_every_rank_s_shard_and_nothing_else() -> None:
    """Each rank's local shard norm: the whole's is their root sum of squares, said only when
    every rank told its part of one whole (another rank's words are checked, never trusted)."""
    from gradtrace.render.ranks import whole_norms_line

    two = [_shards_told({"w": [3.0, 2], "b": [0.0, 2]}), _shards_told({"w": [4.0, 2],
                                                                       "b": [0.0, 2]})]
    assert whole_norms_line(two, 0) == \
        ".grad norm of each sharded parameter, over every rank's shard: w 5, b 0"
    huge = [_shards_told({"w": [1e200, 2]}), _shards_told({"w": [1e200, 2]})]
    assert whole_norms_line(huge, 1) == \
        ".grad norm of each sharded parameter, over every rank's shard: w 1.41421e+200"
    one = _shards_told({"w": [3.0, 2]})
    for others in (None, "not json", "[1]", _shards_told({"w": [4.0, 2]}, passes=2),
                   _shards_told({"w": [4.0, 2]}, failed="RuntimeError: x"),
                   _shards_told({"w": [True, 2]}), _shards_told({"w": [-4.0, 2]}),
                   _shards_told({"w": [4.0, True]}), _shards_told({"w": "4"}),
                   _shards_told({"w": [4.0, 4]}), _shards_told([["w", 4.0]])):
        assert whole_norms_line([one, others], 0) is None, others
    # a whole split among 2 of 4 ranks (one replica of two): no sum over its replicas
    four = [_shards_told({"w": [3.0, 2]}) for _ in range(4)]
    assert whole_norms_line(four, 0) is None


@LAUNCHES
def test_watch_writes_a_log_per_rank(tmp_path: Path) -> None:
    """Each rank's own log ({rank} in the name): its steps, its findings, its end; no norm
    is reduced across ranks (that would synchronise them)."""
    run = torchrun("watch", "ddp_train.py", "--run-log", tmp_path / "run-{rank}.jsonl")
    assert run.returncode == 0, run.stderr
    logs = [read_log((tmp_path / f"run-{rank}.jsonl").read_text()) for rank in (0, 1)]
    assert all(log.ended and log.steps is not None for log in logs)
    assert len({len(log.steps.grads) for log in logs if log.steps is not None}) == 1


def test_watch_under_several_ranks_wants_a_log_per_rank(tmp_path: Path) -> None:
    result = invoke("watch", DISTRIBUTED / "ddp_train.py", "--log", tmp_path / "run.jsonl",
                    env={"RANK": "0", "WORLD_SIZE": "2"})
    assert result.exit_code == 2
    assert "each of the 2 ranks would write it" in result.output
    assert not (tmp_path / "run.jsonl").exists()
