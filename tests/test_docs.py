"""The docs are tested: every transcript in the README and docs/ is the real output, every
command line in them exists, the README's findings table is the registry's, CONTRIBUTING's
layer table the layer test's, and every --help example does what it says."""

from __future__ import annotations

import glob
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import xml.etree.ElementTree as ET
from collections.abc import Callable
from pathlib import Path
from typing import Any, NamedTuple

import pytest
import typer
from helpers import GALLERY_FINDINGS, ROOT, SCENARIOS, code_files, gallery_finding, invoke

from gradtrace.cli import app
from gradtrace.findings.registry import CODES
from gradtrace.model.examples import bundled
from gradtrace.model.run_log import read_log

README = (ROOT / "README.md").read_text(encoding="utf-8")
CONTRIBUTING = (ROOT / "CONTRIBUTING.md").read_text(encoding="utf-8")
# every page of documentation, by its path in the repository
DOCS = {str(p.relative_to(ROOT)): p.read_text(encoding="utf-8")
        for p in [ROOT / "README.md", ROOT / "CONTRIBUTING.md",
                  *sorted((ROOT / "docs").glob("*.md"))]}
# every command, in the order their --help examples are read
COMMANDS = ("show", "dot", "check", "diff", "steps", "watch", "examples")


# | `code` | severity | title: doc | `scenario`: example message |
ROWS = re.findall(r"^\| `([a-z-]+)` \| ([a-z ]+) \| (.+?): (.+?) \| `([^`]+)`: (.+) \|$",
                  README, re.MULTILINE)


def test_readme_lists_every_finding_code_as_the_registry_declares_it() -> None:
    listed = {code: (severity, title, doc) for code, severity, title, doc, _, _ in ROWS}
    declared = {c.name: (" or ".join((c.severity, *c.also)), c.title, c.doc)
                for c in CODES.values()}
    assert listed == declared


@pytest.mark.parametrize("row", ROWS, ids=[r[0] for r in ROWS])
def test_readme_examples_are_what_the_gallery_prints(row: tuple[str, ...]) -> None:
    code, _, _, _, scenario, example = row
    assert scenario.split(" ")[0] == "example:" + GALLERY_FINDINGS[code][0].removesuffix(".py")
    message = gallery_finding(code)["message"].replace(f"{ROOT}/", "")
    assert message.startswith(example.replace("\\|", "|").removesuffix(" …"))


def test_readme_transcript_is_the_real_output() -> None:
    block = re.search(r"```console\n\$ (gradtrace show \S+)\n(.*?)```", README, re.DOTALL)
    assert block is not None
    command, shown = block[1], block[2]
    # piped output is 120 columns wide unless COLUMNS says otherwise
    result = invoke(*shlex.split(command)[1:], env={"COLUMNS": None})
    assert result.exit_code == 0, result.stderr
    real = "\n".join(line.rstrip() for line in result.stdout.splitlines())
    assert real == shown.rstrip("\n")


def test_training_loops_steps_transcript_is_the_real_output() -> None:
    block = re.search(r"```console\n\$ (gradtrace steps \S+)\n(.*?)```",
                      DOCS["docs/training-loops.md"], re.DOTALL)
    assert block is not None
    result = invoke(*shlex.split(block[1])[1:], env={"COLUMNS": "120"})
    assert result.exit_code == 0, result.stderr
    real = "\n".join(line.rstrip() for line in result.stdout.splitlines()).strip("\n")
    assert real == "\n".join(line.rstrip() for line in block[2].splitlines()).strip("\n")


def transcripts() -> list[tuple[str, str, str]]:
    """(page, command, what it shows) of every console transcript of gradtrace in the docs
    (docs/distributed.md's torchrun one is run by tests/test_distributed.py)."""
    found = []
    for path, text in DOCS.items():
        for block in re.findall(r"```console\n(.*?)```", text, re.DOTALL):
            first, _, shown = block.partition("\n")
            if first.startswith("$ gradtrace "):
                found.append((path, first.removeprefix("$ "), shown))
    return found


@pytest.mark.parametrize("page, command, shown", transcripts(),
                         ids=[f"{p}: {c}" for p, c, _ in transcripts()])
