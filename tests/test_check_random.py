"""`gradtrace check` finds wrong backwards the recorded inputs hide (issue 53, item 7): it tries
random inputs too, says what a gradgradcheck failure means for backward, names elements by
their position in the tensor, and names backward's own line."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from helpers import check_json, invoke

from gradtrace.render.checks import element_at, position, unravel

BUG = "example:bugs/check_missing_factor"


def by_function(report: dict) -> dict[str, dict]:
    return {r["function"]: r for r in report["results"]}


def test_a_factor_forgotten_while_it_is_one_fails_and_its_twin_passes() -> None:
    """The bug gallery's pair: beta starts at 1.0, where grad_output and grad_output * beta
    agree; at random inputs they do not."""
    code, report = check_json(BUG)
    (result,) = report["results"]
    assert code == 1 and (result["gradcheck"], result["gradgradcheck"]) == ("fail", "skipped")
    assert result["message"].startswith("wrong away from the recorded inputs: at random ones")
    assert "input 1 is 1.0" in result["message"]
    mismatch = result["mismatch"]
    assert mismatch["inputs"] == "random" and mismatch["check"] == "gradcheck"
    assert (mismatch["input_shape"], mismatch["output_shape"]) == ([64, 32], [64, 32])
    row, col = mismatch["worst_at"]
    assert row == col and len(row) == 2  # a position of the [64, 32] tensor, on the diagonal
    assert result["backward"] == {"file": BUG, "line": 19}
    assert result["line"] == 29  # the .apply() line, as before

    out = invoke("check", BUG).stdout
    assert "Scale: gradcheck at random inputs:" in out
    assert f"backward: {BUG}:19 (called at {BUG}:29)" in " ".join(out.split())
    assert f"of [64, 32], output 0 {position(mismatch['worst'][1], (64, 32))} of [64, 32]" \
        in out

    code, report = check_json(f"{BUG}_fixed")
    assert code == 0 and report["results"][0]["ok"], report
    assert report["results"][0]["notes"] == []  # beta was varied: 1.0 hid nothing


HIDDEN = """import torch
from torch.autograd.function import once_differentiable


