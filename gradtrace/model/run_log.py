"""A run's log (`watch --log`), schema gradtrace.log/1: JSON Lines appended as the run goes,
read back whole, still growing, or cut by a kill at any byte."""

from __future__ import annotations

import io
import json
import re
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, replace
from datetime import datetime, timezone
from typing import Any, Literal, get_args

from ..errors import RunLogError
from .codec import finding_dict, finding_from, leaf_steps_json, steps_from
from .records import Finding, LeafStep, Pass, Steps, Trace
from .validate import finding_problem, steps_problem
from .values import json_float

SCHEMA = "gradtrace.log/1"
_FAMILY, _MAJOR = SCHEMA.split("/")
Outcome = Literal["finished", "stopped", "failed"]
OUTCOMES: tuple[Outcome, ...] = get_args(Outcome)
_HINT = "a run log is what `gradtrace watch --log FILE` writes: one JSON object a line"


@dataclass(frozen=True, slots=True)
class LogHeader:
    """The log's first line: who wrote it, for which script, and when."""

    gradtrace: str
    torch: str
    script: str
    argv: tuple[str, ...]
    started: str  # ISO 8601, UTC (started_now())

    @staticmethod
    def started_now() -> str:
        """Now, as a header's `started`: 2026-11-28T05:21:31+00:00."""
        return datetime.now(timezone.utc).isoformat(timespec="seconds")


@dataclass(frozen=True, slots=True)
class LogLeaves:
    """Named leaves first seen: the step rows' columns from index `first` on."""

    first: int
    names: tuple[str, ...]
    modules: tuple[str | None, ...]  # the nn.Module path of each, else None


@dataclass(frozen=True, slots=True)
class LogSteps:
    """Consecutive step rows, the first of them pass number `first` (from 1); a row may
    be shorter than the columns: those added later are None in it."""

    first: int
    loss: tuple[float | None, ...]
    optimizer_steps: tuple[int, ...]
    grads: Sequence[tuple[LeafStep | None, ...]]
    loss_scale: tuple[float | None, ...] = ()  # empty: no row's gradients were scaled
    loss_divisor: tuple[float | None, ...] = ()  # empty: no row's loss was divided
    closure_call: tuple[int | None, ...] = ()  # empty: no row ran in an optimizer's closure


@dataclass(frozen=True, slots=True)
class LogFinding:
    """A finding as it fired, and the pass it fired at (None: the run's, not a step's)."""

    step: int | None
    finding: Finding


@dataclass(frozen=True, slots=True)
class LogEnd:
    """The last line of a run that ended (a killed run has none)."""

    steps: int
    optimizer_steps_after: int
    outcome: Outcome


LogRecord = LogHeader | LogLeaves | LogSteps | LogFinding | LogEnd


def log_line(record: LogRecord) -> str:
    """One line of the log: the record as JSON, ASCII only (valid under any locale), ending
    in a newline. Non-finite numbers are the strings "nan", "inf", "-inf", as in a trace."""
    return json.dumps(_ENCODERS[type(record)](record), ensure_ascii=True, allow_nan=False) + "\n"


def _header_json(h: LogHeader) -> dict[str, Any]:
    return {"kind": "header", "schema": SCHEMA, "gradtrace": h.gradtrace, "torch": h.torch,
            "script": h.script, "argv": list(h.argv), "started": h.started}


def _leaves_json(r: LogLeaves) -> dict[str, Any]:
    return {"kind": "leaves", "first": r.first, "names": list(r.names),
            "modules": list(r.modules)}


def _steps_json(r: LogSteps) -> dict[str, Any]:
    d: dict[str, Any] = {"kind": "steps", "first": r.first,
                         "loss": [json_float(x) for x in r.loss],
                         "optimizer_steps": list(r.optimizer_steps),
                         "grads": leaf_steps_json(r.grads)}
    for key in ("loss_scale", "loss_divisor"):
        if getattr(r, key):  # left out when no row has one, as the trace's steps leave it empty
            d[key] = [json_float(x) for x in getattr(r, key)]
    if r.closure_call:
        d["closure_call"] = list(r.closure_call)
    return d


def _finding_json(r: LogFinding) -> dict[str, Any]:
    return {"kind": "finding", "step": r.step, **finding_dict(r.finding)}


def _end_json(r: LogEnd) -> dict[str, Any]:
    return {"kind": "end", "steps": r.steps, "optimizer_steps_after": r.optimizer_steps_after,
            "outcome": r.outcome}


_ENCODERS: dict[type, Callable[[Any], dict[str, Any]]] = {
    LogHeader: _header_json, LogLeaves: _leaves_json, LogSteps: _steps_json,
    LogFinding: _finding_json, LogEnd: _end_json,
}


