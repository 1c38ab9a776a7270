"""A file written a whole line at a time, each in one write to a descriptor opened to
append: a process killed at any moment leaves whole lines, at most the last one cut."""

from __future__ import annotations

import os
from pathlib import Path


class LineFile:
    """Lines appended to a file made empty as it opens (None: nowhere)."""

    def __init__(self, path: Path | str | None) -> None:
        self._fd = None if path is None else os.open(
            path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_APPEND, 0o644)

    def write(self, line: str) -> None:
        """One line, ending in a newline, ASCII only."""
        if self._fd is not None:
            os.write(self._fd, line.encode("ascii"))

    def close(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None
