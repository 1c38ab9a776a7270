"""Saved traces are untrusted input: validated against the contract, escaped everywhere they
are shown. Each case here broke a promise before (a traceback, a wrong picture, an escape
sequence reaching the terminal, an injected link)."""

from __future__ import annotations

import copy
import json
import shutil
import time
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import pytest
from helpers import SCENARIOS, as_read, invoke
from plain_python import run_gradtrace

CHAIN = SCENARIOS / "chain_rule.py"
INJECTED_ID = 'n0 [URL="javascript:alert(1)"]; n0'
HOSTILE = "\x1b]0;pwned\x07Mul\x1b[2J\u202eevil\x9b1m"


@pytest.fixture(scope="module")
def good() -> dict[str, Any]:
    result = invoke("show", CHAIN, "--json")
    assert result.exit_code == 0
    return as_read(result.stdout)


def saved(tmp_path: Path, data: Any, name: str = "t.json") -> Path:
    path = tmp_path / name
    path.write_text(data if isinstance(data, str) else json.dumps(data))
    return path


def rejected(path: Path) -> str:
    """Every command that reads a trace refuses it with exit 2 and no traceback."""
    messages = []
    for args in (["show", path], ["dot", path], ["dot", path, "--to", "mmd"]):
        result = invoke(*args)
        assert result.exit_code == 2, (args, result.stdout, result.exception)
        assert result.stderr.startswith("error: ") and "Traceback" not in result.stderr
        assert result.stdout == ""
        messages.append(result.stderr)
    assert len(set(messages)) == 1
    return messages[0]


@pytest.mark.parametrize("mutate,where", [
    (lambda d: d["edges"][0].update(src="n99"), "edges[0].src: points at 'n99'"),
    (lambda d: d["nodes"][0].update(id=0), "nodes[0].id: expected a string, found int"),
    (lambda d: d["nodes"][1].update(type=None), "nodes[1].type: expected a string, found null"),
    (lambda d: d["tensors"][0].update(shape="abc"), "tensors[0].shape: expected a list"),
    (lambda d: d["tensors"][0].update(shape=[-1]), "tensors[0].shape[0]: expected a whole"),
    (lambda d: d["nodes"][1].update(id="n0"), "nodes[1].id: 'n0' is used twice"),
    (lambda d: d["nodes"][0].update(id=INJECTED_ID), "nodes[0].id: 'n0 [URL="),
    (lambda d: d["outputs"].append("n7"), "outputs[1]: points at 'n7'"),
    (lambda d: d["passes"][0]["flow"].update(n9={}), "passes[0].flow['n9']: points at"),
    (lambda d: d["nodes"][0].update(kind="evil"), "nodes[0].kind: expected one of op"),
    (lambda d: d["findings"].append({"code": "x", "severity": "fatal", "message": "m"}),
     ".severity: expected one of error"),
    (lambda d: d["nodes"][0].update(type="x" * 5000), "nodes[0].type: longer than 1,000"),
    (lambda d: d["tensors"][0]["grad"].update(values=[[[["deep"]]]], shape=[1, 1, 1, 1]),
     "tensors[0].grad.values[0][0][0][0]: expected a number"),
    (lambda d: d["tensors"][0]["grad"].update(values=[]), "tensors[0].grad.values: does not "
                                                          "have the shape []"),
    (lambda d: d.pop("nodes"), "nodes: missing"),
])
def test_a_broken_trace_is_named_by_its_json_path(good: dict[str, Any], tmp_path: Path,
                                                 mutate: Any, where: str) -> None:
    data = copy.deepcopy(good)
    mutate(data)
    message = rejected(saved(tmp_path, data))
    assert "invalid trace: " + where in message or where in message


def test_deep_nesting_is_refused_without_recursion(good: dict[str, Any], tmp_path: Path) -> None:
    deep = "[" * 100_000 + "]" * 100_000
    text = json.dumps(good).replace('"stdout": ""', f'"stdout": {deep}')
    assert "nested too deeply" in rejected(saved(tmp_path, text))
    data = copy.deepcopy(good)
    values: Any = 1.0
    for _ in range(100):
        values = [values]
    data["second_order"] = {"root": "z", "wrt": ["x"], "blocks": [{"a": "x", "b": "x",
                                                                   "values": values}]}
    assert "second_order.blocks[0].values" + "[0]" * 64 + ": nested more than 64 deep" \
        in rejected(saved(tmp_path, data, "v.json"))


