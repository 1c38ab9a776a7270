"""A run that is one rank of many (torchrun, or any launcher that sets RANK and WORLD_SIZE):
which rank it is, and the ranks' messages to each other through torchrun's own store."""

from __future__ import annotations

import os
from datetime import timedelta
from typing import Any

from ...model.records import Ranks

WAIT = 120.0  # seconds a rank waits for another: a slower rank's run, then its report


def launched() -> Ranks | None:
    """The rank and world size a launcher set, when there is more than one rank."""
    try:
        rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    except (KeyError, ValueError):
        return None
    return Ranks(rank, world) if world > 1 and 0 <= rank < world else None


class RankStore:
    """The key-value store torchrun's agent keeps for its workers (MASTER_ADDR:MASTER_PORT,
    alive while any of them runs), under gradtrace's own prefix; None-like when there is none
    (another launcher): get() and wait() then find nothing."""

    def __init__(self) -> None:
        self._store: Any = None
        if os.environ.get("TORCHELASTIC_USE_AGENT_STORE") != "True":
            return
        import torch.distributed as dist

        prefix = "gradtrace/{}/{}/".format(os.environ.get("TORCHELASTIC_RUN_ID", ""),
                                           os.environ.get("TORCHELASTIC_RESTART_COUNT", "0"))
        try:
            store = dist.TCPStore(os.environ["MASTER_ADDR"], int(os.environ["MASTER_PORT"]),
                                  is_master=False, timeout=timedelta(seconds=WAIT))
        except (KeyError, ValueError, RuntimeError):
            return  # no store to reach: each rank goes on alone
        self._store = dist.PrefixStore(prefix, store)

    @property
    def reachable(self) -> bool:
        return self._store is not None

    def set(self, key: str, value: str) -> None:
        if self._store is not None:
            self._store.set(key, value)

    def get(self, key: str, timeout: float = WAIT) -> str | None:
        """The value of key once a rank sets it; None if none does in time."""
        if self._store is None:
            return None
        try:
            self._store.wait([key], timedelta(seconds=timeout))
        except RuntimeError:  # a time out: that rank stopped before it said anything
            return None
        value: bytes = self._store.get(key)
        return value.decode("utf-8", "replace")
