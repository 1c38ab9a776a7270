"""What a recording knows of the code's forwards: its names, the line that made each node,
the module whose forward made it, module hooks and DDP reducers — the Host the recorder and
its observers ask (observers/base.py)."""

from __future__ import annotations

from typing import Any

import torch

from ..compat.torch import compiled_region_frames, is_compiled_region
from ..extract.captured import Captured
from ..extract.tensors import Named
from ..model.records import Source
from .modules.global_hooks import ModuleCalls
from .modules.module_hooks import ModuleHooks
from .modules.reducers import Reducers
from .modules.tracker import ModuleTracker, module_paths, unsharded_aliases
from .naming.names import ScenarioNames, library_file
from .naming.provenance import LineLog
from .naming.roots import named_tensors
from .naming.sharded import module_objects
from .observers.base import InplaceModule
from .passes.recorder import Recorder
from .script.ranks import launched


class ScriptHost:
    """The code's names and forwards, as one recording notes them; attach() it to the
    recorder that asks it."""

    def __init__(self, path: str | None, namespace: dict[str, Any]) -> None:
        self.names = ScenarioNames(path, namespace)
        self.line_log = LineLog(self.names.owns, library_file)
        self.traces = True  # it turns line_log on and off (not a block nested in another's)
        self.module_calls = ModuleCalls()  # the one global forward hook pair
        self.tracker = ModuleTracker(self.module_calls)
        self.reducers = Reducers(self.module_calls)
        self.module_hooks: ModuleHooks | None = None

    def attach(self, recorder: Recorder) -> None:
        """The module hooks note on recorder's marks; --profile's clock times the forwards
        (subscribed last: the innermost, so the others' work is not in its times)."""
        self.module_hooks = ModuleHooks(recorder, self.module_calls)
        clock = recorder.forward_clock()
        if clock is not None:  # light steps' forwards too
            self.module_calls.subscribe(clock.pre, clock.post, pausable=False)

    def detail(self, on: bool) -> None:
        """Note the lines, modules, module hooks and DDP modules of the forwards from now on,
        or not (a loop's light steps)."""
        if self.traces:
            self.line_log.follow(on)
        self.module_calls.follow(on)

    def lines_of(self, node: Any) -> tuple[Source | None, Source | None]:
        """The line that made node, and the line of a library's model code (transformers…)
        below it, if one did."""
        if is_compiled_region(node) and id(node) not in self.tracker.owner:
            # no line runs as such in a compiled function: its region's is the first of the
            # script's that its graph differentiates, as torch noted it (a compiled module's:
            # the line that called the module); no library line
            innermost = [next((where for where in reversed(frames) if self.names.owns(where[0])),
                              None) for frames in compiled_region_frames(node)]
            first = next((where for where in reversed(innermost) if where is not None), None)
            return None if first is None else self.line_log.source_at(first), None
        return self.line_log.lines_of(node)

    def source_of(self, node: Any) -> Source | None:
        """The line that made node (lines_of's first)."""
        return self.lines_of(node)[0]

    def module_of(self, node: Any) -> str | None:
        """The dotted path of the named nn.Module whose forward made node (None: a forward
        not followed, or a module no name reaches)."""
        owner = self.tracker.owner.get(id(node))
        if owner is None or owner[0] is not node:
            return None
        return module_objects(self.names.merged().items()).get(id(owner[1]))

    def inplace_module_of(self, node: Any) -> InplaceModule | None:
        """The nn.Module built with inplace=True (nn.ReLU(inplace=True)…) whose forward made
        node, and its dotted path when a name reaches it."""
        node_, module = self.tracker.owner.get(id(node), (None, None))
        if node_ is not node or getattr(module, "inplace", None) is not True:
            return None
        kind = type(module)
        return InplaceModule(f"nn.{kind.__name__}" if getattr(torch.nn, kind.__name__, None)
                             is kind else kind.__name__,
                             module_objects(self.names.merged().items()).get(id(module)))

    def owns(self, filename: str) -> bool:
        return self.names.owns(filename)

    def forget(self, nodes: list[Any]) -> None:
        self.tracker.forget(nodes)
        if self.module_hooks is not None:
            self.module_hooks.forget(nodes)

    def captured_now(self) -> Captured:
        """What is known now of names and modules, for a graph the code let go of."""
        every = self.names.merged()
        return self.captured(named_tensors(every), every)

    def captured(self, named: Named, every: dict[str, Any]) -> Captured:
        """The capture record's names, modules and their hooks (objects: the (name, object)
        pairs of the modules and objects named, earlier ones too), and the process's rank."""
        earlier, earlier_modules = self.names.earlier(named, every)
        modules = [*every.items(), *earlier_modules]
        hooks = self.module_hooks.labels(every) if self.module_hooks is not None else {}
        return Captured(
            scenario=None, named=named, outputs=[], root_reason="", earlier=earlier,
            modules=module_paths(modules, self.tracker), hooks=hooks,
            reduced=self.reducers.named(named), leaf_aliases=unsharded_aliases(modules),
            objects=modules, ranks=launched())

    def clear(self, namespace: bool) -> None:
        """Let go of every torch object held (namespace: the code's globals too)."""
        self.tracker.owner.clear()
        if self.module_hooks is not None:
            self.module_hooks.clear()
        self.names.clear(namespace=namespace)
