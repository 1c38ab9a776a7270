"""Lone surrogates ("\\udcff") in a trace: python decodes a non-UTF-8 path (or a folder's
name under an ASCII locale) with surrogateescape, so gradtrace writes such traces itself, and
every command that reads or writes one must take them. The page and `diff --json` failed
("surrogates not allowed", called a bug in gradtrace) before."""

from __future__ import annotations

import json
import os
import re
import shutil
from pathlib import Path

import pytest
from helpers import as_read, invoke
from plain_python import run_gradtrace

ODD = "x\udcff"  # a name, a folder and a line printed, each with a lone surrogate
SCRIPT = ("import torch\nprint('hi \\udcff')\n"
          "x = torch.tensor([2.0, 3.0], requires_grad=True)\ny = (x * x).sum()\ny.backward()\n")


def surrogate_trace(folder: Path) -> tuple[Path, Path]:
    """A plain trace, and its copy with a lone surrogate in a tensor's name, the scenario's
    path, each node's source file and the scenario's stdout (as JSON escapes: valid JSON)."""
    script = folder / "s.py"
    script.write_text(SCRIPT.replace("\\udcff", ""))
    plain = folder / "t.json"
    assert invoke("show", script, "-o", plain).exit_code == 0
    data = as_read(plain.read_text())
    data["scenario"] = "caf\udcff/s.py"
    data["stdout"] = "hi \udcff\n"
    for node in data["nodes"]:
        if node.get("source"):
            node["source"]["file"] = "caf\udcff/s.py"
    text = json.dumps(data).replace('"x"', json.dumps(ODD))  # ensure_ascii: "x\udcff"
    odd = folder / "s.json"
    odd.write_text(text)
    assert ODD in {t["name"] for t in as_read(text)["tensors"]}
    return plain, odd


COMMANDS = {
    "page": ("dot", "{odd}", "-o", "{out}.html"),
    "svg": ("dot", "{odd}", "-o", "{out}.svg"),
    "dot": ("dot", "{odd}", "-o", "{out}.dot"),
    "mermaid": ("dot", "{odd}", "-o", "{out}.mmd"),
    "trace file": ("dot", "{odd}", "-o", "{out}.json"),
    "show": ("show", "{odd}"),
    "show --json": ("show", "{odd}", "--json"),
    "diff --json": ("diff", "{plain}", "{odd}", "--json"),
    "diff": ("diff", "{plain}", "{odd}"),
    "diff picture": ("diff", "{plain}", "{odd}", "-o", "{out}.svg"),
    "steps --json": ("steps", "{odd}", "--json"),
    "steps chart": ("steps", "{odd}", "-o", "{out}.svg"),
}


@pytest.mark.parametrize("command", COMMANDS)
def test_a_trace_with_lone_surrogates_goes_through_every_command(command: str,
                                                                 tmp_path: Path) -> None:
    plain, odd = surrogate_trace(tmp_path)
    args = [a.format(plain=plain, odd=odd, out=tmp_path / "out") for a in COMMANDS[command]]
    if args[-1].endswith(".svg") and shutil.which("dot") is None:
        pytest.skip("Graphviz is not installed")
    result = invoke(*args)
    assert result.exit_code == (1 if command.startswith("diff") else 0), result.stderr
    assert "bug in gradtrace" not in result.stderr
    written = next(tmp_path.glob("out.*"), None)
    if written is not None:
        text = written.read_bytes().decode("utf-8")  # UTF-8 whole: the surrogate escaped
        if written.suffix == ".html":  # the page's data holds the name as it was
            data = re.search(r'id="gt-data">(.*?)</script>', text, re.DOTALL)
            assert data is not None and ODD in json.dumps(json.loads(data[1]), ensure_ascii=False)
        if written.suffix == ".json":
            assert ODD in {t["name"] for t in as_read(text)["tensors"]}
    if command in ("show --json", "diff --json", "steps --json"):
        assert "udcff" in result.stdout and json.loads(result.stdout)
    if command == "show --json":
        assert as_read(result.stdout)["stdout"] == "hi \udcff\n"


def test_a_script_in_a_non_ascii_folder_under_an_ascii_locale(tmp_path: Path) -> None:
    """python decodes the folder's name with surrogateescape there: the trace has surrogates,
    and each command reads it back, in that locale too."""
    folder = tmp_path / "café"
    folder.mkdir()
    (folder / "s.py").write_text(SCRIPT.replace("'hi \\udcff'", "'file', __file__"))
    # what a shell hands python under LC_ALL=C: the bytes of "é", decoded with surrogateescape
    here = os.fsencode(folder).decode("ascii", "surrogateescape")
    script = f"{here}/s.py"
    env = {**os.environ, "LC_ALL": "C", "PYTHONUTF8": "0"}
    done = run_gradtrace("show", script, "-o", "t.json", env=env, cwd=here, text=False)
    assert done.returncode == 0, done.stderr
    saved = (folder / "t.json").read_text(encoding="utf-8")
    assert "\\udcc3\\udca9" in saved  # "é" as python decoded it under C: the premise
    for args in (("show", "t.json"), ("show", "t.json", "--json"),
                 ("dot", "t.json", "-o", "x.html"), ("dot", "t.json", "-o", "x.svg"),
                 ("diff", script, "t.json", "--json"), ("steps", "t.json", "--json")):
        if args[-1].endswith(".svg") and shutil.which("dot") is None:
            continue
        got = run_gradtrace(*args, env=env, cwd=here, text=False)
        assert got.returncode == 0, (args, got.stderr)
        if "--json" in args:
            json.loads(got.stdout.decode("utf-8"))
    assert (folder / "x.html").read_bytes().decode("utf-8")
