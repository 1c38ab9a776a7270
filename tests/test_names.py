"""Names through containers (capture/reach.py, capture/names.py): real tensors and modules in
lists, tuples, dicts and plain objects, named by their shortest path, within bounds."""

from __future__ import annotations

import argparse
import json
from collections import namedtuple
from pathlib import Path
from typing import Any

import pytest
import torch
from helpers import invoke
from plain_python import run_plain

from gradtrace.capture.naming.names import ScenarioNames
from gradtrace.capture.naming.reach import MAX_DEPTH, MAX_ITEMS, reached
from gradtrace.capture.observers.step_columns import ColumnsTaken


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


def test_a_model_s_plain_list_of_layers_names_them() -> None:
    """`self.layers = [Layer(), Layer()]` (not a ModuleList): no module path reaches them,
    the list does; the model's own parts and private state are left to it."""
    class Net(torch.nn.Module):  # the code's own module (torch's are not looked into)
        pass

    net = Net()
    layers = [torch.nn.Linear(2, 2), torch.nn.Linear(2, 2)]
    net.layers = layers  # type: ignore[assignment]  # a plain list, as the example keeps
    net.head = torch.nn.Linear(2, 1)
    net._cache = [torch.nn.Linear(2, 2)]  # type: ignore[assignment]
    net.w = leaf()  # type: ignore[assignment]  # a plain attribute: the model's own
    found = paths({"net": net})
    assert found == {"net.layers[0]": layers[0], "net.layers[1]": layers[1]}
    assert paths({"net": net, "layer": layers[0]}) == {"net.layers[1]": layers[1]}
    # torch's own modules are not looked into (a Conv2d's stride …): the search's budget
    # still reaches a name past 128 of them
    w = leaf()
    convs = [[torch.nn.Conv2d(1, 1, 3) for _ in range(MAX_ITEMS)] for _ in range(2)]
    assert 'cfg["opt"]["ws"][0]' in paths({"a": convs[0], "b": convs[1],
                                           "cfg": {"opt": {"ws": [w]}}})


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
    names.remember([("net.params[0]", w)], merged, 7)
    names.namespace.clear()
    names.namespace["net"] = Holder(params=[v])  # bound again
    merged = names.merged()
    assert merged["net.params[0]"] is v
    earlier, _ = names.earlier([("net.params[0]", v)], merged)
    assert earlier == [("net.params[0]@7", w)]  # the name the pass at line 7 gave it
    del earlier, w  # names hold nothing alive
    assert names.earlier([("net.params[0]", v)], merged) == ([], [])


def test_a_plain_name_for_a_module_s_parameter_is_no_second_tensor() -> None:
    """`for p in model.parameters()` (pytorch/examples' word_language_model updates weights
    so) left p naming model.bias: a second row, .grad change and steps series of it."""
    from gradtrace.capture.naming.roots import named_tensors

    model = torch.nn.Linear(3, 2)
    *_, p = model.parameters()  # what the loop leaves in p: the last parameter
    x = torch.ones(2, requires_grad=True)
    names = [n for n, _ in named_tensors({"model": model, "p": p, "x": x})]
    assert names == ["model.weight", "model.bias", "x"]
    assert [n for n, _ in named_tensors({"p": p, "model": model})] == ["model.weight",
                                                                       "model.bias"]


# Public tutorials' shapes: a name bound twice (the PyTorch blitz's `x`), a whole model built
# twice (the torch.compile tutorial's), a leaf in a list updated by a loop variable (d2l's
# linear regression from scratch). Every name in the trace names one tensor; the plain name
# is what python binds to it at the end; the numbers are plain python's.
REBOUND = """import torch
x = torch.ones(2, 2, requires_grad=True)
out = (3 * (x + 2) ** 2).mean()
out.backward()
x = torch.randn(3, requires_grad=True)
y = x * 2
y.backward(torch.tensor([0.1, 1.0, 0.0001]))
print(x.grad.tolist())
"""
BUILT_TWICE = """import torch
torch.manual_seed(0)
data = torch.randn(4, 3)
model = torch.nn.Sequential(torch.nn.Linear(3, 2))
model(data).sum().backward()
model = torch.nn.Sequential(torch.nn.Linear(3, 2))
(model(data) ** 2).sum().backward()
print(model[0].weight.grad.norm().item())
"""
IN_A_LIST = """import torch
torch.manual_seed(0)
params = [torch.randn(3, requires_grad=True), torch.zeros(1, requires_grad=True)]
X = torch.randn(8, 3)
for epoch in range(3):
    loss = ((X @ params[0] + params[1]) ** 2).mean()
    loss.backward()
    with torch.no_grad():
        for p in params:
            p -= 0.1 * p.grad
            p.grad.zero_()
"""


