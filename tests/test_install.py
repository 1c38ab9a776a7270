"""gradtrace installed as the README's Install section says: the wheel `python3 dev.py wheel`
builds, installed by the README's own `pip install` line into a fresh virtualenv (no site
packages of this one; torch==2.13.0 from a cached venv of torch alone), run from a folder
that is not the repository. Every --help example runs there, as typed.

Slow (a wheel built and installed, ~50 runs of the installed gradtrace): run by .ci/run's
`python3 dev.py test -m slow`.
"""

from __future__ import annotations

import fcntl
import os
import shutil
import subprocess
import sys
import time
import venv
from pathlib import Path

import pytest
from helpers import DOT, ROOT, module_from
from plain_python import run_gradtrace
from test_docs import EXAMPLES, PRODUCERS, SHARED, as_typed

# one worker builds the venv (its fixture is the module's), not each of them
pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("install")]

README = (ROOT / "README.md").read_text(encoding="utf-8")


def readme_install() -> list[str]:
    """The README's Install section's `pip install` line, as words."""
    section = README[README.index("## Install"):README.index("**Working on gradtrace")]
    assert "python3 dev.py wheel" in section
    (line,) = [line for line in section.splitlines() if line.startswith("pip install ")
               and ".whl" in line]
    return line.split()


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The bin folder of a fresh venv with torch and gradtrace's wheel installed by the
    README's line (torch is there already: the venv is a linked copy of a cached one that has
    torch alone, as a user's venv has torch before they add gradtrace; ~45 s saved)."""
    base = tmp_path_factory.mktemp("install")
    started = time.monotonic()
    command = module_from(ROOT / "dev.py").wheel_command(sys.executable, base / "dist")
    words = readme_install()  # pip install torch==2.13.0 /path/to/clone/dist/NAME.whl
    assert "torch==2.13.0" in words  # the pin: an unpinned torch is a multi-GB CUDA build
    # pip builds in the checkout's build/: one build at a time (a second `pytest -n` run
    # may build too), and its leftovers removed as `dev.py wheel` does, or the next build
    # meets them
    with open(tmp_path_factory.getbasetemp().parent / "wheel.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            build = subprocess.run(command, capture_output=True, text=True, timeout=600)
        finally:
            shutil.rmtree(ROOT / "build", ignore_errors=True)
        torch_only = _torch_venv([w for w in words[2:] if not w.endswith(".whl")])
    assert build.returncode == 0, build.stdout + build.stderr
    wheels = list((base / "dist").glob("gradtrace-*.whl"))
    assert len(wheels) == 1, wheels
    _linked_copy(torch_only, base / "venv")
    python = base / "venv" / "bin" / "python"
    assert [Path(w).name for w in words if w.endswith(".whl")] == [wheels[0].name]
    words = [str(wheels[0]) if w.endswith(".whl") else w for w in words]
    pip = subprocess.run([str(python), "-m", *words[:2], "-q", *words[2:]],
                         capture_output=True, text=True, timeout=1200, env=_clean_env(base))
    assert pip.returncode == 0, pip.stdout + pip.stderr
    print(f"wheel built, venv made, torch and gradtrace installed in "
          f"{time.monotonic() - started:.0f} s")
    return python.parent


def _torch_venv(pins: list[str]) -> Path:
    """A cached venv (no site packages of ours) with the README's torch pin alone, made once:
    GRADTRACE_INSTALL_CACHE, default ~/.cache/gradtrace/install."""
    folder = Path(os.environ.get("GRADTRACE_INSTALL_CACHE")
                  or Path.home() / ".cache" / "gradtrace" / "install") / "torch-venv"
    stamp = folder / ".gradtrace-install"
    if not (stamp.exists() and stamp.read_text() == " ".join(pins)):
        venv.create(folder, with_pip=True, clear=True)  # system_site_packages=False
        pip = subprocess.run([str(folder / "bin" / "python"), "-m", "pip", "install", "-q",
                              *pins], capture_output=True, text=True, timeout=1200)
        assert pip.returncode == 0, pip.stdout + pip.stderr
        stamp.write_text(" ".join(pins))
    return folder


def _linked_copy(source: Path, into: Path) -> None:
    """A copy of a venv whose files are hard links (a second; pip replaces a file it changes,
    never writes into it), or plain copies across file systems."""
    try:
        shutil.copytree(source, into, symlinks=True, copy_function=os.link)
    except (OSError, shutil.Error):
        shutil.rmtree(into, ignore_errors=True)
        shutil.copytree(source, into, symlinks=True)


def _clean_env(bin_dir: Path) -> dict[str, str]:
    """The environment without this checkout's code (PYTHONPATH) and the venv's bin first."""
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME")}
    env["PATH"] = f"{bin_dir}{os.pathsep}{env.get('PATH', '')}"
    return env


def run(bin_dir: Path, command: str, folder: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["bash", "-c", command], cwd=folder, env=_clean_env(bin_dir),
                          capture_output=True, text=True, timeout=600)


def run_typed(bin_dir: Path, example: str, folder: Path) -> subprocess.CompletedProcess[str]:
    """`gradtrace ARGS [> FILE]` as typed in folder, run by the venv's python (`python -m
    gradtrace`) forked from one that imported the venv's torch and gradtrace once: the
    installed code and data, without ~3 s of imports a run (the console script itself is
    run by bash in the tests above)."""
    args, into = as_typed(example, folder)
    done = run_gradtrace(*args, cwd=folder, env=_clean_env(bin_dir),
                         python=bin_dir / "python", timeout=600)
    if into is not None:
        into.write_text(done.stdout, encoding="utf-8")
    return done


def test_the_installed_package_is_the_wheel_not_this_checkout(installed: Path,
                                                               tmp_path: Path) -> None:
    where = run(installed, "python -c 'import gradtrace, torch; print(gradtrace.__file__); "
                "print(torch.__version__)'", tmp_path)
    assert where.returncode == 0, where.stderr
    module, torch_version = where.stdout.split()
    assert Path(module).is_relative_to(installed.parent) and "site-packages" in module
    assert not Path(module).is_relative_to(ROOT)
    assert torch_version.startswith("2.13.0")


def test_examples_and_the_chain_rule_after_install(installed: Path, tmp_path: Path) -> None:
    listing = run(installed, "gradtrace examples", tmp_path)
    assert listing.returncode == 0, listing.stderr
    assert "example:chain_rule " in listing.stdout and "example:real/gpt_tiny " in listing.stdout
    shown = run(installed, "gradtrace show example:chain_rule", tmp_path)
    assert shown.returncode == 0, shown.stderr
    assert shown.stdout.startswith("scenario example:chain_rule  ·  3 nodes, 2 edges")
    assert "AccumulateGrad → x" in shown.stdout and "x.grad  None → 0.6" in shown.stdout
    unknown = run(installed, "gradtrace show example:nope", tmp_path)
    assert unknown.returncode == 2
    assert "hint: `gradtrace examples` lists them" in unknown.stderr


PLOT_EXTRA = {"gradtrace steps trace.json --by-leaf -o steps.png"}  # needs gradtrace[plot]
# needs the tensorboard package, which a plain install lacks
TENSORBOARD = {"gradtrace watch example:loops/mlp_30_steps --tensorboard runs/mlp"}


@pytest.mark.parametrize("example", list(EXAMPLES))
def test_every_help_example_runs_after_install(installed: Path, tmp_path: Path,
                                               example: str) -> None:
    """As typed, in an empty folder: the exit code and what it promises (the same
    checks as tests/test_docs.py's). A PNG chart needs the optional plot extra, and
    --tensorboard the tensorboard package, which a plain install lacks: each says so, exit 2."""
    if (".svg" in example or ".png" in example) and DOT is None:
        pytest.skip("Graphviz is not installed")
    for needed, producer in PRODUCERS.items():
        if needed in example.split() and example != producer:
            assert run_typed(installed, producer, tmp_path).returncode == 0
    # an example too slow to run twice is checked on its --json, as in test_docs
    result = run_typed(installed, example + (" --json" if example in SHARED else ""),
                       tmp_path)
    assert "Traceback" not in result.stderr, result.stderr
    if example in PLOT_EXTRA and \
            run(installed, "python -c 'import cairosvg'", tmp_path).returncode != 0:
        assert result.returncode == 2 and "gradtrace[plot]" in result.stderr, result.stderr
        return
    if example in TENSORBOARD and \
            run(installed, "python -c 'import tensorboard'", tmp_path).returncode != 0:
        assert result.returncode == 2 and "pip install tensorboard" in result.stderr, \
            result.stderr
        return
    expected = EXAMPLES[example]
    assert result.returncode == expected.code, result.stdout[-2000:] + result.stderr[-2000:]
    assert "error:" not in result.stderr, result.stderr
    assert expected.check(result.stdout, tmp_path), result.stdout[-2000:]
