"""What a command reads: a Trace from a scenario (run now), a saved JSON trace or a run's log;
a pass."""

from __future__ import annotations

import json
import shlex
import time
from pathlib import Path
from typing import TYPE_CHECKING, Literal, NamedTuple

from ..capture.script.target import parse_target
from ..errors import GradtraceError, NoGraph, RunLogError, ScenarioError, TraceFileError
from ..findings.registry import NO_GRAPH, NO_GRAPH_LEAD
from ..gcpause import collector_paused
from ..model.codec import trace_from_dict
from ..model.labels import label_file
from ..model.records import Pass, Trace
from ..model.run_log import RunLog, read_log, starts_run_log
from ..render.report import kept_in_full
from .files import is_stream
from .output import tell

if TYPE_CHECKING:  # (capture imports torch when it runs)
    from ..capture.options import RunListener


class Loaded(NamedTuple):
    """A command's Trace, and the error that stopped its scenario part-way, if one did: the
    command shows the trace, then raises ending()'s error (exit 2)."""

    trace: Trace
    stopped: ScenarioError | None = None
    seconds: float | None = None  # how long the script ran (None: a saved trace, read)
    log: RunLog | None = None  # the run's log the trace was read from

    def ending(self, printed_shown: bool = False, picture: bool = False,
               findings_shown: bool = False) -> ScenarioError | None:
        """The one rule every command ends by: the scenario stopped (it raised, in backward()
        too, exited non-zero or ran out of time), else it made no graph — or None: exit 0.

        printed_shown: the command showed what the scenario printed (else the error carries
        it); picture: the command draws the graph, so a trace of gradcheck verdicts alone has
        nothing to give it either; findings_shown: the report above it on the terminal holds
        the error whole (its scenario-stopped finding), so the error says it in brief."""
        error = self.stopped or no_graph(self.trace, picture)
        if findings_shown and error is not None and error.brief is not None:
            error = ScenarioError(f"{error.brief} (the scenario-stopped finding above has "
                                  "its whole message)", error.hint, error.line)
        if error is not None and not printed_shown and not error.printed:
            error.printed = self.trace.stdout
        return error


def no_graph(trace: Trace, picture: bool = False) -> NoGraph | None:
    """The NoGraph error of a trace without a graph, told why by its no-graph finding (every
    recording without a graph has one); None when it has a graph, or, unless picture, when
    the finding does not say it has none or says its gradcheck and Function calls are what
    it reports (info)."""
    if trace.nodes:
        return None
    found = next((f for f in trace.findings if f.code == NO_GRAPH.name), None)
    if found is None:  # a trace made by hand (steps alone): no picture in it, nothing else
        return NoGraph(trace.scenario, "the trace has no nodes") if picture else None
    if found.severity == "info" and not picture:
        return None
    return NoGraph(trace.scenario, found.message.removeprefix(NO_GRAPH_LEAD), found.line)


class RunChoices(NamedTuple):
    """How a scenario is run: its argv, its pass limit, its time limit, the pass shown."""

    args: list[str] | None = None
    passes: str = "all"
    timeout: float | None = None
    shown_pass: str | None = None  # --pass N|all


def pass_choice(text: str | None) -> int | Literal["all"] | None:
    """--pass N|all: N, "all", or None when not given."""
    if text is None:
        return None
    number = _number_or_all(text, f"--pass {text!r}: give a pass number (1 or more) or all",
                            "e.g. --pass 1 for a loop's first step, --pass all for every "
                            "pass's graph")
    return "all" if number is None else number


def pass_limit(text: str) -> int | None:
    """--passes N|all: N, or None for all."""
    return _number_or_all(text, f"--passes {text!r}: give a number of passes (1 or more) or all",
                          "e.g. --passes 10, or --passes all to run the script to the end")


def _number_or_all(text: str, message: str, hint: str) -> int | None:
    """A whole number of 1 or more, or None for "all"; else GradtraceError(message, hint)."""
    if text.strip().lower() == "all":
        return None
    if not text.strip().isdigit() or int(text) < 1:
        raise GradtraceError(message, hint)
    return int(text)


