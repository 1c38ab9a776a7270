"""The Trace of a run: the walk's nodes and edges, tensor rows, passes and their flow."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import replace
from itertools import compress, repeat, tee
from operator import itemgetter
from typing import Any

import torch

from .._version import __version__
from ..errors import NoGraph
from ..findings.cuts import why_no_root, with_cuts
from ..findings.graph import trace_findings, unreached
from ..findings.located import located
from ..findings.passes import pass_findings
from ..findings.recorded import findings_of
from ..gcpause import gc_paused
from ..model.facts import Detached, Fact, NonFiniteBorn, NoRoot, SavedChanged, Stopped
from ..model.records import (
    BACKWARD_HOOK_NODE,
    LEAF,
    Edge,
    FunctionCall,
    Node,
    NodeFlow,
    Pass,
    SavedTensor,
    Source,
    TensorInfo,
    Trace,
)
from .captured import Captured, RawPass
from .frozen import Fragments, FrozenGraph, leaf_refs, node_keys, tensor_key
from .summary import to_summaries
from .tensors import Named, describe_value, detached_sources, tensor_info
from .walk import (
    NodeIds,
    RawEdge,
    SavedCache,
    indexed_walk,
    node_kind,
    release,
    saved_reader,
    walk,
)


@gc_paused
def build_trace(c: Captured) -> Trace:
    """Walk the graph from the outputs (then from the roots of the passes shown) and build
    the Trace, with every finding. A pass over a graph like a shown pass's (a loop's other
    steps) has its flow and roots placed on the shown pass's nodes; each pass's raw flow is
    let go of once read."""
    output_nodes = [t.grad_fn for _, t in c.outputs]
    shown = list(c.passes if c.graph_passes is None else c.graph_passes)
    pass_roots = [r for p in shown for r in p.roots]
    order, raw_edges, index = c.walked[1:] if c.walked is not None \
        and c.walked.covers(output_nodes, pass_roots) \
        else indexed_walk(output_nodes, pass_roots)
    try:
        ids = [f"n{i}" for i in range(len(order))]
        node_ids = NodeIds(index, {}, ids)
        nodes = _marked(c, order, _nodes(order, node_ids, [*c.named, *c.earlier], c.modules,
                                         c.saved_before, c.lines_of,
                                         c.leaf_aliases))
        named = [*c.named, *((n, t) for n, t in c.earlier if id(t) in node_ids.leaf_index)]
        # the graphs the code let go of join the walk's: their nodes get the ids after its
        fragments = Fragments(shown, order, raw_edges, ids, named)
        # the passes next: each lets go of its raw flow records as it is made, before the
        # nodes are (for a big graph, the two together were the peak of memory)
        graphs: dict[int, int] = {}  # signature -> its number, in the order first run
        twin_walks: dict[int, list[Any]] = {}  # id(shown pass) -> its walk: walked once
        trace_passes: list[Pass] = []
        carried: dict[int, frozenset[str] | None] = {}  # pass number -> its nodes whose forward
        # values were not finite
        for number, p in enumerate(c.passes, 1):
            graph = graphs.setdefault(p.signature, len(graphs))
            if p.frozen is not None:
                on = _frozen_positions(p, shown, fragments, node_ids)
                flow, roots = Fragments.flow(p, on) if on is not None else ({}, ())
                if on is not None and p.frozen.carried is None:
                    carried[number] = None
                elif on is not None and p.frozen.carried:
                    carried[number] = frozenset(on[int(i[1:])] for i in p.frozen.carried)
                trace_passes.append(_pass_record(p, node_ids, roots, graph, flow))
                continue
            placed, roots = _placed(p, shown, node_ids, twin_walks, fragments)
            if p.carriers is None or p.carriers:
                carried[number] = _carriers(p, placed)
            made = _pass_record(p, placed, roots, graph)
            # a loop's light steps are alike: one frozen record for each run of them
            trace_passes.append(trace_passes[-1] if trace_passes and made.light
                                and trace_passes[-1] == made else made)
        for twin_walk in twin_walks.values():
            release(twin_walk)
        edges = _edges(raw_edges, node_ids.ids)
        nodes = [*fragments.filled(_output_hook_modules(nodes, edges)), *fragments.nodes]
        walked = set(edges)  # (a frozen graph's edge between nodes the walk holds: once)
        edges = (*edges, *(e for e in fragments.edges if e not in walked))
        reached = {node for p in trace_passes for node in p.flow}
        filled = {ch.tensor for p in trace_passes for ch in p.grad_changes
                  if ch.after is not None}
        detached = detached_sources(named)
        facts = (*c.facts, *c.optimizer_facts)
        trace = Trace(
            scenario=c.scenario, gradtrace_version=__version__, torch_version=torch.__version__,
            outputs=tuple(dict.fromkeys([*map(node_ids.of, output_nodes),
                                         *_pass_roots(c.root_pass, shown, fragments,
                                                      node_ids)])),
            output_names=(*(name for name, _ in c.outputs), *_root_names(c.root_pass)),
            root_reason=c.root_reason, nodes=tuple(nodes), edges=edges,
            tensors=(*(_claimed(tensor_info(name, t, node_ids, c.grad_before.get(name),
                                            reached, detached.get(name), name in filled),
                                t, fragments) for name, t in named), *fragments.tensors),
            passes=tuple(trace_passes),
            findings=(*findings_of((_with_module(f, c.modules, node_ids, fragments)
                                    for f in facts
                                    if not isinstance(f, Stopped)), c.scenario),
                      *pass_findings(c.passes, facts),
                      *findings_of(Detached(name, source) for name, source in detached.items())),
            functions=tuple(FunctionCall(
                call.function.__name__, node_ids.node(call.node) if call.node is not None
                else None, call.line, tuple(describe_value(a) for a in call.args))
                for call in c.calls),
            stdout=c.stdout, ranks=c.ranks, second_order=c.second_order,
            saved_read=c.saved_before is not None, steps=c.optimized_steps(),
            costs=None if c.costs is None else c.costs.costs(node_ids,
                                                             {n.id: n for n in nodes}))
    finally:
        release(order)
    lost = unreached(trace)
    found = trace_findings(trace, c.updated, c.handed, c.reduced,
                           _waiting(named, trace, lost, set(detached.values())) if lost else {},
                           carried=carried, fresh=c.fresh)
    findings = located(trace, (*trace.findings, *found))
    if c.source is not None:  # the code's lines tell where tensors were bound and cut
        findings = with_cuts(findings, c.source.file, c.source.bound_at, c.source.cuts(
            lost, c.updated, trace.nodes, trace.edges) if lost else [], trace.scenario)
    return replace(trace, findings=findings)


def no_graph(label: str | None, fact: NoRoot) -> NoGraph:
    """The error of a recording with nothing to build: no named tensor has a graph, and
    nothing else was recorded (why, as the no-graph finding says it)."""
    return NoGraph(label, why_no_root(fact), fact.line)


@gc_paused
def frozen_graph(c: Captured) -> FrozenGraph:
    """The graph of c's one pass as plain data, as build_trace would show it (names, lines,
    modules, saved tensors, the flow): the code let go of it. Its raw flow is let go of."""
    p = c.passes[0]
    order, raw_edges, index = indexed_walk(p.roots)
    try:
        node_ids = NodeIds(index, {}, [f"n{i}" for i in range(len(order))])
        carried = _carriers(p, node_ids) if p.carriers is None or p.carriers else frozenset()
        roots, flow = _ids(p.roots, node_ids), _flow_record(p, node_ids)
        nodes = _marked(c, order, _nodes(order, node_ids, [*c.named, *c.earlier], c.modules,
                                         c.saved_before, c.lines_of,
                                         c.leaf_aliases))
        edges = _edges(raw_edges, node_ids.ids)
        named = [(n, t) for n, t in (*c.named, *c.earlier)
                 if id(t) in node_ids.leaf_index or t.grad_fn in index]
        detached = detached_sources(named)
        filled = {name for name, _, after in p.pending_changes if after is not None} | {
            ch.tensor for ch in p.grad_changes if ch.after is not None}
        tensors = tuple(tensor_info(name, t, node_ids, c.grad_before.get(name), set(flow),
                                    detached.get(name), name in filled) for name, t in named)
        # a root no name holds now (`del loss`) is named as its pass named it
        names = dict(zip(roots, p.root_names, strict=False))
        nodes = [n._replace(tensor=names[n.id]) if n.tensor is None and names.get(n.id)
                 else n for n in _output_hook_modules(nodes, edges)]
        return FrozenGraph(tuple(nodes), edges, tensors, flow, roots,
                           tuple(node_keys(order, raw_edges)), carried, tuple(map(id, order)),
                           leaf_refs(order))
    finally:
        release(order)


def _with_module(fact: Fact, modules: dict[int, str], node_ids: NodeIds,
                 fragments: Fragments) -> Fact:
    """A saved tensor's fact told the module whose forward made its node; a NaN's birth
    told its node's id, when the graph shown holds that node (a frozen graph's too)."""
    frozen = fragments.by_object.get(fact.node) if isinstance(
        fact, (SavedChanged, NonFiniteBorn)) else None
    if isinstance(fact, SavedChanged) and fact.module is None:
        return fact._replace(module=modules.get(fact.node) or (
            None if frozen is None else frozen.module))
    if isinstance(fact, NonFiniteBorn):
        return fact._replace(box=next((node_ids.ids[i] for node, i in node_ids.index.items()
                                       if id(node) == fact.node),
                                      None if frozen is None else frozen.id))
    return fact


def _carriers(p: RawPass, ids: NodeIds) -> frozenset[str] | None:
    """The ids of the nodes of p's flow whose saved values were not finite (None: not
    asked)."""
    if p.carriers is None:
        return None
    return frozenset(ids.of(r.node) for r in p.flow.values()
                     if id(r.node) in p.carriers and r.node in ids)


def _marked(c: Captured, order: list[Any], nodes: list[Node]) -> list[Node]:
    """The nodes with what the recording marked on them: recomputed by checkpointing, run
    by module hooks, made by a create_graph pass."""
    if c.recomputed:
        nodes = [n._replace(recomputed=True) if id(obj) in c.recomputed else n
                 for n, obj in zip(nodes, order, strict=True)]
    if c.hooks:
        nodes = [n._replace(hooks=c.hooks[id(obj)]) if id(obj) in c.hooks else n
                 for n, obj in zip(nodes, order, strict=True)]
    if c.grad_graph is not None:
        grad_graph = c.grad_graph
        nodes = [n._replace(grad_graph=True) if grad_graph(obj) else n
                 for n, obj in zip(nodes, order, strict=True)]
    return nodes


def _waiting(named: Named, trace: Trace, lost: list[str], cut: set[str]
             ) -> dict[str, tuple[str, ...]]:
    """The lost leaves that a named tensor's graph uses, one no backward pass ran from (made
    after the last pass, or never differentiated): each with the topmost such tensors. Not
    those a detach cut off (cut: the tensors detached; the detached finding tells them)."""
    undrawn = {t.name for t in trace.tensors if t.node is None and not t.is_leaf} - cut
    roots = list({t.grad_fn: name for name, t in named
                  if name in undrawn and t.grad_fn is not None}.items())
    if not roots:
        return {}
    order, edges, index = indexed_walk([node for node, _ in roots])
    try:
        used = {index[node] for node, _ in roots} - {src for src, *_ in edges}
        tops = tuple(name for node, name in roots if index[node] in used)
        lost_names = set(lost)
        wanted = {id(t): name for name, t in named if name in lost_names}
        return {wanted[id(node.variable)]: tops for node in order
                if node_kind(node) == LEAF and id(node.variable) in wanted}
    finally:
        release(order)


def _nodes(order: list[Any], node_ids: NodeIds, named: Named, modules: dict[int, str],
           saved_before: SavedCache | None,
           lines_of: Callable[[Any], tuple[Source | None, Source | None]] | None = None,
           aliases: dict[int, int] | None = None) -> list[Node]:
    """Node records, built column by column with map and zip: a big graph has 100,000s.
    Fills node_ids' leaf index (a leaf's id by its tensor; an FSDP2 leaf's by its sharded
    parameter, through aliases)."""
    ids, leaf_index = node_ids.ids, node_ids.leaf_index
    classes = list(map(type, order))
    one_of_each = dict(zip(classes, order, strict=True))
    names = {cls: cls.__name__ for cls in one_of_each}
    kinds = {cls: node_kind(obj) for cls, obj in one_of_each.items()}
    name_of: dict[int, str] = {}  # id(grad_fn) or id(tensor) -> the tensor's first name
    for name, t in named:
        if t.grad_fn is not None:
            name_of.setdefault(id(t.grad_fn), name)
        name_of.setdefault(id(t), name)
    keys: list[int] = []  # what names and modules are keyed by: id(grad_fn), id(leaf tensor)
    # Without names or modules nothing asks for a leaf by its tensor: a big graph's 10,000s
    # of .variable reads are saved.
    if name_of or modules:
        keys = list(map(id, order))
        leaf_classes = {cls for cls, kind in kinds.items() if kind == LEAF}
        for i in compress(range(len(order)), map(leaf_classes.__contains__, classes)):
            keys[i] = id(order[i].variable)
            if aliases:
                keys[i] = aliases.get(keys[i], keys[i])
            leaf_index[keys[i]] = i
    saved: Iterable[tuple[SavedTensor, ...]] = repeat(())
    if saved_before is not None:
        saved = list(map(saved_reader(saved_before), order))
    per_output = _output_tensors(named)
    # one lookup a node for both lines, read by the two columns in step (tee keeps one)
    sources, libraries = tee(map(lines_of, order)) if lines_of else (None, None)
    return Node.from_columns(  # ids set the length; repeat() never ends
        id=ids, type=map(names.__getitem__, classes), kind=map(kinds.__getitem__, classes),
        tensor=map(name_of.get, keys) if name_of else repeat(None), saved=saved,
        module=map(modules.get, keys) if modules else repeat(None), recomputed=repeat(False),
        source=map(itemgetter(0), sources) if sources else repeat(None), grad_graph=repeat(False),
        library=map(itemgetter(1), libraries) if libraries else repeat(None),
        output_tensors=(per_output.get(id(node), ()) for node in order) if per_output
        else repeat(()))


def _output_tensors(named: Named) -> dict[int, tuple[str | None, ...]]:
    """{id(grad_fn): each output's tensor name} for the nodes where a named tensor is not
    output 0 (its output_nr): `a, b = x.chunk(2)` names SplitBackward0's outputs (a, b). The
    first name bound to an output names it, as for a node's tensor."""
    outputs: dict[int, dict[int, str]] = {}
    several: set[int] = set()
    for name, t in named:
        if t.grad_fn is None:
            continue
        at = outputs.setdefault(id(t.grad_fn), {})
        at.setdefault(t.output_nr, name)
        if t.output_nr:
            several.add(id(t.grad_fn))
    return {key: tuple(outputs[key].get(i) for i in range(max(outputs[key]) + 1))
            for key in several}


def _output_hook_modules(nodes: list[Node], edges: tuple[Edge, ...]) -> list[Node]:
    """A module's full backward hook node on its outputs is made once its forward returned,
    so it was taken for its parent's: it is the module whose op it follows, one level below
    that parent on the op's module path."""
    hooked = {n.id for n in nodes if n.type == BACKWARD_HOOK_NODE}
    if not hooked:
        return nodes
    child = {e.dst: e.src for e in edges if e.dst in hooked and e.dst_input == 0}
    module_of = {n.id: n.module for n in nodes}
    out = []
    for n in nodes:
        inner = module_of.get(child.get(n.id, ""))
        if n.id in hooked and inner and (n.module is None or inner.startswith(n.module + ".")):
            depth = 0 if n.module is None else n.module.count(".") + 1
            n = n._replace(module=".".join(inner.split(".")[:depth + 1]))
        out.append(n)
    return out


def _edges(raw_edges: list[RawEdge], ids: list[str]) -> tuple[Edge, ...]:
    """Edges with node ids, made column by column: a big graph has 100,000s."""
    if not raw_edges:
        return ()
    srcs, dsts, dst_inputs, src_outputs = zip(*raw_edges, strict=True)
    return tuple(Edge.from_columns(src=map(ids.__getitem__, srcs),
                                   dst=map(ids.__getitem__, dsts),
                                   dst_input=dst_inputs, src_output=src_outputs))


def _flow_record(p: RawPass, node_ids: NodeIds) -> dict[str, NodeFlow]:
    """The pass's flow by node id, in run order (each node's position its place in it)."""
    records = sorted((r for r in p.flow.values() if r.node in node_ids),
                     key=lambda r: r.position)
    p.flow = {}  # let go of the raw records (and their stats) as the summaries are made
    summaries = to_summaries([g for r in records for g in (*r.received, *r.sent)])
    flow = {}
    end = 0
    for position, r in enumerate(records):
        start, middle, end = end, end + len(r.received), end + len(r.received) + len(r.sent)
        # each record's slice of the summaries
        flow[node_ids.of(r.node)] = NodeFlow(grad_outputs=tuple(summaries[start:middle]),
                                            grad_inputs=tuple(summaries[middle:end]),
                                            position=position)
        if r.unhooked is not None:  # rare: a module hook's node
            flow[node_ids.of(r.node)] = flow[node_ids.of(r.node)]._replace(
                unhooked=tuple(to_summaries(r.unhooked)))
    return flow


def _placed(p: RawPass, shown: list[RawPass], node_ids: NodeIds,
            twin_walks: dict[int, list[Any]],
            fragments: Fragments) -> tuple[NodeIds, tuple[str, ...]]:
    """The ids to give p's flow, and p's root ids: its own nodes' when its graph was walked;
    else, when its graph is like a shown pass's (a loop's other step), that pass's nodes: the
    i-th node of p's walk is the i-th of the twin's (twin_walks keeps each twin's walk)."""
    own = [r for r in p.roots if r is not None and r in node_ids]
    twin = None if own else next((s for s in reversed(shown) if s.signature == p.signature),
                                 None)
    if twin is None:
        return node_ids, _ids(own, node_ids)
    if twin.frozen is not None:  # a graph the code let go of: its frozen nodes, by place
        on = fragments.positions(twin)
        roots = () if on is None else Fragments.flow(twin, on)[1]
        if on is None or not p.flow:
            return node_ids, roots
        mine, _ = walk(p.roots)
        index = {node: int(on[i][1:]) for i, node in enumerate(mine)} \
            if len(mine) == len(on) else {}
        release(mine)
        return NodeIds(index, {}, node_ids.ids), roots
    roots = _ids(twin.roots, node_ids)
    if not p.flow:  # its detail was let go of: only its roots are told
        return node_ids, roots
    mine, _ = walk(p.roots)
    theirs = twin_walks.get(id(twin))
    if theirs is None:
        theirs = twin_walks[id(twin)] = walk(twin.roots)[0]
    index = {node: node_ids.index[t] for node, t in zip(mine, theirs, strict=False)
             if t in node_ids} if len(mine) == len(theirs) else {}
    release(mine)  # the index holds what it needs
    return NodeIds(index, {}, node_ids.ids), roots


def _claimed(row: TensorInfo, t: Any, fragments: Fragments) -> TensorInfo:
    """A live tensor's row, told its node in a frozen graph when the walk did not reach it."""
    node = fragments.claimed.get(tensor_key(t)) if row.node is None and fragments.claimed \
        else None
    return row if node is None else replace(row, node=node)


def _frozen_positions(p: RawPass, shown: list[RawPass], fragments: Fragments,
                      node_ids: NodeIds) -> list[str] | None:
    """The id of each node of a frozen pass's graph, by its place in its walk: its own when
    shown, else its twin's (the latest shown pass over a graph alike); None: neither."""
    placed = fragments.positions(p)
    if placed is None:
        twin = next((s for s in reversed(shown) if s.signature == p.signature), None)
        if twin is None:
            return None
        placed = fragments.positions(twin) if twin.frozen is not None \
            else fragments.live_positions(twin, node_ids)
    assert p.frozen is not None
    return placed if placed is not None and len(placed) == len(p.frozen.nodes) else None


def _pass_roots(p: RawPass | None, shown: list[RawPass], fragments: Fragments,
                node_ids: NodeIds) -> tuple[str, ...]:
    """The ids of the roots of the pass whose roots are the outputs (the code let go of
    them): its frozen graph's, or its own nodes' (none for None, or a pass placed nowhere)."""
    if p is None:
        return ()
    if p.frozen is None:
        return _ids([r for r in p.roots if r is not None and r in node_ids], node_ids)
    on = _frozen_positions(p, shown, fragments, node_ids)
    return () if on is None else Fragments.flow(p, on)[1]


def _root_names(p: RawPass | None) -> tuple[str, ...]:
    """The names of the roots of the pass whose roots are the outputs."""
    if p is None:
        return ()
    names = p.root_names
    return tuple(name or ("root" if len(names) == 1 else f"root{i}")
                 for i, name in enumerate(names))


def _ids(roots: list[Any], node_ids: NodeIds) -> tuple[str, ...]:
    return tuple(dict.fromkeys(node_ids.of(r) for r in roots if r is not None))


def _pass_record(p: RawPass, node_ids: NodeIds, roots: tuple[str, ...], graph: int,
                 flow: dict[str, NodeFlow] | None = None) -> Pass:
    """p's record: its flow given (a frozen pass's, placed already) or read off its raw one."""
    return Pass(
        kind=p.kind,
        roots=roots,
        retain_graph=p.retain_graph,
        create_graph=p.create_graph,
        error=p.error,
        flow=_flow_record(p, node_ids) if flow is None else flow,
        by=p.by,
        root_names=tuple(p.root_names),
        line=p.line,
        code=p.code,
        grad_changes=tuple(p.grad_changes),
        graph=graph,
        light=p.thinned,
    )
