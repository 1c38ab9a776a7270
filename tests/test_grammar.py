"""One grammar: an option means the same in every command, as docs/guide.md's options table says;
combinations that cannot work are refused, naming both; --help is plain and fits 80 columns."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
import typer
from helpers import SCENARIOS, invoke
from test_docs import COMMANDS, DOCS, help_examples

from gradtrace.cli import app

GUIDE = DOCS["docs/guide.md"]  # the options table
CHAIN = SCENARIOS / "chain_rule.py"
LOOP = SCENARIOS / "real" / "train_args.py"
CELL = re.compile(r"(?<!\\)\|")  # a table cell ends at an unescaped |
NAMES = re.compile(r"(?<![\w-])(--?[a-z][a-z-]*)")


class Row:
    """A row of the options table (docs/guide.md)."""

    def __init__(self, line: str) -> None:
        cells = [c.strip().replace("\\|", "|") for c in CELL.split(line.strip())[1:-1]]
        first = re.findall(r"`([^`]+)`", cells[0])
        self.names = {n for f in first for n in NAMES.findall(f)}
        words = first[-1].split()
        self.metavar = words[1] if len(words) == 2 else None
        self.cells = dict(zip(COMMANDS, cells[2:], strict=True))

    def has(self, command: str) -> bool:
        assert self.cells[command][0] in "✓—", self.cells[command]
        return self.cells[command].startswith("✓")

    def names_in(self, command: str) -> set[str]:
        """The row's names, and those its command's cell adds (`--file`, `--by-leaf`)."""
        extra = {n for code in re.findall(r"`([^`]+)`", self.cells[command])
                 for n in NAMES.findall(code)}
        return self.names | extra


def table() -> list[Row]:
    section = GUIDE[GUIDE.index("## Options: one grammar"):]
    section = section[:section.index("\n\n", section.index("| option |"))]
    lines = [line for line in section.splitlines() if line.startswith("| `")]
    return [Row(line) for line in lines]


def commands() -> dict[str, Any]:
    group = typer.main.get_command(app)
    return dict(group.commands)  # type: ignore[attr-defined]


def options(command: Any) -> list[Any]:
    """A command's options as --help shows them (hidden ones are old spellings)."""
    ctx = command.make_context(command.name, ["--help"], resilient_parsing=True)
    return [p for p in command.get_params(ctx)
            if p.param_type_name == "option" and not p.hidden and "--help" not in p.opts]


def row_of(rows: list[Row], param: Any) -> Row:
    long = [o for o in param.opts if o.startswith("--")][0]
    found = [r for r in rows if long in r.names]
    assert len(found) == 1, f"{long} is in {len(found)} rows of the options table"
    return found[0]


def test_options_table_is_every_commands_options() -> None:
    """Each command's every option is in the table, ✓ in its column, with the table's
    metavar; each ✓ is an option the command has."""
    rows = table()
    assert len(rows) >= 30
    for name, command in commands().items():
        ctx = command.make_context(name, ["--help"], resilient_parsing=True)
        declared = options(command)
        for param in declared:
            row = row_of(rows, param)
            assert row.has(name), f"{name} {param.opts}: — in the table"
            assert set(param.opts + param.secondary_opts) <= row.names_in(name), param.opts
            assert param.display_type_rich(ctx) == row.metavar, (name, param.opts)
        present = {row_of(rows, p) for p in declared}
        missing = [sorted(r.names) for r in rows if r.has(name) and r not in present]
        assert not missing, f"{name} lacks {missing}, ✓ in the table"


def test_each_commands_help_lists_the_tables_options() -> None:
    """The same, read from what a user reads: `gradtrace COMMAND --help`."""
    rows = table()
    for name in COMMANDS:
        text = invoke(name, "--help", env={"COLUMNS": "300"}).stdout
        listed = set(re.findall(r"^│ (--[a-z][a-z-]*)", text, re.MULTILINE)) - {"--help"}
        assert listed == {sorted(n for n in r.names if n.startswith("--"))[0]
                          for r in rows if r.has(name)}, name


def test_shared_options_say_the_same_in_every_command() -> None:
    """An option declared once means the same, word for word, wherever it is."""
    helps: dict[str, set[str]] = {}
    for name, command in commands().items():
        for param in options(command):
            long = [o for o in param.opts if o.startswith("--")][0]
            if long in ("--strict", "--fail-on", "--root", "--no-backward", "--passes",
                        "--pass", "--debug") or (long == "--timeout" and name != "check"):
                helps.setdefault(long, set()).add(param.help)
    assert set(helps) >= {"--strict", "--fail-on", "--timeout", "--passes", "--debug"}
    assert {k: len(v) for k, v in helps.items()} == {k: 1 for k in helps}


@pytest.mark.parametrize("command", ["", *COMMANDS])
def test_help_shows_no_type_labels_and_no_braces(command: str) -> None:
    text = invoke(*command.split(), "--help", env={"COLUMNS": "80"}).stdout
    assert not re.search(r"<(bool|str|int|float|path|list)", text), text
    usage = text[text.index("Usage:"):].splitlines()[0]
    assert "{" not in usage and "}" not in usage, usage