def _trace_of(tmp_path: Any, text: str) -> dict[str, Any]:
    from helpers import show_json, write_script

    return show_json(write_script(tmp_path, text))


def _names(trace: dict[str, Any]) -> list[str]:
    names = [t["name"] for t in trace["tensors"]]
    assert len(names) == len(set(names)), names  # every name names one tensor
    return names


def test_a_name_bound_twice_names_the_last_tensor_and_the_first_by_its_pass_line(
        tmp_path: Any) -> None:
    trace = _trace_of(tmp_path, REBOUND)
    names = _names(trace)
    assert "x" in names and "x@4" in names  # the x the backward at line 4 saw
    rows = {t["name"]: t for t in trace["tensors"]}
    table = trace["gradients"]

    def values(name: str) -> Any:
        grad = rows[name]["grad"]
        return (table[grad] if isinstance(grad, int) else grad)["values"]

    assert values("x") == pytest.approx([0.2, 2.0, 0.0002])  # as python printed
    assert values("x@4") == [[4.5, 4.5], [4.5, 4.5]]
    assert trace["stdout"] == "[0.20000000298023224, 2.0, 0.00019999999494757503]\n"


def test_a_model_built_twice_gives_its_plain_names_to_the_last_one(tmp_path: Any) -> None:
    trace = _trace_of(tmp_path, BUILT_TWICE)
    names = _names(trace)
    assert {"model.0.weight", "model.0.bias", "model.0.weight@5", "model.0.bias@5"} \
        <= set(names)
    rows = {t["name"]: t for t in trace["tensors"]}
    grad = rows["model.0.weight"]["grad"]
    norm = (trace["gradients"][grad] if isinstance(grad, int) else grad)["norm"]
    assert norm == pytest.approx(float(trace["stdout"]), rel=1e-6)  # python's model.0.weight


def test_a_leaf_in_a_list_is_named_by_its_place_not_by_the_loop_variable(
        tmp_path: Any) -> None:
    trace = _trace_of(tmp_path, IN_A_LIST)
    names = _names(trace)
    assert "params[0]" in names and "params[1]" in names and "p" not in names
    assert trace["steps"]["leaves"] == ["params[0]", "params[1]"]


def test_a_weak_proxy_is_not_named_in_place_of_what_it_stands_for() -> None:
    """Lightning's trainer keeps a weakref.proxy of its module: the proxy passes for an
    nn.Module but is not one (it cannot be weakly referenced): the module is named where it
    is held, and the walk goes on (it once failed with a TypeError)."""
    import weakref

    class Trainer:
        pass

    model = torch.nn.Linear(2, 1)
    trainer = Trainer()
    trainer.module = weakref.proxy(model)  # type: ignore[attr-defined]
    trainer.callback = weakref.proxy(print)  # type: ignore[attr-defined]
    found = reached([("trainer", trainer), ("alias", weakref.proxy(model))])
    assert found == []  # only proxies: nothing to name through them
    names = ScenarioNames(None, {"trainer": trainer, "model": model})
    names.add([("<module>", {"trainer": trainer, "model": model})])
    assert dict(names.merged())["model"] is model


