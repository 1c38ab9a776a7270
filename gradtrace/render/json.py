"""The Trace as JSON text: the canonical, deterministic serialised form."""

from __future__ import annotations

import json
import re
from json import encoder as json_encoder
from json.encoder import encode_basestring, encode_basestring_ascii
from typing import Any

from ..gcpause import gc_paused
from ..model.codec import trace_to_dict
from ..model.records import Trace

_SURROGATE = re.compile("[\ud800-\udfff]")


def _encoder(ascii_only: bool) -> Any:
    """One item's JSON text: json's C encoder made once (json.dumps with options makes a
    new encoder per call, a third of the time for 100,000s of small items)."""
    c_make_encoder = getattr(json_encoder, "c_make_encoder", None)  # not in typeshed
    if c_make_encoder is None:  # a Python without the C accelerator
        return lambda value: json.dumps(value, ensure_ascii=ascii_only, allow_nan=False)
    escape = encode_basestring_ascii if ascii_only else encode_basestring
    make = c_make_encoder(None, _refuse, escape, None, ": ", ", ", False, False, False)
    return lambda value: "".join(make(value, 0))


def _refuse(value: Any) -> Any:
    raise TypeError(f"{type(value).__name__} is not JSON serializable")


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
    compact = _encoder(ascii_only)
    lines = []
    for key, value in data.items():
        if isinstance(value, list) and value:
            items = ",\n    ".join(map(compact, value))
            lines.append(f"  {compact(key)}: [\n    {items}\n  ]")
        else:
            lines.append(f"  {compact(key)}: {compact(value)}")
    return "{\n" + ",\n".join(lines) + "\n}\n"
