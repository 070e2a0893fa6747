"""What every training stack returns and how a stack keeps its books.

A stack turns a plan and a strategy into a `Breakdown`: every term of the per-GPU budget in
bytes, from four pieces of bookkeeping it may each override: the training state it keeps per
parameter (`layout`), how it runs the model (`setup`: the widths of saved tensors, what LoRA
adapters keep, the loss), the buffers of its communication and optimizer step (`transient`),
and where each number comes from (`sources`). `BookStack` assembles them; the generic stack is
memtui's own model of a step and every other stack starts from it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import ClassVar

from memtui.estimator.activations import (
    Setup,
    activation_bytes,
    kept_output_bytes,
    logits_bytes,
    offloaded_bytes,
)
from memtui.estimator.capabilities import CAPABILITIES, StackCapabilities
from memtui.estimator.choices import Objective, StackName, Strategy
from memtui.estimator.loops import output_through_step
from memtui.estimator.memo import BoundedCache
from memtui.estimator.objectives import (
    NOTHING,
    ObjectiveBytes,
    head_bytes,
    objective_bytes,
    scored_architecture,
    trained_shape,
)
from memtui.estimator.plan import Plan
from memtui.estimator.runtime import Runtime, runtime
from memtui.estimator.state import (
    Layout,
    StaticState,
    TrainableTensor,
    frozen_copy_bytes,
    shard,
    trainable_tensors,
)
from memtui.estimator.terms import Books, TermKind
from memtui.estimator.transient import Transient


@dataclass(frozen=True)
class Breakdown:
    """One plan's per-GPU bytes for one strategy, term by term; their sum is the peak as
    nvidia-smi would show it (`runtime` has the allocated and reserved figures)."""

    terms: Mapping[TermKind, int]
    """Every TermKind, bytes per GPU (each from its declaration's `bytes` hook): the
    allocator's terms, then the others."""
    state: StaticState
    """The static state behind the first four terms."""
    transient: Transient
    """The buffers behind the transient term, by phase."""
    runtime: Runtime
    """The overhead term's parts and the allocated / reserved / device totals."""
    cpu_bytes: int
    """CPU RAM per GPU: offloaded state and offloaded activations (pinned)."""
    objective: ObjectiveBytes = NOTHING
    """What the objective keeps beside the policy (its terms, the generation phase)."""

    @property
    def total(self) -> int:
        return sum(self.terms.values())

    @property
    def per_sample(self) -> int:
        """Bytes that grow with the micro-batch (the `per_sample` terms: activations, logits)."""
        return sum(self.terms[kind] for kind in TermKind.growing_with_batch)

    @property
    def fixed(self) -> int:
        """Bytes that do not grow with the micro-batch: every other term but the transient
        one (the state, the runtime...), and of that the buffers of the forward/backward
        phase (its optimizer-step share shrinks as the activations grow: `peak_extra`)."""
        t = self.transient
        grows = self.per_sample + self.terms[TermKind.transient]
        return self.total - grows + t.persistent + t.backward


@dataclass(frozen=True)
class ModelPass:
    """What one plan's forward and backward hold, whatever the strategy: a stack's
    `breakdown` computes it once per plan for every strategy."""

    plan: Plan
    """The plan as the books read it (a reward model's score head in place of the lm_head)."""
    shaped: Plan
    """That plan with the micro-batch the objective's trainer runs (DPO: chosen and
    rejected), what the stack's setup and transient read."""
    setup: Setup
    activations: int
    """Saved activations at the backward's peak, bytes per GPU."""
    logits: int
    """The loss's logits buffers at that peak, bytes per GPU."""
    kept: int | None
    """Logits of the loop's output alive through the optimizer step (None: the loop drops
    the output before it)."""
    offloaded: int
    """Pinned CPU bytes of offloaded activations."""


class BookStack:
    """The common assembly of a stack's books; subclasses override what differs."""

    name: ClassVar[StackName]
    """Its key in `memtui.estimator.capabilities.CAPABILITIES`, where what it can run is."""

    def __init__(self) -> None:
        self._states = BoundedCache()
        self._passes = BoundedCache()

    # -- what a stack decides ---------------------------------------------------------------

    def layout(
        self, plan: Plan, strategy: Strategy, tensors: tuple[TrainableTensor, ...]
    ) -> Layout:
        """The training state the stack keeps for the whole model, before sharding."""
        raise NotImplementedError

    def setup(self, plan: Plan) -> Setup:
        """How the stack runs the model's forward and backward."""
        raise NotImplementedError

    def transient(
        self, plan: Plan, strategy: Strategy, state: StaticState, setup: Setup
    ) -> Transient:
        """Communication buffers and the optimizer step's temporaries, by phase."""
        raise NotImplementedError

    def sources(self, plan: Plan, breakdown: Breakdown) -> Mapping[TermKind, str]:
        """Where each term's number comes from, for the report (called once per plan); a
        term left out shows its declaration's `source`."""
        raise NotImplementedError

    # -- checks and assembly ------------------------------------------------------------------

    @property
    def capabilities(self) -> StackCapabilities:
        """What it can run, and how it loads and saves."""
        return CAPABILITIES[self.name]

    def suited(self, plan: Plan) -> dict[str, object]:
        """The changes that let this stack run `plan` (`StackCapabilities.suited`)."""
        return self.capabilities.suited(plan)

    def static_state(self, plan: Plan, strategy: Strategy) -> StaticState:
        """Per-GPU static bytes (memoised on what the state depends on)."""

        def compute() -> StaticState:
            tensors = trainable_tensors(plan)
            return shard(plan, strategy, self.layout(plan, strategy, tensors), tensors)

        return self._states.get((strategy, plan.state_key), compute)

    def _model_pass(self, plan: Plan) -> ModelPass:
        """What `plan`'s forward and backward hold, whatever the strategy."""
        scored = scored_architecture(plan)
        if scored is not None:  # a reward model: its score head in place of the lm_head
            model = plan.model.model_copy(
                update={"architecture": scored, "parameters": scored.parameter_count}
            )
            plan = plan.model_copy(update={"model": model})
        arch = plan.model.architecture
        # the micro-batch as the objective's trainer runs it (DPO: chosen and rejected)
        seq, rows = trained_shape(plan)
        shaped = (
            plan
            if (seq, rows) == (plan.seq_len, plan.micro_batch)
            else (plan.model_copy(update={"seq_len": seq, "micro_batch": rows}))
        )
        setup = self.setup(shaped)
        head = head_bytes(plan, arch, setup, seq, rows)
        kept = None
        if setup.kept_logits_bytes and output_through_step(
            plan.stack, plan.loop, plan.loop_keeps_output
        ):
            kept = kept_output_bytes(arch, setup, seq, rows)
        return ModelPass(
            plan,
            shaped,
            setup,
            activation_bytes(arch, setup, seq, rows, head),
            logits_bytes(arch, setup, seq, rows) if head is None else head,
            kept,
            offloaded_bytes(arch, setup, seq, rows),
        )

    def breakdown(self, plan: Plan, strategy: Strategy) -> Breakdown:
        """Every term's bytes per GPU for `plan` run with `strategy` (the hot path: the
        lever list and the micro-batch search call it many times)."""
        # memoised on the whole plan: every strategy of the plan runs the same model
        run = self._passes.get(plan, lambda: self._model_pass(plan))
        plan, setup = run.plan, run.setup
        state = self.static_state(plan, strategy)
        extra = self.transient(run.shaped, strategy, state, setup)
        if run.kept is not None:
            # the loop's output outlives the backward: its logits beside the optimizer step
            extra = replace(
                extra,
                step=extra.step + run.kept,
                detail=f"{extra.detail}, the loop's output {run.kept / 1e9:.2f} GB",
            )
        goal = (
            NOTHING
            if plan.objective is Objective.sft
            else objective_bytes(plan, frozen_copy_bytes(plan, strategy), state.total)
        )
        books = Books(plan, state, setup, run.activations, run.logits, extra, goal)
        # the allocator's terms first: the runtime overhead is computed around their sum
        terms = {kind: hook(books) for kind, hook in TermKind.allocator_hooks}
        rt = runtime(plan, sum(terms.values()), state.managed)
        around = Books(plan, state, setup, run.activations, run.logits, extra, goal, rt)
        for kind, hook in TermKind.outside_hooks:
            terms[kind] = hook(around)
        return Breakdown(terms, state, extra, rt, state.cpu_bytes + run.offloaded, goal)
