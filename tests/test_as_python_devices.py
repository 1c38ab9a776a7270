"""`-o` a device, a FIFO or one of the process's own descriptors is written through, in a real
process. `-o /dev/stdout` wrote 0 bytes and said "wrote /dev/stdout" before (gradtrace's own
descriptor 1 goes to /dev/null while the command's output goes to a copy), and `--json` with
a FIFO or /dev/stdout was refused for its missing .json suffix."""

from __future__ import annotations

import os
import subprocess
import threading
from pathlib import Path

import pytest
from helpers import as_read
from plain_python import run_gradtrace, start_gradtrace

SCRIPT = "import torch\nx = torch.tensor(2.0, requires_grad=True)\ny = x * 3\n"


def script(folder: Path) -> Path:
    path = folder / "ex.py"
    path.write_text(SCRIPT)
    return path


@pytest.mark.parametrize("stdout", ["file", "pipe", "appended file"])
def test_json_to_dev_stdout_comes_out_on_stdout(stdout: str, tmp_path: Path) -> None:
    ex = script(tmp_path)
    if stdout == "file":  # `> out.json`
        done = run_gradtrace("show", ex, "--json", "-o", "/dev/stdout")
        code, out, err = done.returncode, done.stdout, done.stderr
    else:
        kept = tmp_path / "out.txt"
        kept.write_text("kept\n")
        with open(kept, "ab") as appended:  # `>> out.txt`: what is there stays
            run = start_gradtrace("show", ex, "--json", "-o", "/dev/stdout", text=True,
                                  stdout=subprocess.PIPE if stdout == "pipe" else appended,
                                  stderr=subprocess.PIPE)
            out, err = run.communicate(timeout=300)
            code = run.returncode
        if stdout == "appended file":
            text = kept.read_text()
            assert text.startswith("kept\n")
            out = text.removeprefix("kept\n")
    assert code == 0, err
    assert as_read(out)["scenario"] == str(ex)
    assert err.strip() == "wrote /dev/stdout"  # no "show /dev/stdout reads it" hint


def test_a_report_to_dev_stdout_and_json_to_dev_stderr(tmp_path: Path) -> None:
    ex = script(tmp_path)
    done = run_gradtrace("show", ex, "-o", "/dev/stdout")
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("scenario ") and "AccumulateGrad" in done.stdout
    done = run_gradtrace("show", ex, "--json", "-o", "/dev/stderr")
    assert done.returncode == 0 and done.stdout == ""
    assert as_read(done.stderr.removesuffix("wrote /dev/stderr\n"))["nodes"]


def test_json_into_a_fifo(tmp_path: Path) -> None:
    ex = script(tmp_path)
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    got: list[bytes] = []
    reader = threading.Thread(target=lambda: got.append(fifo.read_bytes()), daemon=True)
    reader.start()
    done = run_gradtrace("show", ex, "--json", "-o", fifo)
    reader.join(timeout=60)
    if reader.is_alive():  # nothing was written into the FIFO: release the reader
        os.close(os.open(fifo, os.O_WRONLY | os.O_NONBLOCK))
    assert done.returncode == 0, done.stderr
    assert got and as_read(got[0].decode())["scenario"] == str(ex)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["ex.py", "pipe"]


@pytest.mark.parametrize("device", ["/dev/stdout", "/dev/fd/1", "/proc/self/fd/1"])
def test_a_trace_file_to_stdout_by_its_names(device: str, tmp_path: Path) -> None:
    done = run_gradtrace("dot", script(tmp_path), "--to", "json", "-o", device)
    assert done.returncode == 0, done.stderr
    assert as_read(done.stdout)["nodes"]  # 0 bytes before
