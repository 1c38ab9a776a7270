"""One line per rank of a multi-process run: what it recorded, and whether its graph is the
shown rank's."""

from __future__ import annotations

import hashlib
import json
import math
from collections import Counter
from typing import Any

from ..model.gradients import close_numbers
from ..model.records import Trace
from ..model.texts import number

SHOWN_NAMES = 3  # parameters named in a rank's line
WHOLE_SHOWN = 8  # sharded parameters whose whole .grad norm is told
REENTRANT_CHECKPOINT = "CheckpointFunctionBackward"  # checkpoint(..., use_reentrant=True)


def graph_key(trace: Trace) -> str:
    """A short digest of the graph's shape: node types, leaves' names and edges, in order."""
    digest = hashlib.sha256()
    # surrogatepass: a saved trace's strings may hold any code point JSON can write
    for node in trace.nodes:
        digest.update(f"{node.id} {node.type} {node.tensor}\n".encode("utf-8", "surrogatepass"))
    for edge in trace.edges:
        digest.update(f"{edge.src}>{edge.dst}:{edge.src_output}:{edge.dst_input}\n"
                      .encode("utf-8", "surrogatepass"))
    return digest.hexdigest()[:16]


def rank_summary(trace: Trace | None, failed: str | None) -> str:
    """What one rank tells the others, as JSON: its passes, findings, graph and how it ended."""
    if trace is None:
        return json.dumps({"failed": failed})
    severities = Counter(f.severity for f in trace.findings)
    # a local shard (FSDP2) is each rank's own part of the reduced gradient: not compared
    grads = {t.name: [t.grad.norm, t.grad.min, t.grad.max] for t in trace.tensors
             if t.is_leaf and t.grad is not None and not t.grad.local_shard}
    # the norm of its shard, and how many ranks hold one: the whole's norm adds them up
    shards = {t.name: [t.grad.norm, t.grad.shards] for t in trace.tensors
              if t.is_leaf and t.grad is not None and t.grad.shards}
    reentrant = any(n.type == REENTRANT_CHECKPOINT for n in trace.nodes)
    return json.dumps({"passes": len(trace.passes), "nodes": len(trace.nodes),
                       "graph": graph_key(trace), "findings": dict(sorted(severities.items())),
                       "failed": failed, "grads": grads, "shards": shards,
                       "reentrant": reentrant})


def whole_norms_line(summaries: list[str | None], shown: int) -> str | None:
    """'.grad norm of each sharded parameter, over every rank's shard: model.w 0.0123, …'
    from every rank's summary (summaries[rank]); None unless every rank told its shards,
    none failed and all ran as many passes (each part then is one rank's of one whole)."""
    told = []
    for summary in summaries:
        try:
            told.append(json.loads(summary or "null"))
        except ValueError:
            return None
    if not all(isinstance(t, dict) and not t.get("failed") and isinstance(t.get("shards"), dict)
               and t.get("passes") == told[shown].get("passes") for t in told):
        return None
    whole = []
    for name, (_, count) in told[shown]["shards"].items():
        parts = [t["shards"][name] for t in told if _shard(t["shards"].get(name))]
        if len(parts) == count == len(told) and all(part[1] == count for part in parts):
            whole.append(f"{name} {number(math.hypot(*(part[0] for part in parts)))}")
    if not whole:
        return None
    more = f", … {len(whole) - WHOLE_SHOWN} more" if len(whole) > WHOLE_SHOWN else ""
    return (f".grad norm of each sharded parameter, over every rank's shard: "
            f"{', '.join(whole[:WHOLE_SHOWN])}{more}")


def _shard(told: Any) -> bool:
    """Whether a rank told a shard's [norm, ranks] (another rank's words: checked)."""
    return isinstance(told, list) and len(told) == 2 and isinstance(told[0], float) \
        and not told[0] < 0 and isinstance(told[1], int) and not isinstance(told[1], bool)


def _unreduced(told: dict[str, Any], own: dict[str, Any], shown: int) -> str:
    """'; .grad differs from rank 0's for 2 of 4 parameters …' (nothing when all agree): the
    ranks' .grad after backward, which DDP's allreduce makes equal."""
    theirs, mine = told.get("grads") or {}, own.get("grads") or {}
    both = [name for name in mine if name in theirs]
    differ = [name for name in both if not close_numbers(theirs[name], mine[name])]
    if not differ:
        return ""
    names = ", ".join(differ[:SHOWN_NAMES]) + (", …" if len(differ) > SHOWN_NAMES else "")
    why = ("; a reentrant checkpoint's parameters escape DDP's reducer: "
           "checkpoint(..., use_reentrant=False) or DDP(..., static_graph=True)"
           if own.get("reentrant") and len(differ) < len(both) else "")
    return (f"; .grad differs from rank {shown}'s for {len(differ)} of {len(both)} "
            f"parameter(s), not reduced across the ranks: {names}{why}")


def rank_line(rank: int, summary: str | None, shown: int, shown_summary: str) -> str:
    """'rank 1: 1 pass, 10 nodes, no findings; its graph is rank 0's' (summary: that rank's
    rank_summary, None when it said nothing in time)."""
    if summary is None:
        return f"rank {rank}: said nothing (it stopped before its report, or is still running)"
    try:
        told, own = json.loads(summary), json.loads(shown_summary)
    except ValueError:
        return f"rank {rank}: sent something gradtrace cannot read"
    if told.get("passes") is None:
        return f"rank {rank}: failed: {told.get('failed')}"
    found = ", ".join(f"{n} {s}" for s, n in told["findings"].items()) or "no findings"
    same = f"its graph is rank {shown}'s" if told["graph"] == own.get("graph") \
        else f"its graph differs from rank {shown}'s ({told['nodes']} nodes, rank {shown}: " \
        f"{own.get('nodes')})"
    failed = told["failed"] or ""
    ended = f"; stopped: {failed[:100]}{'…' if len(failed) > 100 else ''}" if failed else ""
    return f"rank {rank}: {told['passes']} pass(es), {told['nodes']} nodes, {found}; " \
        f"{same}{_unreduced(told, own, shown)}{ended}"
