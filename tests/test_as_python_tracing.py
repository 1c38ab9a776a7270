"""A script that touches the interpreter's tracing, recursion or KeyboardInterrupt runs as under
python, and gradtrace's line log and error messages stay right: the script's own
`sys.settrace(None)` (pdb's `continue`, `coverage.stop()`) or a tracer of its own, a
RecursionError it catches or not, a `raise KeyboardInterrupt` of its own."""

from __future__ import annotations

from pathlib import Path

from helpers import write_script
from plain_python import run_gradtrace, run_plain

LIMIT = 120  # seconds: a run takes a few


def test_a_keyboard_interrupt_the_script_raises_names_its_line(tmp_path: Path) -> None:
    """As a real Ctrl-C does (the README's promise), exit 130 as python does."""
    script = write_script(tmp_path, "import torch\nx = torch.ones(2, requires_grad=True)\n"
                          "raise KeyboardInterrupt\n")
    plain = run_plain(script, timeout=LIMIT)
    assert plain.returncode != 0 and "KeyboardInterrupt" in plain.stderr
    done = run_gradtrace("show", script, timeout=LIMIT)
    assert done.returncode == 130
    assert done.stderr.strip().endswith(
        f"error: interrupted at {script}:3 `raise KeyboardInterrupt`"), done.stderr
