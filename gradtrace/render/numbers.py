"""Numbers in the terminal: `nan`, `inf` and `-inf` stand out in red wherever a gradient or a
value is printed (the tree, the tensor table, the passes)."""

from __future__ import annotations

import re

from rich.style import Style
from rich.text import Text

NON_FINITE_STYLE = "bold red"
# a whole word: "inf" in "[0.3, inf]", not in "information"; the sign goes with it
_NON_FINITE = re.compile(r"(?<![\w.])-?(?:nan|inf)(?![\w.])")


def number_text(text: str, style: str | Style = "") -> Text:
    """text in style, with each nan, inf and -inf in red."""
    out = Text(text, style=style)
    if "nan" in text or "inf" in text:
        for match in _NON_FINITE.finditer(text):
            out.stylize(NON_FINITE_STYLE, match.start(), match.end())
    return out
