"""Every per-pass observer, in the order each pass starts them (they finish in reverse), and
why that order matters where it does. A new one is a module with an Observer subclass and a
line here."""

from __future__ import annotations

from .base import Observer
from .births import NonFiniteBirths
from .flow import GradientFlow
from .freed import FreedGraphs
from .grad_changes import GradChanges
from .grad_graph import GradGraph
from .nan_gradients import NanGradients
from .optimizers import OptimizerUse
from .profile import Profile
from .roots_seen import RootsSeen
from .saved import SavedTensors
from .second_order import SecondDerivatives
from .steps import StepLog

OBSERVERS: tuple[type[Observer], ...] = (
    RootsSeen,  # the roots of the latest pass, and of the one asked for: the default graph
    SecondDerivatives,  # --order 2: the second derivatives of a root
    GradChanges,  # which named .grad each pass changed, from what to what
    NanGradients,  # a watched run's nan-gradient, judged once a pass's row is read
    SavedTensors,  # saved tensors read before backward frees them; those changed in place
    StepLog,  # the light statistics of every pass: .grad norms, the loss, optimizer steps
    NonFiniteBirths,  # where a non-finite root's NaN was born (before the flow's hooks)
    OptimizerUse,  # the gradients optimizers stepped with, threw away or never held
    Profile,  # --profile: replays and timings (before the flow: a timed step runs plain)
    GradientFlow,  # what each node received and sent: hooks on the pass's nodes
    FreedGraphs,  # the graphs passes freed: why a later pass finds its graph freed
    GradGraph,  # the nodes create_graph passes make (last: its span is the call's alone)
)

# (earlier, later, why): the order the table must keep (tests/test_layers.py holds it). Each
# observer writes only its own fields of the pass's record; these are the only places one
# reads what another wrote, or tells its facts before or after another's (what one's start
# writes, any finish may read: every start runs first, as StepLog reads OptimizerUse's
# closure_call).
ORDER: tuple[tuple[type[Observer], type[Observer], str], ...] = (
    (Profile, GradientFlow, "Profile may wrap p.call in a timed step that runs plain "
                            "(p.plain): the flow then sets no hooks"),
    (NonFiniteBirths, GradientFlow, "the birth search reads the graph before the flow's "
                                    "hooks are on it"),
    (NanGradients, StepLog, "a pass waits for its row, which StepLog numbers as it finishes"),
    (NanGradients, GradientFlow, "a pass in detail is judged on the flow GradientFlow "
                                 "recorded as it finished"),
    (SavedTensors, NonFiniteBirths, "as the code ends (in reverse), a NaN's birth is told "
                                    "before the saved tensors changed in place"),
    *((kind, GradGraph, "the span of a create_graph pass holds the call alone, nothing of "
                        "gradtrace's around it") for kind in OBSERVERS if kind is not GradGraph),
)
