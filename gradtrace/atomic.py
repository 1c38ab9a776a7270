"""A file written atomically: through a temporary file beside it that replaces it when whole,
with Ctrl-C and SIGTERM held meanwhile, so no interruption leaves the temporary file behind
(or half a file)."""

from __future__ import annotations

import contextlib
import os
import signal
import stat
import tempfile
import threading
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

_HELD = (signal.SIGINT, signal.SIGTERM)


@contextlib.contextmanager
def _signals_held() -> Iterator[None]:
    """SIGINT and SIGTERM noted, not acted on, while the block runs; the first is raised again
    as it ends (its handler runs then: Ctrl-C still stops gradtrace, after the write)."""
    if threading.current_thread() is not threading.main_thread():
        yield  # Python runs signal handlers in the main thread only: none can interrupt
        return
    caught: list[int] = []
    previous: dict[signal.Signals, Any] = {}
    for held in _HELD:
        previous[held] = signal.signal(held, lambda n, frame: caught.append(n))
    try:
        yield
    finally:
        for held, handler in previous.items():
            signal.signal(held, handler)
        if caught:
            signal.raise_signal(caught[0])


def replace_file(path: Path, data: bytes | Iterable[bytes], mode: int | None = None) -> None:
    """path holds data (bytes, or pieces written as they are made), whole, or is as it was:
    written to a temporary file in its folder that replaces it (mode: the permission bits it
    gets; None: a plain open()'s)."""
    with _signals_held():
        fd, temp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
        try:
            with os.fdopen(fd, "wb") as handle:
                handle.writelines([data] if isinstance(data, bytes) else data)
            if mode is None:  # mkstemp makes the file private (0600)
                mask = os.umask(0)
                os.umask(mask)
                mode = 0o666 & ~mask
            os.chmod(temp, stat.S_IMODE(mode))
            os.replace(temp, path)
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(temp)
            raise
