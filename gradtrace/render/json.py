"""The Trace as JSON text: the canonical, deterministic serialised form."""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterable, Iterator
from itertools import islice, repeat
from json import encoder as json_encoder
from json.encoder import encode_basestring, encode_basestring_ascii
from typing import Any

from ..gcpause import collector_paused, gc_paused
from ..model.codec import Streamed, trace_sections
from ..model.records import Trace

_SURROGATE = re.compile("[\ud800-\udfff]")


def json_text(value: Any, **options: Any) -> str:
    """json.dumps(value) with other characters as they are, but lone surrogates escaped
    ("\\udcff"): UTF-8 cannot hold them, and they come (a path python decoded with
    surrogateescape under an ASCII locale, a saved trace's "\\udcff")."""
    text = json.dumps(value, ensure_ascii=False, allow_nan=False, **options)
    if text.isascii() or not _SURROGATE.search(text):
        return text
    return json.dumps(value, ensure_ascii=True, allow_nan=False, **options)


def _encoder(ascii_only: bool) -> Callable[[Iterable[Any]], Iterable[str]]:
    """Each item's JSON text: json's C encoder made once and called through map (json.dumps
    with options makes a new encoder per call: a third of the time for 100,000s of items)."""
    c_make_encoder = getattr(json_encoder, "c_make_encoder", None)  # not in typeshed
    if c_make_encoder is None:  # a Python without the C accelerator
        return lambda items: (json.dumps(value, ensure_ascii=ascii_only, allow_nan=False)
                              for value in items)
    escape = encode_basestring_ascii if ascii_only else encode_basestring
    make = c_make_encoder(None, _refuse, escape, None, ": ", ", ", False, False, False)
    return lambda items: map("".join, map(make, items, repeat(0)))


def _refuse(value: Any) -> Any:
    raise TypeError(f"{type(value).__name__} is not JSON serializable")


@gc_paused
def to_json(trace: Trace) -> str:
    """JSON of the trace (schema gradtrace.trace/3), byte-identical for the same trace."""
    return "".join(json_chunks(trace))


def json_chunks(trace: Trace) -> Iterator[str]:
    """The trace's JSON text in pieces, made as they are written (no whole-trace dict).

    One top-level key per line and one list item (node, edge, gradient ...) per line:
    readable and diff-friendly, and written by json's C encoder.
    """
    compact, ascii_compact = _encoder(False), _encoder(True)

    def text(value: Any) -> str:
        out, = compact((value,))
        if out.isascii() or not _SURROGATE.search(out):
            return out
        # A lone surrogate (from a trace's "\ud800") cannot be written as UTF-8: escape it.
        escaped, = ascii_compact((value,))
        return escaped

    def texts(items: list[Any]) -> str:
        """The items' texts, one a line (each item escaped as text() would)."""
        out = ",\n    ".join(compact(items))
        return out if out.isascii() or not _SURROGATE.search(out) else \
            ",\n    ".join(map(text, items))

    with collector_paused():
        yield from _chunks(trace, text, texts)


def _chunks(trace: Trace, text: Callable[[Any], str],
            texts: Callable[[list[Any]], str]) -> Iterator[str]:
    yield "{\n"
    for k, (key, value) in enumerate(trace_sections(trace)):
        yield ",\n  " if k else "  "
        if isinstance(value, list) and value:
            value = iter(value)
        if isinstance(value, Iterator):
            first = next(value, _END)
            if first is _END:
                yield f"{text(key)}: []"
                continue
            yield f"{text(key)}: [\n    "
            yield from _item(first, text)
            # the rest a few thousand at a time: each item's text joined, a piece per part
            while part := list(islice(value, _PART)):
                if any(type(item) is Streamed for item in part):
                    for item in part:
                        yield ",\n    "
                        yield from _item(item, text)
                else:
                    yield ",\n    " + texts(part)
            yield "\n  ]"
        else:
            yield f"{text(key)}: {text(value)}"
    yield "\n}\n"


_END = object()
_PART = 4096


def _item(item: Any, text: Callable[[Any], str]) -> Iterator[str]:
    """One item's text; a mapping given as an iterator of pairs (a pass's flow: 100,000s of
    entries) is written a part at a time, as json would write the dict, never whole."""
    if type(item) is not Streamed:
        yield text(item)
        return
    for k, (key, value) in enumerate(item.items()):
        yield f"{', ' if k else '{'}{text(key)}: "
        if isinstance(value, Iterator):
            yield "{"
            # a few thousand entries a time, as one dict without its braces: json's encoder
            # at its speed, and never the whole mapping at once
            comma = ""
            while part := dict(islice(value, _PART)):
                yield comma + text(part)[1:-1]
                comma = ", "
            yield "}"
        else:
            yield text(value)
    yield "}"