def load_trace(source: str, roots: list[str], backward: bool, derivative_order: int = 1,
               saved: bool = True, flow: bool = True,
               run: RunChoices = RunChoices(), lean: bool = False,
               profile: bool = False, listener: RunListener | None = None) -> Loaded:
    """A Trace from a scenario .py file or FILE::FUNC (run now), a saved .json trace (lean: only
    what `diff` compares, see trace_from_dict) or a run's log. profile: time each backward node
    (a saved trace must hold costs already)."""
    passes = pass_limit(run.passes)
    shown = pass_choice(run.shown_pass)
    run_log = is_run_log(source)
    if source.endswith(".json") or run_log:
        if roots or run.args:
            raise GradtraceError("--root and script arguments apply to scenarios, not to "
                                 "saved traces",
                                 f"drop them, or pass the scenario instead of {source}")
        _refuse_run_options(source, backward, derivative_order, passes, run.timeout)
        log = _read_log(source) if run_log else None
        loaded = Loaded(_read_trace(source, lean) if log is None else log.trace(), log=log)
        if profile and loaded.trace.costs is None:
            raise GradtraceError(f"--profile: {source} holds no costs",
                                 "record them with `gradtrace show SCENARIO --profile --json`")
        return loaded
    from ..capture.options import CaptureOptions  # imports torch below
    from ..capture.runner import run_scenario
    from ..errors import ScenarioStopped

    options = CaptureOptions(tuple(roots), backward, derivative_order, saved or profile, flow,
                             passes, shown, profile, listener)
    started = time.perf_counter()
    try:
        trace = run_scenario(parse_target(source, run.args or ()), options, timeout=run.timeout)
    except ScenarioStopped as stop:
        return Loaded(stop.trace, stop, time.perf_counter() - started)
    return Loaded(trace, None, time.perf_counter() - started)