def test_every_transcript_in_the_docs_is_the_real_output(page: str, command: str, shown: str,
                                                         shared_run: Callable[..., Any]) -> None:
    """As wide as piped output (120 columns); a transcript with "…" lines shows some of the
    lines, in the order the real output has them, each whole."""
    result = shared_run(*shlex.split(command)[1:])
    assert "Traceback" not in result.stderr, result.stderr
    real = "\n".join(line.rstrip() for line in result.stdout.splitlines()).strip("\n")
    lines = "\n".join(line.rstrip() for line in shown.splitlines()).strip("\n")
    if any(line.strip() == "…" for line in lines.splitlines()):
        rest = iter(real.splitlines())  # each shown line found after the one before
        assert all(line in rest for line in lines.splitlines() if line.strip() != "…"), page
    else:
        assert lines == real, page


def command_lines() -> list[tuple[str, list[str]]]:
    """(page, words) of every gradtrace command in a bash or console block of the docs, up to
    a shell's `>` or `|` and the script's own `--` arguments, without its comment."""
    found = []
    for path, text in DOCS.items():
        for block in re.findall(r"```(?:bash|console)\n(.*?)```", text, re.DOTALL):
            for line in block.splitlines():
                line = line.removeprefix("$ ")
                if line.startswith("gradtrace "):
                    words = shlex.split(line, comments=True)
                    for stop in (">", "|", "--"):
                        words = words[:words.index(stop)] if stop in words else words
                    found.append((path, words))
    return found


def test_every_command_line_in_the_docs_names_what_exists() -> None:
    """Each command, option and example a doc's command line names is one gradtrace has."""
    from gradtrace.model.examples import example_file, folder_examples

    commands = dict(typer.main.get_command(app).commands)  # type: ignore[attr-defined]
    lines = command_lines()
    assert len(lines) > 20
    for page, words in lines:
        assert words[1] in commands, (page, words)
        known = {o for p in commands[words[1]].params for o in (*p.opts, *p.secondary_opts)}
        for word in words[2:]:
            if word.startswith("-"):
                assert word.split("=")[0] in known, (page, words, word)
            if word.startswith("example:"):
                assert example_file(word) or folder_examples(word[8:]), (page, word)


def test_links_between_the_docs_point_at_files() -> None:
    for page, text in DOCS.items():
        for target in re.findall(r"\]\(([^)\s]+)\)", text):
            if target.startswith(("http://", "https://", "#")):
                continue
            if target == "docs/profiling.md":  # the profiler's page, written on its branch
                continue
            assert ((ROOT / page).parent / target.split("#")[0]).exists(), (page, target)


def test_the_readme_is_short_and_written_for_users() -> None:
    """At most 250 lines; no history of how gradtrace was made, no internal references (the
    tutorials' seed and code numbers) in any page."""
    assert len(README.splitlines()) <= 250
    for page, text in DOCS.items():
        for words in ("previous session", "this round", "What made it so", "seed 0",
                      "Code 21", "seed Code"):
            assert words not in text, (page, words)


def readme_layers() -> dict[str, tuple[set[str], set[str]]]:
    """CONTRIBUTING's layer table: layer -> (the layers it may import, its modules)."""
    table = CONTRIBUTING[CONTRIBUTING.index("## The layers"):
                         CONTRIBUTING.index("Renderers return values")]
    rows = re.findall(r"^\| (\w+) \| ([^|]*) \| (.*) \|$", table, re.MULTILINE)
    return {layer: ({n.strip() for n in imports.split(",")} - {"—"},
                    set(re.findall(r"\*\*`([\w/]+)`\*\*", modules)))
            for layer, imports, modules in rows if layer != "layer"}


