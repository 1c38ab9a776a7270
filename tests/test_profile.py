"""--profile: per-node backward costs recorded with real torch, shown by show, dot, the page
and diff, saved and validated like every other key — and gradients, .grad, the passes and
the script's output exactly as without it. No wall-clock speed is asserted."""

from __future__ import annotations

import copy
import json
import re
from pathlib import Path
from typing import Any

import pytest
from helpers import SCENARIOS, as_read, invoke, needs_dot, shared_invoke, write_script
from test_html import browser, opened  # noqa: F401  (the module's Chromium, a fixture)

from gradtrace.capture.observers.profile_samples import SAMPLES
from gradtrace.errors import ScenarioError
from gradtrace.model.codec import trace_from_dict, trace_to_dict
from gradtrace.model.profile import cost_rows

SLOW = SCENARIOS / "profile" / "slow_function.py"
SLOW_LINE = 36  # h = SlowSquare.apply(self.inp(x))


@pytest.fixture(scope="module")
def slow(tmp_path_factory: pytest.TempPathFactory) -> tuple[dict[str, Any], Path]:
    """The slow Function scenario's trace with costs, as data and saved to a file."""
    result = shared_invoke("show", str(SLOW), "--profile", "--json")
    assert result.exit_code == 0, result.stderr
    path = tmp_path_factory.mktemp("profile") / "slow.json"
    path.write_text(result.stdout)
    return as_read(result.stdout), path


def test_the_slow_function_is_named_first_with_its_line(slow: tuple[dict[str, Any], Path]
                                                         ) -> None:
    data, path = slow
    trace = trace_from_dict(data)
    assert trace.costs is not None and trace.costs.method == "steps"  # not replayable
    # steps 2–10 in turn: a full profile, a light timing, a plain one
    assert len(trace.costs.profiled_us) == 3 and len(trace.costs.wall_us) == 3
    top = cost_rows(trace, "node")[0]
    node = next(n for n in trace.nodes if n.id == top.key)
    assert node.type == "SlowSquareBackward" and node.source is not None
    assert node.source.line == SLOW_LINE and node.module == "model"
    assert cost_rows(trace, "line")[0].key.endswith(f"slow_function.py:{SLOW_LINE}")
    assert cost_rows(trace, "module")[0].key == "model"
    assert "SlowSquareBackward runs the script's own backward code" in (trace.costs.note or "")
    # the report, from the saved trace (not run again), within the screen budget
    out = invoke("show", path, "--profile", env={"COLUMNS": "120"}).stdout
    section = out[out.index("backward cost"):]
    nodes = section[section.index("top nodes by backward time"):]
    assert nodes.splitlines()[2].startswith("n6 SlowSquareBackward  model slow_function.py:36")
    assert "slow_function.py:36  h = SlowSquare.apply" in section
    ops = section[section.index("top op types by backward time"):]
    assert ops.splitlines()[2].startswith("SlowSquareBackward ")
    words = " ".join(section.split())  # the totals wrap at the terminal's width
    assert "backward without profiler" in words and "measuring costs" in words
    assert "… 3 more nodes (--all)" in section


def test_costs_are_in_the_json_per_node_and_round_trip(slow: tuple[dict[str, Any], Path]
                                                       ) -> None:
    data, _ = slow
    costs = data["costs"]
    ids = {n["id"] for n in data["nodes"]}
    assert costs["pass"] == 10 and costs["method"] == "steps" and costs["device"] == "cpu"
    assert set(costs["nodes"]) <= ids and len(costs["nodes"]) >= 6
    for cost in costs["nodes"].values():
        assert set(cost) == {"time_us", "spread_us", "allocated", "freed"}
        assert cost["time_us"] >= 0 and cost["spread_us"] >= 0
    assert trace_to_dict(trace_from_dict(data))["costs"] == costs
    # without --profile there is no costs key at all (older readers see nothing new)
    assert "costs" not in json.loads(shared_invoke("show", str(SLOW), "--json").stdout)


@pytest.mark.parametrize(("where", "value", "said"), [
    ("time", -1.0, "costs.nodes.n6.time_us: expected a time in µs"),
    ("time", "nan", "costs.nodes.n6.time_us: expected a time in µs"),
    ("method", "guessed", "costs.method: expected one of replay, steps, once"),
    ("node", "n999", "costs.nodes.n999: points at 'n999', which is not a node id"),
    ("pass", 99, "costs.pass: 99 is not one of the 10 passes"),
])
def test_an_invalid_cost_in_a_saved_trace_is_refused(
        slow: tuple[dict[str, Any], Path], tmp_path: Path, where: str, value: Any,
        said: str) -> None:
    bad = copy.deepcopy(slow[0])
    if where == "time":
        bad["costs"]["nodes"]["n6"]["time_us"] = value
    elif where == "node":
        bad["costs"]["nodes"][value] = bad["costs"]["nodes"]["n6"]
    else:
        bad["costs"][where] = value
    path = tmp_path / "bad.json"
    path.write_text(json.dumps(bad))
    result = invoke("show", path, "--profile")
    assert result.exit_code == 2 and "Traceback" not in result.stderr
    assert said in result.stderr and "hint:" in result.stderr