def _read_trace(source: str, lean: bool) -> Trace:
    """The Trace a saved .json trace holds (lean: see trace_from_dict)."""
    try:
        with collector_paused():  # 100,000s of dicts, none in a cycle
            data = json.loads(Path(source).read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise TraceFileError(f"no such file: {source}") from None
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise TraceFileError(f"{source} is not readable JSON: {exc}") from exc
    except RecursionError:
        raise TraceFileError(f"{source} is nested too deeply to be a gradtrace trace",
                             "regenerate it with `gradtrace show SCENARIO --json`") from None
    with collector_paused():
        return trace_from_dict(data, lean)


HEADER_BYTES = 1 << 20  # a log's header line is read whole up to this size to tell a log


def is_run_log(source: str) -> bool:
    """Whether source is a file whose first line is a run log's header (`watch --log`),
    whatever its name."""
    path = Path(source)
    try:
        if not path.is_file():  # FILE::FUNC, example:NAME, a missing file, a FIFO
            return False
        with path.open("rb") as file:
            return starts_run_log(file.readline(HEADER_BYTES))
    except OSError:
        return False  # what reads it next says why it cannot be read


def _read_log(source: str) -> RunLog:
    """What a run's log holds (its header at least)."""
    try:
        data = Path(source).read_bytes()
    except OSError as exc:
        raise RunLogError(f"{source} cannot be read: {exc}") from exc
    try:
        log = read_log(data)
    except RunLogError as exc:
        raise RunLogError(f"{source}: {exc.message}", exc.hint) from None
    if log.header is None:
        raise RunLogError(f"{source}: its header line is cut short",
                          "the run was killed as it started; run it again")
    return log


SLOW_RUN = 10.0  # seconds: a script this slow is better recorded once and read many times


def reuse_hint(source: str, loaded: Loaded, args: list[str] | None) -> str | None:
    """For a script that ran SLOW_RUN seconds or more, the command that records it once and
    the commands that then read the record in a fraction of a second; else None."""
    if loaded.seconds is None or loaded.seconds < SLOW_RUN:
        return None
    saved = shlex.quote(f"{Path(label_file(source)).stem}.json")
    after = f" -- {shlex.join(args)}" if args else ""
    return (f"hint: the script ran {loaded.seconds:.0f} s; record it once with `gradtrace show "
            f"{shlex.quote(source)} -o {saved}{after}`, then give {saved} to show, steps, dot "
            "or diff: each reads it in a fraction of a second")


def wrote_line(target: Path, trace_file: bool) -> str:
    """What -o FILE says on stderr once written; for a trace, the commands that read it."""
    line = f"wrote {target}"
    if trace_file and not is_stream(target):  # /dev/stdout, a FIFO: nothing to read again
        file = shlex.quote(str(target))
        line += (f": `gradtrace show {file}`, `gradtrace steps {file}` and `gradtrace dot "
                 f"{file} -o graph.svg` read it without running the script again")
    return line


def told_after(source: str, loaded: Loaded, args: list[str] | None, target: Path | None,
               trace_file: bool) -> None:
    """What a command says on stderr when it is done: the file it wrote, and for a slow
    script not saved as a trace, how to record it once."""
    if target is not None:
        tell(wrote_line(target, trace_file))
    hint = None if trace_file else reuse_hint(source, loaded, args)
    if hint is not None:
        tell(hint)


def _refuse_run_options(source: str, backward: bool, derivative_order: int,
                        passes: int | None, timeout: float | None) -> None:
    """Options that change how a scenario runs cannot apply to a saved trace, which is read,
    not run: each one given is refused, naming it and the file."""
    given = [name for name, on in (("--no-backward", not backward),
                                   (f"--order {derivative_order}", derivative_order != 1),
                                   (f"--passes {passes}", passes is not None),
                                   (f"--timeout {timeout:g}" if timeout else "", bool(timeout)))
             if on]
    if given:
        raise GradtraceError(f"{' and '.join(given)} cannot apply to {source}: a saved trace "
                             "is read, not run again",
                             f"drop {' and '.join(g.split()[0] for g in given)}, or give the "
                             "scenario that made it")


def pick_pass(trace: Trace, choice: str | None) -> Pass | None:
    """Pass N (1-based), or by default (and with all) the last pass with a recorded flow
    from the graph's outputs (Trace.shown_pass)."""
    number = pass_choice(choice)
    if isinstance(number, int):
        if number > len(trace.passes):
            raise GradtraceError(f"--pass {number}: the scenario ran {len(trace.passes)} "
                                 "pass(es)", "passes are numbered from 1 in `gradtrace show`")
        if trace.passes[number - 1].light:
            raise GradtraceError(_not_kept(trace, number),
                                 f"pass {number} is recorded in full when the script runs with "
                                 "it: gradtrace show "
                                 f"{shlex.quote(trace.scenario) if trace.scenario else 'SCENARIO'}"
                                 f" --pass {number} -o FILE")
        return trace.passes[number - 1]
    return trace.shown_pass()


def _not_kept(trace: Trace, number: int) -> str:
    """What a trace kept of a pass it holds only the light statistics of, and which passes
    it kept in full."""
    steps, row = trace.steps, number - 1
    light = ""
    if steps is not None and row < len(steps.grads):
        loss = steps.loss[row]
        norms = [f"{leaf} {g.norm:.4g}" for leaf, g in zip(steps.leaves, steps.grads[row],
                                                           strict=False) if g is not None]
        said = ([] if loss is None else [f"loss {loss:.4g}"]) + (
            [".grad norm " + ", ".join(norms[:3]) + (", …" if len(norms) > 3 else "")]
            if norms else [])
        light = f" ({'; '.join(said)})" if said else ""
    return (f"--pass {number}: this trace kept only the light statistics of pass {number}"
            f"{light}, not its graph and gradients; passes kept in full: {kept_in_full(trace)}")
