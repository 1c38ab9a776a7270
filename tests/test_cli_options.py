"""Each graph command passes one frozen record of what it was asked down to its helpers: the
record's fields are the command's parameters, one for one."""

from __future__ import annotations

import dataclasses
import inspect
from collections.abc import Callable
from typing import Any

import pytest

from gradtrace.cli.diff import DiffOptions, diff
from gradtrace.cli.dot import DotOptions, dot
from gradtrace.cli.options import DEBUG_PARAMETER, RunOptions
from gradtrace.cli.show import ShowOptions, show

RECORDS: list[tuple[Callable[..., None], type[RunOptions]]] = [
    (show, ShowOptions), (dot, DotOptions), (diff, DiffOptions)]


def _parameters(command: Callable[..., None]) -> dict[str, Any]:
    """The command's parameters, each at its declared default, as its locals() start."""
    return {name: p.default for name, p in inspect.signature(command).parameters.items()}


@pytest.mark.parametrize(("command", "record"), RECORDS)
def test_a_command_s_record_has_a_field_for_each_parameter_but_debug(
        command: Callable[..., None], record: type[RunOptions]) -> None:
    fields = {f.name for f in dataclasses.fields(record)}
    assert fields == set(_parameters(command)) - {DEBUG_PARAMETER}


@pytest.mark.parametrize(("command", "record"), RECORDS)
def test_the_record_is_made_from_the_parameters_and_cannot_change(
        command: Callable[..., None], record: type[RunOptions]) -> None:
    asked = record.given(_parameters(command))
    with pytest.raises(dataclasses.FrozenInstanceError):
        asked.passes = "1"  # type: ignore[misc]


def test_a_parameter_the_record_lacks_is_refused() -> None:
    with pytest.raises(TypeError, match="new_flag"):
        DiffOptions.given({**_parameters(diff), "new_flag": True})


def test_the_run_choices_carry_the_shared_options() -> None:
    asked = ShowOptions.given({**_parameters(show), "script_args": ["--lr", "1"],
                               "root": None, "passes": "2", "timeout": 3.0})
    assert asked.roots == []
    assert asked.run("all") == (["--lr", "1"], "2", 3.0, "all")
