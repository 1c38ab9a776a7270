"""Everything a command prints on stdout goes through `write_stdout`: all of it, or an error.

Python's own writes are not enough: an unbuffered stdout (PYTHONUNBUFFERED=1) drops what a
short write left over, and a non-blocking one drops what would block. Documents (JSON, DOT,
annotations) are UTF-8 whatever the locale, the bytes -o FILE writes; a report for a person is
in stdout's encoding, gradtrace's symbols in ASCII where that encoding has no room for them.
"""

from __future__ import annotations

import codecs
import contextlib
import io
import os
import select
import shutil
import sys
import threading
from collections.abc import Iterable
from typing import Any

from rich.console import Console

from ..errors import GradtraceError
from ..render.ascii import ascii_symbols
from ..render.escape import visible_console

BLOCK = 1 << 16  # bytes gathered before a write: few system calls for many small pieces
PIPED_WIDTH = 120  # columns of a report that goes to a pipe or a file


class _MainThreadOnly:
    """sys.stdout or sys.stderr for the command's life: what the main thread writes goes
    through; another thread's writes — a daemon thread a script left running after its run
    ended, or its traceback — are dropped: they never reach gradtrace's output."""

    def __init__(self, stream: Any) -> None:
        self._stream = stream

    def write(self, text: str) -> int:
        if threading.current_thread() is threading.main_thread():
            return int(self._stream.write(text))
        return len(text)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._stream, name)


def main_thread_streams() -> None:
    """Let only the main thread write on sys.stdout and sys.stderr (the command's), and
    stdout's descriptor be the command's alone."""
    if sys.stdout is not None:
        sys.stdout = _MainThreadOnly(_own_descriptor(sys.stdout))  # type: ignore[assignment]
    if sys.stderr is not None:
        sys.stderr = _MainThreadOnly(sys.stderr)  # type: ignore[assignment]


def _own_descriptor(stream: Any) -> Any:
    """stream on a copy of its descriptor, which goes to /dev/null: what a thread or child the
    script left running writes there after its run never reaches the command's output."""
    try:
        fd = stream.fileno()
        stream.flush()
        copy = os.dup(fd)
        null = os.open(os.devnull, os.O_WRONLY)
    except (AttributeError, OSError, ValueError, io.UnsupportedOperation):
        return stream  # no descriptor (closed, or not a file): nothing to keep apart
    # buffered as python buffered the stream (PYTHONUNBUFFERED: no buffer below the text)
    binary = open(copy, "wb", buffering=0 if stream.write_through else -1)  # noqa: SIM115
    own = io.TextIOWrapper(binary, encoding=stream.encoding, errors=stream.errors,
                           line_buffering=stream.line_buffering,
                           write_through=stream.write_through)
    os.dup2(null, fd)
    os.close(null)
    return own


def stdout_beside_stderr() -> bool:
    """Whether stdout goes where stderr goes (one terminal, or one file or pipe as with
    2>&1): what the report on stdout says, the reader of stderr has seen."""
    try:
        out, err = os.fstat(sys.stdout.fileno()), os.fstat(sys.stderr.fileno())
    except (AttributeError, OSError, ValueError, io.UnsupportedOperation):
        return False  # not files (closed, or a test's buffers): apart
    return (out.st_dev, out.st_ino, out.st_rdev) == (err.st_dev, err.st_ino, err.st_rdev)


def flush_streams() -> None:
    """Flush Python's stdout and stderr as far as they still can be (closed, replaced by the
    script, or a broken pipe: nothing more to do)."""
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(AttributeError, ValueError, OSError):
            stream.flush()


_SILENT = [False]  # this process is a rank whose output another rank prints


def stdout_silenced(silent: bool) -> None:
    """Print nothing on stdout from now on (a rank that is not the shown one), or again."""
    _SILENT[0] = silent


def write_stdout(data: str | bytes | Iterable[str] | Iterable[bytes]) -> None:
    """Write a command's output to stdout, pieces as they are made; text as UTF-8."""
    if _SILENT[0]:
        return
    if sys.stdout is None:
        raise GradtraceError("standard output is closed",
                             "redirect it to a file (> out.json), or give -o FILE")
    sys.stdout.flush()  # what Python holds goes first
    try:
        fd = sys.stdout.fileno()
    except io.UnsupportedOperation:  # not a file (a test's CliRunner): it takes writes whole
        fd = None
    for block in _blocks([data] if isinstance(data, str | bytes) else data):
        if fd is None:
            sys.stdout.buffer.write(block)
        else:
            write_all(fd, block)