def test_readme_layer_table_is_the_layer_tests_table() -> None:
    """Bottom up, each layer's imports as tests/test_layers.py enforces them, and every module
    of the package in its own layer's row."""
    from test_layers import BELOW, PACKAGE, layer, module_name

    documented = readme_layers()
    assert set(documented) == set(BELOW)
    below: set[str] = set()
    for name, (imports, _) in documented.items():  # bottom up: what it imports comes first
        assert imports == BELOW[name] - {name} and imports <= below, name
        below.add(name)
    for path in code_files():
        module = module_name(path) if path.name != "__init__.py" else "gradtrace.__init__"
        if path.name == "__init__.py" and path.parent != PACKAGE:
            continue
        inner = path.relative_to(PACKAGE).with_suffix("").parts  # capture/naming/names
        stem = "/".join(inner[1:]) if len(inner) > 2 else path.stem  # naming/names
        assert stem in documented[layer(module.removesuffix(".__init__"))][1], \
            f"{path.relative_to(ROOT)} is not in its layer's row of CONTRIBUTING's table"


def test_every_command_is_in_the_readme_and_has_help() -> None:
    for command in app.registered_commands:
        name = command.name or command.callback.__name__
        assert f"gradtrace {name}" in README, name
        result = invoke(name, "--help")
        assert result.exit_code == 0 and "Examples" in result.stdout


def help_examples() -> list[str]:
    """Every example line of the app's and each command's --help, in the order first shown
    (the app's --help repeats three of the commands' examples: each is listed once)."""
    wide = {"COLUMNS": "200"}  # one example a line, however long
    texts = [invoke("--help", env=wide).stdout]
    texts += [invoke(name, "--help", env=wide).stdout
              for name in COMMANDS]
    examples = []
    for text in texts:
        for line in text.splitlines():
            found = re.match(r"^\s*(gradtrace \S.*?)(\s{2,}\S.*)?$", line.strip("│ "))
            if found:
                examples.append(found[1].strip())
    return list(dict.fromkeys(examples))


SVG_NS = "{http://www.w3.org/2000/svg}"


def svg_texts(path: Path) -> list[str]:
    """The words an SVG file draws, asserting it is well-formed SVG."""
    root = ET.parse(path).getroot()
    assert root.tag == f"{SVG_NS}svg", root.tag
    return " ".join(t.text or "" for t in root.iter(f"{SVG_NS}text")).split()


def saved_trace(path: Path, scenario: str) -> bool:
    data = json.loads(path.read_text())
    return data["schema"] == "gradtrace.trace/3" and data["scenario"] == scenario and \
        bool(data["nodes"]) and bool(data["passes"])


def all_ok(out: str, folder: Path) -> bool:
    """A check report's last line says every check is ok."""
    found = re.match(r"(\d+) of (\d+) (ok|passed)", out.strip().splitlines()[-1])
    return found is not None and found[1] == found[2] and int(found[1]) >= 1


def dot_focus(out: str, folder: Path) -> bool:
    near = svg_texts(folder / "near.svg")
    assert invoke("dot", "example:mlp_modules", "-o", folder / "all.svg").exit_code == 0
    return "model.0.weight" in near and "model.2.weight" not in near and \
        "model.2.weight" in svg_texts(folder / "all.svg")  # only what is near it


def junit_all_passed(out: str, folder: Path) -> bool:
    suite = ET.parse(folder / "report.xml").getroot()
    return suite.tag == "testsuite" and int(suite.get("tests", 0)) >= 1 and \
        suite.get("failures") == "0" and not list(suite.iter("failure")) and all_ok(out, folder)


def fused_conv_bn(out: str, folder: Path) -> bool:
    """Run with --json (shared with test_check): every gradcheck done within the timeout and
    passed (gradgradcheck fails: the statistics are kept on ctx), a big input sampled."""
    results = json.loads(out)["results"]
    return len(results) == 5 and all(r["gradcheck"] == "pass" for r in results) and \
        any(r["sampled"] for r in results)


def tensorboard_has_every_step(folder: Path, steps: int) -> bool:
    """The event files in folder hold the loss and the global gradient norm at passes 1 to
    steps, as TensorBoard reads them."""
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    events = EventAccumulator(str(folder))
    events.Reload()
    return all([e.step for e in events.Scalars(tag)] == list(range(1, steps + 1))
               for tag in ("loss", "grad_norm/global"))


def diff_names_the_swap(out: str, folder: Path) -> bool:
    return "different: 1 node(s) changed" in out and \
        "ReluBackward0 → TanhBackward0 in model.1" in out


