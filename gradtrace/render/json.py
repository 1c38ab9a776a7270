"""The Trace as JSON text: the canonical, deterministic serialised form."""

from __future__ import annotations

import json
import re
from typing import Any

from ..gcpause import gc_paused
from ..model.codec import trace_to_dict
from ..model.records import Trace

_SURROGATE = re.compile("[\ud800-\udfff]")


def _compact(value: Any, ascii_only: bool = False) -> str:
    return json.dumps(value, ensure_ascii=ascii_only, allow_nan=False)


@gc_paused
def to_json(trace: Trace) -> str:
    """JSON of the trace (schema gradtrace.trace/2), byte-identical for the same trace.

    One top-level key per line and one list item (node, edge, tensor, ...) per line: readable
    and diff-friendly, and written by json's C encoder (indent= would use the slow Python one).
    """
    data = trace_to_dict(trace)
    text = _lines(data)
    # A lone surrogate (from a trace's "\ud800") cannot be written as UTF-8: escape all then.
    return text if text.isascii() or not _SURROGATE.search(text) else _lines(data, True)


def _lines(data: dict[str, Any], ascii_only: bool = False) -> str:
    lines = []
    for key, value in data.items():
        if isinstance(value, list) and value:
            items = ",\n".join("    " + _compact(item, ascii_only) for item in value)
            lines.append(f"  {_compact(key)}: [\n{items}\n  ]")
        else:
            lines.append(f"  {_compact(key)}: {_compact(value, ascii_only)}")
    return "{\n" + ",\n".join(lines) + "\n}\n"
