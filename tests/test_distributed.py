"""Multi-process runs (issue 30): torchrun with DistributedDataParallel on gloo, two ranks on
free ports of 127.0.0.1, each run under a time limit; and a script that spawns its own."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest
from helpers import ROOT, SCENARIOS, as_read, invoke, tensor

CHAIN = SCENARIOS / "chain_rule.py"

DISTRIBUTED = SCENARIOS / "distributed"
LIMIT = 240  # seconds for one launch: two ranks start torch, then gloo connects them


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def torchrun(*args: str | Path, env: dict[str, str] | None = None
             ) -> subprocess.CompletedProcess[str]:
    """`torchrun --nproc-per-node 2 -m gradtrace ARGS` in the distributed scenarios' folder."""
    return subprocess.run(
        [sys.executable, "-m", "torch.distributed.run", "--nproc-per-node", "2",
         "--master-addr", "127.0.0.1", "--master-port", str(free_port()),
         "-m", "gradtrace", *map(str, args)],
        cwd=DISTRIBUTED, capture_output=True, text=True, timeout=LIMIT,
        env=None if env is None else {**os.environ, **env})


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


def test_every_rank_s_report_in_rank_order() -> None:
    run = torchrun("show", "ddp_train.py", "--ranks", "all")
    assert run.returncode == 0, run.stderr[-3000:]
    first, second = run.stdout.index("rank 0 of 2"), run.stdout.index("rank 1 of 2")
    assert first < run.stdout.index("on rank 0.") < second < run.stdout.index("on rank 1.")
    assert run.stdout.count("scenario ddp_train.py") == 2


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


def test_a_rank_whose_graph_differs_is_said() -> None:
    run = torchrun("show", "ddp_branch.py")
    assert run.returncode == 0, run.stderr[-3000:]
    assert "rank 1: 1 pass(es), 14 nodes, 1 info; its graph differs from rank 0's " \
        "(14 nodes, rank 0: 10)" in run.stdout


def test_a_script_that_spawns_its_workers_is_told_what_is_not_recorded() -> None:
    for _ in range(3):  # gloo's shutdown aborts a child now and then (1 in 8 under python)
        run = subprocess.run([sys.executable, "-m", "gradtrace", "show", "ddp_spawn.py", "--",
                              str(free_port())], cwd=DISTRIBUTED, capture_output=True,
                             text=True, timeout=LIMIT)
        if "terminated with signal" not in run.stderr:
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


@pytest.mark.parametrize("which", ["x", "-1", "1.5"])
def test_a_rank_that_is_no_number_is_refused(which: str) -> None:
    result = invoke("show", CHAIN, "--ranks", which)
    assert result.exit_code == 2 and result.stdout == ""
    assert f"--ranks {which!r}: give a rank number (0, 1, …) or all" in result.stderr


def test_ranks_all_refuses_json_on_stdout() -> None:
    result = invoke("show", CHAIN, "--ranks", "all", "--json",
                    env={"RANK": "0", "WORLD_SIZE": "2"})
    assert result.exit_code == 2 and result.stdout == ""
    assert "-o trace-{rank}.json" in result.stderr
