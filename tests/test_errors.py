"""Bad input: a clear `error:` message, exit 2, and no traceback of gradtrace's own."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from helpers import SCENARIOS, as_read, invoke, read_terminal, write_script
from plain_python import start_gradtrace


def scenario(tmp_path: Path, body: str, name: str = "scenario.py") -> Path:
    path = tmp_path / name
    path.write_text(body)
    return path


def fails(*args: str | Path) -> str:
    """Run gradtrace, assert exit 2 with an error and no traceback; return stderr."""
    result = invoke(*[str(a) for a in args])
    assert result.exit_code == 2, (result.exit_code, result.stdout, result.stderr)
    assert result.stderr.startswith("error: ")
    assert "Traceback" not in result.stderr and "Traceback" not in result.stdout
    assert result.stdout == ""
    return result.stderr


def test_missing_file(tmp_path: Path) -> None:
    assert "no such file" in fails("show", tmp_path / "nope.py")


def test_not_a_python_file(tmp_path: Path) -> None:
    err = fails("show", scenario(tmp_path, "x = 1\n", "notes.txt"))
    assert "not a Python file" in err


def test_directory(tmp_path: Path) -> None:
    assert "is a directory" in fails("show", tmp_path)


def test_syntax_error_points_at_line(tmp_path: Path) -> None:
    path = scenario(tmp_path, "import torch\nx = torch.tensor(1.0\n")
    err = fails("show", path)
    assert f"{path}:2" in err and "syntax error" in err


def test_exception_in_scenario_points_at_its_line(tmp_path: Path) -> None:
    path = scenario(tmp_path, "import torch\n\nx = torch.ones(2, requires_grad=True)\n"
                              "y = x @ torch.ones(3)\n")
    err = fails("show", path)
    assert f"{path}:4" in err
    assert "RuntimeError" in err and "y = x @ torch.ones(3)" in err


def test_exception_in_a_function_points_at_scenario_line(tmp_path: Path) -> None:
    path = scenario(tmp_path, "def f():\n    return 1 / 0\n\nf()\n")
    err = fails("show", path)
    assert f"{path}:2" in err and "ZeroDivisionError" in err


def test_non_utf8_file(tmp_path: Path) -> None:
    path = tmp_path / "latin1.py"
    path.write_bytes(b"x = '\xe9'\n")
    assert "not UTF-8" in fails("show", path)


def test_no_tensors(tmp_path: Path) -> None:
    err = fails("show", scenario(tmp_path, "a = 1 + 2\n"))
    assert "names no tensors" in err and "FILE::FUNC" in err


def test_nothing_requires_grad(tmp_path: Path) -> None:
    err = fails("show", scenario(tmp_path, "import torch\nx = torch.ones(2)\ny = x * 2\n"))
    assert "no tensor requires grad" in err


def test_no_grad_says_where(tmp_path: Path) -> None:
    err = fails("show", scenario(tmp_path, "import torch\nx = torch.ones(2, requires_grad=True)\n"
                                           "with torch.no_grad():\n    y = x * 2\n"))
    assert "torch.no_grad() on line 3" in err


def test_detached_says_where(tmp_path: Path) -> None:
    err = fails("show", scenario(tmp_path, "import torch\nx = torch.ones(2, requires_grad=True)\n"
                                           "y = (x * 2).detach()\n"))
    assert ".detach() on line 3" in err


def test_unknown_output_lists_names(tmp_path: Path) -> None:
    path = scenario(tmp_path, "import torch\nx = torch.ones(2, requires_grad=True)\ny = x * 2\n")
    err = fails("show", path, "--root", "q")
    assert "'q'" in err and "named tensors: x, y" in err


def test_output_without_grad_fn(tmp_path: Path) -> None:
    path = scenario(tmp_path, "import torch\nx = torch.ones(2, requires_grad=True)\ny = x * 2\n")
    err = fails("show", path, "--root", "x")
    assert "has no grad_fn" in err and "leaf" in err


def test_bad_output_variable(tmp_path: Path) -> None:
    path = scenario(tmp_path, "import torch\nx = torch.ones(2, requires_grad=True)\n"
                              "y = x * 2\nOUTPUT = 3\n")
    assert "OUTPUT must be a tensor" in fails("show", path)


def test_sys_exit_nonzero(tmp_path: Path) -> None:
    assert "sys.exit(3)" in fails("show", scenario(tmp_path, "import sys\nsys.exit(3)\n"))


def test_not_a_trace_json(tmp_path: Path) -> None:
    path = tmp_path / "t.json"
    path.write_text(json.dumps({"schema": "something/else"}))
    assert "not a gradtrace trace" in fails("show", path)


def test_broken_json(tmp_path: Path) -> None:
    path = tmp_path / "t.json"
    path.write_text("{nope")
    assert "not readable JSON" in fails("show", path)


def test_output_option_with_json_trace(tmp_path: Path) -> None:
    path = tmp_path / "t.json"
    path.write_text("{}")
    assert "--root and script arguments apply to scenarios" in fails("show", path, "--root", "z")


def test_debug_shows_the_traceback(tmp_path: Path) -> None:
    result = invoke("show", tmp_path / "nope.py", "--debug")
    assert result.exit_code != 0
    assert result.exception is not None and "no such file" in str(result.exception)


def test_a_pass_that_stops_the_scenario_is_told_once_after_its_cause_then_exits_2() -> None:
    result = invoke("show", SCENARIOS / "backward_twice_error.py")
    assert result.exit_code == 2  # python stops there too
    findings = result.stdout.split("\nfindings\n")[1]
    # the cause first, then the stop with torch's message, once; no pass-failed twin of it
    assert findings.index("[graph-freed]") < findings.index("[scenario-stopped]")
    assert "pass-failed" not in findings and "retain_graph=True" in findings
    # (the report wraps at 120 columns, where the scenario's path puts it)
    assert " ".join(findings.split()).count(
        "Trying to backward through the graph a second time") == 1
    # stdout and stderr apart (the report in a file): the error line says it whole
    assert "second time" in result.stderr and "finding above" not in result.stderr
    # where no report shows it, the error line says it whole
    alone = invoke("show", SCENARIOS / "backward_twice_error.py", "--json")
    assert "Trying to backward through the graph a second time" in alone.stderr


def _on_terminal(report_to_file: bool, tmp_path: Path) -> tuple[str, str]:
    """What `show backward_twice_error.py` writes on a terminal (stderr, and stdout too
    unless report_to_file), and in the file stdout is redirected to."""
    leader, follower = os.openpty()
    report = tmp_path / "report.txt"
    with report.open("wb") as file:
        done = start_gradtrace("show", SCENARIOS / "backward_twice_error.py",
                               stdout=file if report_to_file else follower, stderr=follower,
                               env={**os.environ, "TERM": "xterm", "COLUMNS": "100"})
        os.close(follower)
        seen = read_terminal(leader)
        done.wait(120)
    assert done.returncode == 2
    return seen.decode(errors="replace"), report.read_text()


def test_the_stop_is_said_in_brief_only_beside_the_report_that_holds_it(tmp_path: Path
                                                                        ) -> None:
    screen, _ = _on_terminal(False, tmp_path)  # report and error line on one terminal
    assert "backward_twice_error.py:10: the scenario raised RuntimeError (the " \
        "scenario-stopped finding above has its whole message)" in " ".join(screen.split())
    error_line = screen[screen.rindex("error: "):]  # the report's findings come before it
    assert "Trying to backward" not in error_line
    screen, report = _on_terminal(True, tmp_path)  # `> report.txt`: the terminal sees stderr
    assert "[scenario-stopped]" in report
    assert "Trying to backward through the graph a second time" in screen
    assert "finding above" not in screen


NON_SCALAR = """
import torch
w = torch.ones(3, requires_grad=True)
y = w * 2
{call}
"""


def test_a_stop_without_a_cause_finding_takes_the_pass_hint(tmp_path: Path) -> None:
    result = invoke("show", write_script(tmp_path, NON_SCALAR.format(call="y.backward()")),
                    "--json")
    found = {f["code"]: f for f in json.loads(result.stdout)["findings"]}
    assert "pass-failed" not in found
    assert "gradient=torch.ones_like(t)" in found["scenario-stopped"]["hint"]


def test_a_pass_error_the_script_catches_stays_a_pass_failed_finding(tmp_path: Path) -> None:
    caught = "try:\n    y.backward()\nexcept RuntimeError:\n    pass\nloss = y.sum()"
    result = invoke("show", write_script(tmp_path, NON_SCALAR.format(call=caught)), "--json")
    assert result.exit_code == 0
    codes = [f["code"] for f in json.loads(result.stdout)["findings"]]
    assert "pass-failed" in codes and "scenario-stopped" not in codes


def test_strict_turns_error_findings_into_exit_1() -> None:
    assert invoke("show", SCENARIOS / "explained/norm_of_zero.py", "--strict").exit_code == 1
    assert invoke("show", SCENARIOS / "chain_rule.py", "--strict").exit_code == 0
    # a scenario that stopped is exit 2 whatever its findings
    assert invoke("show", SCENARIOS / "backward_twice_error.py", "--strict").exit_code == 2


@pytest.mark.parametrize("command", ["show", "dot", "diff"])
@pytest.mark.parametrize("value", ["two", "0", "-3", "1.5", ""])
def test_a_bad_passes_value_is_a_usage_error_before_anything_runs(
        tmp_path: Path, command: str, value: str) -> None:
    ran = tmp_path / "ran"
    path = scenario(tmp_path, f"import torch\nopen({str(ran)!r}, 'w').close()\n"
                              "x = torch.ones(2, requires_grad=True)\n(x * 2).sum().backward()\n")
    both = [path, path] if command == "diff" else [path]
    err = fails(command, *both, "--passes", value)
    assert f"--passes {value!r}: give a number of passes (1 or more) or all" in err
    assert not ran.exists()
    for good in ("1", " ALL "):  # and a good one runs it
        assert invoke(command, *both, "--passes", good).exit_code == 0
        assert ran.exists()


@pytest.mark.parametrize("text", ["input()\n", "import torch\nx = torch.ones(1)\ninput()\n"])
def test_scenario_reading_stdin_does_not_hang(tmp_path: Path, text: str) -> None:
    err = fails("show", scenario(tmp_path, text))
    assert "EOFError" in err


def test_show_leaves_the_scenario_untouched() -> None:
    path = SCENARIOS / "chain_rule.py"
    before = path.read_bytes()
    assert invoke("show", path, "--json").exit_code == 0
    assert path.read_bytes() == before


def test_fail_on_a_finding_code_and_github_annotations(tmp_path: Path) -> None:
    path = scenario(tmp_path, "import torch\nx = torch.ones(2, requires_grad=True)\n"
                              "w = torch.ones(2, requires_grad=True)\ny = (x * 2).sum()\n")
    assert invoke("show", path, "--fail-on", "nan-gradient").exit_code == 0
    failed = invoke("show", path, "--fail-on", "nan-gradient, unreached-leaf",
                    "--format", "github")
    assert failed.exit_code == 1
    assert failed.stdout.startswith("::warning ") and "title=gradtrace unreached-leaf::" in \
        failed.stdout
    assert "no finding has the code bogus" in fails("show", path, "--fail-on", "bogus")


def test_findings_carry_the_file_and_line_they_are_about(tmp_path: Path) -> None:
    path = scenario(tmp_path, "import torch\nx = torch.ones(2, requires_grad=True)\n"
                              "y = (x * 2).sum()\ny.backward()\ny.backward()\n")
    trace = as_read(invoke("show", path, "--json").stdout)
    failed = next(f for f in trace["findings"] if f["code"] == "scenario-stopped")
    assert failed["file"] == str(path) and failed["line"] == 5
    github = invoke("show", path, "--format", "github").stdout
    assert f"::error file={path},line=5,title=gradtrace scenario-stopped::" in github


def test_github_annotations_carry_no_control_character() -> None:
    from gradtrace.model.records import Finding
    from gradtrace.render.github import github_annotations

    text = github_annotations((Finding("pass-failed", "error", "bad\x1b[2J\nnext", file="a:b,c",
                                       line=3),))
    assert text == ("::error file=a%3Ab%2Cc,line=3,title=gradtrace pass-failed::"
                    "bad\\x1b[2J%0Anext\n")


def test_timeout_is_at_most_a_day_and_inf_means_no_limit() -> None:
    for command in ("show", "check"):
        for value in ("1e10", "nan"):
            result = invoke(command, SCENARIOS / "custom_sigmoid.py", "--timeout", value)
            assert result.exit_code == 2 and "Traceback" not in result.stderr, (command, value)
            assert "a day" in " ".join(result.stderr.split()) or "0.001" in result.stderr
    assert invoke("show", SCENARIOS / "chain_rule.py", "--timeout", "inf").exit_code == 0


def test_a_module_s_unused_parameters_are_annotated_on_the_line_that_made_the_module() -> None:
    """The annotation of unreached-leaf for a module's parameters has a file and line: where
    the module was bound (one annotation for the module, not one per parameter)."""
    path = SCENARIOS / "explained" / "unused_head.py"
    github = invoke("show", path, "--format", "github").stdout
    (line,) = [x for x in github.splitlines() if "unreached-leaf" in x]
    bound = next(i for i, text in enumerate(path.read_text().splitlines(), 1)
                 if text.startswith("model ="))
    assert line.startswith(f"::warning file={path},line={bound},title=gradtrace unreached-leaf::")
