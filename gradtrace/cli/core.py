"""The `gradtrace` app: exit codes, the one error boundary, and what every command shares."""

from __future__ import annotations

import contextlib
import difflib
import math
import os
import sys
from collections.abc import Iterable, Sequence
from enum import IntEnum
from typing import Any, NamedTuple

import typer
from rich.text import Text
from typer.core import TyperArgument, TyperCommand, TyperGroup, TyperOption

from .._version import __version__
from ..compat.typer import CONTROL_FLOW, NO_SUCH_OPTION
from ..errors import GradtraceError, Interrupted, ScenarioError
from .output import stderr_console, stdout_silenced


class ExitCode(IntEnum):
    """Process exit codes, as promised in the README."""

    OK = 0
    FAILED = 1  # a check, diff, --strict or --fail-on finding failed
    USAGE = 2  # bad usage, invalid input, or a scenario that cannot run
    INTERRUPTED = 130  # 128 + SIGINT: Ctrl-C
    BROKEN_PIPE = 141  # 128 + SIGPIPE: the reader of stdout went away (`| head`)


DEBUG_KEY = "gradtrace.debug"
FORMAT_KEY = "gradtrace.format"
BUG_HINT = "this is a bug in gradtrace, not in your input: please report it"


def debugging(ctx: typer.Context | None = None) -> bool:
    """--debug was given (to any command), or GRADTRACE_DEBUG is set."""
    return bool(os.environ.get("GRADTRACE_DEBUG") or (ctx is not None and
                                                      ctx.meta.get(DEBUG_KEY)))


def github_log(ctx: typer.Context | None) -> bool:
    """--format github was given: GitHub's runner reads stderr too, for workflow commands."""
    return ctx is not None and ctx.meta.get(FORMAT_KEY) == "github"


def print_error(message: str, hint: str | None, github: bool = False) -> None:
    """`error: …` and `hint: …` on stderr; github: each on one line that holds no workflow
    command (the message may quote a scenario's exception or file name)."""
    if github:
        from ..render.github import log_line

        message, hint = log_line(message), hint and log_line(hint)
    err = stderr_console()
    err.print(Text("error: ", style="bold red") + Text(message))
    if hint:
        err.print(Text("hint: ", style="bold") + Text(hint))


def print_printed(printed: str, github: bool = False) -> None:
    """What the scenario printed (its last lines, in a panel) on stderr: the words of a script
    that stopped (argparse's usage and error) go with gradtrace's error. Each line of the
    panel starts with its border, so with github only legacy commands need breaking."""
    if printed.strip():
        from ..render.github import inert
        from ..render.report import printed_panel

        printed = inert(printed) if github else printed
        err = stderr_console()
        err.print(printed_panel(printed, PRINTED_LINES))


PRINTED_LINES = 40  # a script's --help fits


def print_compat_notes() -> None:
    """An `info:` line on stderr for each private name this environment lacks (torch's are
    probed only when a command needed torch: --help and saved traces never import it)."""
    from ..compat import missing

    err = stderr_console()
    for line in missing():
        err.print(Text("info: ", style="bold") + Text(line))


class PlainArgument(TyperArgument):
    """An argument shown by its metavar alone: `SCENARIO`, not `{SCENARIO}` and `<str>`."""

    def display_type_rich(self, ctx: Any) -> str | None:
        return None

    def get_usage_pieces(self, ctx: Any) -> list[str]:
        # Click's public hook, which every Typer calls (0.26+ words it through a private
        # method of its own, _usage_display_name; 0.16 through make_metavar)
        name = self.metavar or (self.name or "").upper()
        return [name if self.required else f"[{name}]"]


class PlainOption(TyperOption):
    """An option shown by its metavar (SECONDS, N|all), a flag by its name alone: no `<bool>`."""

    def display_type_rich(self, ctx: Any) -> str | None:
        if self.metavar is not None:
            return self.metavar
        return None if self.is_flag else self.bare_type().upper()


def plain_help(params: list[Any]) -> list[Any]:
    """params, each shown in --help the plain way (a class of the same fields)."""
    for param in params:
        if type(param) is TyperArgument:
            param.__class__ = PlainArgument
        elif type(param) is TyperOption:
            param.__class__ = PlainOption
    return params


SCRIPT_ARGS_NAME = "script_args"  # the parameter that takes the script's own arguments