def hostile_trace(good: dict[str, Any]) -> dict[str, Any]:
    data = copy.deepcopy(good)
    data["nodes"][0]["type"] = HOSTILE
    data["nodes"][0]["module"] = HOSTILE
    data["tensors"][0]["name"] = "x" + HOSTILE
    data["findings"] = [{"code": HOSTILE, "severity": "error", "message": HOSTILE,
                         "hint": HOSTILE}]
    data["stdout"] = HOSTILE + "\n"
    data["passes"][0]["code"] = HOSTILE
    op = next(n for n in data["nodes"] if n["source"] is not None)
    op["source"] = {"file": "javascript:alert(1)" + HOSTILE, "line": 3, "code": HOSTILE}
    return data


def test_control_characters_never_reach_the_terminal(good: dict[str, Any],
                                                     tmp_path: Path) -> None:
    path = saved(tmp_path, hostile_trace(good))
    for args in (["show", path], ["show", path, "--saved"], ["dot", path],
                 ["dot", path, "--to", "mmd", "--module-depth", "1"]):
        result = invoke(*args)
        assert result.exit_code == 0, result.stderr
        for bad in ("\x1b", "\x07", "\u202e", "\x9b"):
            assert bad not in result.stdout, (args, bad)
        # shown escaped (rich itself drops the bell; DOT doubles the backslash)
        assert "x1b]0;pwned" in result.stdout and "x1b[2J" in result.stdout
        assert "u202eevil" in result.stdout and "x9b1m" in result.stdout


def test_errors_show_control_characters_escaped(tmp_path: Path) -> None:
    path = tmp_path / "s.py"
    path.write_text("raise ValueError('\\x1b]0;pwned\\x07')\n")
    result = invoke("show", path)
    assert result.exit_code == 2 and "\x1b" not in result.stderr
    assert "ValueError: \\x1b]0;pwned" in result.stderr


@pytest.mark.skipif(shutil.which("dot") is None, reason="Graphviz is installed by dev.py")
def test_svg_of_a_hostile_trace_is_valid_xml_without_links(good: dict[str, Any],
                                                          tmp_path: Path) -> None:
    path = saved(tmp_path, hostile_trace(good))
    out = tmp_path / "g.svg"
    result = invoke("dot", path, "--grads", "-o", out)
    assert result.exit_code == 0, result.stderr
    root = ET.fromstring(out.read_bytes())  # parses: no character XML 1.0 forbids
    # tooltips only (the scenario line of each box): no element links anywhere
    links = [e for e in root.iter() if e.tag.endswith("}a")]
    assert links and not [e for e in links if any(k.endswith("href") for k in e.attrib)]
    titles = [v for e in links for k, v in e.attrib.items() if k.endswith("title")]
    told = sum(t.count("javascript:") for t in titles)
    assert told == out.read_bytes().count(b"javascript:") == 1  # as hover text, nowhere else


def test_a_500mb_style_single_line_of_output_is_cut_when_shown(good: dict[str, Any],
                                                               tmp_path: Path) -> None:
    data = copy.deepcopy(good)
    data["stdout"] = "y" * 20_000_000
    path = saved(tmp_path, data)
    start = time.perf_counter()
    proc = run_gradtrace("show", path, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert "(19,999,000 more characters)" in proc.stdout
    assert len(proc.stdout) < 20_000
    assert time.perf_counter() - start < 60  # it took minutes when every line was wrapped


def test_junit_of_a_hostile_function_name_parses(tmp_path: Path) -> None:
    scenario = tmp_path / "s.py"
    scenario.write_text(
        "import torch\n"
        "class F(torch.autograd.Function):\n"
        "    @staticmethod\n"
        "    def forward(ctx, x):\n"
        "        return x * 2\n"
        "    @staticmethod\n"
        "    def backward(ctx, g):\n"
        "        return g * 3\n"
        "F.__name__ = 'F\\x1b[2J\\x01'\n"
        "x = torch.ones(2, dtype=torch.float64, requires_grad=True)\n"
        "y = F.apply(x)\n")
    junit = tmp_path / "r.xml"
    result = invoke("check", scenario, "--junit", junit)
    assert result.exit_code == 1 and "\x1b" not in result.stdout
    suite = ET.parse(junit).getroot()
    assert suite.get("failures") == "1"
    assert "F\\x1b[2J\\x01" in suite.find("testcase").get("name")


def test_a_bug_of_ours_is_exit_2_with_a_plain_message(monkeypatch: pytest.MonkeyPatch) -> None:
    def broken(*args: Any, **kwargs: Any) -> None:
        raise RuntimeError("a renderer bug")

    monkeypatch.setattr("gradtrace.render.report.report", broken)
    result = invoke("show", CHAIN)
    assert result.exit_code == 2 and "Traceback" not in result.stderr
    assert result.stderr.startswith("error: gradtrace failed: RuntimeError: a renderer bug")
    assert "please report it" in result.stderr
    assert isinstance(invoke("show", CHAIN, "--debug").exception, RuntimeError)
