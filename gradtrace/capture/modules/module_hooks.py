"""The nodes on which nn.Module backward hooks run: a module's full backward hooks run on the
BackwardHookFunctionBackward node torch puts before its forward; its (non-full) backward
hooks on the node that made its output. The tree marks them, names the hook and its module,
and shows what the node sent before a hook replaced it."""

from __future__ import annotations

from functools import partial
from typing import Any

import torch

from ...compat.torch import backward_hooks_of, compiling, never_compiled, node_key
from ...model.records import BACKWARD_HOOK_NODE
from ..naming.reach import is_module
from ..passes.recorder import Recorder
from .global_hooks import ModuleCalls


class ModuleHooks:
    """A global forward hook that notes, after each module's forward, the node its backward
    hooks will run on (held, as the module tracker holds nodes, until forgotten)."""

    def __init__(self, recorder: Recorder, calls: ModuleCalls) -> None:
        self.recorder = recorder
        # id(node) -> (node, module, the hooks' functions)
        self.on: dict[int, tuple[Any, torch.nn.Module, tuple[Any, ...]]] = {}
        calls.subscribe(post=self._post)

    @never_compiled  # as the module tracker's: torch.compile must not trace gradtrace
    def _post(self, module: torch.nn.Module, args: Any, output: Any) -> None:
        full, old = backward_hooks_of(module)
        if not (full or old) or compiling():
            return
        if full:  # its tensor args are already the BackwardHookFunction's outputs
            node = next((t.grad_fn for t in args if isinstance(t, torch.Tensor)
                         and t.grad_fn is not None
                         and type(t.grad_fn).__name__ == BACKWARD_HOOK_NODE), None)
            if node is not None:
                self._note(node, module, full)
        if old:
            first = _first_tensor(output)
            node = None if first is None else first.grad_fn
            if node is not None:
                # registered before torch registers the module's hooks on it (after the
                # forward hooks): it sees what the node itself sends
                node.register_hook(partial(self._own, id(node)))
                self._note(node, module, old)

    def _note(self, node: Any, module: torch.nn.Module, hooks: list[Any]) -> None:
        held = self.on.get(id(node))
        self.on[id(node)] = (node, module, (*(held[2] if held else ()), *hooks))
        self.recorder.marks.hooked.add(node_key(node))  # its flow is always read, its passes kept

    @never_compiled
    def _own(self, key: int, grad_inputs: tuple[Any, ...], grad_outputs: tuple[Any, ...]) -> None:
        """The node's first hook: what it sent, before the module's hooks (flow.py compares)."""
        if self.recorder.gate.thread is not None and self.recorder.options.flow:
            self.recorder.marks.unhooked[key] = tuple(grad_inputs)

    def labels(self, namespace: dict[str, Any]) -> dict[int, tuple[str, ...]]:
        """id(node) -> "relu_hook of model.1" for each hook on it (a module the scenario
        does not name is told by its class)."""
        path_of: dict[int, str] = {}
        for name, value in list(namespace.items()):
            if is_module(value) and not name.startswith("__"):
                for sub, m in value.named_modules():
                    path_of.setdefault(id(m), f"{name}.{sub}" if sub else name)
        return {key: tuple(f"{_hook_name(h)} of "
                           f"{path_of.get(id(module), type(module).__name__)}" for h in hooks)
                for key, (_, module, hooks) in self.on.items()}

    def forget(self, nodes: list[Any]) -> None:
        """Let go of nodes (a loop step whose detail is no longer kept)."""
        for node in nodes:
            self.on.pop(id(node), None)

    def clear(self) -> None:
        self.on.clear()


def _first_tensor(output: Any) -> torch.Tensor | None:
    """The tensor torch hangs a module's non-full backward hooks on: the output, else the
    first value of a dict, else the first item, again and again."""
    value = output
    while not isinstance(value, torch.Tensor):
        if isinstance(value, dict):
            value = next((v for v in value.values() if isinstance(v, torch.Tensor)), None)
        elif isinstance(value, (tuple, list)) and value:
            value = value[0]
        else:
            return None
    return value


def _hook_name(hook: Any) -> str:
    return str(getattr(hook, "__name__", None) or type(hook).__name__)