class Command(TyperCommand):
    """A gradtrace command: plain --help, and a hint when an option is the script's."""

    def get_params(self, ctx: Any) -> list[Any]:
        return plain_help(super().get_params(ctx))

    def parse_args(self, ctx: Any, args: list[str]) -> list[str]:
        given = list(args)  # the parser consumes args
        try:
            return super().parse_args(ctx, args)
        except NO_SUCH_OPTION as exc:
            if any(p.name == SCRIPT_ARGS_NAME for p in self.params):
                exc.message = script_args_hint(exc.option_name, ctx.info_name or "", given,
                                               exc.possibilities or ())
                exc.possibilities = None
            raise


def script_args_hint(option: str, command: str, args: list[str],
                     close: Sequence[str] = ()) -> str:
    """`show train.py --lr 0.1`: the option is gradtrace's unknown, and perhaps the script's
    (close: gradtrace's options it may be a typo of, as click found them)."""
    example = ""
    at = next((i for i, a in enumerate(args) if a == option or a.startswith(option + "=")),
              None)
    if at is not None and "--" not in args:
        example = ": gradtrace " + " ".join([command, *args[:at], "--", *args[at:]])
    close = difflib.get_close_matches(option, close, n=2, cutoff=0.8)
    meant = f" (did you mean {' or '.join(close)}?)" if close else ""
    return (f"No such option: {option}{meant}. If it is the script's, put the script's "
            f"arguments after `--`{example}")


class BoundedGroup(TyperGroup):
    """The one error boundary: an error from any command is printed as `error:` and `hint:`
    and exits 2, never as a traceback; --debug (or GRADTRACE_DEBUG=1) lets it raise."""

    def get_params(self, ctx: Any) -> list[Any]:
        return plain_help(super().get_params(ctx))

    def invoke(self, ctx: Any) -> Any:
        stdout_silenced(False)  # each command decides (one process may run several: tests)
        try:
            try:
                return super().invoke(ctx)
            finally:  # output errors surface here, not in Python's flush at exit
                if sys.stdout is not None:
                    sys.stdout.flush()
                print_compat_notes()
        except CONTROL_FLOW:
            raise  # the CLI's own control flow: exit codes, usage errors
        except GradtraceError as exc:
            if debugging(ctx):
                raise
            if isinstance(exc, ScenarioError):  # before the error, where python prints it
                print_printed(exc.printed, github_log(ctx))
            print_error(exc.message, exc.hint, github_log(ctx))
            if isinstance(exc, Interrupted):
                raise typer.Exit(ExitCode.INTERRUPTED) from None
        except BrokenPipeError:
            _stdout_to_devnull()  # nothing more can be said to a reader that left
            raise typer.Exit(ExitCode.BROKEN_PIPE) from None
        except OSError as exc:  # inputs are read with their own messages: this is output
            if debugging(ctx):
                raise
            _stdout_to_devnull()
            print_error(f"cannot write the output: {exc.strerror or exc}",
                        "check the disk or the output file", github_log(ctx))
        except Exception as exc:  # a bug of ours: said plainly, still exit 2, never silent
            if debugging(ctx):
                raise
            print_error(f"gradtrace failed: {type(exc).__name__}: {exc}",
                        f"{BUG_HINT}; --debug shows the traceback", github_log(ctx))
        raise typer.Exit(ExitCode.USAGE)


def _stdout_to_devnull() -> None:
    """Point file descriptor 1 at /dev/null, so Python's last flush at exit cannot fail."""
    with contextlib.suppress(AttributeError, ValueError, OSError):  # no descriptor: nothing to do
        null = os.open(os.devnull, os.O_WRONLY)
        try:
            os.dup2(null, sys.stdout.fileno())
        finally:
            os.close(null)  # descriptor 1 keeps its own copy


class Typer(typer.Typer):
    """The app: every command a `Command` unless it names another class, its description
    its docstring (read from its source under `python -OO`, which drops docstrings)."""

    def command(self, *args: Any, cls: Any = None, **kwargs: Any) -> Any:
        def register(function: Any) -> Any:
            if function.__doc__ is None and "help" not in kwargs:
                kwargs["help"] = _source_docstring(function)
            return typer.Typer.command(self, *args, cls=cls or Command, **kwargs)(function)
        return register


def _source_docstring(function: Any) -> str | None:
    """function's docstring as its source file says it (None: no source, or no docstring)."""
    import ast  # only under python -OO
    import inspect
    import textwrap

    try:
        tree = ast.parse(textwrap.dedent(inspect.getsource(function)))
    except (OSError, TypeError, SyntaxError):  # no source file: no description
        return None
    node = tree.body[0] if tree.body else None
    return ast.get_docstring(node) if isinstance(node, (ast.FunctionDef,
                                                         ast.AsyncFunctionDef)) else None


