"""Architecture and hygiene: who imports torch, help without torch, README and CI commands
(ruff and mypy are steps of .ci/run)."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

from helpers import ROOT, invoke

NO_TORCH = "import sys; sys.modules['torch'] = None\n"


def run_python(code: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          cwd=ROOT, timeout=120)


def test_model_findings_renderers_api_and_cli_never_import_torch() -> None:
    torch_free = sorted(
        ".".join(p.relative_to(ROOT).with_suffix("").parts).removesuffix(".__init__")
        for folder in ("model", "findings", "render", "cli")
        for p in (ROOT / "gradtrace" / folder).rglob("*.py"))
    torch_free += ["gradtrace", "gradtrace.api", "gradtrace.errors", "gradtrace.gcpause"]
    proc = run_python(NO_TORCH + "".join(f"import {m}\n" for m in torch_free) + "print('ok')")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "ok"
    assert "gradtrace.render.formats" in torch_free and "gradtrace.cli.show" in torch_free


def test_help_answers_without_torch() -> None:
    proc = run_python(NO_TORCH + "import sys; sys.argv = ['gradtrace', 'show', '--help']\n"
                      "from gradtrace.cli import main\nmain()")
    assert proc.returncode == 0, proc.stderr
    assert "Examples" in proc.stdout


def test_show_renders_saved_json_without_torch(tmp_path) -> None:
    result = invoke("show", ROOT / "gradtrace" / "examples" / "chain_rule.py", "--json")
    saved = tmp_path / "trace.json"
    saved.write_text(result.stdout)
    proc = run_python(NO_TORCH + f"import sys; sys.argv = ['gradtrace', 'show', {str(saved)!r}]\n"
                      "from gradtrace.cli import main\nmain()")
    assert proc.returncode == 0, proc.stderr
    assert "AccumulateGrad → x" in proc.stdout


def test_version() -> None:
    result = invoke("--version")
    assert result.exit_code == 0 and result.stdout.startswith("gradtrace ")


def ci_steps() -> list[str]:
    return [line.split(maxsplit=1)[1] for line in (ROOT / ".ci" / "run").read_text().splitlines()
            if line.startswith("step ")]


def test_readme_names_the_two_setup_commands_and_ci_runs_the_test_one() -> None:
    readme = (ROOT / "README.md").read_text()
    assert "python3 dev.py demo" in readme and "python3 dev.py test" in readme
    assert ci_steps()[0] == "python3 dev.py test"


def test_ci_runs_the_slow_tests_the_matrix_then_ruff_and_mypy_in_steps_of_their_own() -> None:
    """Not in `python3 dev.py test` (mypy alone took 16 s of it): .ci/run runs them after,
    and the torch version matrix between."""
    assert ci_steps()[1:] == ["python3 dev.py test -m slow", "python3 dev.py matrix",
                              ".venv/bin/python -m ruff check .",
                              ".venv/bin/python -m mypy gradtrace"]
    assert "-m 'not slow'" in (ROOT / "pyproject.toml").read_text()  # the default leaves them
    assert ".mypy_cache/" in (ROOT / ".gitignore").read_text().splitlines()


def test_every_scenario_has_a_one_line_docstring() -> None:
    for path in sorted((ROOT / "gradtrace" / "examples").rglob("*.py")):
        first = path.read_text().splitlines()[0]
        assert re.match(r'^""".+', first), path


def test_py_typed_is_shipped() -> None:
    import gradtrace

    assert (Path(gradtrace.__file__).parent / "py.typed").exists()
    assert '"py.typed"' in (ROOT / "pyproject.toml").read_text()


def test_the_version_is_the_installed_one() -> None:
    from importlib.metadata import version

    from gradtrace import __version__

    assert version("gradtrace") == __version__
    assert invoke("--version").stdout.strip() == f"gradtrace {__version__}"