class Example(NamedTuple):
    code: int  # the exit code it promises
    check: Callable[[str, Path], bool]  # (its stdout, its folder): true if it did what it says
    shell: bool = False  # run by bash with the installed `gradtrace` command, not in-process


# What each --help example promises. An example added to a --help needs a row here.
EXAMPLES: dict[str, Example] = {
    "gradtrace examples": Example(0, lambda out, _: (
        all(f"example:{e.name} " in out for e in bundled()) and "example:chain_rule" in out)),
    "gradtrace show example:chain_rule": Example(0, lambda out, _: (
        "LogBackward0 (z)" in out and "tensors" in out and "pass 1 backward at line 9" in out)),
    "gradtrace dot example:chain_rule -o graph.svg": Example(0, lambda out, folder: (
        out == "" and "x" in svg_texts(folder / "graph.svg"))),
    "gradtrace check example:custom_pow_function": Example(0, lambda out, _: (
        out.strip().splitlines()[-1].startswith("1 of 1 passed"))),
    "gradtrace show example:real/train_args --passes 2 -- --epochs 1": Example(
        0, lambda out, _: "2 passes over the same graph" in out
        and "pass 2 backward at line 39" in out),
    "gradtrace show example:real/test_value_grads::test_sanity_check": Example(
        0, lambda out, _: ("example:real/test_value_grads::test_sanity_check" in out
                           and "AccumulateGrad → x" in out)),
    "gradtrace show example:shopping_apple_tangerine --root result --saved": Example(
        0, lambda out, _: "output result  (picked by name" in out and "saved" in out),
    "gradtrace show example:real/gpt_tiny --by-module": Example(0, lambda out, _: (
        len(out.splitlines()) <= 40 and "│ model.transformer.h.0.mlp.c_fc " in out)),
    "gradtrace show example:chain_rule --json > trace.json": Example(
        0, lambda out, folder: saved_trace(folder / "trace.json", "example:chain_rule"),
        shell=True),  # the installed command, and a shell's redirection
    "gradtrace show example:real/gpt_tiny --profile": Example(0, lambda out, _: (
        "backward cost" in out and "top modules by backward time" in out
        and "backward without profiler" in " ".join(out.split()))),
    "gradtrace show trace.json": Example(0, lambda out, _: (
        out.startswith("scenario example:chain_rule  ·  3 nodes")
        and "LogBackward0 (z)" in out)),
    "gradtrace show example:chain_rule --strict --format github": Example(
        0, lambda out, _: out == ""),  # no finding: no annotation
    "gradtrace dot example:chain_rule": Example(0, lambda out, _: (
        out.startswith("digraph gradtrace {") and 'label="LogBackward0\\n(z)"' in out)),
    "gradtrace dot example:two_paths_add_up --grads -o flow.png": Example(
        0, lambda out, folder: (folder / "flow.png").read_bytes().startswith(b"\x89PNG")),
    "gradtrace dot example:mlp_modules --focus model.0.weight -o near.svg": Example(
        0, dot_focus),
    "gradtrace dot trace.json -o graph.mmd": Example(0, lambda out, folder: (
        (folder / "graph.mmd").read_text().startswith("flowchart TB"))),
    "gradtrace dot example:chain_rule --to mmd": Example(0, lambda out, _: (
        out.startswith("flowchart TB") and "LogBackward0" in out)),
    "gradtrace dot example:mlp_modules --grads -o g.html": Example(0, lambda out, folder: (
        (folder / "g.html").read_text().startswith("<!DOCTYPE html>")
        and "model.0.weight" in (folder / "g.html").read_text())),
    "gradtrace dot example:real/gpt_tiny --heat time -o heat.svg": Example(
        0, lambda out, folder: "backward time ≤" in (folder / "heat.svg").read_text()),
    "gradtrace dot example:explained/log_of_zero --strict -o nan.svg": Example(
        1, lambda out, folder: out == "" and "⚠ first NaN/Inf gradient and value here"
        in " ".join(svg_texts(folder / "nan.svg"))),  # findings on stderr, the NaN marked
    "gradtrace check example:broken --no-gradgrad": Example(1, lambda out, _: (
        out.strip().splitlines()[-1].startswith("0 of 5 ok")),
        shell=True),  # exit 1 through the real process, as CI sees it
    "gradtrace check example:double_backward_cube --junit report.xml": Example(
        0, junit_all_passed),
    "gradtrace check example:real/fused_conv_bn --timeout 60": Example(1, fused_conv_bn),
    "gradtrace diff example:diff/mlp_relu example:diff/mlp_tanh": Example(
        1, diff_names_the_swap),
    "gradtrace show example:diff/mlp_relu --json > before.json": Example(
        0, lambda out, folder: saved_trace(folder / "before.json", "example:diff/mlp_relu")),
    "gradtrace diff before.json example:diff/mlp_relu": Example(0, lambda out, _: (
        out.splitlines()[1].startswith("same: 11 nodes match"))),
    "gradtrace diff before.json example:diff/mlp_tanh -o changes.svg": Example(
        1, lambda out, folder: (diff_names_the_swap(out, folder)
                                and "TanhBackward0" in svg_texts(folder / "changes.svg"))),
    "gradtrace diff before.json example:diff/mlp_tanh --json --rtol 1e-3": Example(
        1, lambda out, _: (json.loads(out)["schema"] == "gradtrace.diff/1"
                           and json.loads(out)["same"] is False)),
    "gradtrace diff before.json example:diff/mlp_tanh --format github": Example(
        1, lambda out, _: re.match(  # the example's file, wherever gradtrace is installed
            r"::error file=/\S+/gradtrace/examples/diff/mlp_tanh\.py,line=9,", out) is not None),
    "gradtrace show example:diff/mlp_relu --profile --json > base.json": Example(
        0, lambda out, folder: "costs" in json.loads((folder / "base.json").read_text())),
    "gradtrace diff base.json example:diff/mlp_relu --profile": Example(
        0, lambda out, _: "backward time per module" in out and "model.0" in out),
    "gradtrace diff base.json base.json --fail-on slower:20%": Example(
        0, lambda out, _: "(+0%)" in out),
    "gradtrace steps example:real/train_args -- --epochs 1": Example(
        0, lambda out, _: "4 passes, 4 optimizer steps" in out and "model.conv1.weight" in out),
    "gradtrace steps example:real/train_args -o steps.svg -- --epochs 1": Example(
        0, lambda out, folder: "model.conv1" in svg_texts(folder / "steps.svg")),
    "gradtrace steps trace.json --by-leaf -o steps.png": Example(
        0, lambda out, folder: (folder / "steps.png").read_bytes().startswith(b"\x89PNG")),
    "gradtrace steps trace.json -o steps.json": Example(0, lambda out, folder: (
        json.loads((folder / "steps.json").read_text())["series"][0]["leaves"] == ["x"])),
    "gradtrace watch example:loops/mlp_30_steps --log run.jsonl": Example(
        0, lambda out, folder: "30 passes over the same graph" in out and read_log(
            (folder / "run.jsonl").read_text()).outcome == "finished"),
    "gradtrace steps run.jsonl --follow": Example(0, lambda out, _: "30 passes" in out),
    "gradtrace watch example:bugs/nan_masked_mean --stop-on nan-value -o nan.json": Example(
        1, lambda out, folder: len(json.loads((folder / "nan.json").read_text())["passes"])
        == 5),
    "gradtrace watch example:loops/mlp_30_steps --tensorboard runs/mlp": Example(
        0, lambda out, folder: "30 passes over the same graph" in out
        and tensorboard_has_every_step(folder / "runs" / "mlp", 30)),
    "gradtrace examples chain_rule": Example(0, lambda out, _: (
        out == (SCENARIOS / "chain_rule.py").read_text())),
}
# Saved by one example, read by later ones.
PRODUCERS = {"trace.json": "gradtrace show example:chain_rule --json > trace.json",
             "base.json": "gradtrace show example:diff/mlp_relu --profile --json > base.json",
             "before.json": "gradtrace show example:diff/mlp_relu --json > before.json",
             "run.jsonl": "gradtrace watch example:loops/mlp_30_steps --log run.jsonl"}
