"""The nodes of graphs made in a loop's light stretch (its forwards ran without the line log
and module tracker): their lines and modules are those of their twins, the same nodes of the
latest pass in detail over a graph alike."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import Any

from ...extract.captured import Captured, RawPass
from ...extract.walk import release, walk
from ...model.records import Node
from ..observers.base import Host, lines_made


def node_twins(shown: list[RawPass], latest_of: dict[int, RawPass]) -> dict[int, Any]:
    """id(node) -> its twin, for the nodes of each shown graph a light pass ran over: the
    i-th node of the latest pass in detail over a graph alike (latest_of: by signature)."""
    twins: dict[int, Any] = {}
    for p in shown:
        twin = latest_of.get(p.signature) if p.thinned and p.roots else None
        same: Sequence[Any] = () if twin is None else twin.nodes or (
            twin.frozen.nodes if twin.frozen is not None else ())
        if not same:
            continue
        order = walk(p.roots)[0]  # its nodes live while p holds its roots
        if len(order) == len(same):
            twins.update(zip(map(id, order), same, strict=True))
        release(order)
    return twins


def with_twins(given: Captured, twins: dict[int, Any], host: Host) -> Captured:
    """given, each node's line and module the host's, else its twin's (a frozen twin's node
    record tells its own)."""
    if not twins:  # the host's own, called once a node (a big graph has 100,000s)
        return replace(given, lines_of=host.lines_of)
    modules = given.modules
    of_twins = {key: t.module if isinstance(t, Node) else modules.get(id(t))
                for key, t in twins.items()}
    modules = {**{key: path for key, path in of_twins.items() if path is not None}, **modules}

    return replace(given, modules=modules,
                   lines_of=lambda node: lines_made(host, node, twins.get(id(node))))