app = Typer(
    name="gradtrace",
    cls=BoundedGroup,
    help="See what PyTorch autograd actually does: graphs, tensors, gradients, passes.\n\n"
    "A scenario is an ordinary Python file that builds tensors; gradtrace runs it "
    "(with your rights, like pytest runs a test file), walks its autograd graph and shows it.",
    epilog="Examples:\n\n"
    "  gradtrace examples                   the examples gradtrace ships\n\n"
    "  gradtrace show example:chain_rule    the graph, tensors, gradients\n\n"
    "  gradtrace dot example:chain_rule -o graph.svg\n\n"
    "  gradtrace check example:custom_pow_function   gradcheck custom Functions\n\n"
    "`gradtrace COMMAND --help` tells more.",
    no_args_is_help=True,
    add_completion=False,
    context_settings={"help_option_names": ["-h", "--help"]},
)


def _remember_debug(ctx: typer.Context, value: bool) -> None:
    if value:
        ctx.meta[DEBUG_KEY] = True


# Options that mean the same in every command, declared once.
DEBUG = typer.Option(False, "--debug", callback=_remember_debug, expose_value=False,
                     help="Show gradtrace's own traceback on errors (also GRADTRACE_DEBUG=1).")
ROOT = typer.Option(None, "--root", metavar="NAME",
                    help="Root the graph at this named tensor, or NAME.grad (repeatable). "
                    "Default: the scenario's OUTPUT, else what FILE::FUNC returned, else the "
                    "roots of its last backward pass, else the last named tensor with a "
                    "grad_fn.")
NO_BACKWARD = typer.Option(False, "--no-backward",
                           help="Do not run backward when the scenario runs none.")


def tolerance_option(default: float, flag: str, help: str) -> Any:
    """--atol / --rtol: a number, 0 or more (the range refuses nan too), alike in every
    command."""
    return typer.Option(default, flag, min=0.0, help=help)


MAX_TIMEOUT = 86400.0  # a day: threading's waits overflow on far larger numbers


def seconds_or_none(value: float | None) -> float | None:
    """--timeout: a number of seconds up to a day; inf means no limit (None)."""
    if value is None or value == math.inf:
        return None
    if value > MAX_TIMEOUT:  # nan never gets here: the option's range refuses it
        raise typer.BadParameter(f"{value:g}: at most {MAX_TIMEOUT:g} s (a day); "
                                 "inf, or no --timeout, means no limit")
    return value


def timeout_option(help: str) -> Any:
    """--timeout SECONDS: the same bounds in every command."""
    return typer.Option(None, "--timeout", metavar="SECONDS", min=0.001,
                        callback=seconds_or_none, help=help)


TIMEOUT = timeout_option("Stop the scenario (and its backward passes) after this long: "
                         "exit 2, naming the line it was on. Default: no limit.")
PASSES = typer.Option("all", "--passes", metavar="N|all",
                      help="Stop the script at its backward pass after the first N "
                      "(default: all: it runs to its end, as python would run it).")
SCRIPT_ARGS = typer.Argument(None, metavar="-- ARGS", show_default=False,
                             help="Arguments for the script's sys.argv, after --.")
STRICT = typer.Option(False, "--strict",
                      help="Exit 1 when there is an error or warning finding.")
FAIL_ON = typer.Option(None, "--fail-on", metavar="CODE[,CODE]",
                       help="Exit 1 when a finding with one of these codes appears (codes: "
                       "see the README's Findings table); `gradtrace diff` also takes "
                       "slower:N% — a module's backward time grown by more than N% "
                       "(--profile).")
FINDINGS_FORMATS = ("text", "github")


def _remember_format(ctx: typer.Context, value: str) -> str:
    ctx.meta[FORMAT_KEY] = value  # for the error boundary: how to print errors
    return value


def findings_format(help: str) -> Any:
    """--format text|github: how the command's findings (or results) are printed."""
    return typer.Option("text", "--format", metavar="text|github", callback=_remember_format,
                        help=help)


def printed_as(out_format: str, as_json: bool) -> str:
    """What a command prints: "json", "github" or "text"; --format github with --json is
    refused (both choose what is printed)."""
    if out_format not in FINDINGS_FORMATS:
        raise GradtraceError(f"--format {out_format!r}: use text or github",
                             "--format chooses how findings are printed; a file's format "
                             "comes from the suffix of -o FILE")
    if as_json and out_format == "github":
        raise GradtraceError("--format github and --json both choose what is printed",
                             "give one of them")
    return "json" if as_json else out_format


class FailOn(NamedTuple):
    """What --fail-on asks: finding codes, and a tolerance for slower backward modules
    (slower:20% -> 0.2; None: not asked)."""

    codes: set[str]
    slower: float | None = None


