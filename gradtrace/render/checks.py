"""`gradtrace check` results as a report, JSON, and JUnit XML."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from collections import Counter
from typing import Any

from rich.console import Group, RenderableType
from rich.table import Table
from rich.text import Text

from ..model.checks import CheckResult, CheckRun, Mismatch
from ..model.texts import number
from ..model.values import json_float, json_values
from .escape import visible

VERDICT_STYLE = {"pass": "green", "fail": "bold red", "error": "bold red", "skipped": "dim",
                 "timed out": "bold yellow", "straight-through": "bold yellow",
                 "not applicable": "dim"}
# How the run's summary line counts each outcome, in its order.
OUTCOMES = {"passed": "passed", "failed": "failed", "smell": "smell(s) (see the note)",
            "straight-through": "look(s) like a straight-through estimator",
            "skipped": "skipped by gradtrace_skip", "timed out": "timed out"}
SHOWN = 6  # rows and columns of a Jacobian shown around its worst entry


def check_report(run: CheckRun) -> RenderableType:
    """The table, the Jacobians where they disagree, and the count of passes."""
    parts: list[RenderableType] = [
        check_table(run.results) if run.results
        else Text("no custom autograd.Function calls found", style="yellow")]
    parts.extend(view for view in map(mismatch_view, run.results) if view is not None)
    parts.extend(Text(f"note: {note}", style="dim") for note in run.notes)
    parts.append(Text(summary(run), style="bold"))
    return Group(*parts)


def summary(run: CheckRun) -> str:
    """ "12 of 12 ok: 11 passed, 1 skipped by gradtrace_skip": every result counted once, as
    its cells say."""
    counts = Counter(r.outcome for r in run.results)
    told = [f"{counts[o]} {OUTCOMES[o]}" for o in OUTCOMES if counts[o]]
    n = len(run.results)
    head = "nothing checked" if not n else f"{n} of {n} passed" if counts["passed"] == n else \
        f"{sum(r.ok for r in run.results)} of {n} ok: {', '.join(told)}"
    could_not = f"; {len(run.cannot_run)} scenario(s) could not run" if run.cannot_run else ""
    return head + could_not


def check_table(results: tuple[CheckResult, ...]) -> Table:
    """One row per Function and input signature."""
    table = Table(title="custom autograd.Functions", title_justify="left", header_style="bold")
    for column in ("Function", "scenario", "gradcheck", "gradgradcheck", "max error", "note"):
        table.add_column(column, overflow="fold")
    for r in results:
        error = number(r.mismatch.max_abs) if r.mismatch else ""
        notes = [r.message or "", *(f"smell: {s}" for s in r.smells), r.sampled or ""]
        if r.from_float32 and r.gradcheck not in ("skipped", "timed out"):
            notes.append("checked in float64")
        note = "; ".join(n for n in notes if n)
        table.add_row(
            Text(r.function, style="bold"),
            Text(f"{r.scenario}:{r.line}" if r.line else r.scenario),
            Text(r.gradcheck, style=VERDICT_STYLE.get(r.gradcheck, "")),
            Text(r.gradgradcheck, style=VERDICT_STYLE.get(r.gradgradcheck, "")),
            Text(error),
            Text(note, style="" if r.ok else "red"),
        )
    return table


def mismatch_view(r: CheckResult) -> RenderableType | None:
    """Numerical against analytical Jacobian near the worst entry, worst one highlighted."""
    m = r.mismatch
    if m is None:
        return None
    head = Text()
    head.append(f"{r.function}: Jacobian of output {m.output} with respect to input "
                f"{m.input}", style="bold")
    relative = "" if m.max_rel is None else f", max rel error {number(m.max_rel)}"
    checked = "" if m.rows is None else " (sampled elements)"
    head.append(f"  max abs error {number(m.max_abs)}{relative}, worst at input element "
                f"{m.worst[0]}, output element {m.worst[1]}{checked}")
    if m.numerical is None:
        return Group(head, Text("(too large to list)", style="dim"))
    return Group(head, _jacobians(m))


def _jacobians(m: Mismatch) -> Table:
    """Rows and columns around the worst entry, labelled with their element numbers."""
    row_of = m.rows or range(len(m.numerical))
    col_of = m.cols or range(len(m.numerical[0]))
    at = (row_of.index(m.worst[0]), col_of.index(m.worst[1]))
    rows = range(max(0, at[0] - SHOWN // 2), min(len(row_of), at[0] + SHOWN))
    cols = range(max(0, at[1] - SHOWN // 2), min(len(col_of), at[1] + SHOWN))
    table = Table(header_style="bold", show_lines=False)
    table.add_column("input elem")
    for c in cols:
        table.add_column(f"out {col_of[c]}: numerical / analytical", justify="right")
    for i in rows:
        cells = [Text(f"{number(m.numerical[i][c])} / {number(m.analytical[i][c])}",
                      style="bold red" if (i, c) == at else "") for c in cols]
        table.add_row(str(row_of[i]), *cells)
    return table


def check_dict(r: CheckResult) -> dict[str, Any]:
    """One result as JSON data."""
    d: dict[str, Any] = {
        "scenario": r.scenario, "function": r.function, "line": r.line,
        "inputs": list(r.inputs), "gradcheck": r.gradcheck,
        "gradgradcheck": r.gradgradcheck, "ok": r.ok, "message": r.message,
        "from_float32": r.from_float32, "smells": list(r.smells), "mismatch": None,
        "outcome": r.outcome, "sampled": r.sampled,
    }
    if r.mismatch is not None:
        m = r.mismatch
        d["mismatch"] = {"output": m.output, "input": m.input,
                         "numerical": json_values(m.numerical),
                         "analytical": json_values(m.analytical),
                         "max_abs": json_float(m.max_abs),
                         "max_rel": None if m.max_rel is None else json_float(m.max_rel),
                         "worst": list(m.worst),
                         "rows": None if m.rows is None else list(m.rows),
                         "cols": None if m.cols is None else list(m.cols)}
    return d


def check_json(run: CheckRun) -> str:
    """`gradtrace check --json`: every result, and the scenarios that could not run."""
    return json.dumps({"results": [check_dict(r) for r in run.results],
                       "cannot_run": {c.scenario: c.message for c in run.cannot_run},
                       "notes": list(run.notes)},
                      indent=2) + "\n"


def to_junit(run: CheckRun) -> str:
    """JUnit XML: one testcase per Function and signature, one per scenario that cannot run."""
    results = run.results
    suite = ET.Element("testsuite", name="gradtrace check",
                       tests=str(len(results) + len(run.cannot_run)),
                       failures=str(sum(not r.ok for r in results)),
                       errors=str(len(run.cannot_run)),
                       skipped=str(sum(r.gradcheck == "skipped" for r in results)))
    for r in results:
        case = ET.SubElement(suite, "testcase", classname=r.scenario,
                             name=f"{r.function}({', '.join(r.inputs)})")
        if r.gradcheck == "skipped":
            ET.SubElement(case, "skipped", message=r.message or "")
        elif not r.ok:
            reason = r.message or "; ".join(r.smells)
            failure = ET.SubElement(case, "failure",
                                    message=f"gradcheck {r.gradcheck}, gradgradcheck "
                                    f"{r.gradgradcheck}: {reason}")
            failure.text = "\n".join([reason, *r.smells])
    for broken in run.cannot_run:
        case = ET.SubElement(suite, "testcase", classname=broken.scenario, name="(scenario)")
        ET.SubElement(case, "error", message=broken.message)
    for element in suite.iter():  # XML 1.0 forbids control characters, even escaped
        element.attrib = {k: visible(v) for k, v in element.attrib.items()}
        if element.text:
            element.text = visible(element.text)
    ET.indent(suite)
    return '<?xml version="1.0" encoding="utf-8"?>\n' + ET.tostring(suite, encoding="unicode") \
        + "\n"
