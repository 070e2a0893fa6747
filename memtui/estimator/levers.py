"""The levers of seed 000 (item 4) and DESIGN.md section 5, in the order they are applied:
activation levers first (cheapest), then state levers. Each lever's saving is computed by
estimating the plan with that lever pulled.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from memtui.estimator.choices import Attention, Checkpointing, Method, Offload, Optimizer
from memtui.estimator.communication import volume
from memtui.estimator.optimizers import optimizer_spec
from memtui.estimator.plan import Plan
from memtui.estimator.report import Lever
from memtui.estimator.strategies import strategy_spec

PlanTotal = Callable[[Plan], int]
"""Predicted peak bytes per GPU of a plan: what the lever list re-estimates with."""


def _lever(
    plan: Plan,
    total: int,
    per_gpu_total: PlanTotal,
    name: str,
    cost: str,
    applied: bool,
    update: dict[str, Any],
) -> Lever:
    saves = 0 if applied else max(0, total - per_gpu_total(plan.model_copy(update=update)))
    return Lever(name=name, saves_bytes=saves, cost=cost, applied=applied)


def levers(plan: Plan, total: int, per_gpu_total: PlanTotal, trainable: int) -> tuple[Lever, ...]:
    """What to turn on next, what it saves for this plan (whose peak is `total`), what it
    costs; each saving is `per_gpu_total` of the plan with that lever pulled."""

    def make(name: str, cost: str, applied: bool, **update: Any) -> Lever:
        return _lever(plan, total, per_gpu_total, name, cost, applied, update)

    b = plan.micro_batch
    half = max(1, b // 2)
    how = strategy_spec(plan.strategy)
    next_stage = how.next_stage
    if how.hybrid and plan.hardware.nodes == 1:
        next_stage = None  # HSDP on one node already shards over every GPU
    extra_comm = ""
    if next_stage is not None:
        now = sum(volume(plan, plan.strategy, trainable))
        then = sum(volume(plan, next_stage, trainable))
        if now:
            extra_comm = f", communication x{then / now:.2f}"
    gathers = ""
    if how.shards_weights:
        gathers = ", FSDP gathers the weights again for every micro-batch"
    return (
        make(
            "FlashAttention",
            "nearly free: same math, no s x s scores stored",
            plan.attention is Attention.flash,
            attention=Attention.flash,
        ),
        make(
            f"Micro-batch {b} -> {half}, accumulate x{2 * plan.grad_accum}"
            if b > 1
            else "Smaller micro-batch (already 1)",
            f"same global batch; smaller kernels{gathers}",
            b == 1,
            micro_batch=half,
            grad_accum=plan.grad_accum * 2,
        ),
        make(
            "Activation checkpointing (full)",
            "about 33% more FLOPs: one extra forward per step (HFU 4/3 of MFU)",
            plan.checkpointing is Checkpointing.full,
            checkpointing=Checkpointing.full,
        ),
        make(
            f"Sequence {plan.seq_len} -> {max(1, plan.seq_len // 2)} (or packing)",
            "fewer tokens per sample; packing keeps the tokens per step",
            plan.seq_len == 1,
            seq_len=max(1, plan.seq_len // 2),
        ),
        make(
            "CPU offload of optimizer state",
            "last resort: PCIe makes steps several times slower; needs CPU RAM",
            plan.offload is not Offload.none,
            offload=Offload.optimizer,
        ),
        make(
            f"Shard further ({next_stage.value if next_stage else 'full shard'})",
            f"more collectives per step{extra_comm}",
            next_stage is None,
            strategy=next_stage or plan.strategy,
        ),
        make(
            "8-bit AdamW",
            "block-wise 8-bit moments; matches 32-bit Adam in the paper's runs",
            optimizer_spec(plan.optimizer).eight_bit,
            optimizer=Optimizer.adamw8bit,
        ),
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
    )