def test_profile_of_a_trace_without_costs_says_how_to_get_them(tmp_path: Path) -> None:
    path = tmp_path / "plain.json"
    path.write_text(shared_invoke("show", str(SCENARIOS / "chain_rule.py"), "--json").stdout)
    for args in (("show", path, "--profile"), ("dot", path, "--heat", "time")):
        result = invoke(*args)
        assert result.exit_code == 2 and "holds no costs" in result.stderr
    result = invoke("dot", path, "--heat", "speed")
    assert result.exit_code == 2 and "--heat 'speed': use time or memory" in result.stderr


def test_dot_heat_fills_boxes_and_draws_its_legend(slow: tuple[dict[str, Any], Path]) -> None:
    _, path = slow
    dot = invoke("dot", path, "--heat", "time").stdout
    assert all(f"legend_heat{i} " in dot for i in range(5))
    assert 'label="backward time ≤ ' in dot
    # the unit follows the machine's speed; the order does not (the loop is ~100x any other node)
    slowest = re.search(r'^\s*n6 \[label="SlowSquareBackward\\ncustom Function\\n[0-9.]+ '
                        r'(µs|ms|s)".*$', dot, re.M)
    assert slowest is not None and 'fillcolor="#7f2704"' in slowest[0]  # the darkest
    memory = invoke("dot", path, "--heat", "memory").stdout
    assert 'label="memory allocated in backward ≤ ' in memory
    assert "legend_heat" not in invoke("dot", path).stdout  # only when asked


@needs_dot
def test_mermaid_heat_puts_each_box_in_its_step_s_class_with_a_legend(
        slow: tuple[dict[str, Any], Path]) -> None:
    _, path = slow
    lines = invoke("dot", path, "--heat", "time", "--to", "mmd").stdout.splitlines()
    assert "  class n6 heat4" in lines  # SlowSquareBackward: the darkest step
    assert "  classDef heat4 fill:#7f2704,color:#ffffff" in lines
    legend = [x.strip() for x in lines if x.strip().startswith("heat_legend")]
    assert len(legend) == 5 and legend[0].startswith('heat_legend0["backward time ≤ ')
    # the heat's classes come after the kinds' (a later class wins the fill)
    assert lines.index("  classDef heat0 fill:#fff5eb,color:#000000") > \
        max(i for i, x in enumerate(lines) if x.startswith("  classDef op "))
    heated = {b for x in lines if x.startswith("  class ") for b in x.split()[1].split(",")}
    assert heated >= {"n0", "n6"} and not heated & {"n3", "n7"}  # leaves have no cost
    assert "heat" not in invoke("dot", path, "--to", "mmd").stdout  # only when asked


def test_dot_heat_svg_through_graphviz(slow: tuple[dict[str, Any], Path],
                                       tmp_path: Path) -> None:
    result = invoke("dot", slow[1], "--heat", "time", "-o", tmp_path / "heat.svg")
    assert result.exit_code == 0, result.stderr
    svg = (tmp_path / "heat.svg").read_text()
    assert 'fill="#7f2704"' in svg and "backward time ≤" in svg
    assert "SlowSquareBackward" in svg


@needs_dot
def test_the_page_shows_the_heat_and_each_nodes_cost_in_chromium(
        browser: Any, slow: tuple[dict[str, Any], Path], tmp_path: Path) -> None:  # noqa: F811
    out = tmp_path / "heat.html"
    result = invoke("dot", slow[1], "--heat", "time", "-o", out)
    assert result.exit_code == 0, result.stderr
    tab, _, errors = opened(browser, out)
    fill = tab.locator("g.node#n6 path, g.node#n6 polygon").first.get_attribute("fill")
    assert fill == "#7f2704"
    assert tab.locator("g.node#legend_heat4").is_visible()
    tab.click("g.node#n6")
    panel = tab.inner_text("#gt-details")
    assert "SlowSquareBackward" in panel
    assert re.search(r"backward cost\t[0-9.]+ (µs|ms|s) ± [0-9.]+ (µs|ms|s), ", panel), panel
    assert errors == []
    tab.close()


def _with_times(data: dict[str, Any], module: str, factor: float) -> dict[str, Any]:
    """A copy of a trace whose nodes of module take factor times as long, every spread 0."""
    out = copy.deepcopy(data)
    module_of = {n["id"]: n.get("module") for n in out["nodes"]}
    for node_id, cost in out["costs"]["nodes"].items():
        cost["spread_us"] = 0.0
        if module_of.get(node_id) == module:
            cost["time_us"] *= factor
    return out