SLOWER = "slower:"


def fail_on_rules(text: str | None, codes: Iterable[str] | None = None,
                  slower: bool = False) -> FailOn:
    """--fail-on RULE[,RULE]: each a finding code the registry declares (or one of codes),
    or where the command compares costs (slower), slower:N% — a module's backward time
    grown by more than N percent."""
    tolerance = None
    rest = []
    for item in (text or "").split(","):
        item = item.strip()
        if not item.lower().startswith(SLOWER):
            rest.append(item)
            continue
        if not slower:
            raise _compares_no_costs(item)
        tolerance = _percent(item[len(SLOWER):], item)
    return FailOn(fail_on_codes(",".join(rest), codes), tolerance)


def _compares_no_costs(item: str) -> GradtraceError:
    """--fail-on slower:N% given to a command other than diff."""
    return GradtraceError(f"--fail-on {item}: only `gradtrace diff` compares backward times",
                          "gradtrace diff A B --profile --fail-on slower:20%")


def _percent(text: str, item: str) -> float:
    """ "20%" (or "20") -> 0.2; a number ≥ 0 or GradtraceError."""
    number = text.strip().removesuffix("%").strip()
    try:
        value = float(number)
    except ValueError:
        value = math.nan
    if not math.isfinite(value) or value < 0:
        raise GradtraceError(f"--fail-on {item}: give a percentage, 0 or more",
                             "e.g. --fail-on slower:20% fails when a module's backward "
                             "takes over 20% longer in B than in A")
    return value / 100


def fail_on_codes(text: str | None, codes: Iterable[str] | None = None) -> set[str]:
    """--fail-on CODE[,CODE]: the codes, each one the registry declares (or one of codes)."""
    from ..findings.registry import CODES

    known = list(CODES if codes is None else codes)
    slower = next((c.strip() for c in (text or "").split(",")
                   if c.strip().lower().startswith(SLOWER)), None)
    if slower is not None:
        raise _compares_no_costs(slower)
    wanted = {c.strip() for c in (text or "").split(",") if c.strip()}
    unknown = sorted(wanted - set(CODES))
    if unknown:
        raise GradtraceError(f"--fail-on: no finding has the code {', '.join(unknown)}",
                             "codes: " + ", ".join(known))
    elsewhere = sorted(wanted - set(known))
    if elsewhere:
        raise GradtraceError(f"--fail-on {', '.join(elsewhere)}: this command does not look "
                             "for it", "its codes: " + ", ".join(known))
    return wanted


def findings_fail(findings: Iterable[Any], strict: bool, failing: set[str]) -> bool:
    """--strict: an error or warning finding; --fail-on: a finding with one of the codes."""
    return any((strict and f.severity in ("error", "warning")) or f.code in failing
               for f in findings)


PASS = typer.Option(None, "--pass", metavar="N|all",
                    help="Show pass N's graph and gradients; all: every pass's graph, a "
                    "loop's repeats included. Default: the latest pass over each distinct "
                    "graph (a loop's last step).")


TARGET = typer.Argument(..., help="A scenario .py file, FILE::FUNC, example:NAME, or a trace "
                        ".json saved by `gradtrace show --json`.", metavar="SCENARIO")


LEAD_WITH = typer.Option("script", "--lead-with", metavar="script|library",
                     help="The line a node made in an installed library's model code "
                     "(transformers, timm, torchvision…) leads with: the script's line that "
                     "led there (script), or the library's own (library). Both are shown; "
                     "--json keeps both as they are.")


def library_leads(text: str) -> bool:
    """--lead-with script|library: whether the library's line leads."""
    choice = text.strip().lower()
    if choice not in ("script", "library"):
        raise GradtraceError(f"--lead-with {text!r}: give script or library",
                             "e.g. --lead-with library to lead with the lines of a model "
                             "library's own files (modeling_bert.py:…)")
    return choice == "library"


PROFILE = typer.Option(False, "--profile",
                       help="Time each backward node and measure the memory it allocates "
                       "and frees (torch.profiler): the top modules, lines and nodes, with "
                       "medians and spreads, the backward's time without the profiler, and "
                       "the peak of memory. Costs go into --json. Gradients, .grad and the "
                       "script's output stay as they are.")


def _version(value: bool) -> None:
    if value:
        typer.echo(f"gradtrace {__version__}")
        raise typer.Exit()


@app.callback()
def _root(
    version: bool = typer.Option(False, "--version", callback=_version, is_eager=True,
                                 help="Print the version and exit."),
) -> None:
    """gradtrace: an autograd graph inspector for PyTorch."""