@dataclass(frozen=True, slots=True)
class RunLog:
    """What a log holds: its complete lines read, a cut last line skipped."""

    header: LogHeader | None  # None: not even the header's line is complete yet
    steps: Steps | None  # None: no step row yet
    findings: tuple[LogFinding, ...]
    end: LogEnd | None  # None: the run goes on, or was killed
    complete_lines: int  # the lines read (each ends in a newline)
    torn: bool  # the last line was cut (a run killed mid-write) and is skipped

    @property
    def ended(self) -> bool:
        """Whether the run ended (its end line was written)."""
        return self.end is not None

    @property
    def outcome(self) -> Outcome | None:
        """How the run ended (None: it has not, or was killed)."""
        return None if self.end is None else self.end.outcome

    def trace(self) -> Trace:
        """The log as a Trace without a graph: its steps, a light pass per step row (only
        its statistics kept) and its findings, for the commands that read a saved trace."""
        h = self.header
        return Trace(
            scenario=None if h is None else h.script,
            gradtrace_version="" if h is None else h.gradtrace,
            torch_version="" if h is None else h.torch,
            outputs=(), output_names=(), root_reason="", nodes=(), edges=(), tensors=(),
            passes=(_LIGHT_PASS,) * (0 if self.steps is None else len(self.steps.loss)),
            # a finding's node is one of a graph the log does not hold
            findings=tuple(replace(f.finding, node=None) for f in latest(self.findings)),
            steps=self.steps)


# a step row's pass: one record for all, as none holds anything of its own
_LIGHT_PASS = Pass("backward", (), retain_graph=False, create_graph=False, error=None,
                   light=True)


def starts_run_log(first_line: str | bytes) -> bool:
    """Whether a file's first line is a run log's header (of any schema version): a log is
    known by what it holds, not by its name."""
    try:
        head = json.loads(first_line)
    except (ValueError, RecursionError):  # UnicodeDecodeError is a ValueError
        return False
    return (isinstance(head, dict) and head.get("kind") == "header"
            and isinstance(head.get("schema"), str)
            and head["schema"].startswith(_FAMILY + "/"))


def read_log(source: str | bytes | Iterable[str | bytes]) -> RunLog:
    """The log in source (its text, bytes, or lines as a file gives them); a cut last line is
    skipped, and any other invalid line raises RunLogError naming its number."""
    reading = _Reading()
    torn = False
    for number, (line, last) in enumerate(_with_last(_lines(source)), 1):
        complete = line.endswith(b"\n" if isinstance(line, bytes) else "\n")
        data = _parsed(line) if complete else _CUT
        if data is _CUT and last:
            torn = True
            break
        if data is _CUT:
            raise RunLogError(f"line {number}: " + ("not a line of JSON" if complete else
                                                    "cut short (no newline at its end)"), _HINT)
        reading.take(data, number)
    return reading.log(torn)


class GrowingLog:
    """A log read as it grows (`steps --follow`): each line is parsed once, when its newline
    arrives, so a 100,000-line log is not read again for every new line."""

    def __init__(self) -> None:
        self._reading = _Reading()
        self._waiting = b""  # the last line so far, its newline not yet written
        self._number = 0  # the complete lines taken

    def feed(self, appended: bytes) -> int:
        """Take the bytes appended since the last feed: the number of lines they completed.
        An invalid line raises RunLogError naming its number."""
        *complete, self._waiting = (self._waiting + appended).split(b"\n")
        for line in complete:
            self._number += 1
            data = _parsed(line)
            if data is _CUT:
                raise _problem(self._number, "not a line of JSON")
            self._reading.take(data, self._number)
        return len(complete)

    @property
    def ended(self) -> bool:
        """Whether the run's end line was taken (cheaper than log().ended)."""
        return self._reading.end is not None

    def log(self) -> RunLog:
        """What the complete lines so far hold (torn: a line waits for its newline); its
        steps are made anew from every row."""
        return self._reading.log(bool(self._waiting))


_CUT = object()  # what a line that is not whole JSON reads as


def _parsed(line: str | bytes) -> Any:
    """The JSON value of a line, or _CUT."""
    try:
        return json.loads(line)
    except (ValueError, RecursionError):  # bad UTF-8, bad JSON, a number of 5,000 digits
        return _CUT


def _lines(source: str | bytes | Iterable[str | bytes]) -> Iterable[str | bytes]:
    """source's lines, each with its newline but a last one cut short."""
    if isinstance(source, str):
        return io.StringIO(source, newline="\n")  # "\n" alone ends a line, as the writer's
    if isinstance(source, bytes):
        return io.BytesIO(source)
    return source


