"""Text from a scenario or a saved trace is data: it must not drive a terminal or inject markup.

`visible` shows control characters as escapes (`\\x1b`, `\\u202e`); `VisibleHook` applies it to
everything a rich console prints, after layout, so rich's own colours still work.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from rich.console import (
    Console,
    ConsoleOptions,
    ConsoleRenderable,
    RenderableType,
    RenderHook,
    RenderResult,
)
from rich.segment import Segment

# C0 controls but tab and newline, DEL, C1 controls, bidirectional overrides and isolates,
# lone surrogates (not encodable), and the two non-characters XML 1.0 forbids.
_UNSAFE = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u200e\u200f\u202a-\u202e\u2066-\u2069"
                     "\ud800-\udfff\ufffe\uffff]")


def _escape(match: re.Match[str]) -> str:
    code = ord(match[0])
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def visible(text: str) -> str:
    """text with control and invisible direction characters written as escapes."""
    return _UNSAFE.sub(_escape, text) if _UNSAFE.search(text) else text


class Visible:
    """A renderable whose text segments are passed through `visible`."""

    def __init__(self, renderable: RenderableType) -> None:
        self.renderable = renderable

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        for segment in console.render(self.renderable, options):
            text, style, control = segment
            if control or not _UNSAFE.search(text):
                yield segment
            else:
                yield Segment(visible(text), style)


class VisibleHook(RenderHook):
    """Installed on a console, makes every renderable printed on it Visible."""

    def process_renderables(self, renderables: Sequence[RenderableType],
                            ) -> list[ConsoleRenderable]:
        return [Visible(r) for r in renderables]


def visible_console(console: Console) -> Console:
    """console, with nothing printed on it able to drive the terminal."""
    console.push_render_hook(VisibleHook())
    return console