# Too slow to run twice: run with --json, once a session, shared with test_check.
SHARED = {"gradtrace check example:real/fused_conv_bn --timeout 60"}
GRADTRACE = Path(sys.executable).with_name("gradtrace")


def test_help_examples_are_found_and_each_says_what_it_promises() -> None:
    examples = help_examples()
    assert "gradtrace show example:chain_rule --json > trace.json" in examples
    assert "gradtrace dot trace.json -o graph.mmd" in examples
    assert examples == list(EXAMPLES)  # in the order shown, each once
    for needed, producer in PRODUCERS.items():
        assert all(examples.index(producer) < examples.index(e) for e in examples
                   if needed in e.split() and e != producer)


def as_typed(example: str, folder: Path) -> tuple[list[str], Path | None]:
    """`gradtrace ARGS [> FILE]` as bash in folder would run it: the arguments after
    `gradtrace`, `*` expanded, and the file `>` writes stdout to (None without one)."""
    words = shlex.split(example)
    assert words[0] == "gradtrace" and not set("|<;&$") & set(example), example
    into = None
    if ">" in words:
        words, into = words[:words.index(">")], folder / words[words.index(">") + 1]
    return [w for word in words[1:]
            for w in (sorted(glob.glob(word, root_dir=folder)) if "*" in word else [word])
            ], into


