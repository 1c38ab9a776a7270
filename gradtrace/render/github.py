"""Findings as GitHub Actions workflow commands: an annotation on the file and line."""

from __future__ import annotations

from ..model.records import Finding
from .escape import visible

LEVEL = {"error": "error", "warning": "warning", "info": "notice"}


def _data(text: str) -> str:
    """Escaped as workflow commands need, and no control character left raw (the text comes
    from a scenario or a trace)."""
    return visible(text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A"))


def _property(text: str) -> str:
    return _data(text).replace(":", "%3A").replace(",", "%2C")


def github_annotations(findings: tuple[Finding, ...]) -> str:
    """One `::error file=…,line=…,title=…::message` line per finding, most severe first."""
    order = {"error": 0, "warning": 1, "info": 2}
    lines = []
    for f in sorted(findings, key=lambda f: order.get(f.severity, 3)):
        where = []
        if f.file is not None:
            where.append(f"file={_property(f.file)}")
            if f.line is not None:
                where.append(f"line={f.line}")
        where.append(f"title={_property(f'gradtrace {f.code}')}")
        message = f.message + (f"\n{f.hint}" if f.hint else "")
        lines.append(f"::{LEVEL.get(f.severity, 'notice')} {','.join(where)}::{_data(message)}")
    return "".join(line + "\n" for line in lines)
