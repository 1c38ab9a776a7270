"""The docs are tested: the README's transcript, codes and layers, and every --help example."""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest
from helpers import GALLERY_FINDINGS, ROOT, gallery_finding, invoke

from gradtrace.cli import app
from gradtrace.findings.registry import CODES

README = (ROOT / "README.md").read_text(encoding="utf-8")


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
    assert scenario == GALLERY_FINDINGS[code][0]
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


def readme_layers() -> dict[str, tuple[set[str], set[str]]]:
    """The README's layer table: layer -> (the layers it may import, its modules)."""
    table = README[README.index("### The house"):README.index("Renderers return values")]
    rows = re.findall(r"^\| (\w+) \| ([^|]*) \| (.*) \|$", table, re.MULTILINE)
    return {layer: ({n.strip() for n in imports.split(",")} - {"—"},
                    set(re.findall(r"\*\*`(\w+)`\*\*", modules)))
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
    for path in sorted(PACKAGE.rglob("*.py")):
        module = module_name(path) if path.name != "__init__.py" else "gradtrace.__init__"
        if path.name == "__init__.py" and path.parent != PACKAGE:
            continue
        stem = path.stem
        assert stem in documented[layer(module.removesuffix(".__init__"))][1], \
            f"{path.relative_to(ROOT)} is not in its layer's row of the README's table"


def test_every_command_is_in_the_readme_and_has_help() -> None:
    for command in app.registered_commands:
        name = command.name or command.callback.__name__
        assert f"gradtrace {name}" in README, name
        result = invoke(name, "--help")
        assert result.exit_code == 0 and "Examples" in result.stdout


def help_examples() -> list[str]:
    """Every example line of the app's and each command's --help, in the order shown."""
    wide = {"COLUMNS": "200"}  # one example a line, however long
    texts = [invoke("--help", env=wide).stdout]
    texts += [invoke(name, "--help", env=wide).stdout
              for name in ("show", "dot", "check", "diff")]
    examples = []
    for text in texts:
        for line in text.splitlines():
            found = re.match(r"^\s*(gradtrace \S.*?)(\s{2,}\S.*)?$", line.strip("│ "))
            if found:
                examples.append(found[1].strip())
    return examples


def test_help_examples_are_found() -> None:
    examples = help_examples()
    assert "gradtrace show scenarios/chain_rule.py --json > trace.json" in examples
    assert "gradtrace dot trace.json -o graph.mmd" in examples
    assert len(examples) >= 12


@pytest.mark.skipif(not Path(sys.executable).with_name("gradtrace").exists(),
                    reason="the gradtrace command is installed by dev.py")
def test_help_examples_run(tmp_path: Path) -> None:
    """Each example runs as typed, in a folder with the scenarios, in the order shown (the
    saved trace.json of `show` is read by `dot`): no error, no traceback."""
    (tmp_path / "scenarios").symlink_to(ROOT / "scenarios")
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"}
    for example in help_examples():
        proc = subprocess.run(["bash", "-c", example], cwd=tmp_path, env=env,
                              capture_output=True, text=True, timeout=300)
        # exit 1 is a finding: `check scenarios/broken/` is meant to find the bugs
        assert proc.returncode in (0, 1), f"{example}: {proc.stderr}"
        assert "error:" not in proc.stderr and "Traceback" not in proc.stderr, example
    assert (tmp_path / "graph.svg").stat().st_size > 0 and (tmp_path / "report.xml").exists()


def test_readme_record_example_passes_under_pytest(tmp_path: Path) -> None:
    block = re.search(r"```python\n(import gradtrace, torch\n\ndef test_.*?)```", README,
                      re.DOTALL)
    assert block is not None
    (tmp_path / "test_readme_example.py").write_text(block[1])
    proc = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                           str(tmp_path)], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "1 passed" in proc.stdout
