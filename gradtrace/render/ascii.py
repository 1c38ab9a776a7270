"""ASCII stand-ins for gradtrace's own symbols, for a stdout that cannot carry them (`LC_ALL=C`).

Each stand-in is as wide as its symbol, so a report keeps its columns (the tables, the tree's
guides, a sparkline), except where a wider one reads far better in running text (`->`).
A symbol a renderer adds needs its stand-in here (tests/test_stdout.py reads every string).
"""

from __future__ import annotations

ASCII_SYMBOLS = {
    "·": "-", "…": "~", "→": "->", "↑": "^", "↻": "@", "⚓": "**", "⚠": "!",
    "×": "x", "²": "2", "±": "+-", "−": "-", "–": "-", "—": "-", "≥": ">=",
    "≤": "<=", "µ": "u", "✂": "8<",
    "├": "|", "└": "`", "│": "|", "─": "-",
    # a sparkline from low to high
    "▁": "_", "▂": ".", "▃": ":", "▄": "=", "▅": "+", "▆": "*", "▇": "%", "█": "#",
}

_TABLE = str.maketrans(ASCII_SYMBOLS)


def ascii_symbols(text: str) -> str:
    """text with gradtrace's symbols written in ASCII; other characters as they are."""
    return text.translate(_TABLE)
