"""The process as `python FILE ARGS` would have it while a scenario runs, and as it was
afterwards: argv, sys.path, stdin, the working folder, and torch's process-wide settings
(`check` runs many scenarios in one process)."""

from __future__ import annotations

import contextlib
import io
import os
import sys
from collections.abc import Iterator
from pathlib import Path

import torch

from ..torch_compat import default_device_mode, mode_stack_depths, pop_modes_to
from .target import Target


@contextlib.contextmanager
def scenario_process(target: Target) -> Iterator[None]:
    """Its folder first on sys.path, its argv, an empty stdin; restored afterwards."""
    saved = (sys.argv, list(sys.path), sys.stdin)
    sys.argv = [target.path, *target.args]
    sys.path.insert(0, str(Path(target.path).resolve().parent))
    sys.stdin = io.StringIO()
    try:
        with torch_settings_kept(), _working_folder_kept():
            yield
    finally:
        sys.argv, sys.path[:], sys.stdin = saved[0], saved[1], saved[2]


@contextlib.contextmanager
def _working_folder_kept() -> Iterator[None]:
    folder = os.getcwd()
    try:
        yield
    finally:
        with contextlib.suppress(OSError):  # the scenario may have removed it
            os.chdir(folder)


@contextlib.contextmanager
def torch_settings_kept() -> Iterator[None]:
    """torch's process-wide settings as they were: default dtype and device, modes, anomaly
    mode, deterministic algorithms, and this thread's grad mode."""
    dtype, device = torch.get_default_dtype(), default_device_mode()
    modes = mode_stack_depths()
    grad, anomaly = torch.is_grad_enabled(), torch.is_anomaly_enabled()
    deterministic = (torch.are_deterministic_algorithms_enabled(),
                     torch.is_deterministic_algorithms_warn_only_enabled())
    try:
        yield
    finally:
        torch.set_default_dtype(dtype)
        if default_device_mode() is not device:  # even one that says cpu: it is a mode
            torch.set_default_device(None if device is None else device.device)
        pop_modes_to(modes)  # set_default_device enters one
        torch.set_grad_enabled(grad)
        torch.autograd.set_detect_anomaly(anomaly)
        # only when changed: setting it imports torch._inductor (seconds)
        if (torch.are_deterministic_algorithms_enabled(),
                torch.is_deterministic_algorithms_warn_only_enabled()) != deterministic:
            torch.use_deterministic_algorithms(deterministic[0], warn_only=deterministic[1])
