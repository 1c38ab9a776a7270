"""The examples gradtrace ships: `gradtrace examples`, and example:NAME wherever a target goes."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from helpers import SCENARIOS, as_read, invoke

import gradtrace
from gradtrace.check.discover import targets_of
from gradtrace.model.examples import FOLDERS, PATH, PREFIX, bundled, folder_examples
from gradtrace.model.labels import label_file


def test_every_example_file_is_listed_once_with_its_summary() -> None:
    names = [e.name for e in bundled()]
    files = sorted(p.relative_to(SCENARIOS).with_suffix("").as_posix()
                   for p in SCENARIOS.rglob("*.py"))
    assert sorted(names) == files and len(set(names)) == len(names)
    assert all(e.summary and "\n" not in e.summary for e in bundled())
    listed = _listed(invoke("examples").stdout)
    assert sorted(name for name, _, _ in listed) == files  # each once
    lines = {name: line for name, _, line in listed}
    for example in bundled():
        assert lines[example.name].endswith(f"  {example.summary}")


def _listed(listing: str) -> list[tuple[str, int | None, str]]:
    """The listing's examples in order: (name, its number on the path or None, its line)."""
    found = []
    for line in listing.splitlines():
        words = line.split()
        if not line.startswith("  ") or not words:
            continue
        number = int(words[0].removesuffix(".")) if words[0].endswith(".") else None
        label = words[1] if number is not None else words[0]
        assert label.startswith(PREFIX), line
        found.append((label.removeprefix(PREFIX), number, line))
    return found


def test_every_top_level_example_is_on_the_learning_path_exactly_once() -> None:
    """PATH declares the teaching order: a new top-level example cannot be left out of it."""
    top = sorted(p.stem for p in SCENARIOS.glob("*.py"))
    assert sorted(PATH) == top and len(set(PATH)) == len(PATH)
    assert [e.name for e in bundled() if e.folder == ""] == list(PATH)


def test_the_listing_opens_with_the_numbered_learning_path() -> None:
    listing = invoke("examples").stdout
    paragraphs = listing.split("\n\n")
    assert paragraphs[1].startswith("The learning path: the tutorials' lessons in teaching order")
    listed = _listed(listing)
    path = listed[:len(PATH)]
    assert [name for name, _, _ in path] == list(PATH)
    assert [number for _, number, _ in path] == list(range(1, len(PATH) + 1))
    assert all(number is None for _, number, _ in listed[len(PATH):])
    assert path[0][2].startswith("   1. example:sigmoid_builtin ")
    # the tutorials' five lessons first: requires_grad; grad_fn and next_functions; leaves
    # and retain_grad; the chain rule; hooks
    assert list(PATH[:5]) == ["sigmoid_builtin", "print_grad_graph", "retain_grad",
                              "chain_rule", "tensor_hook"]
    numbers = {name: number for name, number, _ in path}
    assert numbers["chain_rule"] <= 5 and numbers["retain_grad"] <= 5
    assert numbers["backward_across_detach"] > numbers["detach_cuts_graph"] > 10
    assert numbers["double_backward_cube"] > numbers["second_derivative"] > \
        numbers["custom_pow_function"] > numbers["tensor_hook"]


def test_beginner_folders_come_before_the_advanced_ones() -> None:
    listing = invoke("examples").stdout
    headings = [p.split("\n")[0].partition("/:")[0] for p in listing.split("\n\n")[2:]]
    assert headings == [f for f in FOLDERS if f]
    order = {f: i for i, f in enumerate(FOLDERS)}
    assert order[""] == 0
    for beginner in ("no_graph", "explained"):
        for advanced in ("real", "broken", "distributed", "bugs", "profile"):
            assert order[beginner] < order[advanced], (beginner, advanced)
    assert all(about and "\n" not in about for about in FOLDERS.values())


def test_every_folder_of_examples_is_described_and_listed_under_its_heading() -> None:
    folders = {p.relative_to(SCENARIOS).as_posix() for p in SCENARIOS.rglob("*")
               if p.is_dir() and p.name != "__pycache__"}
    assert folders | {""} == set(FOLDERS)
    listing = invoke("examples").stdout
    for folder in folders:
        assert f"\n{folder}/: {FOLDERS[folder]}\n" in listing


def test_no_internal_references_in_what_the_examples_say() -> None:
    for example in bundled():
        assert "seed 0" not in example.summary and "Code " not in example.summary, example


@pytest.mark.parametrize("name", ["nope", "../../etc/passwd", "/etc/passwd", "chain_rule/..",
                                  "", "broken/../chain_rule", "..", "real/../../README"])
