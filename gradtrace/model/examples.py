"""The examples gradtrace ships (gradtrace/examples/): `example:NAME` as a target, their names,
files and one-line descriptions. Read with ast, never imported: listing them runs nothing.

A name is a file's path below the folder without `.py` ("chain_rule", "real/gpt_tiny"), or a
folder's ("broken"). Names are looked up in the listing, never joined onto a path, so no
text a user types reaches a file outside the folder.
"""

from __future__ import annotations

import ast
import functools
from pathlib import Path
from typing import NamedTuple

from ..errors import ScenarioError

PREFIX = "example:"
FOLDER = Path(__file__).resolve().parent.parent / "examples"

# What each folder of examples teaches ("": the top level), in the order they are listed: the
# learning path first, then the beginner folders, then the advanced ones.
FOLDERS = {
    "": "the learning path: the tutorials' lessons in teaching order, one concept of autograd each",
    "no_graph": "code with no autograd graph at all: `show` says why and exits 2",
    "explained": "the usual surprises, each explained by a finding",
    "loops": "training loops: gradient health over the steps (`gradtrace steps`)",
    "diff": "a model before and after a change (`gradtrace diff`)",
    "bugs": "the bugs people make in training code, each with its healthy twin (`*_fixed`)",
    "broken": "custom Functions with a bug that `gradtrace check` finds",
    "profile": "a custom Function with a slow backward, found first by `show --profile`",
    "real": "scripts adapted from public code: models, a test file, an argparse script",
    "distributed": "DDP under torchrun: `torchrun --nproc-per-node 2 --no-python "
                   "gradtrace show example:distributed/ddp_train`",
}

# The top-level examples in teaching order, listed numbered (1. …): the tutorials' five lessons
# first (requires_grad; grad_fn and next_functions; leaves and retain_grad; the chain rule;
# hooks), then what builds on them. Every top-level example is here exactly once (a test says
# so): a new one takes its place in the path. The numbers are shown, never part of a name.
PATH = (
    # 1-5: the five lessons, one example each
    "sigmoid_builtin",              # requires_grad: x.requires_grad = True, backward fills x.grad
    "print_grad_graph",             # grad_fn and next_functions
    "retain_grad",                  # leaves and retain_grad
    "chain_rule",                   # the chain rule
    "tensor_hook",                  # hooks
    # the graph: more paths, vectors, multi-output ops
    "next_functions_walk",
    "two_paths_add_up",
    "tensor_exponent",
    "chain_rule_vector",
    "vector_fan_out",
    "shopping_apple",
    "shopping_apple_tangerine",
    "chunk_multi_output",
    # where the graph stops
    "no_grad_context",
    "detach_cuts_graph",
    "detach_then_requires_grad",
    "backward_across_detach",
    # more than one backward
    "backward_twice_error",
    "retain_graph_accumulates",
    "zero_grad_between_passes",
    "mlp_modules",
    # custom Functions
    "custom_function_template",
    "custom_add",
    "custom_sigmoid",
    "custom_pow_function",
    "gradcheck_pow",
    # second derivatives and double backward
    "second_derivative",
    "second_derivative_without_create_graph",
    "double_backward_square",
    "double_backward_exp",
    "double_backward_sinh",
    "double_backward_cube",
    "synthetic_gradient",
)


class Example(NamedTuple):
    """One bundled example: its name, its file, the first paragraph of its docstring."""

    name: str
    path: Path
    summary: str

    @property
    def folder(self) -> str:
        return self.name.rpartition("/")[0]


@functools.cache
def bundled() -> tuple[Example, ...]:
    """Every example, by folder (in FOLDERS' order), then the top level in PATH's order and
    every other folder by name."""
    found = []
    for path in FOLDER.rglob("*.py"):
        name = path.relative_to(FOLDER).with_suffix("").as_posix()
        found.append(Example(name, path, _summary(path)))
    order = list(FOLDERS)

    def key(e: Example) -> tuple[int, str, int, str]:
        folder = order.index(e.folder) if e.folder in order else len(order)
        return folder, e.folder, path_number(e.name) or len(PATH) + 1, e.name

    return tuple(sorted(found, key=key))


def path_number(name: str) -> int | None:
    """An example's number on the learning path, from 1 (None: it is not on the path)."""
    return PATH.index(name) + 1 if name in PATH else None


def _summary(path: Path) -> str:
    """The first paragraph of the file's docstring, on one line ("" when it has none)."""
    try:
        doc = ast.get_docstring(ast.parse(path.read_bytes())) or ""
    except (OSError, SyntaxError, ValueError):
        return ""
    return " ".join(doc.split("\n\n")[0].split())


def is_example(text: str) -> bool:
    return text.startswith(PREFIX)


def example_path(name: str) -> Path | None:
    """The file of an example's name (None: no such example)."""
    return next((e.path for e in bundled() if e.name == name), None)


def folder_examples(name: str) -> list[Example]:
    """The examples in a folder of examples and below it ([] when name is no folder)."""
    name = name.strip("/")
    return [e for e in bundled() if name and (e.folder + "/").startswith(name + "/")]


def resolve(name: str) -> Path:
    """The file of example:NAME, or ScenarioError saying which names there are."""
    name = name.removesuffix(".py")
    path = example_path(name)
    if path is not None:
        return path
    inside = folder_examples(name)
    if inside:
        raise ScenarioError(f"{PREFIX}{name} is a folder of examples, not one example",
                            "name one of them: " + ", ".join(PREFIX + e.name for e in inside[:4])
                            + (", …" if len(inside) > 4 else ""))
    raise ScenarioError(f"{PREFIX}{name}: gradtrace has no example of that name",
                        "`gradtrace examples` lists them, e.g. example:chain_rule")


def example_file(label: str) -> str | None:
    """The file of a label example:NAME or example:NAME::FUNC (None: not a known example)."""
    if not is_example(label):
        return None
    path = example_path(label[len(PREFIX):].partition("::")[0].removesuffix(".py"))
    return None if path is None else str(path)