class SquareOfOnes(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x ** 2

    @staticmethod
    def backward(ctx, g):
        return 2 * g  # should be 2 * x * g: the same while x is all ones


class DropsTerm(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, z):
        ctx.save_for_backward(x, z)
        return x * x + x * z

    @staticmethod
    def backward(ctx, g):
        x, z = ctx.saved_tensors
        return 2 * x * g, x * g  # drops z * g for x: the same while z is all zeros


class Right(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x ** 2

    @staticmethod
    @once_differentiable
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        return 2 * x * g


class Acos(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return torch.acos(x)

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        return -g / torch.sqrt(1 - x * x)


class Picky(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x * 3

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        if (x.abs() > 1).any():
            raise ValueError("inputs must be within [-1, 1]")
        return g * 3


class ScaleByNumber(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, beta):
        ctx.beta = beta
        return x * beta

    @staticmethod
    def backward(ctx, g):
        return g, None  # forgets beta: a number, which check does not vary


torch.manual_seed(0)
SquareOfOnes.apply(torch.ones(3, 4, requires_grad=True))
DropsTerm.apply(torch.randn(5, requires_grad=True), torch.zeros(5, requires_grad=True))
Right.apply(torch.ones(3, requires_grad=True))
Acos.apply((torch.rand(6) * 0.6).requires_grad_())
Picky.apply(torch.rand(4, requires_grad=True))
ScaleByNumber.apply(torch.randn(3, requires_grad=True), 1.0)
"""


@pytest.fixture(scope="module")
def hidden(tmp_path_factory: pytest.TempPathFactory) -> tuple[int, dict[str, dict], str]:
    path = tmp_path_factory.mktemp("hidden") / "hidden.py"
    path.write_text(HIDDEN)
    code, report = check_json(path)
    return code, by_function(report), str(path)


def test_values_that_hide_a_wrong_backward_are_varied(
        hidden: tuple[int, dict[str, dict], str]) -> None:
    code, results, _ = hidden
    assert code == 1
    ones, zeros = results["SquareOfOnes"], results["DropsTerm"]
    assert ones["gradcheck"] == zeros["gradcheck"] == "fail"
    assert "as recorded, input 0 is all ones" in ones["message"]
    assert "as recorded, input 1 is all zeros" in zeros["message"]
    assert ones["mismatch"]["inputs"] == zeros["mismatch"]["inputs"] == "random"
    # a right backward at ones passes, and needs no note: random inputs agreed
    right = results["Right"]
    assert right["ok"] and right["notes"] == [] and right["gradgradcheck"] == "not applicable"


def test_inputs_a_function_cannot_take_are_never_a_failure(
        hidden: tuple[int, dict[str, dict], str]) -> None:
    _, results, path = hidden
    acos = results["Acos"]  # wide random inputs give NaN: near the recorded ones instead
    assert acos["ok"] and acos["gradcheck"] == acos["gradgradcheck"] == "pass"
    assert acos["notes"] == ["random inputs near the recorded ones (each scaled by 0.5 to 1.5): "
                             "at wider ones, forward's output 0 is not finite there"]
    picky = results["Picky"]  # backward raises at random inputs: checked at recorded ones
    assert picky["ok"]
    (note,) = picky["notes"]
    assert note.startswith("checked at the recorded inputs only: at random ones, backward "
                           f"raised ValueError at {path}:")
    number = results["ScaleByNumber"]  # a Python number is not varied: said so
    assert number["ok"] and number["notes"] == [
        "as recorded, input 1 is the number 1.0 (numbers are not varied): values that hide a "
        "forgotten factor or term"]


VERDICTS = """import torch
from torch.autograd.function import once_differentiable


class NoGraph(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, beta):
        ctx.save_for_backward(x, beta)
        return x * beta

    @staticmethod
    def backward(ctx, g):
        x, beta = ctx.saved_tensors
        with torch.no_grad():  # right values, but no graph for double backward
            return g * beta, (g * x).sum().reshape(beta.shape)


class OneWrongElement(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        return x * 3

    @staticmethod
    @once_differentiable
    def backward(ctx, g):
        grad = g * 3
        grad[5, 3] = g[5, 3] * 4
        return grad


class Cube(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x ** 3

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        return 2 * x * x * g  # should be 3 * x * x * g


NoGraph.apply(torch.randn(4, 3, requires_grad=True), torch.full((1,), 0.5, requires_grad=True))
OneWrongElement.apply(torch.randn(8, 6, requires_grad=True))
Cube.apply(torch.randn(3, requires_grad=True))


class ScaleSquared(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, beta):
        ctx.save_for_backward(x, beta)
        return x * beta ** 2

    @staticmethod
    def backward(ctx, g):
        x, beta = ctx.saved_tensors
        b = beta.detach()
        # beta ** 2 in value, but its derivative is b + 1, not 2 * beta: the same at 1.0
        return g * (b * beta + beta - b), 2 * beta * (g * x).sum().reshape(beta.shape)


ScaleSquared.apply(torch.randn(3, requires_grad=True), torch.ones(1, requires_grad=True))
"""


@pytest.fixture(scope="module")
def verdicts(tmp_path_factory: pytest.TempPathFactory) -> tuple[dict[str, dict], str, Path]:
    path = tmp_path_factory.mktemp("verdicts") / "verdicts.py"
    path.write_text(VERDICTS)
    code, report = check_json(path)
    assert code == 1
    return by_function(report), invoke("check", path).stdout, path


def test_a_double_backward_failure_says_the_first_derivative_is_right(
        verdicts: tuple[dict[str, dict], str, Path]) -> None:
    results, _, _ = verdicts
    no_graph = results["NoGraph"]
    assert (no_graph["gradcheck"], no_graph["gradgradcheck"]) == ("pass", "fail")
    message = no_graph["message"]
    assert message.startswith("gradcheck passed, so backward's gradients are right; "
                              "gradgradcheck, which differentiates backward itself (double "
                              "backward, for second derivatives), failed: backward's gradients "
                              "carry no graph (computed under torch.no_grad()")
    assert "expected to be zero" not in message  # torch's words, not the user's
    assert "the derivative of backward's gradient for input 0 with respect to input 1" \
        in message
    mismatch = no_graph["mismatch"]
    assert (mismatch["check"], mismatch["output"], mismatch["input"]) == ("gradgradcheck", 0, 1)
    assert (mismatch["input_shape"], mismatch["output_shape"]) == ([1], [4, 3])


def test_a_wrong_first_derivative_says_gradgradcheck_would_follow(
        verdicts: tuple[dict[str, dict], str, Path]) -> None:
    cube = verdicts[0]["Cube"]
    assert (cube["gradcheck"], cube["gradgradcheck"]) == ("fail", "skipped")
    assert cube["mismatch"]["inputs"] == "recorded"
    assert cube["message"].endswith("gradgradcheck not run: it differentiates backward, which "
                                    "is already wrong — fix the first derivative first")


def test_a_double_backward_wrong_away_from_the_recorded_inputs_fails_there(
        verdicts: tuple[dict[str, dict], str, Path]) -> None:
    squared = verdicts[0]["ScaleSquared"]
    assert (squared["gradcheck"], squared["gradgradcheck"]) == ("pass", "fail")
    assert squared["message"].startswith("gradcheck passed, so backward's gradients are right")
    assert "failed: wrong away from the recorded inputs: at random ones (seeded), the " \
        "derivative of backward's gradient for input 0 with respect to input 1" \
        in squared["message"]
    assert "as recorded, input 1 is 1.0" in squared["message"]
    assert squared["mismatch"]["inputs"] == "random"
    assert "ScaleSquared: gradgradcheck at random inputs:" in verdicts[1]


def test_elements_are_named_by_their_position_and_backward_by_its_def_line(
        verdicts: tuple[dict[str, dict], str, Path]) -> None:
    results, out, path = verdicts
    wrong = results["OneWrongElement"]
    assert wrong["mismatch"]["worst"] == [33, 33]  # flat, as before
    assert wrong["mismatch"]["worst_at"] == [[5, 3], [5, 3]]
    text = " ".join(out.split())
    assert "worst at input 0 [5, 3] of [8, 6], output 0 [5, 3] of [8, 6]:" in text
    assert "element 33" not in text
    # the def line, not the decorators' above it, nor the .apply() line
    assert wrong["backward"] == {"file": str(path), "line": 25} and wrong["line"] == 44
    assert f"backward: {path}:25 (called at {path}:44)" in text
    assert results["Cube"]["backward"]["line"] == 38


def test_junit_names_backward_too(verdicts: tuple[dict[str, dict], str, Path],
                                  tmp_path: Path) -> None:
    _, _, path = verdicts
    junit = tmp_path / "report.xml"
    invoke("check", path, "--junit", junit)
    assert f"backward: {path}:38" in junit.read_text()


@pytest.mark.parametrize("shape", [(64, 32), (7,), (2, 3, 4), (3, 1, 5), (1,)])
def test_positions_are_torch_unravel_index(shape: tuple[int, ...]) -> None:
    n = 1
    for size in shape:
        n *= size
    for flat in sorted({0, n // 2, n - 1, 913 % n}):
        expected = [int(i) for i in torch.unravel_index(torch.tensor(flat), shape)]
        assert unravel(flat, shape) == expected
        assert position(flat, shape) == str(expected)
    assert position(913, (64, 32)) == "[28, 17]"
    assert element_at(913, (64, 32)) == " [28, 17] of [64, 32]"
    assert element_at(0, ()) == " (a scalar)" and element_at(913, None) == " element 913"
