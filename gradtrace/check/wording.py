"""What a check's verdict says, in plain words: which Jacobian block disagrees and at which
inputs, what a gradgradcheck failure means for backward, what torch's messages mean."""

from __future__ import annotations

from ..capture.naming.where import scenario_line
from ..compat.torch import error_kind
from ..model.labels import label_file

# A failing gradgradcheck after a passing gradcheck: what is wrong, and what is not.
DOUBLE = ("gradcheck passed, so backward's gradients are right; gradgradcheck, which "
          "differentiates backward itself (double backward, for second derivatives), failed")
# Where backward's own derivative goes wrong, and how a first-order-only Function says so.
DOUBLE_FIX = (": backward must be built from operations autograd follows (tensors from "
              "ctx.save_for_backward, no torch.no_grad(), .detach(), .item() or NumPy); a "
              "Function meant for first derivatives only: mark its backward "
              "@once_differentiable, or skip the second-order check")
# Said where gradcheck failed: why gradgradcheck was not run.
FOLLOWS = ("; gradgradcheck not run: it differentiates backward, which is already wrong — "
           "fix the first derivative first")

# torch's gradcheck messages without a Jacobian block, in words (by how they start).
_TORCH_WORDS = {
    "Numerical gradient for function expected to be zero":
        "the outputs carry no graph (made under torch.no_grad(), detached, or outside torch), "
        "so autograd takes their derivative as 0, yet finite differences say they change "
        "with the inputs",
    "Backward is not reentrant":
        "backward gives different values when run twice on the same inputs (it is not "
        "deterministic, or keeps state between calls)",
}
_DOUBLE_WORDS = {
    "Numerical gradient for function expected to be zero":
        "backward's gradients carry no graph (computed under torch.no_grad(), from detached "
        "values, or outside torch), so autograd takes their derivative as 0, yet finite "
        "differences say they change with the inputs",
}


def first_line(exc: BaseException) -> str:
    return str(exc).strip().splitlines()[0].rstrip(",") if str(exc).strip() \
        else type(exc).__name__


def torch_words(text: str, second: bool = False) -> str:
    """gradcheck's or gradgradcheck's one-line message in plain words where it is known."""
    table = _DOUBLE_WORDS if second else _TORCH_WORDS
    return next((words for start, words in table.items() if text.startswith(start)), text)


def disagree_text(output: int, index: int) -> str:
    """Which block of backward's Jacobian disagrees with finite differences, in words."""
    return (f"backward's Jacobian of output {output} with respect to input {index} "
            "disagrees with finite differences")


def double_text(output: int, index: int, n_inputs: int) -> str:
    """Which block of double backward disagrees: the derivative of backward's gradient for
    input `output` with respect to argument `index` of (inputs…, incoming gradients…)."""
    by = f"input {index}" if index < n_inputs else \
        f"the incoming gradient {index - n_inputs} (grad_output)"
    return (f"the derivative of backward's gradient for input {output} with respect to {by} "
            "disagrees with finite differences")


def double_failed(what: str) -> str:
    """A gradgradcheck failure after a passing gradcheck: what failed, and how it is fixed."""
    return f"{DOUBLE}: {what}{DOUBLE_FIX}"


def at_random(what: str, hidden: str | None) -> str:
    """A check that passed at the recorded inputs and failed at random ones."""
    told = (f"wrong away from the recorded inputs: at random ones (seeded), {what}; at the "
            "recorded ones it agrees")
    return told + (f" ({hidden})" if hidden else "")


# What a Function's backward did wrong, by the kind torch_compat.error_kind gives the error.
_BACKWARD_MISTAKES = {
    "wrong-count": "backward returns the wrong number of gradients",
    "invalid-gradient": "backward returns a gradient of the wrong shape or type",
    "needless-gradient": "backward returns a gradient for an input that needs none",
}


def reason(exc: BaseException, scenario: str, where: str) -> str:
    """A one-paragraph reason, with the scenario's file and line when it raised there."""
    text = first_line(exc)
    meaning = _BACKWARD_MISTAKES.get(error_kind(text) or "")
    if meaning is not None:
        return f"{meaning}: {text}"
    path = label_file(scenario)
    line = scenario_line(path, exc)
    at = f" at {path}:{line}" if line else ""
    return f"{where} raised {type(exc).__name__}{at}: {text}"
