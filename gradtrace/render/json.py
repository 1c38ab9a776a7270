"""The Trace as JSON text: the canonical, deterministic serialised form."""

from __future__ import annotations

import json

from ..model import Trace


def to_json(trace: Trace) -> str:
    """JSON of the trace (schema gradtrace.trace/1), byte-identical for the same trace."""
    return json.dumps(trace.to_dict(), indent=2, ensure_ascii=False, allow_nan=False) + "\n"
