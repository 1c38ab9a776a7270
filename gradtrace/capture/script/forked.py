"""A child the scenario forks itself (`os.fork()`): it runs the script on as python's child
does, and at the script's end it exits as python's child would — never back into gradtrace,
whose other threads are not in it (waiting on them hangs both processes)."""

from __future__ import annotations

import contextlib
import os
import traceback
from collections.abc import Iterator
from typing import NoReturn

from ...compat.cpython import exit_status
from ..naming.where import gradtrace_file
from .printed import captured_text

_parent: list[int] = []  # the pid of the process running the scenario, while it runs
_printed_from: list[int] = []  # in a child: where its own printing begins in the capture


def _at_fork_in_child() -> None:
    if _parent:  # what the script printed before the fork is the parent's to show
        _printed_from[:] = [len(captured_text())]


os.register_at_fork(after_in_child=_at_fork_in_child)


@contextlib.contextmanager
def forks_watched() -> Iterator[None]:
    """While the block runs the scenario, a child it forks is told by forked_child()."""
    _parent[:] = [os.getpid()]
    try:
        yield
    finally:
        _parent.clear()


def forked_child() -> bool:
    """Whether this process is a child the scenario forked."""
    return bool(_parent) and os.getpid() != _parent[0]


def exit_child(error: BaseException | None) -> NoReturn:
    """End a forked child at the script's end as python ends it: what it printed written
    out, an uncaught error's traceback, then its exit status (no handler of gradtrace's)."""
    status = 0
    if isinstance(error, SystemExit):
        status = exit_status(error.code)
    elif error is not None:  # python's traceback: from the script's frames on
        tb = error.__traceback__
        while tb is not None and gradtrace_file(tb.tb_frame.f_code.co_filename):
            tb = tb.tb_next
        traceback.print_exception(type(error), error, tb)
        status = 1
    write_printed()
    os._exit(status)


def write_printed() -> None:
    """In a forked child: what it printed, written to its descriptor 1 (the capture lives
    in its memory, which the parent never sees), as python flushes its streams at exit."""
    captured = captured_text()
    text = captured[_printed_from[0] if _printed_from else 0:]
    _printed_from[:] = [len(captured)]  # written once
    with contextlib.suppress(OSError):
        os.write(1, text.encode("utf-8", "backslashreplace"))
