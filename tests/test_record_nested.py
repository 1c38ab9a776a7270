"""gradtrace.record() inside another recording: a test that uses it runs under `gradtrace show
FILE::FUNC` and `gradtrace check DIR` (its block is recorded inside the run's recording, which
records the same calls), and a record() nested in another is a view of its own block. Only a
record() in a thread other than the recording one is refused, naming its file and line."""

from __future__ import annotations

import json
import re
import textwrap
from pathlib import Path

import torch
from helpers import ROOT
from plain_python import run_gradtrace

import gradtrace

README_TEST = re.search(r"```python\n(import gradtrace, torch\n\ndef test_.*?)```",
                        (ROOT / "README.md").read_text(encoding="utf-8"), re.DOTALL)

FUNCTION_TEST = textwrap.dedent('''\
    import torch

    class Cube(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            ctx.save_for_backward(x)
            return x ** 3

        @staticmethod
        def backward(ctx, g):
            (x,) = ctx.saved_tensors
            return 3 * x ** 2 * g

    def test_cube():
        x = torch.tensor([1.5, 2.0], dtype=torch.float64, requires_grad=True)
        Cube.apply(x).sum().backward()
        assert torch.allclose(x.grad, 3 * x.detach() ** 2)
    ''')


def readme_test(folder: Path) -> Path:
    assert README_TEST is not None
    path = folder / "test_readme_example.py"
    path.write_text(README_TEST[1])
    return path


def test_show_runs_a_test_that_uses_record(tmp_path: Path) -> None:
    readme_test(tmp_path)
    run = run_gradtrace("show", "test_readme_example.py::test_every_parameter_gets_a_gradient",
                        cwd=tmp_path)
    assert run.returncode == 0, run.stdout + run.stderr
    assert "pass 1 backward at line 7" in run.stdout  # recorded once, by the run
    assert "AddmmBackward0 · model.2" in run.stdout
    assert "scenario output" in run.stdout  # what rec.show() printed, in the run's report


def test_a_profiled_record_in_a_run_adds_no_passes_of_its_own(tmp_path: Path) -> None:
    (tmp_path / "test_profiled.py").write_text(textwrap.dedent('''\
        import gradtrace, torch

        def test_profiled():
            model = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.Linear(8, 1))
            with gradtrace.record(profile=True) as rec:
                model(torch.randn(16, 4)).pow(2).mean().backward()
            assert rec.costs is not None and len(rec.passes) == 1
        '''))
    run = run_gradtrace("show", "test_profiled.py::test_profiled", "--json", cwd=tmp_path)
    assert run.returncode == 0, run.stderr
    # the block's timing replays are gradtrace's, not the test's passes
    assert len(json.loads(run.stdout)["passes"]) == 1


def test_check_runs_a_folder_whose_tests_use_record(tmp_path: Path) -> None:
    readme_test(tmp_path)
    (tmp_path / "test_cube.py").write_text(FUNCTION_TEST)
    run = run_gradtrace("check", ".", cwd=tmp_path)
    assert run.returncode == 0, run.stdout + run.stderr
    assert "could not run" not in run.stdout + run.stderr
    assert "Cube" in run.stdout


def test_record_in_another_thread_of_a_run_names_its_line(tmp_path: Path) -> None:
    (tmp_path / "threaded.py").write_text(textwrap.dedent('''\
        import threading, torch, gradtrace
        w = torch.ones(2, requires_grad=True)
        def elsewhere():
            with gradtrace.record():
                (w * 2).sum().backward()
        worker = threading.Thread(target=elsewhere)
        worker.start()
        worker.join()
        (w * 3).sum().backward()
        '''))
    run = run_gradtrace("show", "threaded.py", cwd=tmp_path)
    assert run.returncode == 2  # the run stops with it, after its report
    assert "pass 1 backward at line 9" in run.stdout
    assert "gradtrace.record() at" in run.stderr and "threaded.py:4" in run.stderr, run.stderr
    assert "cannot run while another thread records" in run.stderr
    assert "Traceback" not in run.stderr


def test_a_record_nested_in_another_holds_its_own_block() -> None:
    w = torch.ones(3, requires_grad=True)
    with gradtrace.record() as outer:
        (w * 2).sum().backward()
        with gradtrace.record() as inner:
            loss = (w * 3).sum()
            loss.backward()
        (w * 4).sum().backward()
    assert len(outer.passes) == 3 and len(inner.passes) == 1
    assert inner.output_names == ("loss",)
    mul = next(n for n in inner.nodes if n.type == "MulBackward0")
    assert mul.source is not None and mul.source.code == "loss = (w * 3).sum()"
    assert torch.equal(w.grad, torch.full((3,), 9.0))  # as without gradtrace
