"""Writing output files: atomically, and never over an input."""

from __future__ import annotations

import contextlib
import os
import tempfile
from collections.abc import Sequence
from pathlib import Path

from ..errors import ExportError


def write_atomic(path: Path, data: bytes, protected: Sequence[Path] = ()) -> None:
    """Write data to path through a temporary file, so a failure leaves no half-written file."""
    target = path.resolve()
    if any(target == p.resolve() for p in protected):
        raise ExportError(f"refusing to overwrite {path}: it is the input",
                          "choose another output file")
    if target.is_dir():
        raise ExportError(f"{path} is a directory", "give a file name, e.g. graph.svg")
    if not target.parent.is_dir():
        raise ExportError(f"cannot write {path}: folder {target.parent} does not exist")
    try:
        fd, temp = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.",
                                    suffix=".tmp")
    except OSError as exc:
        raise ExportError(f"cannot write {path}: {exc.strerror}") from None
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
        # mkstemp makes the file private (0600); give it the mode a plain open() would
        mask = os.umask(0)
        os.umask(mask)
        mode = target.stat().st_mode & 0o777 if target.exists() else 0o666 & ~mask
        os.chmod(temp, mode)
        os.replace(temp, target)
    except OSError as exc:
        with contextlib.suppress(OSError):
            os.unlink(temp)
        raise ExportError(f"cannot write {path}: {exc.strerror}") from None
