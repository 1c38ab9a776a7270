"""Every field of every record survives the JSON writer and loader; a new field must join in."""

from __future__ import annotations

import dataclasses
import inspect
import json
from typing import Any

from gradtrace.model import records
from gradtrace.model.codec import trace_from_dict
from gradtrace.model.records import (
    Costs,
    Edge,
    Finding,
    FunctionCall,
    GradChange,
    GradSummary,
    LeafStep,
    ModuleSaved,
    Node,
    NodeCost,
    NodeFlow,
    Pass,
    Ranks,
    SavedTensor,
    SecondOrder,
    Source,
    Steps,
    TensorInfo,
    Trace,
)
from gradtrace.render.json import to_json

EMPTY: tuple[Any, ...] = (None, (), {}, "")


def summary(x: float) -> GradSummary:
    return GradSummary(shape=(2,), norm=abs(x) * 2, min=-x, max=x, finite=True, values=[-x, x],
                       note="kept whole", is_complex=True, local_shard=True,
                       shards=2)


def full_trace() -> Trace:
    """A trace whose every record sets every field (a default left only where another
    record of its kind sets it)."""
    source = Source(file="model.py", line=7, code="y = x * w")
    nodes = (
        Node(id="n0", type="MyFnBackward", kind="custom", tensor="y",
             saved=(SavedTensor(name="self", shape=(2,), dtype="float32", bytes=8,
                                status="freed"),),
             module="model.layer", recomputed=True, source=source, grad_graph=True,
             hooks=("relu_hook of model.layer",),
             library=Source(file="site-packages/lib/model.py", line=3, code="return x @ w"),
             output_tensors=(None, "y")),
        Node(id="n1", type="AccumulateGrad", kind="leaf", tensor="x"),
    )
    g, h = summary(0.5), summary(1.5)
    flow = {"n1": NodeFlow(grad_outputs=(h,), grad_inputs=(), position=1),  # out of run order
            "n0": NodeFlow(grad_outputs=(g,), grad_inputs=(h, None), position=0,
                           unhooked=(g, None))}
    return Trace(
        scenario="model.py", gradtrace_version="9.9", torch_version="2.13.0+cpu",
        outputs=("n0",), output_names=("y",), root_reason="the scenario's OUTPUT",
        nodes=nodes,
        edges=(Edge(src="n1", dst="n0", dst_input=1, src_output=2),),
        tensors=(TensorInfo(name="x", shape=(2,), dtype="float32", requires_grad=True,
                            is_leaf=True, retains_grad=True, grad_fn="MyFnBackward", node="n1",
                            grad=h, grad_before=g, value=summary(2.5), grad_note="a hook"),),
        passes=(Pass(kind="grad", roots=("n0",), retain_graph=True, create_graph=True,
                     error="RuntimeError: late", flow=flow, by="gradtrace", root_names=("y",),
                     line=9, code="torch.autograd.grad(y, x)",
                     grad_changes=(GradChange(tensor="x", before=g, after=h),), graph=2,
                     light=True),),
        findings=(Finding(code="nan-gradient", severity="warning", message="m", tensor="x",
                          node="n1", hint="h", file="model.py", line=7),),
        functions=(FunctionCall(function="MyFn", node="n0", line=7, inputs=("x",)),),
        stdout="printed\n",
        second_order=SecondOrder(root="y", wrt=("x",), blocks={("x", "x"): [[1.0, 2.0]]},
                                 error="only x"),
        saved_read=False,
        steps=Steps(leaves=("x", "model.w"), modules=(None, "model"), loss=(0.25,),
                    optimizer_steps=(3,),
                    grads=((LeafStep(norm=2.0, max_abs=1.5, finite=False, kept=True), None),),
                    optimizer_steps_after=1, loss_scale=(65536.0,),
                    loss_divisor=(4.0,), optimized=(False, True),
                    scale_free=(None, True), closure_call=(7,)),
        ranks=Ranks(rank=1, world=2),
        costs=Costs(pass_number=1, method="steps", device="cuda",
                    nodes={"n1": NodeCost(time_us=12.5, spread_us=1.5, allocated=-256,
                                          freed=128)},
                    wall_us=(10.0, 11.0), profiled_us=(12.0,), op_total_us=(11.5,),
                    peak_bytes=512, peak_node="n1", peak_saved=(ModuleSaved("model", 64),),
                    forward_us={"model": 3.0}, accumulate_us=0.5, accumulate_spread_us=0.25,
                    engine_us=2.0, outside_us=3.0,
                    ops_us={"aten::mm": 4.0},
                    recomputed_us=1.0,
                    recomputed_saved=32, note="one timing"),
    )


def record_fields(cls: Any) -> dict[str, Any]:
    """A record's fields, each with its default (inspect.Parameter.empty when it has none)."""
    if dataclasses.is_dataclass(cls):
        return {f.name: f.default if f.default_factory is dataclasses.MISSING
                else f.default_factory() for f in dataclasses.fields(cls)}
    return {name: cls._field_defaults.get(name, inspect.Parameter.empty)  # a named tuple
            for name in cls._fields}


def reachable_records(trace: Trace) -> list[Any]:
    """Every record in the trace, found by walking its fields, tuples and dicts."""
    found, todo = [], [trace]
    while todo:
        item = todo.pop()
        if isinstance(item, (list, tuple)) and not hasattr(item, "_fields"):
            todo.extend(item)
        elif isinstance(item, dict):
            todo.extend(item.values())
        elif type(item).__module__ == records.__name__:
            found.append(item)
            todo.extend(getattr(item, name) for name in record_fields(type(item)))
    return found


def test_the_fixture_sets_every_field_of_every_record() -> None:
    kinds = {cls for cls in vars(records).values()
             if isinstance(cls, type) and cls.__module__ == records.__name__}
    seen: dict[type, list[Any]] = {}
    for record in reachable_records(full_trace()):
        seen.setdefault(type(record), []).append(record)
    assert set(seen) == kinds, f"records not in the fixture: {kinds - set(seen)}"
    for cls, instances in seen.items():
        for name, default in record_fields(cls).items():
            values = [getattr(r, name) for r in instances]
            assert any(v != default and not any(v is e or v == e for e in EMPTY)
                       for v in values), f"no {cls.__name__} in the fixture sets {name}"


def test_every_field_survives_the_json_writer_and_loader() -> None:
    trace = full_trace()
    text = to_json(trace)
    assert '"order": 1' in text  # the entry out of run order keeps its position
    back = trace_from_dict(json.loads(text))
    for field in dataclasses.fields(Trace):
        assert getattr(back, field.name) == getattr(trace, field.name), field.name
    assert back == trace
    assert to_json(back) == text


def test_column_constructors_take_the_fields_in_order() -> None:
    for cls in (Node, Edge):
        params = list(inspect.signature(cls.from_columns).parameters)
        assert params == list(cls._fields)
    node = full_trace().nodes[0]
    assert Node.from_columns(**{name: [value] for name, value in node._asdict().items()}) \
        == [node]
