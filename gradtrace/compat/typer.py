"""Typer's names gradtrace relies on beyond its documented API (checked on typer 0.16 and
0.29): since 0.26 Typer vendors Click as the private typer._click, before it used click."""

from __future__ import annotations

import sys
from typing import Any

import typer

from . import probe

# Click's exceptions live beside BadParameter, which Typer re-exports publicly, whichever Click
# this Typer uses: found there, no private module is named.
_exceptions = sys.modules[typer.BadParameter.__module__]

_no_such_option = probe(
    f"typer {typer.__version__}", "NoSuchOption", lambda: _exceptions.NoSuchOption,
    "an unknown option is not said to be perhaps the script's (put its arguments after --)",
    "typer 0.16, 0.29")

# The CLI's own control flow, which the error boundary lets through: exit codes, aborts and
# usage errors (Click's ClickException, the base of BadParameter in either Click).
CONTROL_FLOW: tuple[type[BaseException], ...] = (typer.Exit, typer.Abort,
                                                 _exceptions.ClickException)

# what `except NO_SUCH_OPTION` catches: Click's NoSuchOption, or nothing without it
NO_SUCH_OPTION: tuple[type[Any], ...] = (
    () if _no_such_option is None else (_no_such_option,))
