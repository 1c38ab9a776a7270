"""Numbers computed on the tensors' device as a pass ends, read to the host later and in
batches: one copy per device per batch, never a host-device synchronisation per pass."""

from __future__ import annotations

from collections.abc import Callable

import torch

# What a batch's numbers are handed to: the values of the vector given to later(), as floats
Reader = Callable[[list[float]], None]


class Readback:
    """Float64 vectors kept on their device until read: every `every` vectors (a loop's
    steps) or when read() is called. On a CUDA device a batch is copied without blocking into
    pinned memory and handed over at the next batch, when the copy has long finished."""

    def __init__(self, every: int = 64) -> None:
        self.every = every
        self._waiting: list[tuple[torch.Tensor, Reader]] = []
        self._copying: list[tuple[torch.Tensor, list[int], list[Reader], object]] = []

    def later(self, values: torch.Tensor, reader: Reader) -> None:
        """Hand values (a 1-D float64 tensor) to reader once they are read (never, when they
        cannot be: a meta tensor's, a subclass's that refuses)."""
        if values.is_meta:
            return
        self._waiting.append((values, reader))
        if len(self._waiting) >= self.every:
            self._start()

    def read(self) -> None:
        """Hand every vector given so far to its reader."""
        self._start()
        self._finish()

    def _start(self) -> None:
        """Copy the waiting vectors to the host, a batch per device: on the CPU read now; on
        an accelerator started (a copy into pinned memory and an event), read at the next."""
        self._finish()
        by_device: dict[torch.device, list[tuple[torch.Tensor, Reader]]] = {}
        for values, reader in self._waiting:
            by_device.setdefault(values.device, []).append((values, reader))
        self._waiting = []
        for device, batch in by_device.items():
            try:
                joined = torch.cat([values for values, _ in batch])
            except Exception:  # noqa: BLE001 - a subclass's own cat: each read alone then
                self._copying += [(values, [values.numel()], [reader], None)
                                  for values, reader in batch]
                continue
            sizes = [values.numel() for values, _ in batch]
            readers = [reader for _, reader in batch]
            if device.type == "cuda":
                host = torch.empty(joined.shape, dtype=joined.dtype, pin_memory=True)
                host.copy_(joined, non_blocking=True)
                done = torch.cuda.Event()
                done.record(torch.cuda.current_stream(device))
                self._copying.append((host, sizes, readers, done))
            else:  # the CPU (or a device without events): the values are there
                self._copying.append((joined, sizes, readers, None))

    def _finish(self) -> None:
        """Hand out the batches started (waiting for a copy only if it has not finished)."""
        copying, self._copying = self._copying, []
        for host, sizes, readers, done in copying:
            if done is not None:
                done.synchronize()  # type: ignore[attr-defined]
            try:
                read, at = host.tolist(), 0
            # Any tensor may be a .grad or a leaf (a subclass whose methods raise): its
            # numbers stay unread (no statistics), the others' are read alone.
            except Exception:  # noqa: BLE001
                if len(readers) > 1:
                    self._copying = [(values, [size], [reader], None) for values, size, reader
                                     in zip(host.split(sizes), sizes, readers, strict=True)]
                    self._finish()
                continue
            for size, reader in zip(sizes, readers, strict=True):
                reader(read[at:at + size])
                at += size