def test_diff_fails_on_a_module_slower_beyond_the_tolerance(
        slow: tuple[dict[str, Any], Path], tmp_path: Path) -> None:
    base = _with_times(slow[0], "model.inp", 1.0)
    paths = {}
    for name, factor in (("a", 1.0), ("slower", 2.0), ("within", 1.1)):
        paths[name] = tmp_path / f"{name}.json"
        paths[name].write_text(json.dumps(_with_times(base, "model.inp", factor)))
    failed = invoke("diff", paths["a"], paths["slower"], "--fail-on", "slower:20%")
    assert failed.exit_code == 1, failed.stderr
    assert "fail-on: slower beyond 20%: model.inp " in failed.stderr
    assert "(+100%)" in failed.stderr
    assert "backward time per module" in failed.stdout
    within = invoke("diff", paths["a"], paths["within"], "--fail-on", "slower:20%")
    assert within.exit_code == 0 and "model.inp" in within.stdout and not within.stderr
    as_json = json.loads(invoke("diff", paths["a"], paths["slower"], "--json").stdout)
    inp = next(c for c in as_json["costs"] if c["module"] == "model.inp")
    assert inp["b_us"] == pytest.approx(2 * inp["a_us"])


@pytest.mark.parametrize(("args", "said"), [
    (("show", "example:chain_rule", "--fail-on", "slower:20%"),
     "only `gradtrace diff` compares backward times"),
    (("diff", "a.json", "a.json", "--fail-on", "slower:lots"), "give a percentage"),
    (("diff", "a.json", "a.json", "--fail-on", "slower:-5%"), "give a percentage"),
    (("diff", "a.json", "a.json", "--fail-on", "no-such-code"), "no finding has the code"),
])
def test_fail_on_slower_is_one_grammar_with_the_codes(args: tuple[str, ...], said: str) -> None:
    result = invoke(*args)
    assert result.exit_code == 2 and said in result.stderr


def _grads(data: dict[str, Any]) -> dict[str, Any]:
    return {t["name"]: t["grad"] for t in data["tensors"]}


@pytest.mark.parametrize("scenario", ["mlp_modules.py", "retain_grad.py",
                                      "profile/slow_function.py"])
@pytest.mark.matrix
def test_grads_passes_and_output_are_the_same_with_profile(scenario: str) -> None:
    plain = json.loads(shared_invoke("show", str(SCENARIOS / scenario), "--json").stdout)
    profiled = as_read(shared_invoke("show", str(SCENARIOS / scenario), "--profile",
                                        "--json").stdout)
    assert _grads(profiled) == _grads(plain)
    assert profiled["stdout"] == plain["stdout"]
    assert len(profiled["passes"]) == len(plain["passes"])
    assert [p["grad_changes"] for p in profiled["passes"]] == \
        [p["grad_changes"] for p in plain["passes"]]
    assert profiled["costs"]["nodes"]


@pytest.mark.matrix
def test_a_replayable_pass_is_replayed_and_a_retained_grad_is_not(tmp_path: Path) -> None:
    data = as_read(shared_invoke("show", str(SCENARIOS / "mlp_modules.py"), "--profile",
                                    "--json").stdout)
    costs = data["costs"]
    assert costs["method"] == "replay" and costs["note"] is None
    assert len(costs["wall_us"]) == SAMPLES and len(costs["profiled_us"]) == SAMPLES
    assert costs["engine_us"] > 0 and costs["ops_us"]["aten::mm"] > 0
    # memory: what each node left allocated, the peak, and whose saved tensors were held
    nodes = {n["id"]: n for n in data["nodes"]}
    addmm = [c for k, c in costs["nodes"].items() if nodes[k]["type"] == "AddmmBackward0"]
    assert addmm and all(c["allocated"] > 0 for c in addmm)
    peak = costs["peak"]
    assert peak["bytes"] > 0 and peak["node"] in nodes
    modules = {n.get("module") for n in data["nodes"]}
    assert peak["saved"] and {s["module"] for s in peak["saved"]} <= modules
    assert costs["recomputed"] is None
    retained = json.loads(shared_invoke("show", str(SCENARIOS / "retain_grad.py"),
                                        "--profile", "--json").stdout)["costs"]
    assert retained["method"] == "once" and "retain_grad() would set a .grad" in \
        retained["note"]


