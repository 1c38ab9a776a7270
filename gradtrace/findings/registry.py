"""Every finding code, declared once with its severity, a title and a sentence of doc.

Findings are made only through these declarations (`PASS_FAILED.finding(...)`), so the
README's table of codes can be checked against `CODES`.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..model.records import Finding, Severity

CODES: dict[str, Code] = {}


@dataclass(frozen=True, slots=True)
class Code:
    """A finding code: its usual severity, other severities a case may take, what it means."""

    name: str
    severity: Severity
    title: str
    doc: str
    also: tuple[Severity, ...] = ()

    def finding(self, message: str, *, severity: Severity | None = None,
                tensor: str | None = None, node: str | None = None,
                hint: str | None = None, file: str | None = None,
                line: int | None = None) -> Finding:
        """A Finding of this code; severity defaults to the declared one."""
        chosen = severity or self.severity
        if chosen != self.severity and chosen not in self.also:
            raise ValueError(f"finding {self.name!r} is not declared with severity {chosen!r}")
        return Finding(self.name, chosen, message, tensor, node, hint, file, line)


def declare(name: str, severity: Severity, title: str, doc: str,
            also: tuple[Severity, ...] = ()) -> Code:
    """Add a code to the registry (once) and return it."""
    if name in CODES:
        raise ValueError(f"finding code {name!r} is declared twice")
    code = CODES[name] = Code(name, severity, title, doc, also)
    return code


PASS_FAILED = declare(
    "pass-failed", "error", "a backward or autograd.grad call raised",
    "The scenario's pass raised (a freed graph, a root without grad_fn, an in-place change); "
    "the state up to that point is still shown, and unless the scenario catches the error it "
    "stops there, as under python (scenario-stopped).")
NO_GRAPH = declare(
    "no-graph", "warning", "no named tensor has a grad_fn",
    "Nothing was computed with gradients enabled (no_grad, detach, no requires_grad); info "
    "when the scenario only calls gradcheck or Functions.", also=("info",))
NO_GRAPH_LEAD = "no autograd graph: "  # then why: every command's NoGraph error quotes it
UNREACHED_LEAF = declare(
    "unreached-leaf", "warning", "a leaf that requires grad is reached by no output or pass",
    "Its .grad stays None: it is not used in the expression that was differentiated, or only "
    "by a named tensor no backward pass ran from (not said once the script stopped with an "
    "error before that backward).")
UPDATED_COPY = declare(
    "updated-copy", "info", "a leaf no graph reaches changed without autograd",
    "It requires grad, but no output depends on it, and its values changed during the run "
    "under no_grad or through .data: an EMA or target copy of a model, kept in step with it.")
DETACHED = declare(
    "detached", "info", "a tensor shares memory with a graph tensor but is cut from it",
    "Made by .detach() or .data: no gradient flows back through it.")
HOOK_CHANGED_GRADIENT = declare(
    "hook-changed-gradient", "info", "a hook changed a gradient on its way",
    "What a node sent differs from what its input received: a tensor or node hook returned a "
    "new gradient.")
GRAD_CHANGED_AFTER = declare(
    "grad-changed-after", "info", "a .grad is not what reached its AccumulateGrad",
    "Something changed the gradient after autograd delivered it, before backward returned: "
    "DistributedDataParallel averages it over the ranks (the graph shows this rank's own), "
    "or a post-accumulate-grad hook rewrote it.")
NAN_GRADIENT = declare(
    "nan-gradient", "error", "where the first NaN or Inf gradient is born",
    "The first node, in backward order, that received finite gradients and sent a "
    "non-finite one.")
FLOW_NOT_RECORDED = declare(
    "flow-not-recorded", "warning", "gradtrace could not summarise some gradients",
    "The pass ran as usual, but the flow of some nodes is not shown (a gradtrace limitation); "
    "info, said once, for passes inside torch.func transforms or "
    "`autograd.grad(is_grads_batched=True)` (`torch.autograd.functional`'s `vectorize=True`), "
    "whose gradients are batched, and for passes under compiled autograd, which compiles "
    "every hook of the backward graph.",
    also=("info",))
GRADCHECK = declare(
    "gradcheck", "info", "the scenario's own gradcheck or gradgradcheck call",
    "Its verdict: info when it passed, error when it returned False.", also=("error",))
GRADCHECK_FAILED = declare(
    "gradcheck-failed", "error", "the scenario's own gradcheck or gradgradcheck call raised",
    "The Function's backward disagrees with finite differences.")
SCENARIO_STOPPED = declare(
    "scenario-stopped", "error", "the scenario raised, exited non-zero or ran out of time",
    "An exception (in backward() too) or sys.exit(n) stops the script at that line, as "
    "python would; everything recorded up to there is shown, then gradtrace exits 2.")
PASSES_CAPPED = declare(
    "passes-capped", "info", "the scenario was stopped at its pass after the last recorded",
    "`--passes N` records the first N backward passes, then stops the script (by default it "
    "runs to its end).")
INPLACE_MODIFIED = declare(
    "inplace-modified", "error", "a tensor saved for backward was changed in place",
    "Backward needs the value a tensor had when an op saved it; the finding names the tensor, "
    "the line that made it and the line that changed it (wherever the tensor came from: "
    "forward's argument, another module's output, an `inplace=True` module the line calls), "
    "once per line, before any backward runs.")
GRAPH_FREED = declare(
    "graph-freed", "error", "a backward went through a graph an earlier one freed",
    "Names the earlier pass that freed the saved tensors, how many nodes both share and the "
    "tensor that links them, with the fix that fits: detach it, recompute it, or "
    "retain_graph=True when two backwards over one graph are meant.")
NAN_VALUE = declare(
    "nan-value", "error", "where the first NaN or Inf value appears in the forward",
    "The first op whose output is not finite while its inputs are: read off the values saved "
    "for backward at the first pass whose loss is not finite (or at the stop, for a loss no "
    "backward ran from), its line and module even for an unnamed tensor inside forward(); or "
    "the parameter or data that held it already. Else the first named tensor with non-finite "
    "values whose named inputs are finite.")
GRAPH_CUT = declare(
    "graph-cut", "error", "a root or tensor lost requires_grad on the way",
    "The line that ran and made it without a graph: inside a no_grad or inference_mode block, "
    "or through .detach(), .item(), .data, torch.tensor(...), argmax; a warning for a leaf "
    "whose path to every root was cut (freezing may be meant), naming the line in a module's "
    "forward() and that module when the cut is there, in the script or the model's own file. "
    "Only a line that ran before the backward it explains (not the logging after it), never "
    "for a target or EMA copy (updated-copy); `dot` draws the cut.",
    also=("warning",))
GRAD_ACCUMULATING = declare(
    "grad-accumulating", "warning", "a .grad was never reset while the optimizer stepped",
    "Over 3 passes or more each backward added to the .grad the pass before left (clipped or "
    "unscaled in place, perhaps, but not zeroed), though the optimizer stepped (or called its "
    "step's closure again, as L-BFGS does) before each: zero_grad() is missing (accumulation "
    "on purpose steps only after the last micro-batch, and is not reported).")
VANISHING_GRADIENT = declare(
    "vanishing-gradient", "info", "a module's gradient is 10,000 times too small",
    "Below 1e-4 of the largest module's in most passes, or fallen 1e4-fold over the run while "
    "the loss did not converge (fell by less than a tenth): the module barely learns (not "
    "under Adam's family, RMSprop or Adagrad, whose steps do not shrink with the gradient); info "
    "when small can be meant, a warning when the loss did not converge over 20 passes or more.",
    also=("warning",))
EXPLODING_GRADIENT = declare(
    "exploding-gradient", "warning", "a gradient grew 10,000-fold or became non-finite",
    "A module's gradient norm passed 1e4 times the largest of the first pass, or a .grad "
    "became NaN or Inf; names the module, the parameter and the pass.")
DEAD_PARAMETER = declare(
    "dead-parameter", "warning", "a parameter's gradient is exactly zero in every pass",
    "It is on the graph and gets a .grad in 2 passes or more, always all zeros (dead ReLUs, "
    "a mask): it never learns. unreached-leaf is the case with no .grad at all.")
GRAD_DISCARDED = declare(
    "grad-discarded", "warning", "zero_grad() threw away gradients no optimizer step used",
    "A reset of gradients a backward made before any step used them, in most passes: "
    "zero_grad() at the top of every micro-batch of an accumulation loop (only the last "
    "micro-batch reaches each step), or between backward() and step() (the step finds no "
    "gradient). Names the zero_grad() line.")
STEP_WITHOUT_GRADIENT = declare(
    "step-without-gradient", "warning", "an optimizer step found no gradient",
    "optimizer.step() ran while none of its parameters had a .grad, in most steps: step() "
    "before backward(), or after a reset; the parameters do not move.")
CLIP_WITHOUT_GRADIENT = declare(
    "clip-without-gradient", "warning", "gradient clipping ran before there was a gradient",
    "clip_grad_norm_ or clip_grad_value_ ran while none of its parameters had a .grad (before "
    "backward, or after zero_grad): it clips nothing, and the step uses unclipped gradients.")
NOT_OPTIMIZED = declare(
    "not-optimized", "warning", "parameters get gradients but no optimizer holds them",
    "Backward reached them, the optimizer stepped, but none holds them: layers in a plain "
    "list (not nn.ModuleList), a tensor attribute not made an nn.Parameter, a layer added "
    "after the optimizer was built, a Parameter made in forward(). They never learn.")
FROZEN_IN_OPTIMIZER = declare(
    "frozen-in-optimizer", "warning", "an optimizer holds parameters that do not require grad",
    "They never get a gradient, so they never change: a requires_grad_(False) or "
    "from_pretrained(freeze=True) left in; info when the code says it freezes them on "
    "purpose (a frozen backbone).", also=("info",))
LEAF_COPIED = declare(
    "leaf-copied", "warning", "a tensor meant as a leaf is a copy of one",
    "Its line asks for requires_grad=True, then converts what it made (.double(), "
    ".to(device)): the name holds the copy, a non-leaf whose .grad stays None; the gradient "
    "goes to the unnamed leaf before it.")
GRAPH_KEPT = declare(
    "graph-kept", "warning", "a running total keeps every step's graph",
    "A name that adds each backward pass's loss to itself with its graph (total_loss += "
    "loss): every step's graph stays in memory, which grows with the steps.")
NONLEAF_GRAD = declare(
    "nonleaf-grad", "warning", "a non-leaf's .grad was read, and it is None",
    "Backward keeps .grad only for leaves; a tensor computed from others keeps one only after "
    "its retain_grad() ran before the backward. Names the line that read it.")

# What the steps of a loop say about its gradients' health and what its optimizers did with
# them (`gradtrace steps` lists them).
STEP_CODES = frozenset(c.name for c in (
    GRAD_ACCUMULATING, VANISHING_GRADIENT, EXPLODING_GRADIENT, DEAD_PARAMETER, GRAD_DISCARDED,
    STEP_WITHOUT_GRADIENT, CLIP_WITHOUT_GRADIENT, NOT_OPTIMIZED, FROZEN_IN_OPTIMIZER,
    GRAPH_KEPT))
