"""The one global nn.Module forward pre-hook and forward hook of a recording: every part
that follows module calls (the module tracker, module backward hooks, DDP, --profile's
clock) subscribes to them. A loop's light steps run without the pausable ones: while any
global forward hook exists, every nn.Module call takes torch's slow path."""

from __future__ import annotations

import contextlib
import re
import threading
import warnings
from collections.abc import Callable, Iterator
from typing import Any, NamedTuple

import torch

from ...compat.cpython import remove_warning_filter
from ...compat.torch import GLOBAL_HOOKS_WARNING, never_compiled

Pre = Callable[[torch.nn.Module, Any], None]
Post = Callable[[torch.nn.Module, Any, Any], None]


class Subscriber(NamedTuple):
    pre: Pre | None
    post: Post | None
    pausable: bool  # off in a loop's light steps
    paused: Callable[[], None]  # told when it stops being called


class ModuleCalls:
    """Dispatches each module call to the subscribers that follow it now; the global hooks
    exist only while one does."""

    def __init__(self) -> None:
        self._subscribers: list[Subscriber] = []
        self._pre: tuple[Pre, ...] = ()
        self._post: tuple[Post, ...] = ()
        self._handles: dict[str, Any] = {}  # "pre" / "post" -> torch's handle
        self._tracking = False
        self._following = True
        self.thread: int | None = None  # the one thread whose calls are followed (None: all)

    def subscribe(self, pre: Pre | None = None, post: Post | None = None,
                  pausable: bool = True, paused: Callable[[], None] = lambda: None) -> None:
        """Call pre before each module's forward and post after it: pres in subscription
        order, posts in reverse (the last to subscribe is innermost: --profile's clock)."""
        self._subscribers.append(Subscriber(pre, post, pausable, paused))
        self._refresh()

    @contextlib.contextmanager
    def tracking(self) -> Iterator[None]:
        """The hooks, while the block runs (and the code's torch.compile(module) calls warn
        not about them: the script's output is to be what `python` prints)."""
        warnings.filterwarnings("ignore", re.escape(GLOBAL_HOOKS_WARNING), UserWarning)
        quiet = warnings.filters[0]
        self._tracking = True
        self._refresh()
        try:
            yield
        finally:
            self._tracking = False
            self._refresh()
            remove_warning_filter(quiet)

    def follow(self, on: bool) -> None:
        """The pausable subscribers are called from now on, or not until told."""
        if on != self._following:
            self._following = on
            self._refresh()

    def _refresh(self) -> None:
        live = [s for s in self._subscribers
                if self._tracking and (self._following or not s.pausable)]
        was = set(self._pre) | set(self._post)
        for s in self._subscribers:
            if s not in live and ({s.pre, s.post} & was):
                s.paused()
        self._pre = tuple(s.pre for s in live if s.pre is not None)
        self._post = tuple(s.post for s in reversed(live) if s.post is not None)
        hooks = torch.nn.modules.module
        for kind, wanted, register in (
                ("pre", bool(self._pre), lambda: hooks.register_module_forward_pre_hook(
                    self._on_pre)),
                ("post", bool(self._post), lambda: hooks.register_module_forward_hook(
                    self._on_post))):
            if wanted and kind not in self._handles:
                self._handles[kind] = register()
            elif not wanted and kind in self._handles:
                self._handles.pop(kind).remove()

    @never_compiled  # as each subscriber: torch.compile must not trace gradtrace
    def _on_pre(self, module: torch.nn.Module, args: Any) -> None:
        if self.thread is not None and threading.get_ident() != self.thread:
            return
        for pre in self._pre:
            pre(module, args)

    @never_compiled
    def _on_post(self, module: torch.nn.Module, args: Any, output: Any) -> None:
        if self.thread is not None and threading.get_ident() != self.thread:
            return
        for post in self._post:
            post(module, args, output)