def run_example(example: str, folder: Path, shared_run: Callable[..., Any],
                shell: bool = False) -> tuple[int, str]:
    """An example run as typed in folder: in-process, with bash's `>` and `*` done here, or
    (shell) by bash with the installed command. Its exit code and stdout."""
    if shell:
        env = {**os.environ, "PATH": f"{GRADTRACE.parent}{os.pathsep}{os.environ['PATH']}"}
        proc = subprocess.run(["bash", "-c", example], cwd=folder, env=env,
                              capture_output=True, text=True, timeout=300)
        assert "Traceback" not in proc.stderr and "error:" not in proc.stderr, proc.stderr
        return proc.returncode, proc.stdout
    args, into = as_typed(example, folder)
    if example in SHARED:  # the same files, as the example's folder links to them
        result = shared_run(*[ROOT / a if (folder / a).exists() else a for a in args],
                            "--json")
    else:
        cwd = os.getcwd()
        os.chdir(folder)
        try:
            result = invoke(*args)
        finally:
            os.chdir(cwd)
    assert "Traceback" not in result.stderr and "error:" not in result.stderr, result.stderr
    if into is not None:
        into.write_text(result.stdout)
        return result.exit_code, ""
    return result.exit_code, result.stdout


# the fused conv+BN check (~14 s) runs in the slow tier, where test_check reads the same run
@pytest.mark.parametrize("example", [pytest.param(e, marks=pytest.mark.slow) if e in SHARED
                                     else e for e in EXAMPLES])
def test_help_example_does_what_it_says(example: str, tmp_path: Path,
                                        shared_run: Callable[..., Any]) -> None:
    """Each example runs as typed, in an empty folder (a saved trace.json it
    reads is saved first by the example that saves it), with the exit code it promises and
    what else it promises."""
    expected = EXAMPLES[example]
    if expected.shell and not GRADTRACE.exists():
        pytest.skip("the gradtrace command is installed by dev.py")
    if (".svg" in example or ".png" in example) and shutil.which("dot") is None:
        pytest.skip("Graphviz is installed by dev.py")
    for needed, producer in PRODUCERS.items():
        if needed in example.split() and example != producer:
            assert run_example(producer, tmp_path, shared_run)[0] == 0
    code, out = run_example(example, tmp_path, shared_run, shell=expected.shell)
    assert code == expected.code, out[-2000:]
    assert expected.check(out, tmp_path), out[-2000:]


def test_readme_record_example_passes_under_pytest(tmp_path: Path) -> None:
    block = re.search(r"```python\n(import gradtrace, torch\n\ndef test_.*?)```", README,
                      re.DOTALL)
    assert block is not None
    (tmp_path / "test_readme_example.py").write_text(block[1])
    proc = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                           str(tmp_path)], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "1 passed" in proc.stdout
