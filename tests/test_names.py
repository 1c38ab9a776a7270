"""Names through containers (capture/reach.py, capture/names.py): real tensors and modules in
lists, tuples, dicts and plain objects, named by their shortest path, within bounds."""

from __future__ import annotations

import argparse
from collections import namedtuple
from typing import Any

import torch

from gradtrace.capture.names import ScenarioNames
from gradtrace.capture.reach import MAX_DEPTH, MAX_ITEMS, reached


class Holder:  # a plain object of the user's
    def __init__(self, **attributes: Any) -> None:
        self.__dict__.update(attributes)


def leaf() -> torch.Tensor:
    return torch.zeros(2, requires_grad=True)


def paths(roots: dict[str, Any]) -> dict[str, Any]:
    return dict(reached(list(roots.items())))


def test_lists_dicts_named_tuples_and_attributes_give_paths() -> None:
    w, b, u = leaf(), leaf(), leaf()
    pair = namedtuple("pair", "weight bias")(w, b)
    found = paths({"params": [pair], "cfg": {"w": u, 3: leaf(), (1, 2): leaf()}})
    assert list(found) == ["cfg[\"w\"]", "cfg[3]", "params[0].weight", "params[0].bias"]
    assert found["params[0].weight"] is w and found["cfg[\"w\"]"] is u


def test_the_shortest_path_names_and_an_object_is_named_once() -> None:
    w = leaf()
    found = paths({"deep": Holder(inner=Holder(w=w)), "flat": [w]})
    assert found == {"flat[0]": w}  # depth 1 before depth 2, whatever the roots' order
    assert paths({"w": w, "again": [w]}) == {}  # a root names it itself


def test_modules_are_named_and_their_parameters_left_to_them() -> None:
    critic = torch.nn.Sequential(torch.nn.Linear(2, 2))
    agent = Holder(critic=critic, params=list(critic.parameters()), alias=critic[0])
    assert paths({"agent": agent}) == {"agent.critic": critic}
    model = torch.nn.Linear(2, 2)
    assert paths({"model": model, "layers": [model], "ps": [model.weight]}) == {}


def test_only_leaves_that_require_grad_are_named() -> None:
    data = [torch.zeros(3), leaf() * 2]  # a batch, an activation
    assert paths({"data": data}) == {}


def test_depth_and_size_are_bounded() -> None:
    w = leaf()
    nested: Any = w
    for _ in range(MAX_DEPTH + 1):
        nested = [nested]
    assert paths({"nested": nested}) == {}
    assert paths({"nested": nested[0]}) == {"nested" + "[0]" * MAX_DEPTH: w}
    many = [torch.zeros(1)] * (10 * MAX_ITEMS) + [w]
    assert paths({"many": many}) == {}


def test_foreign_objects_classes_and_functions_are_not_looked_into() -> None:
    w = leaf()
    optimizer = torch.optim.SGD([w], lr=0.1)
    namespace = argparse.Namespace(w=w)

    def function() -> torch.Tensor:
        return w
    assert paths({"opt": optimizer, "args": namespace, "f": function, "cls": Holder,
                  "torch": torch}) == {}


def test_names_are_stable_across_passes_and_outlive_a_rebinding() -> None:
    w, v = leaf(), leaf()
    names = ScenarioNames(None, {"net": Holder(params=[w])})
    assert names.merged()["net.params[0]"] is w
    names.namespace["short"] = [w]  # a shorter path appears: w keeps its name
    merged = names.merged()
    assert merged["net.params[0]"] is w and "short[0]" not in merged
    names.remember([("net.params[0]", w)], merged)
    names.namespace.clear()
    names.namespace["net"] = Holder(params=[v])  # bound again
    merged = names.merged()
    assert merged["net.params[0]"] is v
    earlier, _ = names.earlier([("net.params[0]", v)], merged)
    assert earlier == [("net.params[0]", w)]
    del earlier, w  # names hold nothing alive
    assert names.earlier([("net.params[0]", v)], merged) == ([], [])


def test_a_plain_name_for_a_module_s_parameter_is_no_second_tensor() -> None:
    """`for p in model.parameters()` (pytorch/examples' word_language_model updates weights
    so) left p naming model.bias: a second row, .grad change and steps series of it."""
    from gradtrace.capture.roots import named_tensors

    model = torch.nn.Linear(3, 2)
    *_, p = model.parameters()  # what the loop leaves in p: the last parameter
    x = torch.ones(2, requires_grad=True)
    names = [n for n, _ in named_tensors({"model": model, "p": p, "x": x})]
    assert names == ["model.weight", "model.bias", "x"]
    assert [n for n, _ in named_tensors({"p": p, "model": model})] == ["model.weight",
                                                                       "model.bias"]
