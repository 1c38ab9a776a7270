"""Set-up and everyday tasks, with nothing but Python 3.11 needed to start.

    python3 dev.py demo    set up .venv, then show a bundled scenario and draw it to out/
    python3 dev.py test    set up .venv (and Chromium for the page's browser tests), then run
                           the test suite on two cores (extra args go to pytest: -m slow runs
                           the slow tests it leaves out, as .ci/run does; -n 0 runs serially)
    python3 dev.py wheel   build gradtrace's wheel into dist/ (the bundled examples inside),
                           to install into your own environment: pip install dist/gradtrace-*.whl
    python3 dev.py matrix  the supported Pythons across the supported torch range (3.10 with
                           torch 2.11.0, 3.12 with 2.14.0, 3.13 with 2.15.0; 3.11 with 2.13.0
                           is the suite's), each in a cached venv of its own, made with pyenv's
                           interpreter: install gradtrace's wheel there (torch must stay as it
                           is), then run the tests marked `matrix` (extra args go to pytest).
                           The venvs and pip's downloads are kept in GRADTRACE_MATRIX_CACHE
                           (default ~/.cache/gradtrace/matrix): a CUDA build of torch is ~2 GB
                           to download and ~5 GB installed, once

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
import tempfile
import venv
from pathlib import Path

ROOT = Path(__file__).resolve().parent
VENV = ROOT / ".venv"
BIN = VENV / ("Scripts" if os.name == "nt" else "bin")
PY = BIN / "python"
TORCH_PIN = "torch==2.13.0"
# (Python, torch, pins): the oldest Python with the oldest torch, Typer and rich pyproject
# admits, the newest with the newest and today's; 3.12 with a torch between (3.11 with 2.13 is
# the suite's own). `dev.py matrix` tests each; the README and pyproject's classifiers say so
MATRIX = (("3.10", "2.11.0", ("typer==0.16.0", "rich==13.7.1")),
          ("3.12", "2.14.0", ("typer", "rich")),
          ("3.13", "2.15.0", ("typer", "rich")))
MATRIX_TOOLS = ("numpy", "graphviz", "pytest<9.2", "pytest-xdist", "hypothesis", "pyyaml")
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
    user can (root, and GRADTRACE_NO_APT unset); else say what is missing (missing: what
    goes without it)."""
    if any(shutil.which(c) for c in commands):
        return
    apt = shutil.which("apt-get")
    if apt and hasattr(os, "geteuid") and os.geteuid() == 0 and \
            not os.environ.get("GRADTRACE_NO_APT"):
        say(f"installing {package} with the system packages it needs, which apt may upgrade "
            f"(apt-get install -y {package}; GRADTRACE_NO_APT=1 skips this)")
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


def matrix_cache() -> Path:
    return Path(os.environ.get("GRADTRACE_MATRIX_CACHE")
                or Path.home() / ".cache" / "gradtrace" / "matrix")


def find_python(version: str) -> str | None:
    """The interpreter of Python `version` ("3.12"): on PATH as python3.12, else pyenv's
    newest 3.12.x; None when neither is here."""
    found = shutil.which(f"python{version}")
    if found and subprocess.run([found, "-c", ""], capture_output=True).returncode == 0:
        return found  # (a pyenv shim of a version that is not selected exits non-zero)
    root = Path(os.environ.get("PYENV_ROOT") or Path.home() / ".pyenv") / "versions"
    candidates = sorted((p for p in root.glob(f"{version}.*/bin/python{version}")
                         if p.parts[-3].replace(".", "").isdigit()),  # not 3.13.0t, 3.13-dev
                        key=lambda p: [int(n) for n in p.parts[-3].split(".")])
    return str(candidates[-1]) if candidates else None


