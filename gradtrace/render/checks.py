"""`gradtrace check` results as a report, JSON, and JUnit XML."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from collections import Counter
from typing import Any

from rich.console import Console, ConsoleOptions, Group, RenderableType, RenderResult
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
    names = row_names(run.results)
    parts: list[RenderableType] = [
        check_table(run.results, names) if run.results
        else Text("no custom autograd.Function calls found", style="yellow")]
    parts.extend(view for r, name in zip(run.results, names, strict=True)
                 if (view := mismatch_view(r, name)) is not None)
    parts.extend(Text(f"note: {note}", style="dim") for note in run.notes)
    parts.append(Text(summary(run), style="bold"))
    return Group(*parts)


def row_names(results: tuple[CheckResult, ...]) -> list[str]:
    """Each result's Function name; with its inputs where another row of the same Function
    and line would look the same, and its call number where even those agree."""
    at = Counter((r.scenario, r.line, r.function) for r in results)
    signed = Counter((r.scenario, r.line, r.function, r.inputs) for r in results)
    names = []
    for r in results:
        name = r.function
        if at[r.scenario, r.line, r.function] > 1:
            name += f"({', '.join(r.inputs)})"
        if signed[r.scenario, r.line, r.function, r.inputs] > 1 and r.call:
            name += f" call {r.call}"
        names.append(name)
    return names


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


def check_table(results: tuple[CheckResult, ...], names: list[str] | None = None) -> Table:
    """One row per Function and input signature (names: row_names)."""
    names = names or row_names(results)
    table = Table(title="custom autograd.Functions", title_justify="left", header_style="bold")
    for column in ("Function", "scenario", "gradcheck", "gradgradcheck", "max error", "note"):
        table.add_column(column, overflow="fold")
    for r, name in zip(results, names, strict=True):
        error = number(r.mismatch.max_abs) if r.mismatch else ""
        notes = [r.message or "", *(f"smell: {s}" for s in r.smells), r.sampled or "",
                 *r.notes]
        if not r.ok and r.backward is not None:
            notes.append(f"backward: {where(r.backward)}")
        if r.from_float32 and r.gradcheck not in ("skipped", "timed out"):
            notes.append("checked in float64")
        note = "; ".join(n for n in notes if n)
        table.add_row(
            Text(name, style="bold"),
            Text(f"{r.scenario}:{r.line}" if r.line else r.scenario),
            Text(r.gradcheck, style=VERDICT_STYLE.get(r.gradcheck, "")),
            Text(r.gradgradcheck, style=VERDICT_STYLE.get(r.gradgradcheck, "")),
            Text(error),
            Text(note, style="" if r.ok else "red"),
        )
    return table


def mismatch_view(r: CheckResult, name: str | None = None) -> RenderableType | None:
    """Numerical against analytical Jacobian near the worst entry, worst one highlighted."""
    m = r.mismatch
    if m is None:
        return None
    head = Text()
    inp, out = element_names(m, len(r.inputs))
    what = f"Jacobian of output {m.output} with respect to input {m.input}" \
        if m.check == "gradcheck" else \
        f"backward's Jacobian: {out} with respect to {inp}"
    at = " at random inputs" if m.inputs == "random" else ""
    head.append(f"{name or r.function}: {m.check}{at}: {what}", style="bold")
    checked = " (sampled elements)" if m.rows is not None else ""
    head.append(f"\nworst at {inp}{element_at(m.worst[0], m.input_shape)}, "
                f"{out}{element_at(m.worst[1], m.output_shape)}{checked}: {worst_text(m)}")
    if r.backward is not None:
        called = f" (called at {r.scenario}:{r.line})" if r.line else ""
        head.append(f"\nbackward: {where(r.backward)}{called}")
    if m.numerical is None:
        return Group(head, Text("(too large to list)", style="dim"))
    return Group(head, JacobianView(m))


def where(place: tuple[str, int]) -> str:
    """FILE:LINE."""
    return f"{place[0]}:{place[1]}"


def element_names(m: Mismatch, n_inputs: int) -> tuple[str, str]:
    """What the block's rows and columns are: "input 0" and "output 0"; for gradgradcheck,
    backward's: an input or an incoming gradient, and the gradient of an input."""
    if m.check == "gradcheck":
        return f"input {m.input}", f"output {m.output}"
    by = f"input {m.input}" if m.input < n_inputs else f"incoming gradient {m.input - n_inputs}"
    return by, f"the gradient for input {m.output}"


def unravel(flat: int, shape: tuple[int, ...]) -> list[int]:
    """The indices of an element of a tensor of that shape from its flat (row-major) index:
    [28, 17] for 913 of [64, 32]."""
    at = []
    for size in reversed(shape):
        flat, k = divmod(flat, size) if size else (flat, 0)
        at.append(k)
    return at[::-1]


def position(flat: int, shape: tuple[int, ...] | None) -> str:
    """An element's position in its tensor, "[28, 17]" for element 913 of a [64, 32] one (the
    flat index where the shape is not known or the tensor is a scalar)."""
    if not shape:
        return str(flat)
    return "[" + ", ".join(map(str, unravel(flat, shape))) + "]"


def element_at(flat: int, shape: tuple[int, ...] | None) -> str:
    """ " [28, 17] of [64, 32]", " (a scalar)", or " element 913" (shape not known)."""
    if shape is None:
        return f" element {flat}"
    if not shape:
        return " (a scalar)"
    return f" {position(flat, shape)} of [{', '.join(map(str, shape))}]"


