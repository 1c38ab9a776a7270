"""One fresh process, measured: exit code, wall time and its own peak RSS."""

from __future__ import annotations

import subprocess
import sys

# Run in a process of its own, so RUSAGE_CHILDREN is the one command's peak alone.
_MEASURE = ("import resource, subprocess, sys, time\n"
            "start = time.perf_counter()\n"
            "code = subprocess.run(sys.argv[1:], stdout=subprocess.DEVNULL).returncode\n"
            "took = time.perf_counter() - start\n"
            "print(code, took, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)\n")


def measured(command: list[str]) -> tuple[int, float, float]:
    """(exit code, seconds, peak RSS in MiB) of command run as a new process."""
    out = subprocess.run([sys.executable, "-c", _MEASURE, *command], capture_output=True,
                         text=True, check=True).stdout.split()
    return int(out[0]), float(out[1]), int(out[2]) / 1024
