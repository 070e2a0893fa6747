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
from dataclasses import dataclass
from typing import ClassVar

from memtui.estimator.activations import Setup, activation_bytes, logits_bytes, offloaded_bytes
from memtui.estimator.choices import LossKind, Offload, Precision, StackName, Strategy
from memtui.estimator.memo import BoundedCache
from memtui.estimator.plan import Plan
from memtui.estimator.runtime import Runtime, runtime
from memtui.estimator.state import (
    Layout,
    StaticState,
    TrainableTensor,
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


class BookStack:
    """The common assembly of a stack's books; subclasses override what differs."""

    name: ClassVar[StackName]
    label: ClassVar[str]
    """What a person reads next to the verdict."""
    strategies: ClassVar[tuple[Strategy, ...]] = tuple(Strategy)
    """The strategies it runs, the one to switch to first."""
    precisions: ClassVar[tuple[Precision, ...]] = tuple(Precision)
    """The precisions it runs, the one to switch to first."""
    losses: ClassVar[tuple[LossKind, ...]] = tuple(LossKind)
    """The losses it can compute, the one to switch to first."""
    offloads: ClassVar[tuple[Offload, ...]] = tuple(Offload)
    """What it can move to CPU RAM."""
    optimizer_in_backward: ClassVar[bool] = True
    """It can step each parameter in its gradient hook."""
    activation_offload: ClassVar[bool] = True
    """It can move checkpointed layer inputs to CPU RAM."""
    loads_on_every_rank: ClassVar[bool] = True
    """Every process reads the whole checkpoint into CPU RAM before the model is placed or
    sharded (False: once per node, then scattered); memtui/estimator/phases.py."""
    saves_by_module: ClassVar[bool] = False
    """Saving a sharded model gathers one module's parameters at a time (DeepSpeed's
    GatheredParameters), not one wrapped unit (FSDP); memtui/estimator/phases.py."""
    saves_full_optimizer_state: ClassVar[bool] = False
    """Saving gathers the full state dict in the shards' dtype and the full optimizer state on
    rank 0 (accelerate's FSDP FULL_STATE_DICT), not a 16-bit state dict."""
    shard_grad_op_rests_sharded: ClassVar[bool] = False
    """Its SHARD_GRAD_OP strategy keeps the parameters sharded between steps (FSDP's), not
    whole as ZeRO-2's do; memtui/estimator/phases.py."""

    def __init__(self) -> None:
        self._states = BoundedCache()

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

    def check(self, plan: Plan) -> None:
        """Raise ValueError (one line) when the stack cannot run the plan as given."""
        why = self.why_not(plan.strategy, plan)
        if why is not None:
            raise ValueError(why)
        if plan.precision not in self.precisions:
            allowed = ", ".join(p.value for p in Precision if p in self.precisions)
            raise ValueError(
                f"the {self.name.value} stack runs precision {allowed}, not {plan.precision.value}"
            )
        if plan.loss not in self.losses:
            allowed = ", ".join(loss.value for loss in self.losses)
            raise ValueError(
                f"the {self.name.value} stack computes the loss {allowed}, not {plan.loss.value}"
            )
        if plan.offload not in self.offloads:
            allowed = ", ".join(o.value for o in self.offloads)
            raise ValueError(
                f"the {self.name.value} stack offloads {allowed}, not {plan.offload.value}"
            )
        if plan.optimizer_in_backward and not self.optimizer_in_backward:
            raise ValueError(f"the {self.name.value} stack cannot step the optimizer in backward")
        if plan.activation_offload and not self.activation_offload:
            raise ValueError(f"the {self.name.value} stack has no activation offloading")

    def suited(self, plan: Plan) -> dict[str, object]:
        """The changes that let this stack run `plan`: its first strategy and precision in
        place of ones it does not run (nothing else); {} when it runs the plan as it is.
        Switching stacks in the dashboard and `--stack` without those flags use it."""
        changes: dict[str, object] = {}
        if plan.strategy not in self.strategies:
            sharded = [s for s in self.strategies if s is not Strategy.ddp]
            one_gpu = plan.hardware.gpus == 1 and Strategy.ddp in self.strategies
            changes["strategy"] = Strategy.ddp if one_gpu or not sharded else sharded[0]
        if plan.precision not in self.precisions:
            changes["precision"] = self.precisions[0]
        if plan.loss not in self.losses:
            changes["loss"] = self.losses[0]
        if plan.offload not in self.offloads:
            changes["offload"] = Offload.none
        if plan.optimizer_in_backward and not self.optimizer_in_backward:
            changes["optimizer_in_backward"] = False
        if plan.activation_offload and not self.activation_offload:
            changes["activation_offload"] = False
        return changes

    def why_not(self, strategy: Strategy, plan: Plan | None = None) -> str | None:
        """Why this stack cannot run `strategy` (for `plan`, when given: a stack may refuse a
        strategy on some hardware only); None when it can."""
        if strategy in self.strategies:
            return None
        allowed = ", ".join(s.value for s in Strategy if s in self.strategies)
        return f"the {self.name.value} stack runs {allowed}, not {strategy.value}"

    def static_state(self, plan: Plan, strategy: Strategy) -> StaticState:
        """Per-GPU static bytes (memoised on what the state depends on)."""

        def compute() -> StaticState:
            tensors = trainable_tensors(plan)
            return shard(plan, strategy, self.layout(plan, strategy, tensors), tensors)

        return self._states.get((strategy, plan.state_key), compute)

    def breakdown(self, plan: Plan, strategy: Strategy) -> Breakdown:
        """Every term's bytes per GPU for `plan` run with `strategy` (the hot path: the
        lever list and the micro-batch search call it many times)."""
        arch = plan.model.architecture
        state = self.static_state(plan, strategy)
        setup = self.setup(plan)
        acts = activation_bytes(arch, setup, plan.seq_len, plan.micro_batch)
        logits = logits_bytes(arch, setup, plan.seq_len, plan.micro_batch)
        extra = self.transient(plan, strategy, state, setup)
        books = Books(plan, state, setup, acts, logits, extra)
        # the allocator's terms first: the runtime overhead is computed around their sum
        terms = {kind: kind.bytes(books) for kind in TermKind.held_by_allocator}
        rt = runtime(plan, sum(terms.values()), state.managed)
        around = Books(plan, state, setup, acts, logits, extra, rt)
        terms.update({kind: kind.bytes(around) for kind in TermKind.beside_allocator})
        offloaded = offloaded_bytes(arch, setup, plan.seq_len, plan.micro_batch)
        return Breakdown(terms, state, extra, rt, state.cpu_bytes + offloaded)
