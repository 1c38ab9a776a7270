"""gradtrace's own backward, when the code ran none: from the trace's roots, recorded as a
pass of the code's would be."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

from ...extract.captured import RawPass
from ..naming.where import scenario_line


def own_backward(run_pass: Callable[..., Any], passes: list[RawPass], path: str | None,
                 roots: list[torch.Tensor]) -> None:
    """gradtrace's own backward from the roots (ones for non-scalars), recorded as a pass by
    run_pass (the recorder's, whose passes it ends up last of; path: the script's)."""
    roots = list({id(t): t for t in roots}.values())
    grads = [None if t.numel() == 1 else torch.ones_like(t) for t in roots]
    try:
        run_pass("backward", "gradtrace", roots, False, False,
                 lambda: torch.autograd.backward(roots, grads),
                 given={"tensors": roots, "grad_tensors": grads, "inputs": None})
    except Exception as exc:  # recorded as the pass's error; where in the code, if it was
        where = scenario_line(path, exc) if path is not None else None
        failed = passes[-1]
        if where is not None and failed.error is not None:
            failed.error += f" (at {path}:{where})"
