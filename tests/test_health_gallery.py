"""The gradient-health findings on real scripts: each on its own gallery scenario, none on any
other scenario (the healthy loops/grad_accumulation.py and loops/mlp_1000_steps.py included)."""

from __future__ import annotations

import json
import re
from typing import Any

import pytest
from helpers import GALLERY_FINDINGS, SCENARIOS, UNDER_TORCHRUN, shared_invoke

HEALTH = ("grad-accumulating", "vanishing-gradient", "exploding-gradient", "dead-parameter")
OWN = {GALLERY_FINDINGS[code][0]: code for code in HEALTH}
OWN["bugs/accumulation_forgot_zero_grad.py"] = "grad-accumulating"  # in an accumulation loop
OWN["bugs/nan_masked_mean.py"] = "exploding-gradient"  # its .grad turns NaN at pass 5
SCRIPTS = sorted(str(p.relative_to(SCENARIOS)) for p in SCENARIOS.rglob("*.py")
                 if UNDER_TORCHRUN not in p.parts)


def _findings(scenario: str) -> list[dict[str, Any]]:
    """The findings of `show --json` (every pass: a script runs to its end by default)."""
    result = shared_invoke("show", str(SCENARIOS / scenario), "--json")
    if not result.stdout.lstrip().startswith("{"):  # a usage error: no trace to read
        pytest.skip(f"no trace: {result.stderr.strip()[:200]}")
    return list(json.loads(result.stdout)["findings"])


@pytest.mark.parametrize("scenario", SCRIPTS)
def test_health_findings_fire_only_on_their_own_gallery_scenario(scenario: str) -> None:
    found = sorted({f["code"] for f in _findings(scenario)} & set(HEALTH))
    assert found == ([OWN[scenario]] if scenario in OWN else []), scenario


@pytest.mark.parametrize("code", HEALTH)
def test_each_health_finding_names_module_tensor_and_pass(code: str) -> None:
    scenario, tensor, line, _ = GALLERY_FINDINGS[code]
    found = [f for f in _findings(scenario) if f["code"] == code]
    assert len(found) >= 1
    f = found[0]
    module = tensor.rsplit(".", 1)[0]
    assert (f["tensor"], f["line"]) == (tensor, line)
    assert module in f["message"] and tensor in f["message"]
    assert re.search(r"\bpass(es)? \d", f["message"])
    assert f["hint"]