HOSTILE = """import weakref
import torch


class Loud:
    def __getattr__(self, name):
        raise RuntimeError(f"no {name}")

    def __eq__(self, other):
        raise RuntimeError("eq")

    def __hash__(self):
        raise RuntimeError("hash")

    def __bool__(self):
        raise RuntimeError("bool")

    def __len__(self):
        raise RuntimeError("len")


class Prop:
    def __init__(self, w):
        self.w = w

    @property
    def boom(self):
        raise RuntimeError("property")

    @property
    def __class__(self):
        raise RuntimeError("class")


class Counting(dict):
    reads = 0

    def items(self):
        Counting.reads += 1
        raise RuntimeError("items")

    def __len__(self):
        raise RuntimeError("len")


class BadList(list):
    def __iter__(self):
        raise RuntimeError("iter")

    def __len__(self):
        raise RuntimeError("len")


class Meta(type):
    def __eq__(cls, other):
        raise RuntimeError("meta eq")

    __hash__ = None


class Odd(metaclass=Meta):
    def __init__(self, w):
        self.w = w


torch.manual_seed(0)
model = torch.nn.Linear(3, 1)
alias = weakref.proxy(model)
loud = Loud()
prop = Prop(torch.randn(3, requires_grad=True))
cyc = []
cyc.append(cyc)
cyc.append({"self": cyc, "w": torch.randn(3, requires_grad=True)})
counting = Counting(w=torch.randn(3, requires_grad=True))
badlist = BadList([torch.randn(3, requires_grad=True)])
odd = Odd(torch.randn(3, requires_grad=True))
huge = [list(range(10**6)), {i: i for i in range(10**5)}, Loud()]
x = torch.randn(4, 3)
loss = alias(x).sum() + (prop.w * 2).sum() + cyc[1]["w"].sum() + counting["w"].sum() \\
    + badlist[0].sum() + odd.w.sum()
loss.backward()
assert Counting.reads == 0, "gradtrace called user code"
print("NORM", float(model.weight.grad.norm()))
"""


def test_objects_that_defy_reading_are_named_and_none_of_their_code_runs(tmp_path: Any
                                                                         ) -> None:
    """A weak proxy of the model, objects whose __getattr__, property, __class__, __eq__,
    __hash__, __bool__ or __len__ raise, a dict and a list whose own methods raise (and count
    their calls), a class whose metaclass has no hash, a list that holds itself, huge
    containers: the script runs to its end as under python (its last assert: no method of
    the dict ran), each leaf is named by its path, and the gradient is plain python's."""
    script = tmp_path / "hostile.py"
    script.write_text(HOSTILE)
    result = invoke("show", script, "--json")
    assert result.exit_code == 0, result.stderr
    trace = json.loads(result.stdout)
    grads = {t["name"]: t["grad"] for t in trace["tensors"] if t.get("grad")}
    assert {"model.weight", "prop.w", 'counting["w"]', "badlist[0]", "odd.w",
            'cyc[1]["w"]'} <= set(grads)
    plain = run_plain(script)
    assert plain.returncode == 0, plain.stderr
    assert grads["model.weight"]["norm"] == pytest.approx(float(plain.stdout.split("NORM ")[1]))


# Forward-forward's layers (pytorch/examples mnist_forward_forward): each trains itself in a
# method, its optimizer built in __init__; the script prints each pass's .grad norm.
LAYER = """import json
import torch


class Layer(torch.nn.Linear):
    def __init__(self, i, o):
        super().__init__(i, o)
        self.opt = torch.optim.Adam(self.parameters(), lr=1e-3)

    def train(self, x, target, steps):
        for _ in range(steps):
            loss = ((self.forward(x) - target) ** 2).mean()
            self.opt.zero_grad()
            loss.backward()
            self.opt.step()
            NORMS.append(self.weight.grad.norm().item())
        return self.forward(x).detach()
"""
SELF_TRAINED = LAYER + """

torch.manual_seed(0)
NORMS = []
layers = [Layer(8, 8), Layer(8, 8)]
layers[0].train(torch.randn(32, 8) * 1e-3, torch.zeros(32, 8) + 1e-4, 3)
layers[1].train(torch.randn(32, 8) * 10, torch.randn(32, 8) * 100, 3)
print(json.dumps(NORMS))
"""


def _steps_and_python_s(script: Path, text: str) -> tuple[dict[str, Any], list[float]]:
    """show's steps of the script (text), and the JSON list of norms python prints."""
    script.write_text(text)
    result = invoke("show", script, "--json")
    assert result.exit_code == 0, result.stderr
    return json.loads(result.stdout)["steps"], json.loads(run_plain(script).stdout)


def test_layers_that_train_themselves_in_a_method_keep_their_own_names(tmp_path: Path) -> None:
    """Each layer's `self.weight` is one name for two tensors: the steps' rows are each
    layer's own (layers[0].weight, layers[1].weight), as python prints them."""
    steps, plain = _steps_and_python_s(tmp_path / "ff.py", SELF_TRAINED)
    assert steps["leaves"] == ["layers[0].weight", "layers[0].bias", "layers[1].weight",
                               "layers[1].bias"]
    column = {"layers[0].weight": 0, "layers[1].weight": 2}
    got = [row[column["layers[0].weight" if k < 3 else "layers[1].weight"]][0]
           for k, row in enumerate(steps["grads"])]
    assert got == pytest.approx(plain, rel=1e-6)


