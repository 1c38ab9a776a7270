"""Numbers computed on the tensors' device as a pass ends, read to the host later and in
batches: one copy per device per batch, never a host-device synchronisation per pass."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Sequence
from typing import Any

import torch

# What a batch's numbers are handed to: the values of the vector given to later(), as floats
Reader = Callable[[list[float]], None]
# A vector: 1-D parts on one device, of any real dtypes, joined (as float64) only in its batch
Parts = tuple[torch.Tensor, ...]


class Readback:
    """Float64 vectors kept on their device until read: every `every` vectors (a loop's
    steps) or when read() is called. On a CUDA device a batch is copied without blocking into
    pinned memory and handed over at the next batch, when the copy has long finished; on the
    CPU it is handed over at once."""

    def __init__(self, every: int = 64) -> None:
        self.every = every
        self._waiting: list[tuple[Parts, Reader]] = []
        self._streams: dict[torch.device, set[object]] = {}  # the streams that made them
        self.batches = 0  # how many batches were handed out
        # accelerator batches being copied: (pinned host tensor, sizes, readers, event)
        self._copying: list[tuple[torch.Tensor, list[int], list[Reader], Any]] = []

    def later(self, values: torch.Tensor | Sequence[torch.Tensor], reader: Reader) -> None:
        """Hand values (a 1-D tensor, or 1-D parts on one device: joined in the batch, one
        op fewer a pass) to reader once they are read (never, when they cannot be: a meta
        tensor's, a subclass's that refuses)."""
        parts = (values,) if isinstance(values, torch.Tensor) else tuple(values)
        if parts[0].is_meta:
            return
        if parts[0].is_cuda:  # made on this stream: the batch's copy waits for it
            self._streams.setdefault(parts[0].device, set()).add(
                torch.cuda.current_stream(parts[0].device))
        self._waiting.append((parts, reader))
        if len(self._waiting) >= self.every:
            self._start()

    @property
    def pending(self) -> bool:
        """Whether some vector given is still to be handed out (none: every reader that will
        ever be called was)."""
        return bool(self._waiting or self._copying)

    def read(self) -> None:
        """Hand every vector given so far to its reader."""
        self._start()
        self._finish()

    def _start(self) -> None:
        """Copy the waiting vectors to the host, a batch per device: on the CPU read now; on
        an accelerator started (a copy into pinned memory and an event), read at the next."""
        self._finish()
        by_device: dict[torch.device, list[tuple[Parts, Reader]]] = {}
        for parts, reader in self._waiting:
            by_device.setdefault(parts[0].device, []).append((parts, reader))
        self._waiting = []
        for device, batch in by_device.items():
            sizes = [sum(part.numel() for part in parts) for parts, _ in batch]
            readers = [reader for _, reader in batch]
            try:  # float64 holds every real dtype's values exactly
                joined = torch.cat([part for parts, _ in batch for part in parts]).double()
            except Exception:  # noqa: BLE001 - a subclass's own cat: each read alone then
                for (parts, reader), size in zip(batch, sizes, strict=True):
                    with contextlib.suppress(Exception):
                        _hand_out(torch.cat(parts), [size], [reader])
                self.batches += 1
                continue
            if device.type == "cuda":
                stream = torch.cuda.current_stream(device)
                for made_on in self._streams.pop(device, ()):
                    if made_on != stream:
                        stream.wait_stream(made_on)  # type: ignore[arg-type]
                for parts, _ in batch:  # their memory is not reused before the cat ran
                    for part in parts:
                        part.record_stream(stream)
                host = torch.empty(joined.shape, dtype=joined.dtype, pin_memory=True)
                host.copy_(joined, non_blocking=True)
                done = torch.cuda.Event()
                done.record(stream)
                self._copying.append((host, sizes, readers, done))
            else:  # the CPU (or a device without events): nothing to wait for
                _hand_out(joined, sizes, readers)
                self.batches += 1

    def _finish(self) -> None:
        """Hand out the batches started (waiting for a copy only if it has not finished)."""
        copying, self._copying = self._copying, []
        for host, sizes, readers, done in copying:
            done.synchronize()
            _hand_out(host, sizes, readers)
            self.batches += 1


def _hand_out(values: torch.Tensor, sizes: list[int], readers: list[Reader]) -> None:
    """Read values, and hand each reader its part (sizes: the parts' lengths, in order)."""
    try:
        read, at = _listed(values), 0
    # Any tensor may be a .grad or a leaf (a subclass whose methods raise): its numbers stay
    # unread (no statistics), the others' are read alone.
    except Exception:  # noqa: BLE001
        if len(readers) > 1:
            for part, size, reader in zip(values.split(sizes), sizes, readers, strict=True):
                _hand_out(part, [size], [reader])
        return
    for size, reader in zip(sizes, readers, strict=True):
        reader(read[at:at + size])
        at += size


def _listed(values: torch.Tensor) -> list[float]:
    """values as a list: a subclass's (a batch joined with a .grad of one) read as a plain
    tensor when its own tolist refuses, so one such .grad leaves its batch's others read."""
    try:
        return values.tolist()  # type: ignore[no-any-return]
    except Exception:
        if type(values) is torch.Tensor:
            raise
        return values.as_subclass(torch.Tensor).tolist()  # type: ignore[no-any-return]
