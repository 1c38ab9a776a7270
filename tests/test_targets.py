"""What SCENARIO names: FILE, FILE::FUNC, or a file whose own name holds `::`."""

from __future__ import annotations

from pathlib import Path

from helpers import as_read, invoke

from gradtrace.capture.script.target import Target, parse_target

SQUARE = ("import torch\nx = torch.tensor([1.0, 2.0], requires_grad=True)\n"
          "y = (x * x).sum()\ny.backward()\n")


def test_labels_split_at_the_function_after_the_py_file() -> None:
    assert parse_target("s.py") == Target("s.py")
    assert parse_target("t.py::test_grad") == Target("t.py", "test_grad")
    assert parse_target("t.py::TestGrad::test_grad") == Target("t.py", "TestGrad::test_grad")
    assert parse_target("a::b.py") == Target("a::b.py")  # no function follows: all file
    assert parse_target("a::b.py::f") == Target("a::b.py", "f")


def test_a_file_named_with_double_colons_runs(tmp_path: Path) -> None:
    path = tmp_path / "a::b.py"
    path.write_text(SQUARE)
    result = invoke("show", path, "--json")
    assert result.exit_code == 0, result.stderr
    trace = as_read(result.stdout)
    assert trace["scenario"] == str(path)
    x = next(t for t in trace["tensors"] if t["name"] == "x")
    assert x["grad"]["values"] == [2.0, 4.0]
    path.write_text(SQUARE.replace("y.backward()\n", "def f():\n    return (x * 3).sum()\n"))
    assert invoke("show", f"{path}::f", "--json").exit_code == 0
    # a finding's annotation points at that file, not at "a"
    path.write_text(SQUARE + "y.backward()\n")
    github = invoke("show", path, "--format", "github").stdout
    assert f"::error file={str(path).replace(':', '%3A')},line=5," in github


def test_a_generator_as_func_is_told_apart(tmp_path: Path) -> None:
    path = tmp_path / "gen.py"
    path.write_text("import torch\n\ndef gen():\n    x = torch.ones(2, requires_grad=True)\n"
                    "    yield (x * 2).sum()\n")
    result = invoke("show", f"{path}::gen")
    assert result.exit_code == 2 and "Traceback" not in result.stderr
    said = " ".join(result.stderr.split())
    assert f"{path}::gen is a generator" in said and "not supported as FUNC" in said
    assert "return next(gen())" in said
    assert "names no tensors" not in said and "module-level" not in said
