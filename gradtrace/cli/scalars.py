"""What `gradtrace watch --tensorboard DIR` writes: each step row read, as TensorBoard scalars
at its pass's number (1-based: TensorBoard's global_step), through torch's SummaryWriter:

- `loss`: the pass's loss (none written for a pass without a single-number loss);
- `grad_norm/global`: the norm of all the named leaves' gradients as one vector, the square
  root of the sum of their squared norms;
- `grad_norm/<module>`: the same over each nn.Module's own leaves (a leaf outside any module
  stands for itself, under its own name), as `gradtrace steps --by-module` shows them.

Non-finite values are written as they are, as the steps view and chart show them: a NaN or
inf loss, and a norm NaN (inf when every non-finite gradient in it was inf) as soon as one
of its leaves' gradients was not finite, so the chart shows where the run broke instead of a
healthy-looking line that left the broken leaf out. A module none of whose leaves had a
.grad after a pass gets no point at that pass.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..errors import GradtraceError
from ..model.records import Steps
from ..render.series import Value, grad_series, module_norm

if TYPE_CHECKING:
    from torch.utils.tensorboard import SummaryWriter

# how often the event file is flushed while the run goes: TensorBoard itself looks for new
# points every 5 s, so a chart of a running run is seconds behind, never minutes (torch's
# default: 120 s)
FLUSH_SECONDS = 5


def row_scalars(rows: Steps) -> list[tuple[str, tuple[Value, ...]]]:
    """(tag, a value per row: None writes no point) of each scalar the rows make."""
    leaves = grad_series(rows)
    total = tuple(module_norm([leaf.values[p] for leaf in leaves])
                  for p in range(len(rows.grads)))
    return [("loss", rows.loss), ("grad_norm/global", total),
            *((f"grad_norm/{module.name}", module.values)
              for module in grad_series(rows, by_module=True))]


class Scalars:
    """Each step row read, written as scalars to one TensorBoard event file: a pass's scalars
    in one event (a SummaryWriter.add_scalar each: 7x the time, 70 µs a scalar)."""

    def __init__(self, writer: SummaryWriter) -> None:
        from tensorboard.compat.proto.summary_pb2 import (  # type: ignore[import-untyped]
            Summary,
        )

        self.writer, self.summary = writer, Summary
        # the writer's FileWriter, which its constructor makes (typed None: it is declared
        # None first; so in torch 2.11 to 2.15)
        self.events: Any = writer.file_writer

    def write(self, first: int, rows: Steps) -> None:
        """rows, the first of them pass number first (1-based), as scalars."""
        scalars = row_scalars(rows)
        for k in range(len(rows.grads)):
            points = [self.summary.Value(tag=tag, simple_value=values[k])
                      for tag, values in scalars if k < len(values) and values[k] is not None]
            if points:  # what add_scalar writes (simple_value: float32), a pass at a time
                self.events.add_summary(self.summary(value=points), first + k)

    def close(self) -> None:
        """Every point flushed to the file; the writer's thread ended."""
        self.writer.close()


def open_scalars(folder: Path | None) -> Scalars | None:
    """The scalars --tensorboard FOLDER writes (None: not asked), made before the script
    runs: a FOLDER that is a file, or no tensorboard package, is an error then."""
    if folder is None:
        return None
    if folder.exists() and not folder.is_dir():
        raise GradtraceError(f"--tensorboard {folder}: is a file, not a folder",
                             "give a folder for the event files (made when missing), e.g. "
                             "--tensorboard runs/watch")
    writer = _summary_writer()
    try:
        return Scalars(writer(str(folder.absolute()), flush_secs=FLUSH_SECONDS))
    except OSError as error:  # a parent that is a file; no permission
        raise GradtraceError(f"--tensorboard {folder}: cannot write there "
                             f"({error.strerror or error})",
                             "give a folder you can write to") from None


def _summary_writer() -> type[SummaryWriter]:
    """torch's SummaryWriter; an error saying how to install tensorboard when it is missing.
    Imported here, before the script runs: never on the script's thread, from its folder."""
    try:
        import tensorboard  # type: ignore[import-untyped]  # noqa: F401  (torch needs it)
    except ImportError:
        raise GradtraceError("--tensorboard needs the tensorboard package, which is not "
                             "installed here", "pip install tensorboard") from None
    try:
        from torch.utils.tensorboard import SummaryWriter
    except ImportError as error:
        raise GradtraceError(f"--tensorboard: torch's SummaryWriter cannot be imported: "
                             f"{error}", "pip install --upgrade tensorboard") from None
    return SummaryWriter
