"""The Trace as JSON text: the canonical, deterministic serialised form."""

from __future__ import annotations

import json
from typing import Any

from ..gcpause import gc_paused
from ..model.codec import trace_to_dict
from ..model.records import Trace


def _compact(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, allow_nan=False)


@gc_paused
def to_json(trace: Trace) -> str:
    """JSON of the trace (schema gradtrace.trace/1), byte-identical for the same trace.

    One top-level key per line and one list item (node, edge, tensor, ...) per line: readable
    and diff-friendly, and written by json's C encoder (indent= would use the slow Python one).
    """
    lines = []
    for key, value in trace_to_dict(trace).items():
        if isinstance(value, list) and value:
            items = ",\n".join("    " + _compact(item) for item in value)
            lines.append(f"  {_compact(key)}: [\n{items}\n  ]")
        else:
            lines.append(f"  {_compact(key)}: {_compact(value)}")
    return "{\n" + ",\n".join(lines) + "\n}\n"