# The real example keeps its layers in a plain list inside the model and trains them in a
# loop: `layer` names layer 0's tensors, then layer 1's, while both live.
LOOPED = LAYER + """

class Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.layers = [Layer(8, 8), Layer(8, 8)]  # a plain list: no module path reaches them

    def train(self, x):
        for i, layer in enumerate(self.layers):
            x = layer.train(x * 10 ** (4 * i), torch.randn(32, 8) * 10 ** (-4 + 6 * i), 3)


torch.manual_seed(0)
NORMS = []
net = Net()
net.train(torch.randn(32, 8) * 1e-3)
print(json.dumps(NORMS))
"""


def test_a_loop_variable_naming_each_layer_in_turn_leaves_each_its_own_row(
        tmp_path: Path) -> None:
    """`layer` names layer 0, then layer 1, while both live: each keeps the row it took
    first (layer 1's under the path that reaches it inside the model's plain list), each
    row its own layer's numbers, as python prints them."""
    script = tmp_path / "ff_net.py"
    steps, plain = _steps_and_python_s(script, LOOPED)
    assert steps["leaves"] == ["layer.weight", "layer.bias", "net.layers[1].weight",
                               "net.layers[1].bias"]
    first, second = 0, 2
    assert [row[first][0] for row in steps["grads"][:3]] == pytest.approx(plain[:3], rel=1e-6)
    assert [row[second][0] for row in steps["grads"][3:]] == pytest.approx(plain[3:], rel=1e-6)
    assert all(row[second] is None for row in steps["grads"][:3])  # no .grad yet
    # layer 0's .grad stays as its last pass left it (python's last norm of it)
    assert [row[first][0] for row in steps["grads"][3:]] == pytest.approx([plain[2]] * 3,
                                                                         rel=1e-6)


# Three live models under names that roll on each step: `older, old, model = old, model, new`
ROLLING = """import json
import torch

torch.manual_seed(0)
x = torch.randn(16, 4)
NORMS = []
older = old = None
model = torch.nn.Linear(4, 2)
for step in range(4):
    older, old, model = old, model, torch.nn.Linear(4, 2)
    for m, k in ((model, 1.0), (old, 2.0), (older, 3.0)):
        if m is not None:
            m.zero_grad()
            (m(x) * k).pow(2).sum().backward()
            NORMS.append(m.weight.grad.norm().item())
print(json.dumps(NORMS))
"""


def test_names_that_roll_over_live_models_give_each_model_its_own_row(tmp_path: Path) -> None:
    """Each pass's .grad is in the row of the model it is (each row one model's, never two in
    one pass): a model that lost its name to another goes on under its name now, or under
    NAME#K with K on its module's part when that is taken too."""
    steps, plain = _steps_and_python_s(tmp_path / "rolling.py", ROLLING)
    weights = [c for c, name in enumerate(steps["leaves"]) if name.endswith(".weight")]
    assert "old#2.weight" in steps["leaves"]
    for row, norm in zip(steps["grads"], plain, strict=True):  # the one column that moved
        assert [c for c in weights if row[c] is not None
                and row[c][0] == pytest.approx(norm, rel=1e-6)], (row, norm)


def test_a_column_a_new_leaf_took_first_in_a_pass_stays_its_own() -> None:
    """`old = model; model = Net()` with `model` named first: the new leaf takes `model`
    before the old one moves out of it; the old one's move leaves the new one holding it."""
    columns = ColumnsTaken()
    a, b, k, n = leaf(), leaf(), leaf(), leaf()
    columns.names([("model", a)])
    assert columns.names([("model", b), ("old", a)]) == [("model", b), ("old", a)]
    columns.names([("k", k), ("model", b), ("old", a)])
    # a new leaf takes k's column by name; k, named `model` now, may not take b's column
    named = columns.names([("k", n), ("model", k), ("x", b), ("old", a)])
    assert [(name, t) for name, t in named if t is b] == [("model", b)]
    assert [name for name, t in named if t is k] == ["model#2"]
