"""torch_compat: every private torch API in one place, each with a fallback that costs a
feature, never the run, and says so in one line."""

from __future__ import annotations

import ast

import pytest
import torch
from helpers import ROOT, SCENARIOS, code_files, invoke

from gradtrace import torch_compat

PRIVATE = ("_sequence_nr", "_functorch", "_saved_", "_GLOBAL_DEVICE", "_input_metadata",
           "_backward_hooks", "_forward_cls", "_len_torch_function_stack", "_daemonic",
           "_dynamo", "_orig_mod", "_FrameAction")


def test_private_torch_names_appear_only_in_torch_compat() -> None:
    for path in code_files():
        if path.name == "torch_compat.py":
            continue
        text = path.read_text(encoding="utf-8")
        found = [name for name in PRIVATE if name in text]
        assert not found, f"{path.relative_to(ROOT)} reads {found}: put it in torch_compat"


def test_a_probe_this_torch_lacks_falls_back_and_says_so(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(torch_compat, "_missing", {})
    found = torch_compat._probe("torch._C._no_such_probe", lambda: torch._C._no_such_probe,
                                "something is not shown")
    assert found is None
    (line,) = torch_compat.missing()
    assert "has no torch._C._no_such_probe" in line and "something is not shown" in line
    assert f"checked on {torch_compat.CHECKED_ON}" in line


def test_the_cli_prints_each_missing_probe_as_one_info_line(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(torch_compat, "_missing", {"torch.x": "pictures lose their modules"})
    result = invoke("show", SCENARIOS / "chain_rule.py")
    assert result.exit_code == 0
    assert result.stderr.count("info: ") == 1
    assert "has no torch.x (checked on 2.13): pictures lose their modules" in result.stderr


def test_this_torch_has_every_probe() -> None:
    assert torch_compat.missing() == []
    assert torch.__version__.startswith(torch_compat.CHECKED_ON)


@pytest.mark.parametrize(("text", "kind"), [
    ("Trying to backward through the graph a second time (or directly access …)",
     "graph-freed"),
    ("one of the variables needed for gradient computation has been modified by an inplace "
     "operation: [torch.FloatTensor [3]]", "inplace"),
    ("element 0 of tensors does not require grad and does not have a grad_fn", "no-grad-fn"),
    ("One of the differentiated Tensors does not require grad", "needs-no-grad"),
    ("grad can be implicitly created only for scalar outputs", "non-scalar"),
    ("function MulBackward returned an incorrect number of gradients (expected 2, got 1)",
     "wrong-count"),
    ("something else entirely", None),
])
def test_error_texts_are_recognised(text: str, kind: str | None) -> None:
    assert torch_compat.error_kind(RuntimeError(text)) == kind


def test_the_error_texts_are_torchs_own() -> None:
    """The phrases match what this torch raises, not what we remember it raising."""
    x = torch.ones(2, requires_grad=True)
    y = (x * x).sum()
    y.backward()
    with pytest.raises(RuntimeError) as freed:
        y.backward()
    with pytest.raises(RuntimeError) as no_graph:
        torch.ones(2).sum().backward()
    with pytest.raises(RuntimeError) as non_scalar:
        (x * 2).backward()
    a = torch.ones(3, requires_grad=True).sigmoid()
    b = a * 2
    a.add_(1)
    with pytest.raises(RuntimeError) as inplace:
        b.sum().backward()
    kinds = [torch_compat.error_kind(e.value) for e in (freed, no_graph, non_scalar, inplace)]
    assert kinds == ["graph-freed", "no-grad-fn", "non-scalar", "inplace"]


def test_torch_compat_is_the_only_module_reading_torch_C() -> None:
    for path in code_files():
        if path.name == "torch_compat.py":
            continue
        tree = ast.parse(path.read_text(encoding="utf-8"))
        uses = [n.lineno for n in ast.walk(tree) if isinstance(n, ast.Attribute)
                and n.attr == "_C" and isinstance(n.value, ast.Name) and n.value.id == "torch"]
        assert not uses, f"{path.relative_to(ROOT)}:{uses[0]} reads torch._C"

