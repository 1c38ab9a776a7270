"""The extension points: one table of formats, one palette, one registry of findings, the CLI's
options and its one error boundary."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from helpers import SCENARIOS, invoke, needs_dot, show_json

from gradtrace.cli import ExitCode
from gradtrace.errors import ExportError
from gradtrace.findings.registry import CODES, GRADCHECK, PASS_FAILED, declare
from gradtrace.render.dot import STYLE
from gradtrace.render.formats import FORMATS, find_format
from gradtrace.render.mermaid import CLASS_STYLE
from gradtrace.render.palette import PALETTE

CHAIN = SCENARIOS / "chain_rule.py"


RELU, TANH = SCENARIOS / "diff" / "mlp_relu.py", SCENARIOS / "diff" / "mlp_tanh.py"
NO_GRAPH = SCENARIOS / "no_graph" / "forward_only.py"
# Each command: a real situation for each exit code its --help promises.
EXIT_CASES: dict[str, dict[ExitCode, list[str | Path]]] = {
    "show": {ExitCode.OK: [CHAIN],
             ExitCode.FAILED: [SCENARIOS / "explained" / "norm_of_zero.py", "--strict"],
             ExitCode.USAGE: [NO_GRAPH]},
    "dot": {ExitCode.OK: [CHAIN],
            ExitCode.FAILED: [SCENARIOS / "explained" / "log_of_zero.py", "--strict"],
            ExitCode.USAGE: [CHAIN, "-o", "graph.nope"]},
    "check": {ExitCode.OK: [SCENARIOS / "custom_add.py"],
              ExitCode.FAILED: [SCENARIOS / "broken" / "gradcheck_pow_wrong_backward.py"],
              ExitCode.USAGE: [NO_GRAPH]},
    "diff": {ExitCode.OK: [RELU, RELU], ExitCode.FAILED: [RELU, TANH],
             ExitCode.USAGE: [RELU, SCENARIOS / "no_such_file.py"]},
}


@pytest.mark.parametrize("command", EXIT_CASES)
def test_each_command_exits_with_the_codes_its_help_promises(command: str) -> None:
    text = " ".join(invoke(command, "--help", env={"COLUMNS": "300"}).stdout.split())
    promised = re.search(r"Exit codes: (.*?)\.", text)
    assert promised is not None, text
    assert [int(c) for c in re.findall(r"(?:^|, )(\d) ", promised[1])] == \
        sorted(EXIT_CASES[command])  # 0, 1, 2 in the --help
    for code, args in EXIT_CASES[command].items():
        result = invoke(command, *args)
        assert result.exit_code == code, (code, args, result.stderr)
        # (what the scenario printed may come first, as python prints it before its error)
        assert ("\nerror: " in "\n" + result.stderr) == (code == ExitCode.USAGE), result.stderr


@needs_dot
@pytest.mark.parametrize("flag", ["-o", "--output", "--file"])
def test_dot_writes_the_file_given_as_output(flag: str, tmp_path: Path) -> None:
    out = tmp_path / "g.svg"
    result = invoke("dot", CHAIN, flag, out)
    assert result.exit_code == 0, result.stderr
    assert out.read_bytes().lstrip().startswith((b"<?xml", b"<svg"))


def test_root_picks_the_root_in_show_and_dot(tmp_path: Path) -> None:
    trace = show_json(CHAIN, "--root", "y")
    assert trace["output_names"] == ["y"] and trace["root_reason"] == "picked by name"
    result = invoke("dot", CHAIN, "--root", "y")
    assert result.exit_code == 0, result.stderr
    # the output box is y, the first node (n0) is y's PowBackward0
    assert 'out0 [label="y\\nfloat32[]"' in result.stdout
    assert 'n0 [label="PowBackward0\\n(y)"' in result.stdout
    report = invoke("show", CHAIN, "--root", "y")
    assert "output y  (picked by name; pick others with --root NAME)" in report.stdout


def test_show_output_is_no_longer_an_alias_of_root() -> None:
    """`--output NAME` was the old name of --root; -o/--output is now always an output file."""
    result = invoke("show", CHAIN, "--output", "y", "--json")
    assert result.exit_code == 2 and "--json and -o y disagree" in result.stderr
    assert "--output" in invoke("show", "--help").stdout  # listed: it is an option now


@pytest.mark.parametrize("fmt", FORMATS, ids=lambda f: f.name)
def test_every_format_is_found_by_each_suffix_and_by_name(fmt: object) -> None:
    for suffix in fmt.suffixes:  # type: ignore[attr-defined]
        assert find_format(Path("graph" + suffix.upper()), None) is fmt
    assert find_format(None, fmt.name.upper()) is fmt  # type: ignore[attr-defined]
    assert find_format(Path("graph.svg"), "." + fmt.name) is fmt  # type: ignore[attr-defined]


def test_formats_table_is_what_dot_help_and_errors_read() -> None:
    help_text = invoke("dot", "--help", env={"COLUMNS": "200"}).stdout
    for fmt in FORMATS:
        assert fmt.description in help_text and fmt.suffixes[0] in help_text
    with pytest.raises(ExportError) as bad:
        find_format(Path("graph.xyz"), None)
    assert all(f.suffixes[0] in (bad.value.hint or "") for f in FORMATS)
    assert find_format(None, None).name == "dot"


def test_one_palette_colours_dot_and_mermaid() -> None:
    assert set(STYLE) == set(CLASS_STYLE) == set(PALETTE)
    for kind, look in PALETTE.items():
        assert f'fillcolor="{look.fill}"' in STYLE[kind]
        assert CLASS_STYLE[kind].startswith(f"fill:{look.fill},stroke:{look.stroke}")


def test_registry_declares_each_code_once_with_its_severities() -> None:
    assert len(CODES) == 29 and PASS_FAILED is CODES["pass-failed"]
    assert GRADCHECK.finding("ok").severity == "info"
    assert GRADCHECK.finding("returned False", severity="error").severity == "error"
    with pytest.raises(ValueError, match="not declared with severity"):
        PASS_FAILED.finding("a pass", severity="info")
    with pytest.raises(ValueError, match="declared twice"):
        declare("pass-failed", "error", "again", "again")


def test_every_finding_of_the_gallery_has_a_declared_code_and_severity() -> None:
    seen = set()
    for name in ("explained/skip_failed_batch.py", "backward_across_detach.py",
                 "gradcheck_pow.py", "tensor_hook.py"):
        for f in show_json(SCENARIOS / name)["findings"]:
            code = CODES[f["code"]]
            assert f["severity"] in (code.severity, *code.also)
            seen.add(f["code"])
    assert {"pass-failed", "detached", "gradcheck"} <= seen


def test_errors_go_through_the_one_boundary(tmp_path: Path) -> None:
    for args in (["show", tmp_path / "nope.py"], ["dot", tmp_path / "nope.py"],
                 ["dot", CHAIN, "-o", tmp_path / "g.xyz"], ["show", CHAIN, "--pass", "9"]):
        result = invoke(*args)
        assert result.exit_code == ExitCode.USAGE, args
        assert result.stderr.startswith("error: ") and "Traceback" not in result.stderr
    debug = invoke("show", tmp_path / "nope.py", "--debug")
    assert debug.exit_code == 1 and type(debug.exception).__name__ == "ScenarioError"


def test_check_keeps_files_that_cannot_run_as_data(tmp_path: Path) -> None:
    broken = tmp_path / "broken.py"
    broken.write_text("raise ValueError('nope')\n")
    result = invoke("check", SCENARIOS / "custom_add.py", broken, "--json")
    assert result.exit_code == ExitCode.USAGE
    data = json.loads(result.stdout)  # check's JSON, not a trace
    assert [r["function"] for r in data["results"]] and data["results"][0]["ok"]
    assert "ValueError: nope" in data["cannot_run"][str(broken)]
    assert f"error: {broken}:1: the scenario raised ValueError" in result.stderr
