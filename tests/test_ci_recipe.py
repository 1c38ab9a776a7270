"""docs/ci-github-actions.md: its workflow parses, and its gradtrace commands and snapshot
test run as written, on a copy of a small repository laid out as the recipe says."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from helpers import ROOT, SCENARIOS, needs_dot
from plain_python import forwarding_command

RECIPE = (ROOT / "docs" / "ci-github-actions.md").read_text()
GRADTRACE = Path(sys.executable).with_name("gradtrace")


def block(language: str) -> str:
    found = re.search(rf"```{language}\n(.*?)```", RECIPE, re.DOTALL)
    assert found is not None, language
    return found[1]


def workflow_commands() -> list[str]:
    steps = yaml.safe_load(block("yaml"))["jobs"]["gradtrace"]["steps"]
    runs = [line.strip() for step in steps for line in step.get("run", "").splitlines()]
    return [line for line in runs if line.startswith(("gradtrace ", "pytest "))]


def test_the_workflow_parses_and_keeps_the_picture() -> None:
    workflow = yaml.safe_load(block("yaml"))
    steps = workflow["jobs"]["gradtrace"]["steps"]
    upload = next(s for s in steps if s.get("uses", "").startswith("actions/upload-artifact"))
    assert upload["if"] == "always()" and "graph-diff.svg" in upload["with"]["path"]
    assert [c.split()[:2] for c in workflow_commands()] == [
        ["gradtrace", "check"], ["pytest", "tests/test_graph_snapshots.py"],
        ["gradtrace", "diff"], ["gradtrace", "diff"]]
    assert "docs/ci-github-actions.md" in (ROOT / "README.md").read_text()


def test_the_workflow_installs_the_wheel_dev_py_builds() -> None:
    """gradtrace is not on the package index: `pip install gradtrace` installed nothing. The
    workflow installs the wheel the recipe says to commit, named as `dev.py wheel` names it."""
    from gradtrace import __version__

    wheel = f"gradtrace-{__version__}-py3-none-any.whl"
    steps = yaml.safe_load(block("yaml"))["jobs"]["gradtrace"]["steps"]
    install = next(s for s in steps if s.get("name") == "Install")["run"]
    pips = [line.split() for line in install.splitlines() if line.strip().startswith("pip ")]
    assert ["pip", "install", f"ci/{wheel}", "pytest"] in pips
    assert not any("gradtrace" in words for words in pips)  # no package of that name
    assert f"`dist/{wheel}`" in RECIPE and "python3 dev.py wheel" in RECIPE
    assert "python3 dev.py wheel" in (ROOT / "dev.py").read_text()


def run(command: str, repo: Path) -> subprocess.CompletedProcess[str]:
    """The command run by bash in repo, with the venv's pytest and a `gradtrace` forked as
    run_gradtrace's runs are (seconds of imports saved a command)."""
    path = os.pathsep.join([str(forwarding_command().parent), str(GRADTRACE.parent),
                            os.environ["PATH"]])
    env = {**os.environ, "PATH": path}
    return subprocess.run(["bash", "-c", command], cwd=repo, env=env, capture_output=True,
                          text=True, timeout=600)


@needs_dot
@pytest.mark.slow  # a repository made, its snapshot test and every command run: ~25 s
@pytest.mark.skipif(not GRADTRACE.exists(), reason="the gradtrace command is installed by dev.py")
def test_the_recipe_runs_on_a_repository_laid_out_as_it_says(tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    (repo / "scenarios").mkdir(parents=True)
    (repo / "tests").mkdir()
    (repo / "graphs").mkdir()
    shutil.copy(SCENARIOS / "diff" / "mlp_relu.py", repo / "scenarios" / "model.py")
    shutil.copy(SCENARIOS / "custom_pow_function.py", repo / "scenarios")
    (repo / "tests" / "test_graph_snapshots.py").write_text(block("python"))
    made = run("gradtrace show scenarios/model.py --json > graphs/model.json", repo)
    assert made.returncode == 0, made.stderr
    update = run("pytest -q -p no:cacheprovider --gradtrace-update "
                 "tests/test_graph_snapshots.py", repo)
    assert update.returncode == 0, update.stdout + update.stderr
    assert (repo / "tests" / "__gradtrace_snapshots__" / "test_graph_snapshots"
            / "test_mlp_graph.json").exists()
    for command in workflow_commands():  # nothing changed: every step passes
        result = run(command.replace("pytest ", "pytest -p no:cacheprovider ", 1), repo)
        assert result.returncode == 0, f"{command}: {result.stdout}{result.stderr}"
    assert (repo / "gradcheck.xml").exists() and (repo / "graph-diff.svg").exists()
    # the model changes: the diff steps fail, with an annotation naming both ops
    model = repo / "scenarios" / "model.py"
    model.write_text(model.read_text().replace("nn.ReLU()", "nn.Tanh()"))
    annotated = run(workflow_commands()[2], repo)
    assert annotated.returncode == 1
    assert annotated.stdout.startswith("::error file=")
    assert "ReluBackward0 → TanhBackward0 in model.1" in annotated.stdout
    drawn = run(workflow_commands()[3], repo)
    assert drawn.returncode == 1 and "ReluBackward0 → TanhBackward0" in \
        (repo / "graph-diff.svg").read_text()