def test_help_examples_fit_80_columns() -> None:
    """Each example (and what it says about itself) is on one line of an 80-column --help."""
    lines = [line.strip(" │") for command in ["", *COMMANDS]
             for line in invoke(*command.split(), "--help",
                                env={"COLUMNS": "80"}).stdout.splitlines()]
    for example in help_examples():
        assert any(line.startswith(example) for line in lines), example
    wide = [line.strip(" │") for command in ["", *COMMANDS]
            for line in invoke(*command.split(), "--help",
                               env={"COLUMNS": "200"}).stdout.splitlines()
            if line.strip(" │").startswith("gradtrace ")]
    assert wide and set(wide) <= set(lines)


def test_output_is_an_output_file_in_show(tmp_path: Path) -> None:
    """`show --output report.txt` writes the report (it was a hidden alias of --root:
    "no tensor of that name"); -o FILE.json writes the trace."""
    report = tmp_path / "report.txt"
    result = invoke("show", CHAIN, "--output", report)
    assert result.exit_code == 0, result.stderr
    assert result.stdout == "" and "LogBackward0 (z)" in report.read_text()
    assert invoke("show", CHAIN, "-o", tmp_path / "t.json").exit_code == 0
    assert json.loads((tmp_path / "t.json").read_text())["schema"] == "gradtrace.trace/3"


def test_show_output_never_overwrites_the_scenario(tmp_path: Path) -> None:
    scenario = tmp_path / "s.py"
    scenario.write_text(CHAIN.read_text())
    result = invoke("show", scenario, "-o", scenario)
    assert result.exit_code == 2 and "it is an input" in result.stderr
    assert scenario.read_text() == CHAIN.read_text()


@pytest.mark.parametrize("args", [
    ["show", CHAIN], ["check", CHAIN], ["diff", CHAIN, CHAIN], ["steps", CHAIN]],
    ids=lambda a: a[0])
def test_format_github_with_json_is_refused_naming_both(args: list[Any]) -> None:
    result = invoke(*args, "--format", "github", "--json")
    assert result.exit_code == 2, result.stdout
    assert "--format github and --json" in result.stderr and result.stdout == ""


@pytest.mark.parametrize("args", [
    ["show", CHAIN], ["check", CHAIN], ["diff", CHAIN, CHAIN], ["steps", CHAIN]],
    ids=lambda a: a[0])
def test_format_chooses_how_findings_are_printed_everywhere(args: list[Any]) -> None:
    result = invoke(*args, "--format", "svg")
    assert result.exit_code == 2
    assert "use text or github" in result.stderr and "suffix of -o FILE" in result.stderr


@pytest.mark.parametrize("args, both", [
    (["--json", "-o", "report.txt"], "--json and -o report.txt"),
    (["--format", "github", "-o", "t.json"], "--format github and -o t.json")])
def test_show_output_suffix_and_what_is_printed_must_agree(args: list[str], both: str,
                                                           tmp_path: Path) -> None:
    result = invoke("show", CHAIN, *[tmp_path / a if "." in a else a for a in args])
    assert result.exit_code == 2 and "disagree" in result.stderr
    assert both.split(" -o ")[0] in result.stderr
    assert not list(tmp_path.iterdir())


@pytest.mark.parametrize("flag", ["--to", "--format"])
def test_dot_export_format_and_suffix_must_agree(flag: str, tmp_path: Path) -> None:
    """`dot --format mmd -o x.svg` wrote Mermaid into an .svg file."""
    out = tmp_path / "x.svg"
    result = invoke("dot", CHAIN, flag, "mmd", "-o", out)
    assert result.exit_code == 2
    assert f"--to mmd and -o {out} disagree: the suffix .svg means svg" in result.stderr
    assert not out.exists()


def test_dot_to_names_the_format_on_stdout_and_for_a_device() -> None:
    assert invoke("dot", CHAIN, "--to", "mmd").stdout.startswith("flowchart TB")
    assert invoke("dot", CHAIN, "--to", "dot", "-o", "/dev/null").exit_code == 0


def test_dot_format_is_the_old_name_of_to_for_one_release() -> None:
    """Scripts that say `dot --format mmd` keep working, and are told the new name."""
    result = invoke("dot", CHAIN, "--format", "mmd")
    assert result.exit_code == 0 and result.stdout.startswith("flowchart TB")
    assert "`dot --format mmd` is now `--to mmd`" in result.stderr
    assert "--format" not in invoke("dot", "--help").stdout
    github = invoke("dot", CHAIN, "--format", "github")
    assert github.exit_code == 2 and "dot draws the graph" in github.stderr