def test_an_unknown_example_is_exit_2_with_how_to_list_them(name: str) -> None:
    result = invoke("show", PREFIX + name)
    assert result.exit_code == 2 and result.stdout == ""
    assert f"error: {PREFIX}{name}: gradtrace has no example of that name" in result.stderr
    assert "hint: `gradtrace examples` lists them" in result.stderr
    assert "Traceback" not in result.stderr
    shown = invoke("examples", name) if name else None
    assert shown is None or (shown.exit_code == 2 and "no example" in shown.stderr)


def test_a_folder_of_examples_names_some_of_its_examples() -> None:
    result = invoke("show", "example:broken")
    assert result.exit_code == 2
    assert "example:broken is a folder of examples" in result.stderr
    assert "example:broken/mul_ignores_grad_output" in result.stderr


def test_an_example_runs_as_its_file_does_under_its_own_name() -> None:
    by_name = json.loads(invoke("show", "example:chain_rule", "--json").stdout)
    by_file = json.loads(invoke("show", SCENARIOS / "chain_rule.py", "--json").stdout)
    assert by_name["scenario"] == "example:chain_rule"
    assert by_file["scenario"] == str(SCENARIOS / "chain_rule.py")
    assert by_name["nodes"] == by_file["nodes"] and by_name["tensors"] == by_file["tensors"]
    # the file's name works too, and is shown as the example's name
    assert json.loads(invoke("show", "example:chain_rule.py", "--json").stdout)[
        "scenario"] == "example:chain_rule"


def test_an_examples_function_and_its_file_for_findings() -> None:
    """example:FILE::FUNC calls the function; a finding's file is the example's real file
    (GitHub annotations and a check's line read it)."""
    result = invoke("show", "example:real/test_value_grads::test_sanity_check", "--json")
    assert result.exit_code == 0, result.stderr
    assert json.loads(result.stdout)["scenario"] == \
        "example:real/test_value_grads::test_sanity_check"
    assert label_file("example:real/test_value_grads::test_sanity_check") == \
        str(SCENARIOS / "real" / "test_value_grads.py")
    stopped = invoke("show", "example:real/raises_after_two_passes", "--format", "github")
    assert stopped.exit_code == 2
    assert f"file={SCENARIOS / 'real' / 'raises_after_two_passes.py'},line=24" in stopped.stdout


def test_check_takes_examples_and_folders_of_them() -> None:
    result = invoke("check", "example:broken", "example:custom_pow_function", "--json",
                    "--no-gradgrad")
    report = json.loads(result.stdout)
    assert result.exit_code == 1
    assert {r["scenario"] for r in report["results"]} >= {
        PREFIX + e.name for e in folder_examples("broken")} - {
        "example:broken/custom_function_undefined_ctx"} | {"example:custom_pow_function"}
    # a test file's example stands for its test functions, as a test file does
    assert targets_of(["example:real/test_value_grads"]).targets == [
        "example:real/test_value_grads::test_sanity_check",
        "example:real/test_value_grads::test_more_ops"]


def test_examples_prints_an_examples_code() -> None:
    result = invoke("examples", "real/gpt_tiny")
    assert result.exit_code == 0
    assert result.stdout == (SCENARIOS / "real" / "gpt_tiny.py").read_text()
    assert invoke("examples", "example:chain_rule").stdout == \
        (SCENARIOS / "chain_rule.py").read_text()


def test_an_output_never_overwrites_the_example(tmp_path: Path) -> None:
    before = (SCENARIOS / "chain_rule.py").read_text()
    result = invoke("show", "example:chain_rule", "-o", SCENARIOS / "chain_rule.py")
    assert result.exit_code == 2 and "it is an input" in result.stderr
    assert (SCENARIOS / "chain_rule.py").read_text() == before


def test_the_python_api_runs_an_example() -> None:
    view = gradtrace.load_scenario("example:two_paths_add_up")
    assert view.trace.scenario == "example:two_paths_add_up"
    assert [t.name for t in view.trace.tensors][:1] == ["x"]


def test_an_installed_example_names_its_tensors_and_lines(tmp_path: Path) -> None:
    """Installed, an example lives in site-packages: its own functions' locals still name the
    tensors and its lines still label the nodes (files of packages below it do not)."""
    folder = tmp_path / "venv" / "lib" / "site-packages" / "gradtrace" / "examples" / "real"
    folder.mkdir(parents=True)
    script = folder / "train_args.py"
    script.write_text((SCENARIOS / "real" / "train_args.py").read_text())
    steps = invoke("steps", script, "--", "--epochs", "1")
    assert steps.exit_code == 0, steps.stderr
    assert "model.conv1.weight" in steps.stdout  # named from main()'s locals
    trace = as_read(invoke("show", script, "--json", "--", "--epochs", "1").stdout)
    assert any(n["source"] and n["source"]["file"] == str(script) for n in trace["nodes"])
