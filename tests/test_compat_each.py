"""Each compat fallback forced alone (GRADTRACE_WITHOUT=probe): the run goes on, says what is
missing in one line, and changes no number. The slow tier runs it; test_compat forces every
fallback at once in the quick tier and in `dev.py matrix`."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from helpers import show_without, trace_numbers

# each compat module declares its probes as it is imported
import gradtrace.compat.cpython  # noqa: F401
import gradtrace.compat.torch  # noqa: F401
import gradtrace.compat.typer  # noqa: F401
from gradtrace import compat

pytestmark = pytest.mark.slow


@pytest.mark.parametrize("path", compat.declared())
def test_each_fallback_alone_keeps_every_number(
        every_feature: tuple[Path, dict[str, Any]], path: str) -> None:
    script, numbers = every_feature
    trace, stderr = show_without(script, path)
    assert trace_numbers(trace) == numbers
    assert stderr.count("info: ") == 1 and f" has no {path} (checked on " in stderr


