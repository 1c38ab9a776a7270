"""What gradtrace writes to its own stdout, in any environment: all of it or an error (never a
truncated document with exit 0), 141 when the reader leaves whatever the buffering.

The subprocess runs read saved traces where they can: a trace needs no torch (0.3 s a run)."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from helpers import invoke, write_script

UNBUFFERED = {"PYTHONUNBUFFERED": "1"}  # as many CI systems set: stdout's writes go straight out


def saved_trace(folder: Path, scenario: Path, name: str = "trace.json") -> Path:
    """The scenario's trace saved as `show --json` saves it (run in-process: torch is here)."""
    result = invoke("show", scenario, "--json")
    assert result.exit_code == 0, result.stderr
    path = folder / name
    path.write_text(result.stdout, encoding="utf-8")
    return path


@pytest.fixture(scope="module")
def wide_trace(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A trace whose JSON (~600 KB) and `show --all` report (~160 KB) overfill a pipe (64 KB)."""
    folder = tmp_path_factory.mktemp("wide")
    scenario = write_script(folder, "import torch\nx = torch.ones(2, requires_grad=True)\n"
                            "loss = torch.stack([x * i for i in range(1000)]).sum()\n"
                            "loss.backward()\n")
    return saved_trace(folder, scenario)


def environment(**extra: str) -> dict[str, str]:
    """This process's environment with extra, and no setting that would hide what is tested."""
    env = {k: v for k, v in os.environ.items()
           if k not in ("PYTHONIOENCODING", "PYTHONUNBUFFERED", "COLUMNS")}
    return {**env, **extra}


def gradtrace_into_pipe(args: list[str], env: dict[str, str], blocking: bool = True,
                        keep: int | None = None, pause: float = 0.0,
                        ) -> tuple[int, bytes, bytes]:
    """(exit code, what the reader read, stderr) of `gradtrace ARGS` writing into a pipe whose
    reader reads 4 KB every pause seconds, and leaves after `keep` bytes (None: reads all)."""
    read, write = os.pipe()
    os.set_blocking(write, blocking)  # shared with the child: the same open pipe
    proc = subprocess.Popen([sys.executable, "-m", "gradtrace", *args], stdout=write,
                            stderr=subprocess.PIPE, env=env)
    os.close(write)
    got = b""
    while keep is None or len(got) < keep:
        chunk = os.read(read, 4096 if keep is None else keep - len(got))
        if not chunk:
            break
        got += chunk
        time.sleep(pause)
    os.close(read)
    _, err = proc.communicate(timeout=120)
    return proc.returncode, got, err


def gradtrace_to_file(args: list[str], path: Path, env: dict[str, str]) -> bytes:
    """What `gradtrace ARGS > path` writes (a file takes every write whole)."""
    with open(path, "wb") as out:
        subprocess.run([sys.executable, "-m", "gradtrace", *args], stdout=out, env=env,
                       check=True, timeout=120)
    return path.read_bytes()


@pytest.mark.parametrize("what", ["--json", "--all"])
def test_a_slow_reader_of_a_non_blocking_pipe_gets_all_of_it(what: str, wide_trace: Path,
                                                              tmp_path: Path) -> None:
    args = ["show", str(wide_trace), what]
    whole = gradtrace_to_file(args, tmp_path / "out", environment(**UNBUFFERED))
    code, got, err = gradtrace_into_pipe(args, environment(**UNBUFFERED), blocking=False,
                                         pause=0.002)
    assert (code, err) == (0, b"")
    assert len(whole) > 100_000 and got == whole


@pytest.mark.parametrize("buffering", [UNBUFFERED, {}], ids=["unbuffered", "buffered"])
@pytest.mark.parametrize("what", [["show", "--all"], ["show", "--json"], ["dot", "--no-fold"]],
                         ids=["report", "json", "dot"])
def test_a_reader_that_leaves_part_way_is_exit_141(what: list[str], buffering: dict[str, str],
                                                   wide_trace: Path) -> None:
    args = [what[0], str(wide_trace), *what[1:]]
    code, got, err = gradtrace_into_pipe(args, environment(**buffering), keep=100)
    assert (code, len(got), err) == (141, 100, b"")  # as `gradtrace … | head -c 100`
