"""Record once, look many times: -o FILE says what it wrote (for a trace, the commands that
read it without a re-run); a slow script's run ends with the one command that records it."""

from __future__ import annotations

from pathlib import Path

import pytest
from helpers import SCENARIOS, invoke

import gradtrace.cli.inputs as inputs

CHAIN = SCENARIOS / "chain_rule.py"


def test_each_output_file_is_said_once_written(tmp_path: Path) -> None:
    trace = invoke("show", CHAIN, "-o", tmp_path / "t.json")
    assert trace.exit_code == 0 and trace.stdout == ""
    assert f"wrote {tmp_path / 't.json'}: `gradtrace show {tmp_path / 't.json'}`" in trace.stderr
    # and the saved trace is read, not run: the same report
    assert invoke("show", tmp_path / "t.json").stdout == invoke("show", CHAIN).stdout
    picture = invoke("dot", CHAIN, "-o", tmp_path / "g.dot")
    assert picture.stderr.strip() == f"wrote {tmp_path / 'g.dot'}"
    quiet = invoke("dot", CHAIN, "-q", "-o", tmp_path / "h.dot")
    assert quiet.stderr == ""


def test_a_slow_script_s_report_ends_with_the_command_that_records_it(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(inputs, "SLOW_RUN", 0.0)  # every run is slow
    shown = invoke("show", SCENARIOS / "real" / "train_args.py", "--", "--epochs", "1")
    assert shown.exit_code == 0, shown.stderr
    assert "record it once with `gradtrace show " in shown.stderr
    assert "train_args.py -o train_args.json -- --epochs 1`, then give train_args.json to " \
        "show, steps, dot or diff" in shown.stderr
    assert "record it once" not in shown.stdout  # the report itself stays as it is
    # what is written as a trace already is the record: nothing to say
    assert "record it once" not in invoke("show", CHAIN, "--json").stderr


def test_a_fast_script_says_nothing_more() -> None:
    assert invoke("show", CHAIN).stderr == ""