@pytest.mark.matrix
def test_hooks_run_once_per_pass_with_profile(tmp_path: Path) -> None:
    script = write_script(tmp_path, "import torch\n"
                          "calls = []\n"
                          "x = torch.ones(3, requires_grad=True)\n"
                          "y = x * 2\n"
                          "y.register_hook(lambda g: calls.append(1))\n"
                          "z = (y * y).sum()\n"
                          "z.backward()\n"
                          "print('hook calls', len(calls), x.grad.tolist())\n")
    plain = json.loads(invoke("show", script, "--json").stdout)
    profiled = json.loads(invoke("show", script, "--profile", "--json").stdout)
    assert plain["stdout"] == profiled["stdout"] == "hook calls 1 [8.0, 8.0, 8.0]\n"
    assert "a hook on one of its nodes" in profiled["costs"]["note"]


LOOP = """import torch
torch.manual_seed(0)
model = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.ReLU(), torch.nn.Linear(8, 1))
opt = torch.optim.SGD(model.parameters(), lr=0.1)
x = torch.randn(16, 4)
for _ in range(10):
    opt.zero_grad()
    loss = model(x).pow(2).mean()
    loss.backward()
    opt.step()
print(round(loss.item(), 6))
"""


@pytest.mark.matrix
def test_a_loop_is_timed_over_its_steps_and_pass_n_by_replays(tmp_path: Path) -> None:
    script = write_script(tmp_path, LOOP)
    plain = json.loads(invoke("show", script, "--json").stdout)
    steps = json.loads(invoke("show", script, "--profile", "--json").stdout)
    costs = steps["costs"]
    # passes 2–10 timed in turn: 3 full profiles, 3 light timings, 3 plain; the last
    # pass's graph is costed
    assert (costs["method"], costs["pass"]) == ("steps", 10)
    assert (len(costs["profiled_us"]), len(costs["wall_us"]), len(costs["op_total_us"])) \
        == (3, 3, 3)
    assert {t["name"]: t["grad"] for t in steps["tensors"]} == \
        {t["name"]: t["grad"] for t in plain["tensors"]}
    assert steps["stdout"] == plain["stdout"] and steps["steps"] == plain["steps"]
    # the timed steps ran without gradtrace's flow hooks: the flow shown is the first pass's
    assert steps["passes"][0]["flow"] and not any(p["flow"] for p in steps["passes"][1:])
    assert costs["note"] == "timed over passes 2–10"
    third = as_read(invoke("show", script, "--profile", "--pass", "3", "--json").stdout)
    assert (third["costs"]["method"], third["costs"]["pass"]) == ("replay", 3)
    assert len(third["costs"]["wall_us"]) == SAMPLES
    assert {t["name"]: t["grad"] for t in third["tensors"]} == \
        {t["name"]: t["grad"] for t in plain["tensors"]}


def test_checkpointing_says_what_recomputing_cost_and_what_it_saved() -> None:
    data = as_read(shared_invoke("show", str(SCENARIOS / "real" / "checkpointed.py"),
                                    "--profile", "--json").stdout)
    costs = data["costs"]
    assert costs["method"] == "once"
    assert "checkpointing would run forward code again" in costs["note"]
    recomputed = costs["recomputed"]
    assert recomputed["time_us"] > 0
    # checkpoint's own saved_tensors_hooks packed what its nodes saved: not unpacked (that
    # would run the region once more), so no byte of it is read
    assert recomputed["saved_bytes"] == sum(s["bytes"] for n in data["nodes"]
                                            if n.get("recomputed") for s in n["saved"]) == 0
    assert {s["status"] for n in data["nodes"] if n.get("recomputed")
            for s in n["saved"]} == {"packed by a hook"}


def test_the_api_profiles_as_the_cli_does(capsys: pytest.CaptureFixture[str]) -> None:
    """trace(path), trace(tensors, backward=True) and record() take profile=True: the same
    costs `show --profile` records, and .grad as without it."""
    import torch

    import gradtrace

    scenario = gradtrace.trace(SLOW, profile=True).trace
    assert scenario.costs is not None and scenario.costs.method == "steps"
    assert cost_rows(scenario, "line")[0].key.endswith(f"slow_function.py:{SLOW_LINE}")

    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 2))
    x = torch.randn(4, 8)
    model(x).pow(2).mean().backward()
    plain = [p.grad.clone() for p in model.parameters()]
    model.zero_grad()
    with gradtrace.record(profile=True) as rec:
        loss = model(x).pow(2).mean()
        loss.backward()
    assert all(torch.equal(p.grad, g) for p, g in zip(model.parameters(), plain, strict=True))
    assert rec.trace.costs is not None and rec.trace.costs.method == "replay"
    assert {r.key for r in cost_rows(rec.trace, "module")} >= {"model.0", "model.1", "model.2"}
    rec.show()
    assert "top modules by backward time" in capsys.readouterr().out

    own = gradtrace.trace(model(x).sum(), backward=True, profile=True).trace
    assert own.costs is not None and own.passes[0].by == "gradtrace"
    with pytest.raises(ScenarioError, match="backward=True"):
        gradtrace.trace(model(x).sum(), profile=True)
