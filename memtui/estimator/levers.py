"""The levers of the 13B analysis (docs/references.md, item 4) and docs/architecture.md, "Where each
formula lives", built in the order they are applied: activation levers first (cheapest), then
state levers. Each lever's saving is computed by estimating the plan with that lever pulled, and
its time cost by timing that plan (`memtui.estimator.step_time`) against this one; the list is
shown by saving, largest first (that order breaks ties), then the levers already on, then those
with nothing to pull on this plan (`ordered` puts the most bytes per percent slower first).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from memtui.estimator.capabilities import CAPABILITIES
from memtui.estimator.choices import (
    Attention,
    Checkpointing,
    Choice,
    LossKind,
    Method,
    Offload,
    Optimizer,
    RefModel,
    Strategy,
    VllmMode,
)
from memtui.estimator.communication import volume
from memtui.estimator.objectives import keeps_reference, reference_is_copy, spec_of
from memtui.estimator.optimizers import optimizer_spec
from memtui.estimator.plan import Plan
from memtui.estimator.report import Lever, LeverState
from memtui.estimator.step_time import seconds_per_token, step_time
from memtui.estimator.strategies import offload_runs, strategy_spec

PlanTotal = Callable[[Plan], int]
"""Predicted peak bytes per GPU of a plan: what the lever list re-estimates with."""
PlanSeconds = Callable[[Plan], float]
"""Seconds per trained token of a plan: what the lever list re-times with."""


class LeverOrder(Choice):
    """How the lever list is ordered (`memtui estimate --levers-by`)."""

    memory = "memory"  # most bytes saved first (the report's own order)
    efficiency = "efficiency"  # most bytes saved per percent of step time lost first


def ordered(levers: Sequence[Lever], order: LeverOrder) -> tuple[Lever, ...]:
    """`levers` (the report's list: pending by saving, then applied, then not applicable)
    in `order`; only the pending ones move."""
    if order is LeverOrder.memory:
        return tuple(levers)
    pending = [lever for lever in levers if lever.state is LeverState.pending]
    rest = [lever for lever in levers if lever.state is not LeverState.pending]
    # ties: more bytes first (every pending lever saves some)
    pending.sort(key=lambda lever: (-lever.bytes_per_percent, -lever.saves_bytes))
    return (*pending, *rest)


def _lever(
    plan: Plan,
    total: int,
    per_gpu_total: PlanTotal,
    per_token: float,
    tokens: int,
    token_seconds: PlanSeconds,
    name: str,
    cost: str,
    applied: bool,
    update: dict[str, Any],
    why_not: str = "",
) -> Lever | None:
    """The lever (not applicable when `why_not` says why), or None when the plan with it
    pulled breaks a rule of the plan or its stack (a lever is never priced on a plan the
    user could not run) or saves nothing (it is not offered). `per_token` is this plan's
    seconds per trained token, `tokens` its tokens per step."""
    if applied:
        return Lever(name=name, saves_bytes=0, cost=cost, state=LeverState.applied)
    if why_not:
        state = LeverState.not_applicable
        return Lever(name=name, saves_bytes=0, cost=cost, state=state, why=why_not)
    # model_copy skips validation (10 us a plan against 2 on this hot path): the updates are
    # valid field values, so only the cross-field rules need checking
    pulled = plan.model_copy(update=update)
    try:
        pulled.check_rules()
    except ValueError:
        return None
    saves = total - per_gpu_total(pulled)
    if saves <= 0:
        return None
    # the time of this plan's tokens per step: a lever that shortens the sequences trains
    # fewer tokens per step, and costs what training the same tokens costs
    change = (token_seconds(pulled) - per_token) * tokens
    return Lever(
        name=name,
        saves_bytes=saves,
        cost=cost,
        seconds_change=change,
        percent_change=100 * change / (per_token * tokens),
    )


def levers(
    plan: Plan,
    total: int,
    per_gpu_total: PlanTotal,
    trainable: int,
    token_seconds: PlanSeconds = seconds_per_token,
) -> tuple[Lever, ...]:
    """What to turn on next, what it saves for this plan (whose peak is `total`), what it
    costs; each saving is `per_gpu_total` of the plan with that lever pulled, each time cost
    `token_seconds` of that plan against this one's, for this plan's tokens per step. Levers
    the plan's stack cannot pull, and those that would save nothing, are left out; a lever
    whose setting has nowhere to go on this plan is there, not applicable, with why."""
    stack = CAPABILITIES[plan.stack]
    per_token = token_seconds(plan)
    tokens = step_time(plan).tokens_per_step

    def make(name: str, cost: str, applied: bool, why_not: str = "", **update: Any) -> Lever | None:
        return _lever(
            plan, total, per_gpu_total, per_token, tokens, token_seconds, name, cost, applied,
            update, why_not,
        )  # fmt: skip

    b = plan.micro_batch
    half = max(1, b // 2)
    how = strategy_spec(plan.strategy)
    next_stage = how.next_stage
    if how.hybrid and plan.hardware.nodes == 1:
        next_stage = None  # HSDP on one node already shards over every GPU
    unsharded = ""  # why there is no further stage to pull: the stack runs none
    if next_stage is not None and next_stage not in stack.strategies:
        # the stack shards its own way (FSDP where DeepSpeed's next stage is named): the
        # first of its strategies, in its own order, that shards more kinds of state
        more = [s for s in stack.strategies if _kinds_sharded(s) > _kinds_sharded(plan.strategy)]
        next_stage = more[0] if more else None
        if next_stage is None:
            runs = ", ".join(s.value for s in stack.strategies)
            unsharded = (
                f"{stack.label} shards no further than {plan.strategy.value} (it runs {runs})"
            )
    extra_comm = ""
    if next_stage is not None:
        now = sum(volume(plan, plan.strategy, trainable))
        then = sum(volume(plan, next_stage, trainable))
        if now:
            extra_comm = f", communication x{then / now:.2f}"
    gathers = ""
    if how.shards_weights:
        gathers = ", FSDP gathers the weights again for every micro-batch"
    out = [
        make(
            "FlashAttention",
            "nearly free: same math, no s x s scores stored",
            plan.attention is Attention.flash,
            attention=Attention.flash,
        ),
        make(
            f"Micro-batch {b} -> {half}, accumulate x{2 * plan.grad_accum}"
            if b > 1
            else "Smaller micro-batch",
            f"same global batch; smaller kernels{gathers}",
            False,
            why_not="the micro-batch is 1 already" if b == 1 else "",
            micro_batch=half,
            grad_accum=plan.grad_accum * 2,
        )
        if not plan.optimizer_in_backward
        else None,
        make(
            "Activation checkpointing (full)",
            "about 33% more FLOPs: one extra forward per step (HFU 4/3 of MFU)",
            plan.checkpointing is Checkpointing.full,
            checkpointing=Checkpointing.full,
        ),
        _loss_lever(plan, stack.losses, make),
        make(
            "Activation offloading",
            "layer inputs to pinned CPU RAM (the CPU RAM figure grows), copies overlap compute",
            plan.activation_offload,
            activation_offload=True,
            checkpointing=Checkpointing.full,
        )
        if stack.activation_offload
        else None,
        make(
            f"Sequence {plan.seq_len} -> {max(1, plan.seq_len // 2)} (or packing)",
            "fewer tokens per sample; packing keeps the tokens per step",
            False,
            why_not="the sequence is 1 token already" if plan.seq_len == 1 else "",
            seq_len=max(1, plan.seq_len // 2),
        ),
        make(
            "expandable_segments",
            "PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True: less fragmentation, no cost",
            plan.expandable_segments,
            expandable_segments=True,
        ),
        make(
            "Optimizer step in backward",
            "no gradient accumulation or clipping; frees each gradient in its hook",
            plan.optimizer_in_backward,
            optimizer_in_backward=True,
        )
        if stack.optimizer_in_backward and plan.grad_accum == 1 and plan.offload is Offload.none
        else None,
        _offload_lever(plan, stack.offloads, make),
        make(
            f"Shard further ({next_stage.value})"
            if next_stage
            else "Shard further"
            if unsharded
            else "Shard further (full shard)",
            f"more collectives per step{extra_comm}",
            next_stage is None and not unsharded,
            why_not=unsharded,
            strategy=next_stage or plan.strategy,
        ),
        make(
            "8-bit AdamW",
            "block-wise 8-bit moments; matches 32-bit Adam in the paper's runs",
            optimizer_spec(plan.optimizer).eight_bit,
            optimizer=Optimizer.adamw8bit,
        ),
        _saved_modules_lever(plan, make),
        make(
            "LoRA",
            "a different method: trains low-rank adapters, the base stays frozen",
            plan.method is not Method.full,
            method=Method.lora,
        ),
        make(
            "QLoRA",
            "NF4 base: dequantization work every step, small quality cost",
            plan.method is Method.qlora,
            method=Method.qlora,
        ),
    ]
    out.extend(_objective_levers(plan, make))
    # by saving, the largest first (the building order above breaks ties: sorted is stable),
    # then the levers already on, then those with nothing to pull here
    rank = {LeverState.pending: 0, LeverState.applied: 1, LeverState.not_applicable: 2}
    offered = [lever for lever in out if lever is not None]
    return tuple(sorted(offered, key=lambda lever: (rank[lever.state], -lever.saves_bytes)))


LeverMaker = Callable[..., Lever | None]


def _kinds_sharded(strategy: Strategy) -> int:
    """How many of weights, gradients and optimizer state `strategy` shards (HSDP's only
    inside a node: less than full sharding)."""
    how = strategy_spec(strategy)
    kinds = how.shards_weights + how.shards_gradients + how.shards_optimizer
    return kinds - how.hybrid


def _loss_lever(plan: Plan, losses: tuple[LossKind, ...], make: LeverMaker) -> Lever | None:
    """The lightest loss the stack computes: fused linear cross-entropy, else chunked."""
    if LossKind.fused in losses:
        return make(
            "Fused linear cross-entropy",
            "logits never whole (Liger's use_liger_kernel, CCE): a fused kernel",
            plan.loss is LossKind.fused,
            loss=LossKind.fused,
        )
    if LossKind.chunked in losses:
        return make(
            "Chunked cross-entropy",
            "fp32 log-probs kept, the rest one chunk at a time",
            plan.loss is not LossKind.full,
            loss=LossKind.chunked,
        )
    return None


def _offload_lever(plan: Plan, offloads: tuple[Offload, ...], make: LeverMaker) -> Lever | None:
    """Optimizer offload where the stack has it, else parameter offload (with sharding)."""
    cost = "last resort: PCIe makes steps several times slower; needs CPU RAM"
    if Offload.optimizer in offloads:
        return make(
            "CPU offload of optimizer state",
            cost,
            plan.offload is not Offload.none,
            offload=Offload.optimizer,
        )
    if Offload.params in offloads and offload_runs(Offload.params, plan.strategy):
        return make(
            "CPU offload of parameters, gradients and optimizer",
            cost,
            plan.offload is Offload.params,
            offload=Offload.params,
        )
    return None


def _saved_modules_lever(plan: Plan, make: LeverMaker) -> Lever | None:
    """LoRA adapters on the modules trained in full (modules_to_save) instead."""
    if plan.method is Method.full or not plan.modules_to_save:
        return None
    names = ", ".join(plan.modules_to_save)
    return make(
        f"LoRA on {names} instead of full copies",
        "adapters where modules_to_save trained full copies (less capacity to learn there)",
        False,
        modules_to_save=(),
        lora_targets=(*plan.lora_targets, *plan.modules_to_save),
    )


def _objective_levers(plan: Plan, make: LeverMaker) -> list[Lever | None]:
    """The levers of the objectives that keep a reference or generate (TRL's settings)."""
    spec = spec_of(plan)
    out: list[Lever | None] = []
    if reference_is_copy(plan) and plan.method is not Method.full:
        out.append(
            make(
                "Reference: the adapter-disabled base",
                "none: TRL's default under PEFT (no ref_model), the base with the adapter off",
                False,
                ref_model=RefModel.adapter_disabled,
            )
        )
    if spec.reference and not spec.online and keeps_reference(plan):
        out.append(
            make(
                "Precomputed reference log-probs",
                "one reference pass over the dataset before training; no reference in the step",
                False,
                precompute_ref_log_probs=True,
            )
        )
    if spec.online:
        out.append(
            make(
                f"Completions {plan.max_completion_length} -> "
                f"{max(1, plan.max_completion_length // 2)} tokens",
                "shorter reasoning: truncated completions score worse",
                False,
                why_not="completions are 1 token already"
                if plan.max_completion_length == 1
                else "",
                max_completion_length=max(1, plan.max_completion_length // 2),
            )
        )
    if spec.online and plan.vllm_mode is VllmMode.colocate:
        lower = round(plan.vllm_gpu_memory_utilization - 0.1, 2)
        out += [
            make(
                "vLLM sleep mode",
                "weights and KV cache freed while the trainer steps; woken for each generation",
                plan.vllm_sleep_mode,
                vllm_sleep_mode=True,
            ),
            make(
                f"vLLM gpu_memory_utilization {plan.vllm_gpu_memory_utilization:g} -> {lower:g}",
                "a smaller KV cache: fewer sequences generated at once",
                False,
                vllm_gpu_memory_utilization=lower,
            )
            if lower > 0
            else None,
            make(
                "vLLM server on other GPUs",
                "GPUs taken from training for `trl vllm-serve`; weights synced over NCCL",
                False,
                vllm_mode=VllmMode.server,
            ),
        ]
    return out
