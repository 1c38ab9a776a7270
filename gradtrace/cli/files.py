"""Writing output files: atomically, never over an input, and never replacing a device."""

from __future__ import annotations

import contextlib
import os
import stat
from collections.abc import Sequence
from pathlib import Path

from ..atomic import replace_file
from ..errors import ExportError
from ..model.labels import label_file


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


def write_atomic(path: Path, data: bytes, protected: Sequence[Path] = ()) -> None:
    """Write data to path so that no failure or interruption leaves a half-written file.

    A regular file is written through a temporary file that replaces it at the end (Ctrl-C
    and SIGTERM held meanwhile: atomic.py); a device, FIFO or socket (/dev/null,
    /dev/stdout) is written through, never replaced. Paths in protected (the inputs) are
    refused.
    """
    shown = path
    path = absolute(path)
    if any(_same_file(path, p) for p in protected):
        raise ExportError(f"refusing to overwrite {shown}: it is an input",
                          "choose another output file")
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
                handle.write(data)
        except OSError as exc:
            raise ExportError(f"cannot write {shown}: {exc.strerror}") from None
        return
    if not path.parent.is_dir():
        raise ExportError(f"cannot write {shown}: folder {path.parent} does not exist")
    try:
        replace_file(path, data, mode)
    except OSError as exc:
        raise ExportError(f"cannot write {shown}: {exc.strerror}") from None
