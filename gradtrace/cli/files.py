"""Writing output files: atomically, never over an input, and never replacing a device."""

from __future__ import annotations

import contextlib
import os
import re
import stat
import sys
from collections.abc import Iterable, Sequence
from pathlib import Path

from ..atomic import replace_file
from ..errors import ExportError
from ..model.labels import label_file
from .output import write_all, write_stdout

# a descriptor's own name: /dev/fd/N, or /proc/self/fd/N as the folder resolves (/proc/PID/fd)
_DESCRIPTOR = re.compile(r"/dev/fd/([0-9]+)|/proc/[0-9a-z-]+(?:/task/[0-9]+)?/fd/([0-9]+)")
_HOPS = 40  # links followed at most, as the kernel does


def absolute(path: str | Path) -> Path:
    """path relative to the folder gradtrace was started in (a scenario may chdir later)."""
    return Path(os.path.abspath(path))


def input_file(target: str | Path) -> Path:
    """The file of an input to protect from outputs: FILE of FILE::FUNC, absolute."""
    return absolute(label_file(str(target)))


def _same_file(a: Path, b: Path) -> bool:
    with contextlib.suppress(OSError):
        return os.path.samefile(a, b)  # also through links and hard links
    return os.path.realpath(a) == os.path.realpath(b)


def write_atomic(path: Path, data: bytes | Iterable[bytes], protected: Sequence[Path] = ()
                 ) -> None:
    """Write data (bytes, or pieces written as they are made: a big trace is never whole in
    memory) to path so that no failure or interruption leaves a half-written file.

    A regular file is written through a temporary file that replaces it at the end (Ctrl-C
    and SIGTERM held meanwhile: atomic.py); a device, FIFO or socket (/dev/null,
    /dev/stdout) is written through, never replaced. Paths in protected (the inputs) are
    refused.
    """
    shown = path
    path = absolute(path)
    pieces: Iterable[bytes] = [data] if isinstance(data, bytes) else data
    if any(_same_file(path, p) for p in protected):
        raise ExportError(f"refusing to overwrite {shown}: it is an input",
                          "choose another output file")
    fd = own_descriptor(path)
    if fd is not None:
        _write_descriptor(fd, pieces, shown)
        return
    try:
        mode = os.stat(path).st_mode
    except FileNotFoundError:
        mode = None
    except OSError as exc:
        raise ExportError(f"cannot write {shown}: {exc.strerror}") from None
    if mode is not None and stat.S_ISDIR(mode):
        raise ExportError(f"{shown} is a directory", "give a file name, e.g. graph.svg")
    if mode is not None and not stat.S_ISREG(mode):
        try:
            with open(path, "wb") as handle:
                handle.writelines(pieces)
        except OSError as exc:
            raise ExportError(f"cannot write {shown}: {exc.strerror}") from None
        return
    if not path.parent.is_dir():
        raise ExportError(f"cannot write {shown}: folder {path.parent} does not exist")
    try:
        replace_file(path, pieces, mode)
    except OSError as exc:
        raise ExportError(f"cannot write {shown}: {exc.strerror}") from None


def is_stream(path: Path) -> bool:
    """Whether path is written through, not replaced: one of this process's descriptors
    (/dev/stdout), a device, a FIFO or a socket."""
    if own_descriptor(absolute(path)) is not None:
        return True
    try:
        mode = os.stat(path).st_mode
    except OSError:
        return False
    return not stat.S_ISREG(mode) and not stat.S_ISDIR(mode)


def own_descriptor(path: Path) -> int | None:
    """The descriptor of this process path names, through links (/dev/stdout is a link to
    /proc/self/fd/1), or None. Named, not opened: gradtrace's own descriptor 1 goes to
    /dev/null while the command's output goes to a copy (output.py), and opening
    /proc/self/fd/1 of a file would truncate what the shell's `>>` keeps."""
    name = str(path)
    if not name.startswith(("/dev/", "/proc/")) and not os.path.islink(name):
        return None  # the common case: a plain file, no link to follow
    for _ in range(_HOPS):
        name = os.path.join(os.path.realpath(os.path.dirname(name)), os.path.basename(name))
        found = _DESCRIPTOR.fullmatch(name)
        if found is not None and (found[1] is not None or _is_ours(name)):
            return int(found[1] or found[2])
        if not os.path.islink(name):
            return None
        name = os.path.join(os.path.dirname(name), os.readlink(name))
    return None


def _is_ours(name: str) -> bool:
    """Whether /proc/PID/fd/N is this process's (the folder resolved: /proc/PID)."""
    return name.split("/")[2] in ("self", "thread-self", str(os.getpid()))


def _write_descriptor(fd: int, pieces: Iterable[bytes], shown: Path) -> None:
    """pieces through a descriptor of this process: the command's stdout for 1."""
    try:
        if fd == 1:
            write_stdout(pieces)
            return
        if fd == 2 and sys.stderr is not None:
            sys.stderr.flush()  # what Python holds goes first
        for piece in pieces:
            write_all(fd, piece)
    except BrokenPipeError:
        raise
    except OSError as exc:
        raise ExportError(f"cannot write {shown}: {exc.strerror}") from None