def _blocks(pieces: Iterable[str | bytes]) -> Iterable[bytes]:
    """pieces as UTF-8 bytes, gathered into blocks of about BLOCK bytes."""
    gathered: list[bytes] = []
    size = 0
    for piece in pieces:
        data = piece.encode("utf-8") if isinstance(piece, str) else piece
        gathered.append(data)
        size += len(data)
        if size >= BLOCK:
            yield b"".join(gathered)
            gathered, size = [], 0
    if gathered:
        yield b"".join(gathered)


def write_all(fd: int, data: bytes) -> None:
    """All of data to fd: a short write goes on with the rest, a full non-blocking pipe is
    waited for; a reader that left raises BrokenPipeError (exit 141 at the error boundary)."""
    left = memoryview(data)
    while left:
        try:
            left = left[os.write(fd, left):]
        except BlockingIOError:  # O_NONBLOCK (set by whoever made the pipe): wait for the reader
            select.select([], [fd], [])


class _Stdout(io.BufferedIOBase):
    """Stdout as a binary file whose every write goes through write_stdout."""

    name = "<stdout>"  # TextIOWrapper's name for it

    def writable(self) -> bool:
        return True

    def write(self, data: Any) -> int:
        write_stdout(bytes(data))
        return len(data)

    def isatty(self) -> bool:
        return sys.stdout is not None and sys.stdout.isatty()


ASCII_ERRORS = "gradtrace.ascii"  # the codecs error handler below


def _ascii_stand_ins(error: UnicodeError) -> tuple[str, int]:
    """Where stdout's encoding has no room: gradtrace's symbols in ASCII, the rest (a tensor's
    name) as backslash escapes."""
    assert isinstance(error, UnicodeEncodeError)  # registered for encoding only
    part = ascii_symbols(error.object[error.start:error.end])
    return part.encode("ascii", "backslashreplace").decode("ascii"), error.end


codecs.register_error(ASCII_ERRORS, _ascii_stand_ins)


def stdout_console() -> Console:
    """Rich console for reports: colour only on a terminal; 120 columns when piped; no text
    from a scenario or a trace can drive the terminal."""
    if sys.stdout is None:
        raise GradtraceError("standard output is closed", "redirect it to a file (> out.txt)")
    # rich draws ASCII boxes and guides when the encoding is not UTF
    text = io.TextIOWrapper(_Stdout(), encoding=sys.stdout.encoding or "utf-8",
                            errors=ASCII_ERRORS, write_through=True)
    console = ReportConsole(file=text, highlight=False)
    console.width = report_width(console.is_terminal)
    return visible_console(console)


def report_width(terminal: bool) -> int:
    """COLUMNS when it is a positive number, else the terminal's width, else 120."""
    try:
        columns = int(os.environ.get("COLUMNS", ""))
    except ValueError:  # unset, empty or nonsense: as if unset
        columns = 0
    if columns > 0:
        return columns
    if not terminal:
        return PIPED_WIDTH
    # the terminal stdout writes to (descriptor 1 may be gradtrace's /dev/null, which shutil
    # would ask); shutil's answer when it has none (rich would take 0)
    with contextlib.suppress(AttributeError, OSError, ValueError, io.UnsupportedOperation):
        return os.get_terminal_size(sys.stdout.fileno()).columns
    return shutil.get_terminal_size().columns


class ReportConsole(Console):
    """A console whose broken pipe reaches the error boundary (rich would exit 1 itself)."""

    def on_broken_pipe(self) -> None:
        self.quiet = True
        raise BrokenPipeError


def stderr_console() -> Console:
    """Rich console for what gradtrace says on stderr (errors, findings lines, hints): no
    text from a scenario or a trace can drive the terminal."""
    return visible_console(Console(stderr=True, highlight=False, soft_wrap=True))


def tell(line: str) -> None:
    """One line for the person at the terminal on stderr (what was written, a hint): never
    in the output a pipe or a file takes."""
    stderr_console().print(line, style="dim", markup=False)