def _with_last(items: Iterable[Any]) -> Iterator[tuple[Any, bool]]:
    """Each item, and whether it is the last (known once the next is read)."""
    held, have = None, False
    for item in items:
        if have:
            yield held, False
        held, have = item, True
    if have:
        yield held, True


class _Reading:
    """A log's records taken line by line; the step rows kept as the trace's JSON has them."""

    def __init__(self) -> None:
        self.header: LogHeader | None = None
        self.end: LogEnd | None = None
        self.lines = 0
        self.findings: list[LogFinding] = []
        self.names: list[str] = []  # the columns
        self.modules: list[str | None] = []
        self.rows: dict[str, list[Any]] = {key: [] for key in _ROW_KEYS}

    def take(self, data: Any, number: int) -> None:
        """Take one complete line's JSON value (number: its line, from 1)."""
        kind = data.get("kind") if isinstance(data, dict) else None
        if not isinstance(kind, str):
            raise _problem(number, "expected an object with a \"kind\"")
        if self.header is None and kind != "header":
            raise _problem(number, "not a gradtrace run log: its first line is not a header")
        if self.end is not None and kind in _TAKERS:
            raise _problem(number, f"a {kind} line after the run's end")
        self.lines += 1
        taker = _TAKERS.get(kind)
        if taker is not None:  # an unknown kind is a later gradtrace's: skipped
            problem = taker(self, data)
            if problem is not None:
                raise _problem(number, f"invalid {kind} line: {problem}")

    def _header(self, d: dict[str, Any]) -> str | None:
        if self.header is not None:
            return "a second header: give each run a log of its own"
        schema = d.get("schema")
        if not isinstance(schema, str) or not schema.startswith(_FAMILY + "/"):
            return f"schema: expected {SCHEMA}, found {schema!r:.60}"
        if schema.removeprefix(_FAMILY + "/").split(".")[0] != _MAJOR:
            raise RunLogError(f"line 1: the log's schema is {schema!r:.60}; this gradtrace "
                              f"reads {SCHEMA}", "read it with the gradtrace that wrote it")
        problem = (_texts(d, ("gradtrace", "torch", "script", "started"))
                   or _text_list(d.get("argv"), "argv"))
        if problem is None:
            self.header = LogHeader(d["gradtrace"], d["torch"], d["script"], tuple(d["argv"]),
                                    d["started"])
        return problem

    def _leaves(self, d: dict[str, Any]) -> str | None:
        problem = _first(d, len(self.names), "the columns so far")
        if problem is not None or not isinstance(d.get("names"), list):
            return problem or f"names: expected a list, found {d.get('names')!r:.40}"
        added = d.get("modules") or [None] * len(d["names"])  # null: no module known
        problem = steps_problem({"leaves": d["names"], "modules": added, "loss": [],
                                 "optimizer_steps": [], "grads": []}, 0)
        if problem is None:
            self.names.extend(d["names"])
            self.modules.extend(added)
        return problem

    def _steps(self, d: dict[str, Any]) -> str | None:
        rows = self.rows
        problem = _first(d, len(rows["loss"]) + 1, "the pass after the rows so far")
        loss = d.get("loss")
        count = len(loss) if isinstance(loss, list) else 0
        batch = {key: d[key] for key in _ROW_KEYS if key in d}
        problem = problem or steps_problem(
            {**batch, "leaves": self.names, "modules": self.modules}, count)
        if problem is None:
            for key in _ROW_KEYS:
                rows[key].extend(d.get(key) or [None] * count)  # left out: none in the batch
        return problem

    def _finding(self, d: dict[str, Any]) -> str | None:
        step = d.get("step")
        if step is not None and (type(step) is not int or step < 1):
            return f"step: expected a pass number (1 or more) or null, found {step!r:.40}"
        problem = finding_problem(d)
        if problem is None:
            self.findings.append(LogFinding(step, finding_from(d)))
        return problem

    def _end(self, d: dict[str, Any]) -> str | None:
        for key in ("steps", "optimizer_steps_after"):
            if type(d.get(key)) is not int or d[key] < 0:
                return f"{key}: expected a whole number ≥ 0, found {d.get(key)!r:.40}"
        if d.get("outcome") not in OUTCOMES:
            return f"outcome: expected one of {', '.join(OUTCOMES)}, found {d.get('outcome')!r:.40}"
        self.end = LogEnd(d["steps"], d["optimizer_steps_after"], d["outcome"])
        return None

    def log(self, torn: bool) -> RunLog:
        """The RunLog of the lines taken."""
        return RunLog(self.header, self._made_steps(), tuple(self.findings), self.end,
                      self.lines, torn)

    def _made_steps(self) -> Steps | None:
        """The rows as the model's Steps (None without a row), each as wide as the columns."""
        rows, width = self.rows, len(self.names)
        if not rows["loss"]:
            return None
        return steps_from({
            "leaves": self.names, "modules": self.modules, "loss": rows["loss"],
            "optimizer_steps": rows["optimizer_steps"],
            "grads": [row + [None] * (width - len(row)) for row in rows["grads"]],
            "optimizer_steps_after": 0 if self.end is None else self.end.optimizer_steps_after,
            # as a trace's steps: empty unless a row has one
            **{key: rows[key] if any(x is not None for x in rows[key]) else []
               for key in ("loss_scale", "loss_divisor", "closure_call")}})


