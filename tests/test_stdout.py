"""What gradtrace writes to its own stdout, in any environment: all of it or an error (never a
truncated document with exit 0), 141 when the reader leaves whatever the buffering, no crash
in an ASCII locale, and a report as wide as piped output when COLUMNS means nothing.

The subprocess runs read saved traces where they can: a trace needs no torch (0.3 s a run)."""

from __future__ import annotations

import ast
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from helpers import SCENARIOS, code_files, invoke, write_script
from plain_python import run_gradtrace

from gradtrace.render.ascii import ASCII_SYMBOLS

UNBUFFERED = {"PYTHONUNBUFFERED": "1"}  # as many CI systems set: stdout's writes go straight out
ASCII_LOCALE = {"LC_ALL": "C", "LANG": "C", "PYTHONUTF8": "0"}  # stdout encoding: ascii


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


SYMBOLS = '''"""Non-ASCII names, a custom Function (for check) and a diff of two of these."""
import torch

class 제곱(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x * x

    @staticmethod
    def backward(ctx, grad):
        (x,) = ctx.saved_tensors
        return 2 * x * grad

가중치 = torch.tensor([1.0, 2.0], dtype=torch.float64, requires_grad=True)
출력 = (제곱.apply(가중치) * OTHER).sum()
출력.backward()
'''


def test_an_ascii_locale_never_crashes_and_json_is_whole(tmp_path: Path) -> None:
    scenario = write_script(tmp_path, SYMBOLS.replace("OTHER", "3"))
    squared = write_script(tmp_path, SYMBOLS.replace("OTHER", "가중치"), "o.py")
    other = saved_trace(tmp_path, squared, "other.json")
    env = environment(**ASCII_LOCALE)
    run = [["show", str(scenario), "--json"], ["show", str(scenario)], ["check", str(scenario)]]
    done = [run_gradtrace(*args, env=env, text=False, timeout=120) for args in run]
    assert [(p.returncode, p.stderr) for p in done[:2]] == [(0, b""), (0, b"")]
    assert done[2].returncode == 0, done[2].stderr
    trace = tmp_path / "ascii.json"
    trace.write_bytes(done[0].stdout)
    # JSON is UTF-8 whatever the locale (RFC 8259), the same document -o FILE.json writes
    names = {t["name"] for t in json.loads(done[0].stdout.decode("utf-8"))["tensors"]}
    assert {"가중치", "출력"} <= names
    more = [["dot", str(trace)], ["diff", str(trace), str(other)],
            ["show", str(trace), "--format", "github"]]
    done += [run_gradtrace(*args, env=env, text=False, timeout=120) for args in more]
    assert [p.returncode for p in done[3:]] == [0, 1, 0]
    assert b"Traceback" not in b"".join(p.stderr for p in done)
    assert "가중치".encode() in done[3].stdout  # DOT is UTF-8, as Graphviz reads it
    for report in (done[1], done[2], done[4]):  # text for a person: ASCII, names escaped
        assert report.stdout.isascii() and len(report.stdout) > 200
    assert b"\\uac00\\uc911\\uce58" in done[1].stdout  # 가중치


def test_every_symbol_of_gradtrace_has_an_ascii_stand_in() -> None:
    found = {ch for path in code_files()
             for node in ast.walk(ast.parse(path.read_text(encoding="utf-8")))
             if isinstance(node, ast.Constant) and isinstance(node.value, str)
             for ch in node.value if not ch.isascii() and ch.isprintable()}
    assert sorted(found - set(ASCII_SYMBOLS)) == []
    assert all(stand_in.isascii() for stand_in in ASCII_SYMBOLS.values())


@pytest.fixture(scope="module")
def chain_trace(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return saved_trace(tmp_path_factory.mktemp("chain"), SCENARIOS / "chain_rule.py")


@pytest.mark.parametrize("columns", ["0", "-5", "abc", ""])
def test_columns_that_mean_nothing_are_unset(columns: str, chain_trace: Path) -> None:
    unset = invoke("show", chain_trace)
    given = invoke("show", chain_trace, env={"COLUMNS": columns})
    assert given.exit_code == 0 and given.stdout == unset.stdout
    assert max(len(line) for line in unset.stdout.splitlines()) > 80  # 120 wide, piped