@pytest.fixture(scope="module")
def saved(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("saved") / "trace.json"
    result = invoke("show", CHAIN, "--json")
    assert result.exit_code == 0, result.stderr
    path.write_text(result.stdout)
    return path


@pytest.mark.parametrize("args, named", [
    (["show", "{saved}", "--order", "2"], "--order 2"),
    (["show", "{saved}", "--passes", "2"], "--passes 2"),
    (["show", "{saved}", "--timeout", "5"], "--timeout 5"),
    (["dot", "{saved}", "--no-backward"], "--no-backward"),
    (["diff", "{saved}", "{saved}", "--timeout", "5"], "--timeout 5"),
    (["steps", "{saved}", "--passes", "1"], "--passes 1")])
def test_a_saved_trace_refuses_what_it_cannot_honour(args: list[str], named: str,
                                                     saved: Path) -> None:
    """A saved trace is read, not run: --order 2, --passes, --timeout were silently ignored."""
    result = invoke(*[str(saved) if a == "{saved}" else a for a in args])
    assert result.exit_code == 2, result.stdout
    assert f"{named} cannot apply to {saved}" in result.stderr
    assert "saved trace" in result.stderr and "Traceback" not in result.stderr


def test_a_saved_trace_still_takes_what_it_can(saved: Path) -> None:
    assert invoke("show", saved, "--pass", "1", "--saved").exit_code == 0
    assert invoke("show", saved, "--passes", "all").exit_code == 0  # the default, said


@pytest.mark.parametrize("args, again", [
    (["show", "train.py", "--lr", "0.1"], "gradtrace show train.py -- --lr 0.1"),
    (["dot", "train.py", "-o", "g.svg", "--lr=0.1"], "gradtrace dot train.py -o g.svg -- --lr=0.1"),
    (["steps", "train.py", "--epochs", "2"], "gradtrace steps train.py -- --epochs 2")])
def test_an_unknown_option_hints_at_the_scripts_arguments(args: list[str], again: str) -> None:
    result = invoke(*args)
    assert result.exit_code == 2
    text = " ".join(result.stderr.replace("│", " ").split())
    assert "put the script's arguments after `--`" in text and again in text, text
    assert "Possible options" not in text  # --lr is not a misspelt --all


def test_an_unknown_option_of_a_command_without_script_arguments_says_only_that() -> None:
    result = invoke("check", "a.py", "--lr", "0.1")
    assert result.exit_code == 2 and "No such option: --lr" in result.stderr
    assert "after `--`" not in result.stderr
    # diff runs scripts with their arguments after --, as show does, and says so
    assert "after `--`" in invoke("diff", "a.py", "b.py", "--lr", "0.1").stderr


def test_check_prints_failed_checks_as_github_annotations() -> None:
    broken = SCENARIOS / "broken" / "mul_ignores_grad_output.py"
    result = invoke("check", broken, "--format", "github", "--no-gradgrad")
    assert result.exit_code == 1, result.stderr
    assert result.stdout.startswith(f"::error file={broken},line=")
    assert "title=gradtrace check Mul::" in result.stdout and "failed" in result.stdout


def test_steps_prints_json_and_refuses_what_it_does_not_look_for(saved: Path,
                                                                  tmp_path: Path) -> None:
    result = invoke("steps", saved, "--json")
    assert result.exit_code == 0, result.stderr
    assert json.loads(result.stdout)["series"][0]["leaves"] == ["x"]
    assert invoke("steps", saved, "-o", tmp_path / "s.json").exit_code == 0
    assert json.loads((tmp_path / "s.json").read_text()) == json.loads(result.stdout)
    other = invoke("steps", saved, "--fail-on", "nan-gradient")
    assert other.exit_code == 2 and "this command does not look for it" in other.stderr
    both = invoke("steps", saved, "--json", "-o", tmp_path / "s.svg")
    assert both.exit_code == 2 and "--json and -o" in both.stderr


def test_steps_strict_and_fail_on_exit_1_on_a_health_finding() -> None:
    loop = SCENARIOS / "loops" / "forgot_zero_grad.py"  # a grad-accumulating warning
    assert invoke("steps", loop).exit_code == 0
    assert invoke("steps", loop, "--fail-on", "grad-accumulating").exit_code == 1
    assert invoke("steps", loop, "--strict").exit_code == 1


@pytest.mark.parametrize("command", ["show", "dot", "steps", "check", "diff"])
def test_a_command_that_can_exit_1_says_so_in_its_help(command: str) -> None:
    helped = " ".join(invoke(command, "--help").stdout.split())
    assert "Exit codes: 0" in helped and ", 1 " in helped[helped.index("Exit codes:"):]


def test_the_docs_have_no_old_spellings() -> None:
    for path, text in DOCS.items():
        assert "dot --format" not in text.replace("`dot --format FMT` still works", ""), path


def test_a_mistyped_option_gets_a_did_you_mean_and_the_scripts_way_too() -> None:
    result = invoke("show", "example:chain_rule", "--pases", "3")
    text = " ".join(result.stderr.replace("│", " ").split())
    assert result.exit_code == 2
    assert "No such option: --pases (did you mean --passes or --pass?)" in text, text
    assert "put the script's arguments after `--`" in text
    text = " ".join(invoke("show", "example:chain_rule", "--lr", "3").stderr
                    .replace("│", " ").split())
    assert "No such option: --lr. If" in text  # nothing close: no guess