def worst_text(m: Mismatch) -> str:
    """The worst entry in words: a 0-against-x entry is a mismatch; elsewhere the errors,
    the relative one only where it means something."""
    numerical, analytical = m.worst_values
    if m.zero_numerical:
        return (f"mismatch: finite differences give {number(numerical)} where backward gives "
                f"{number(analytical)} (abs error {number(m.max_abs)}; a relative error "
                "means nothing against 0)")
    told = f"numerical {number(numerical)}, analytical {number(analytical)}"
    if analytical == 0:
        told = (f"mismatch: backward gives 0 where finite differences give "
                f"{number(numerical)}")
    rel = "" if m.max_rel is None else f", max relative error {number(m.max_rel)}"
    return f"{told} (max abs error {number(m.max_abs)}{rel})"


class JacobianView:
    """Numerical / analytical entries around the worst one, labelled with their element
    numbers: as many columns as fit the width (a number is never cut); all are in --json."""

    def __init__(self, m: Mismatch) -> None:
        self.m = m

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        m = self.m
        row_of = m.rows or range(len(m.numerical))
        col_of = m.cols or range(len(m.numerical[0]))
        at = (row_of.index(m.worst[0]), col_of.index(m.worst[1]))
        rows = range(max(0, at[0] - SHOWN // 2), min(len(row_of), at[0] + SHOWN))
        cells = {c: [f"{number(m.numerical[i][c])} / {number(m.analytical[i][c])}"
                     for i in rows] for c in range(len(col_of))}
        row_label = {i: position(row_of[i], m.input_shape) for i in rows}
        col_label = [position(c, m.output_shape) for c in col_of]
        first = max(len("in \\ out"), *(len(row_label[i]) for i in rows))

        def width(c: int) -> int:
            return max(len(col_label[c]), *map(len, cells[c])) + 3  # padding and a rule

        # the worst column, then its neighbours nearest first, while the table fits
        cols: list[int] = []
        used = first + 4  # a column's padding and rule, and the outer rule
        nearest = sorted(range(len(col_of)), key=lambda c: (abs(c - at[1]), -c))
        for c in nearest[:SHOWN + SHOWN // 2]:
            if cols and used + width(c) > options.max_width:
                break
            cols.append(c)
            used += width(c)
        cols.sort()
        shown = "" if len(cols) == len(col_of) else \
            f" ({len(cols)} of {len(col_of)} output elements shown)"
        table = Table(header_style="bold", show_lines=False,
                      title=f"numerical / analytical{shown}", title_justify="left")
        table.add_column("in \\ out", no_wrap=True)
        for c in cols:
            table.add_column(col_label[c], justify="right", overflow="fold")
        for k, i in enumerate(rows):
            table.add_row(row_label[i], *[
                Text(cells[c][k], style="bold red" if (i, c) == at else "") for c in cols])
        yield table


def check_dict(r: CheckResult) -> dict[str, Any]:
    """One result as JSON data."""
    d: dict[str, Any] = {
        "scenario": r.scenario, "function": r.function, "line": r.line,
        "inputs": list(r.inputs), "gradcheck": r.gradcheck,
        "gradgradcheck": r.gradgradcheck, "ok": r.ok, "message": r.message,
        "from_float32": r.from_float32, "smells": list(r.smells), "mismatch": None,
        "outcome": r.outcome, "sampled": r.sampled, "call": r.call, "notes": list(r.notes),
        "backward": None if r.backward is None else {"file": r.backward[0],
                                                     "line": r.backward[1]},
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
                         "cols": None if m.cols is None else list(m.cols),
                         "check": m.check,
                         "worst_values": [json_float(v) for v in m.worst_values],
                         "zero_numerical": m.zero_numerical,
                         "inputs": m.inputs,
                         "input_shape": None if m.input_shape is None else list(m.input_shape),
                         "output_shape": None if m.output_shape is None
                         else list(m.output_shape),
                         "worst_at": [_indices(m.worst[0], m.input_shape),
                                      _indices(m.worst[1], m.output_shape)]}
    return d


def _indices(flat: int, shape: tuple[int, ...] | None) -> list[int] | None:
    """An element's position as a list of indices ([] for a scalar), None without a shape."""
    if shape is None:
        return None
    return unravel(flat, shape)


CHECK_SCHEMA = "gradtrace.check/1"


def counts(run: CheckRun) -> dict[str, int]:
    """The summary line's counts, as JSON: each result counted once, by its outcome."""
    by_outcome = Counter(r.outcome for r in run.results)
    return {"checked": len(run.results), "ok": sum(r.ok for r in run.results),
            **{o.replace(" ", "_").replace("-", "_"): by_outcome[o] for o in OUTCOMES},
            "cannot_run": len(run.cannot_run)}


def check_json(run: CheckRun) -> str:
    """`gradtrace check --json`: the counts, every result, the scenarios that could not run
    and what was left out."""
    return json.dumps({"schema": CHECK_SCHEMA, "summary": counts(run),
                       "results": [check_dict(r) for r in run.results],
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
            backward = [] if r.backward is None else [f"backward: {where(r.backward)}"]
            failure.text = "\n".join([reason, *r.smells, *backward, *r.notes])
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
