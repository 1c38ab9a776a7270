"""Set-up and everyday tasks, with nothing but Python 3.11 needed to start.

    python3 dev.py demo    set up .venv, then show a bundled scenario and draw it to out/
    python3 dev.py test    set up .venv (and Chromium for the page's browser tests), then run
                           the test suite on two cores (extra args go to pytest: -m slow runs
                           the slow tests it leaves out, as .ci/run does; -n 0 runs serially)
    python3 dev.py wheel   build gradtrace's wheel into dist/ (the bundled examples inside),
                           to install into your own environment: pip install dist/gradtrace-*.whl

Set-up is idempotent and quick once done: it creates .venv, installs torch==2.13.0 unless a
torch >= 2.13 is already importable there (an unpinned torch would pull a multi-GB CUDA
build), installs gradtrace with its test extras, and installs Graphviz's `dot` with apt-get
when it is missing and this user can.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
import venv
from pathlib import Path

ROOT = Path(__file__).resolve().parent
VENV = ROOT / ".venv"
BIN = VENV / ("Scripts" if os.name == "nt" else "bin")
PY = BIN / "python"
TORCH_PIN = "torch==2.13.0"
DEMO = "example:chain_rule"  # a bundled example (gradtrace/examples/chain_rule.py)
SVG = "out/chain_rule.svg"


def say(text: str) -> None:
    print(f"[dev] {text}", flush=True)


def run(*cmd: str | Path, check: bool = True) -> int:
    return subprocess.run([str(c) for c in cmd], cwd=ROOT, check=check).returncode


def has_torch() -> bool:
    probe = "import torch, sys; v = torch.__version__.split('+')[0].split('.'); " \
            "sys.exit(0 if (int(v[0]), int(v[1])) >= (2, 13) else 1)"
    return subprocess.run([str(PY), "-c", probe], capture_output=True).returncode == 0


def ensure_system_package(commands: tuple[str, ...], package: str, missing: str) -> None:
    """Install a Debian package with apt-get when none of its commands is found and this
    user can; else say what is missing (missing: what goes without it)."""
    if any(shutil.which(c) for c in commands):
        return
    apt = shutil.which("apt-get")
    if apt and hasattr(os, "geteuid") and os.geteuid() == 0:
        say(f"installing {package} (apt-get install -y {package})")
        if run(apt, "update", "-qq", check=False) == 0 and \
                run(apt, "install", "-y", "-qq", package, check=False) == 0:
            return
    say(f"{package} is missing and could not be installed here: {missing}")


def ensure_graphviz() -> None:
    ensure_system_package(("dot",), "graphviz", "SVG/PNG/PDF export needs its `dot` "
                          "(Debian/Ubuntu: apt-get install graphviz; macOS: brew install "
                          "graphviz)")


def ensure_chromium() -> None:
    """The browser the interactive page is tested in (Playwright drives it, with no browser
    download)."""
    ensure_system_package(("chromium", "chromium-browser"), "chromium",
                          "the browser tests of the interactive page will be skipped "
                          "(Debian/Ubuntu: apt-get install chromium)")


def setup() -> None:
    if not PY.exists():
        say(f"creating {VENV.name}")
        venv.create(VENV, with_pip=True)
    if not has_torch():
        say(f"installing {TORCH_PIN}")
        run(PY, "-m", "pip", "install", "-q", TORCH_PIN)
    stamp = VENV / ".gradtrace-installed"
    digest = hashlib.sha256((ROOT / "pyproject.toml").read_bytes()).hexdigest()
    if not stamp.exists() or stamp.read_text() != digest:
        say("installing gradtrace and its test tools")
        run(PY, "-m", "pip", "install", "-q", "-e", ".[test]")
        stamp.write_text(digest)
    ensure_graphviz()


def wheel_command(python: str | Path, into: str | Path) -> list[str]:
    """pip building gradtrace's wheel (and no other) into the folder `into`; the fresh-venv
    test of tests/test_install.py builds it the same way."""
    return [str(python), "-m", "pip", "wheel", "-q", "--no-deps", "-w", str(into), str(ROOT)]


def build_wheel() -> int:
    """Build dist/gradtrace-VERSION-py3-none-any.whl; a wheel needs only pip, no torch."""
    if not PY.exists():
        say(f"creating {VENV.name}")
        venv.create(VENV, with_pip=True)
    dist = ROOT / "dist"
    for old in dist.glob("gradtrace-*.whl"):  # one wheel: the one just built
        old.unlink()
    code = run(*wheel_command(PY, dist), check=False)
    shutil.rmtree(ROOT / "build", ignore_errors=True)  # setuptools' leftovers
    if code == 0:
        say("wrote " + ", ".join(str(w.relative_to(ROOT)) for w in dist.glob("gradtrace-*.whl")))
    return code


def main(argv: list[str]) -> int:
    task = argv[0] if argv else "help"
    if task not in ("demo", "test", "wheel"):
        print(__doc__)
        return 0 if task in ("help", "-h", "--help") else 2
    if task == "wheel":
        return build_wheel()
    setup()
    if task == "demo":
        code = run(BIN / "gradtrace", "show", DEMO, check=False)
        if code == 0 and shutil.which("dot"):
            (ROOT / "out").mkdir(exist_ok=True)
            code = run(BIN / "gradtrace", "dot", DEMO, "--grads", "-o", SVG, check=False)
            if code == 0:
                say(f"wrote {SVG}")
        return code
    ensure_chromium()
    # both cores by default (pytest-xdist, a test extra): the suite takes ~2 minutes, not ~3
    workers = [] if any(a == "-n" or a.startswith(("-n", "--numprocesses")) for a in argv[1:]) \
        else ["-n", str(min(os.cpu_count() or 1, 2))]
    # one torch thread per process, as torchrun sets it: two workers (and the gradtrace runs
    # they start) each with a thread per core fought over the cores, ~1.5x the time
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    # the tests start ~200 gradtrace processes: without bytecode caches (__pycache__, which
    # git ignores) each compiled gradtrace's modules again
    os.environ.pop("PYTHONDONTWRITEBYTECODE", None)
    return run(PY, "-m", "pytest", "-q", *workers, *argv[1:], check=False)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
