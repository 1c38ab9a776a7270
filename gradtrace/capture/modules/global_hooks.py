"""Global nn.Module hooks that a loop's light steps run without: while any global forward
hook exists, every nn.Module call takes torch's slow path."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from typing import Any


class PausableHooks:
    """Hooks registered (by register, which returns their handles) while tracking() runs,
    except between follow(False) and follow(True)."""

    def __init__(self, register: Callable[[], list[Any]],
                 paused: Callable[[], None] = lambda: None) -> None:
        self._register = register
        self._paused = paused  # told when the hooks are removed
        self._handles: list[Any] = []
        self._tracking = False

    @contextlib.contextmanager
    def tracking(self) -> Iterator[None]:
        self._tracking = True
        self.follow(True)
        try:
            yield
        finally:
            self._tracking = False
            self.follow(False)

    def follow(self, on: bool) -> None:
        """Hook from now on, or not until told."""
        if on and self._tracking and not self._handles:
            self._handles = self._register()
        elif not on and self._handles:
            for handle in reversed(self._handles):
                handle.remove()
            self._handles = []
            self._paused()
