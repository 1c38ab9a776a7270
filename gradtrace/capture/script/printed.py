"""What a scenario prints, captured: Python's streams and warnings, and file descriptors 1
and 2 (its subprocesses and C extensions), so gradtrace's own output stays clean."""

from __future__ import annotations

import contextlib
import io
import os
import sys
import tempfile
import warnings
from collections.abc import Callable, Iterator
from typing import Any

# Told what the scenario prints as it prints it: (text, whether to stderr); "" when it
# flushes the stream
Echo = Callable[[str, bool], None]


@contextlib.contextmanager
def python_output_captured(output: io.StringIO, echo: Echo | None = None) -> Iterator[None]:
    """sys.stdout, sys.stderr and warnings into output while the block runs (echo: also
    told each piece as it is printed: `gradtrace watch` shows a long run's own lines)."""
    with contextlib.redirect_stdout(_Stream(output, echo, False)), \
            contextlib.redirect_stderr(_Stream(output, echo, True)), warnings.catch_warnings():
        # Warnings are part of what the scenario prints, whoever else listens for them, and
        # as `python` shows them: not the deprecations libraries warn of among themselves
        # (torch.compile imports modules that do), but those of the script (`__main__`).
        warnings.simplefilter("default")
        for hidden in (DeprecationWarning, PendingDeprecationWarning, ImportWarning,
                       ResourceWarning):
            warnings.filterwarnings("ignore", category=hidden)
        warnings.filterwarnings("default", category=DeprecationWarning, module="__main__")
        warnings.showwarning = _warning_to(output, echo)
        yield


def captured_text() -> str:
    """What the scenario printed so far, while sys.stdout is its capture (else "")."""
    stream = sys.stdout
    return stream.into.getvalue() if isinstance(stream, _Stream) else ""


class _Stream(io.TextIOBase):
    """The scenario's sys.stdout or sys.stderr: what it writes goes into the one capture;
    closing it closes only itself (printing then fails, as in python), not the capture."""

    def __init__(self, into: io.StringIO, echo: Echo | None, to_stderr: bool) -> None:
        super().__init__()
        self.into, self._echo, self._to_stderr = into, echo, to_stderr

    def writable(self) -> bool:
        return True

    def write(self, text: str) -> int:
        if self.closed:
            raise ValueError("I/O operation on closed file.")
        if self._echo is not None and text:
            self._echo(text, self._to_stderr)
        return self.into.write(text)

    def flush(self) -> None:
        if self._echo is not None:  # the script asked: what it printed is shown now
            self._echo("", self._to_stderr)


@contextlib.contextmanager
def descriptors_captured(output: io.StringIO) -> Iterator[Callable[[], str]]:
    """File descriptors 1 and 2 into a file while the block runs; then its text into output
    (after what Python printed: the two cannot be interleaved). It yields a reader of the
    text so far (for the trace, built inside the block)."""
    for stream in (sys.__stdout__, sys.__stderr__):
        with contextlib.suppress(AttributeError, ValueError, OSError):
            stream.flush()  # type: ignore[union-attr]
    saved: list[tuple[int, int]] = []
    with tempfile.TemporaryFile() as capture:
        for fd in (1, 2):
            with contextlib.suppress(OSError):  # a closed descriptor stays closed
                saved.append((fd, os.dup(fd)))
                os.dup2(capture.fileno(), fd)
        try:
            yield lambda: _so_far(capture.fileno())
        finally:
            for fd, copy in saved:
                os.dup2(copy, fd)
                os.close(copy)
            capture.seek(0)
            output.write(capture.read().decode("utf-8", "replace"))


def _so_far(fd: int) -> str:
    """What was written to the file so far: read at an offset, since descriptors 1 and 2
    share the file's position (a seek would move where they write next)."""
    return os.pread(fd, os.fstat(fd).st_size, 0).decode("utf-8", "replace")


def _warning_to(output: io.StringIO, echo: Echo | None) -> Callable[..., None]:
    def show(message: Any, category: Any, filename: str, lineno: int, file: Any = None,
             line: str | None = None) -> None:
        text = warnings.formatwarning(message, category, filename, lineno, line)
        if echo is not None:
            echo(text, True)
        output.write(text)

    return show
