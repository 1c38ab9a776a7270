"""The wrappers that note which nodes pack what they save through the code's own hooks:
torch.utils.checkpoint's calls, and every saved_tensors_hooks block (a checkpoint's, a
save_on_cpu's, the code's own). What such a node saved is never unpacked by gradtrace: the
unpack hook is the code's (it may delete an offload file), or recomputes a checkpointed
region, and python runs it only where the code's backward does."""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

import torch

from ...compat.torch import compiling, never_compiled, next_sequence_number, saved_hooks_pushed
from ...extract.walk import made_since
from ..naming.where import forwards
from .recorder import Recorder


def packing_patches(recorder: Recorder, checkpoint_module: Any) -> list[tuple[Any, str, Any]]:
    """(owner, attribute, wrapper) of each wrapper: saved_tensors_hooks is the base class of
    checkpoint's hooks and save_on_cpu, whose __enter__ and __exit__ they inherit."""
    hooks = torch.autograd.graph.saved_tensors_hooks
    if saved_hooks_pushed():  # entered before the recording began (record() inside a with)
        recorder.marks.hooks_pushed()
    return [
        (checkpoint_module, "checkpoint", _checkpointing(recorder, checkpoint_module.checkpoint)),
        (hooks, "__enter__", _noting(recorder.marks.hooks_pushed, hooks.__enter__)),
        (hooks, "__exit__", _noting(recorder.marks.hooks_popped, hooks.__exit__)),
    ]


def _noting(note: Callable[[], None], original: Callable[..., Any]) -> Callable[..., Any]:
    """saved_tensors_hooks.__enter__ or __exit__, noting, once torch has pushed or popped the
    hooks, where the sequence numbers of the nodes made under them begin or end."""

    @functools.wraps(original)
    @never_compiled
    @forwards
    def noting(self: Any, *args: Any) -> Any:
        out = original(self, *args)
        if not compiling():
            note()
        return out

    return noting


def _checkpointing(recorder: Recorder, original: Callable[..., Any]) -> Callable[..., Any]:
    """Note the nodes a torch.utils.checkpoint call makes: backward recomputes them."""

    @functools.wraps(original)
    @never_compiled
    @forwards
    def checkpoint(*args: Any, **kwargs: Any) -> Any:
        if compiling() or recorder.gate.elsewhere():
            return original(*args, **kwargs)
        start = next_sequence_number()
        out = original(*args, **kwargs)
        for node in made_since(out, start):
            recorder.marks.recomputed.setdefault(id(node), node)  # the node keeps its id unique
        return out

    return checkpoint
