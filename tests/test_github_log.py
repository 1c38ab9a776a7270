"""--format github: nothing a scenario says (its exception, what it printed, its file name) can
put a workflow command of its own into the log GitHub's runner reads, on stdout or stderr.

The runner reads a line as a command when it starts with `::` after leading spaces, or when
it holds the legacy `##[` anywhere (actions/runner, ActionCommand.TryParseV2 and TryParse), and
.NET's ReadLine ends a line at `\\r` as at `\\n`.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from plain_python import run_gradtrace

HOSTILE = ("boom\n::add-mask::s3cret\n::set-output name=pwned::1\n"
           "::error file=evil.py,line=1::x\r::warning::cr\n  ::notice::indented\n"
           "##[set-output name=legacy;]1")
# gradtrace's own annotations: properties escaped, so no `:` or `,` inside them
OWN = re.compile(r"::(error|warning|notice) (file=[^:,]*,(line=\d+,)?)?title=[^:,]*::")

GRAPH = "import torch\nx = torch.ones(2, requires_grad=True)\ny = (x * 2).sum()\ny.backward()\n"
SCENARIOS = {
    "plain": GRAPH,
    "stops": GRAPH + f"print({HOSTILE!r})\nraise RuntimeError({HOSTILE!r})\n",
    "raises": f"raise RuntimeError({HOSTILE!r})\n",
    "syntax": "x = (\n",
    "wrong": """import torch


class Wrong(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x * x

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        return g * x


x = torch.rand(3, dtype=torch.float64, requires_grad=True)
Wrong.apply(x).sum().backward()
""",
}


def hostile_name(kind: str, suffix: str = ".py") -> str:
    return f"{kind}\n::add-mask::{kind}\n::error file=x.py,line=1::n\r##[add-mask]{kind}{suffix}"


@pytest.fixture(scope="module")
def files(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    folder = tmp_path_factory.mktemp("hostile")
    made = {}
    for kind, text in SCENARIOS.items():
        made[kind] = folder / hostile_name(kind)
        made[kind].write_text(text)
    made["json"] = folder / hostile_name("json", ".json")
    made["json"].write_text('{"schema": "gradtrace.trace/2", "nodes": [')
    return made


def injected(text: str) -> list[str]:
    """The lines of text the runner would read as a command that is not gradtrace's own."""
    return [line for line in re.split(r"\r\n|\r|\n", text)
            if not OWN.match(line) and (line.lstrip().startswith("::") or "##[" in line)]


def github(*args: str | Path) -> tuple[int, str, str]:
    """`python -m gradtrace ARGS --format github` as CI runs it: exit code, stdout, stderr
    (bytes read as they are: a `\\r` stays a `\\r`)."""
    done = run_gradtrace(*args, "--format", "github", text=False, timeout=300)
    out, err = (b.decode("utf-8", "surrogateescape") for b in (done.stdout, done.stderr))
    assert "Traceback" not in err, err
    assert not injected(out), out
    assert not injected(err), err
    return done.returncode, out, err


def test_a_scenario_that_stops_says_so_escaped(files: dict[str, Path]) -> None:
    code, out, err = github("show", files["stops"])
    assert code == 2
    assert OWN.match(out) and "scenario-stopped" in out  # the finding, as an annotation
    assert err.count("\nerror: ") + err.startswith("error: ") == 1
    assert "%0A::add-mask::s3cret%0A" in err  # the message is there, on one line
    assert "::add-mask::s3cret" in err  # and what the scenario printed, in its panel


@pytest.mark.parametrize("kind", ["syntax", "json"])
def test_a_scenario_that_cannot_load_says_so_escaped(files: dict[str, Path], kind: str) -> None:
    code, out, err = github("show", files[kind])
    assert code == 2 and out == "" and err.startswith("error: ")
    assert "%0A::add-mask::" in err  # the file's name, on the error's one line


def test_check_failures_and_scenarios_that_cannot_run_are_escaped(
        files: dict[str, Path]) -> None:
    code, out, err = github("check", files["wrong"], files["raises"])
    assert code == 2
    assert "title=gradtrace check Wrong::" in out  # the failed check, as an annotation
    assert "running " in err and "%0A::add-mask::s3cret%0A" in err


def test_diff_findings_and_its_ending_are_escaped(files: dict[str, Path]) -> None:
    code, out, err = github("diff", files["plain"], files["stops"])
    assert code == 2
    assert "title=gradtrace diff%3A new scenario-stopped::" in out and "error: " in err


def test_steps_and_dot_are_escaped(files: dict[str, Path]) -> None:
    code, out, err = github("steps", files["stops"])
    assert code == 2 and "error: " in err
    code, out, err = github("dot", files["stops"])  # dot draws: --format github is refused
    assert code == 2 and "error: dot --format github" in err
