"""Findings as GitHub Actions workflow commands: an annotation on the file and line."""

from __future__ import annotations

from ..model.checks import CheckRun
from ..model.records import Finding
from .escape import visible

LEVEL = {"error": "error", "warning": "warning", "info": "notice"}


def _data(text: str) -> str:
    """Escaped as workflow commands need, and no control character left raw (the text comes
    from a scenario or a trace)."""
    return visible(text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A"))


def inert(text: str) -> str:
    """text with no legacy workflow command in it: GitHub's runner reads `##[add-mask]…`
    anywhere in a line, so each `##[` is written `#%23[`."""
    return text.replace("##[", "#%23[")


def log_line(text: str) -> str:
    """text to print after a word of gradtrace's own (`error: `) in a GitHub Actions log: one
    line, escaped as a command's message is, so the runner reads no command in it."""
    return inert(_data(text))


def _property(text: str) -> str:
    return _data(text).replace(":", "%3A").replace(",", "%2C")


def annotation(level: str, title: str, message: str, file: str | None = None,
               line: int | None = None) -> str:
    """One `::error file=…,line=…,title=…::message` line; level is error, warning or notice."""
    where = []
    if file is not None:
        where.append(f"file={_property(file)}")
        if line is not None:
            where.append(f"line={line}")
    where.append(f"title={_property(title)}")
    return f"::{level} {','.join(where)}::{_data(message)}\n"


def github_annotations(findings: tuple[Finding, ...]) -> str:
    """One annotation per finding, most severe first."""
    order = {"error": 0, "warning": 1, "info": 2}
    return "".join(
        annotation(LEVEL.get(f.severity, "notice"), f"gradtrace {f.code}",
                   f.message + (f"\n{f.hint}" if f.hint else ""), f.file, f.line)
        for f in sorted(findings, key=lambda f: order.get(f.severity, 3)))


def check_annotations(run: CheckRun) -> str:
    """One annotation per check that is not ok (on the scenario's line of the Function call),
    and one per scenario that could not run."""
    lines = [annotation("error", "gradtrace check", f"{c.scenario}: {c.message}"
                        + (f"\n{c.hint}" if c.hint else ""), c.scenario)
             for c in run.cannot_run]
    for r in run.results:
        if r.ok or r.outcome == "skipped":
            continue
        level = "error" if r.outcome in ("failed", "timed out") else "warning"
        told = [f"gradcheck {r.gradcheck}", f"gradgradcheck {r.gradgradcheck}",
                *(f"smell: {s}" for s in r.smells), r.message or ""]
        lines.append(annotation(level, f"gradtrace check {r.function}",
                                f"{r.function}({', '.join(r.inputs)}): {r.outcome}: "
                                + "; ".join(t for t in told if t), r.scenario, r.line))
    return "".join(lines)