def matrix_venv(interpreter: str, release: str, version: str, pins: tuple[str, ...]) -> Path:
    """The cached venv of Python `release` with torch==version (made on first use): its
    python."""
    folder = matrix_cache() / f"py{release}-torch-{version}"
    python = folder / ("Scripts" if os.name == "nt" else "bin") / "python"
    wanted = " ".join([f"torch=={version}", *pins, *MATRIX_TOOLS])
    stamp = folder / ".gradtrace-matrix"
    if stamp.exists() and stamp.read_text() == wanted:
        return python
    if not python.exists():
        say(f"making {folder} (torch {version}: a ~2 GB download the first time)")
        run(interpreter, "-m", "venv", folder)
    # else pip changes what the stamp's list changed, not the ~5 GB that stays
    if run(python, "-m", "pip", "install", "-q", *wanted.split(), check=False) != 0:
        raise SystemExit(f"[dev] could not install torch {version} into {folder}")
    stamp.write_text(wanted)
    return python


def torch_version(python: Path) -> str:
    return subprocess.run([str(python), "-c", "import torch; print(torch.__version__)"],
                          capture_output=True, text=True, check=True).stdout.strip()


def matrix(pytest_args: list[str]) -> int:
    """Each MATRIX Python and torch: its venv, gradtrace's wheel installed (torch left as it
    is), the tests marked `matrix`. Returns 0 when every pair passed."""
    # the matrix's torch comes from the package index, whatever a local pip config caps or
    # pins (this machine's caps torch below 2.15)
    os.environ["PIP_CONFIG_FILE"] = os.devnull
    os.environ.setdefault("PIP_CACHE_DIR", str(matrix_cache() / "pip"))
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    os.environ.pop("PYTHONDONTWRITEBYTECODE", None)
    failed = []
    with tempfile.TemporaryDirectory() as wheels:
        if run(*wheel_command(sys.executable, wheels), check=False) != 0:
            return 1
        shutil.rmtree(ROOT / "build", ignore_errors=True)  # setuptools' leftovers
        (wheel,) = Path(wheels).glob("gradtrace-*.whl")
        for release, version, pins in MATRIX:
            pair = f"Python {release}, torch {version}"
            interpreter = find_python(release)
            if interpreter is None:
                failed.append(f"{pair}: no python{release} on PATH or in pyenv "
                              f"(pyenv install {release})")
                continue
            python = matrix_venv(interpreter, release, version, pins)
            before = torch_version(python)
            run(python, "-m", "pip", "uninstall", "-q", "-y", "gradtrace", check=False)
            if run(python, "-m", "pip", "install", "-q", wheel, check=False) != 0:
                failed.append(f"{pair}: installing gradtrace's wheel failed")
                continue
            if torch_version(python) != before:
                failed.append(f"{pair}: installing gradtrace replaced torch "
                              f"{before} with {torch_version(python)}")
                continue
            say(f"Python {release}, torch {before}: the tests marked matrix")
            # -p no:cacheprovider: the checkout's .pytest_cache is the main suite's
            code = run(python, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-n", "2",
                       "--dist", "loadgroup", "-m", "matrix", *pytest_args, check=False)
            if code != 0:
                failed.append(f"{pair}: tests failed")
    for line in failed:
        say(line)
    return 1 if failed else 0


def main(argv: list[str]) -> int:
    task = argv[0] if argv else "help"
    if task not in ("demo", "test", "wheel", "matrix"):
        print(__doc__)
        return 0 if task in ("help", "-h", "--help") else 2
    if task == "wheel":
        return build_wheel()
    if task == "matrix":
        return matrix(argv[1:])
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
    # --dist loadgroup: a module whose fixture is costly (a fresh venv, a model) is marked
    # xdist_group and runs on one worker, its fixture made once, not once per worker
    workers = [] if any(a == "-n" or a.startswith(("-n", "--numprocesses")) for a in argv[1:]) \
        else ["-n", str(min(os.cpu_count() or 1, 2)), "--dist", "loadgroup"]
    # one torch thread per process, as torchrun sets it: two workers (and the gradtrace runs
    # they start) each with a thread per core fought over the cores, ~1.5x the time
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    # the tests start ~200 gradtrace processes: without bytecode caches (__pycache__, which
    # git ignores) each compiled gradtrace's modules again
    os.environ.pop("PYTHONDONTWRITEBYTECODE", None)
    return run(PY, "-m", "pytest", "-q", *workers, *argv[1:], check=False)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