_ROW_KEYS = ("loss", "optimizer_steps", "grads", "loss_scale", "loss_divisor", "closure_call")
_TAKERS: dict[str, Callable[[_Reading, dict[str, Any]], str | None]] = {
    "header": _Reading._header, "leaves": _Reading._leaves, "steps": _Reading._steps,
    "finding": _Reading._finding, "end": _Reading._end,
}


def _problem(number: int, problem: str) -> RunLogError:
    return RunLogError(f"line {number}: {problem}", _HINT)


def _first(d: dict[str, Any], expected: int, what: str) -> str | None:
    """The problem with d's `first`, which must be expected (what: what that number is)."""
    if d.get("first") != expected or type(d.get("first")) is not int:
        return f"first: expected {expected} ({what}), found {d.get('first')!r:.40}"
    return None


def _texts(d: dict[str, Any], keys: tuple[str, ...]) -> str | None:
    """The problem with the first of d's keys that is not a string, or None."""
    for key in keys:
        if not isinstance(d.get(key), str):
            return f"{key}: expected a string, found {d.get(key)!r:.40}"
    return None


def _text_list(value: Any, key: str) -> str | None:
    """The problem with a value that should be a list of strings, or None."""
    if not isinstance(value, list) or not all(isinstance(item, str) for item in value):
        return f"{key}: expected a list of strings, found {value!r:.40}"
    return None


# the numbers a finding's words hold: its counts, which grow as a run goes
_COUNTS = re.compile(r"\d[\d,.]*(e[-+]?\d+)?")
# the module a node's line is in, which the trace adds to words told as a pass ran
# ("(line 8)", then "(line 8, in model)")
_IN_MODULE = re.compile(r", in [\w.\[\]]+(?=[),])| \(in [\w.\[\]]+\)")


# The gradients' health, judged again as rows come: its words change as the run goes (a
# .grad that "kept growing" over passes "stepped before each pass", later "12 times")
_REJUDGED = frozenset({"grad-accumulating", "vanishing-gradient", "exploding-gradient",
                       "dead-parameter"})


# how a finding about one pass begins: that pass's, however the trace later words it
_PASS = re.compile(r"pass \d+: ")


def about_one_pass(finding: Finding) -> str | None:
    """The pass a finding is about, as its words begin ("pass 12: "); None: not one."""
    at = _PASS.match(finding.message)
    return None if at is None else at.group(0)


def rejudged(finding: Finding) -> bool:
    """Whether a finding is the gradients' health, judged again as rows come."""
    return finding.code in _REJUDGED


def told_as(finding: Finding) -> tuple[str | int | None, ...]:
    """What makes a finding the one told before: its code, what it is about and its words,
    counts aside (a vanishing gradient "in 64 of 64 passes", later "in 2,000 of 2,000"); a
    health finding's words aside; of a finding about one pass, its pass alone (told as it
    fired, then by the trace with its line and node)."""
    if (at := about_one_pass(finding)) is not None:
        return finding.code, None, None, None, None, at
    if rejudged(finding):  # one a code and tensor: told live without a line, then with it
        return finding.code, finding.tensor, None, None, None, ""
    words = _COUNTS.sub("#", _IN_MODULE.sub("", finding.message))
    return finding.code, finding.tensor, finding.node, finding.file, finding.line, words


def latest(findings: Iterable[LogFinding]) -> list[LogFinding]:
    """Each finding once, in the order first told, in the words it was last told in (a run's
    end tells again those whose counts grew)."""
    last: dict[tuple[str | int | None, ...], LogFinding] = {}
    for told in findings:
        key = told_as(told.finding)
        last[key] = told if key not in last else replace(last[key], finding=told.finding)
    return list(last.values())
