"""Architecture and hygiene: who imports torch, help without torch, ruff, README commands."""

from __future__ import annotations

import re
import subprocess
import sys

from helpers import ROOT, invoke

NO_TORCH = "import sys; sys.modules['torch'] = None\n"


def run_python(code: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          cwd=ROOT, timeout=120)


def test_model_and_renderers_never_import_torch() -> None:
    proc = run_python(NO_TORCH + "import gradtrace.model, gradtrace.findings, gradtrace.errors\n"
                      "import gradtrace.render.json, gradtrace.render.tree\n"
                      "import gradtrace.render.table, gradtrace.render.report\n"
                      "import gradtrace.render.dot, gradtrace.render.drawing\n"
                      "import gradtrace.render.mermaid, gradtrace.gcpause\n"
                      "print('ok')")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "ok"


def test_help_answers_without_torch() -> None:
    proc = run_python(NO_TORCH + "import sys; sys.argv = ['gradtrace', 'show', '--help']\n"
                      "from gradtrace.cli import main\nmain()")
    assert proc.returncode == 0, proc.stderr
    assert "Examples" in proc.stdout


def test_show_renders_saved_json_without_torch(tmp_path) -> None:
    result = invoke("show", ROOT / "scenarios" / "chain_rule.py", "--json")
    saved = tmp_path / "trace.json"
    saved.write_text(result.stdout)
    proc = run_python(NO_TORCH + f"import sys; sys.argv = ['gradtrace', 'show', {str(saved)!r}]\n"
                      "from gradtrace.cli import main\nmain()")
    assert proc.returncode == 0, proc.stderr
    assert "AccumulateGrad → x" in proc.stdout


def test_version() -> None:
    result = invoke("--version")
    assert result.exit_code == 0 and result.stdout.startswith("gradtrace ")


def test_every_command_is_in_the_readme_and_has_help() -> None:
    from gradtrace.cli import app

    readme = (ROOT / "README.md").read_text()
    for command in app.registered_commands:
        name = command.name or command.callback.__name__
        assert f"gradtrace {name}" in readme, name
        result = invoke(name, "--help")
        assert result.exit_code == 0 and "Examples" in result.stdout


def test_readme_names_the_two_setup_commands_and_ci_runs_the_test_one() -> None:
    readme = (ROOT / "README.md").read_text()
    assert "python3 dev.py demo" in readme and "python3 dev.py test" in readme
    assert "python3 dev.py test" in (ROOT / ".ci" / "run").read_text()


def test_every_scenario_has_a_one_line_docstring() -> None:
    for path in sorted((ROOT / "scenarios").rglob("*.py")):
        first = path.read_text().splitlines()[0]
        assert re.match(r'^""".+', first), path


def test_ruff_clean() -> None:
    proc = subprocess.run([sys.executable, "-m", "ruff", "check", "."], cwd=ROOT,
                          capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout
