"""The scenario thread's stack: as big as the process may map (1 GiB; less under a limit on
its address space, such as `ulimit -v`), never less than the system's default."""

from __future__ import annotations

import threading
from collections.abc import Callable

from ...errors import ScenarioError

# Deep graphs are freed recursively by torch; a big stack keeps a 100,000-node graph alive
# through teardown. Only touched pages are committed, so this costs no memory up front —
# but all of it counts against a limit on the address space.
STACK_SIZE = 1 << 30
FLOOR = 8 << 20  # below this, the system's default (0): what python's own threads get
SHARE = 4  # under a limit, at most this share of the address space left


def started_thread(target: Callable[[], None], name: str) -> threading.Thread:
    """A daemon thread running target, started with the biggest stack this process can
    map, halved down to the system's default; a ScenarioError when none starts."""
    size = min(STACK_SIZE, _room() // SHARE)
    while True:
        thread = threading.Thread(target=target, name=name, daemon=True)
        old = threading.stack_size(size if size >= FLOOR else 0)  # read as it starts
        try:
            thread.start()
            return thread
        except (RuntimeError, MemoryError) as exc:
            if size < FLOOR:
                raise _no_memory(exc) from None
            size //= 2
        finally:
            threading.stack_size(old)


def _room() -> int:
    """The address space left to this process under its limit (RLIMIT_AS), in bytes; no
    limit (or none known): more than STACK_SIZE needs."""
    unlimited = SHARE * STACK_SIZE
    try:
        import resource  # not on Windows

        limit = resource.getrlimit(resource.RLIMIT_AS)[0]
        if limit == resource.RLIM_INFINITY:
            return unlimited
        with open("/proc/self/statm") as statm:  # Linux: pages mapped so far, first
            used = int(statm.read().split()[0]) * resource.getpagesize()
        return max(limit - used, 0)
    except (ImportError, OSError, ValueError):
        return unlimited


def _no_memory(exc: BaseException) -> ScenarioError:
    limit = ""
    try:
        import resource

        soft = resource.getrlimit(resource.RLIMIT_AS)[0]
        if soft != resource.RLIM_INFINITY:
            limit = f" (its address space is limited to {soft >> 20} MiB: ulimit -v)"
    except (ImportError, OSError, ValueError):
        pass
    return ScenarioError(
        f"not enough memory to start the thread the scenario runs in{limit}: {exc}",
        "raise the process's memory limit (ulimit -v), or free memory; gradtrace needs a "
        "thread with the system's default stack beside what the script needs")
