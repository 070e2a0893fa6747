"""The fastest plan that fits (`memtui.estimator.search`, `memtui plan --fastest`): every plan it
returns fits with the top of its error band by the estimator's own verdict, keeps the user's
fixed choices and the global batch, runs on the plan's stack, and the pruning drops no plan a
search without it finds."""

from __future__ import annotations

import itertools

import pytest

from memtui.estimator import (
    Checkpointing,
    Hardware,
    LossKind,
    Method,
    ModelSpec,
    Offload,
    Optimizer,
    Plan,
    StackName,
    StateDtype,
    Strategy,
    estimate,
)
from memtui.estimator.capabilities import CAPABILITIES
from memtui.estimator.model_source import load_model
from memtui.estimator.report import Verdict
from memtui.estimator.search import SEARCHED, Search, Timing, search

GB = 10**9


def _order(plan: Plan) -> tuple[int, int, int]:
    """A ranking that tells candidates apart (a stand-in only where the step-time model is
    not the subject: the enumeration and the fit filter do not depend on it)."""
    return (plan.micro_batch, plan.tp, list(Strategy).index(plan.strategy))


BY_SHAPE: Timing[tuple[int, int, int]] = Timing(
    of=_order, seconds=lambda key: -key[0] + key[1] / 10 + key[2] / 100
)


def seed_13b(**update: object) -> Plan:
    """The 13B analysis's job: 13B full fine-tune, bf16 mixed AdamW, 4 x 80 GB NVLink."""
    return Plan(
        model=ModelSpec.from_parameters(13 * 10**9),
        hardware=Hardware(gpus_per_node=4, gpu_memory=80 * GB),
        **update,
    )


def llama_8b(**update: object) -> Plan:
    return Plan(model=load_model("meta-llama/Meta-Llama-3-8B"), **update)


def everything(plan: Plan, **kwargs: object) -> Search[tuple[int, int, int]]:
    return search(plan, BY_SHAPE, keep=10**6, **kwargs)  # type: ignore[arg-type]


def global_batch(plan: Plan) -> int:
    return plan.micro_batch * plan.grad_accum * plan.data_parallel


@pytest.mark.parametrize(
    "plan",
    [
        seed_13b(micro_batch=2, grad_accum=4),
        llama_8b(stack=StackName.deepspeed, strategy=Strategy.zero2, micro_batch=4),
        llama_8b(stack=StackName.torchtune, precision="bf16", loss="chunked", grad_accum=2),
    ],
    ids=["generic", "deepspeed", "torchtune"],
)
def test_every_plan_found_fits_with_the_band_top_by_the_estimators_verdict(plan: Plan) -> None:
    found = everything(plan)
    assert found.ranked, "the search found nothing"
    assert found.fitting == len(found.ranked)
    for candidate in found.ranked:
        report = estimate(candidate.plan)
        assert report.budget.verdict is Verdict.fits, candidate.changes(plan)
        assert candidate.peak == max(report.budget.total, report.budget.peak_bytes)
        assert candidate.headroom == report.budget.headroom
        assert candidate.top <= candidate.plan.hardware.gpu_memory
        assert global_batch(candidate.plan) == global_batch(plan) == found.global_batch
        # only the searched fields moved: model, method, optimizer, precision, stack, hardware
        # are the user's job
        moved = {
            name
            for name in Plan.model_fields
            if getattr(candidate.plan, name) != getattr(plan, name)
        }
        assert moved <= set(SEARCHED)


@pytest.mark.parametrize("stack", [StackName.deepspeed, StackName.trainer, StackName.torchtune])
def test_only_what_the_stack_runs_is_searched(stack: StackName) -> None:
    caps = CAPABILITIES[stack]
    lora = llama_8b(method=Method.lora)  # the Trainer's DDP fits no full 8B fine-tune
    base = lora.evolve(stack=stack, **caps.suited(lora))
    found = everything(base)
    assert found.ranked
    seen = {name: {getattr(c.plan, name) for c in found.ranked} for name in SEARCHED}
    assert seen["strategy"] <= set(caps.strategies)
    assert seen["offload"] <= set(caps.offloads)
    assert seen["loss"] <= set(caps.losses)
    # every loss the stack computes fits an 8B LoRA on 8 x 80 GB: each was tried
    assert seen["loss"] == set(caps.losses)


def test_fixed_choices_keep_the_plans_values() -> None:
    base = llama_8b(strategy=Strategy.zero3, micro_batch=2, grad_accum=2, loss=LossKind.chunked)
    fixed = frozenset({"strategy", "micro_batch", "loss", "offload"})
    found = everything(base, fixed=fixed)
    assert found.ranked and found.fixed == fixed
    for c in found.ranked:
        assert c.plan.strategy is Strategy.zero3
        assert c.plan.micro_batch == 2
        assert c.plan.loss is LossKind.chunked
        assert c.plan.offload is Offload.none
        assert global_batch(c.plan) == global_batch(base)
    free = everything(base)
    assert {c.plan.strategy for c in free.ranked} > {Strategy.zero3}


def test_the_state_dtype_moves_only_where_the_user_allows_it() -> None:
    base = seed_13b()
    assert {c.plan.optimizer_state_dtype for c in everything(base).ranked} == {StateDtype.fp32}
    allowed = everything(base, allow_state_dtype=True)
    assert {c.plan.optimizer_state_dtype for c in allowed.ranked} == set(StateDtype)
    # fixed beats allowed; an optimizer whose moments are not the plan's dtype: not tried
    fixed = everything(base, allow_state_dtype=True, fixed=frozenset({"optimizer_state_dtype"}))
    assert {c.plan.optimizer_state_dtype for c in fixed.ranked} == {StateDtype.fp32}
    eight = everything(base.evolve(optimizer=Optimizer.adamw8bit), allow_state_dtype=True)
    assert {c.plan.optimizer_state_dtype for c in eight.ranked} == {StateDtype.fp32}


def test_the_ranking_is_the_timings_seconds_then_the_headroom() -> None:
    found = search(seed_13b(micro_batch=1, grad_accum=8), BY_SHAPE, keep=4)
    assert len(found.ranked) == 4 < found.fitting
    seconds = [c.seconds for c in found.ranked]
    assert seconds == sorted(seconds)
    assert found.ranked[0].plan.micro_batch == max(
        c.plan.micro_batch for c in everything(seed_13b(micro_batch=1, grad_accum=8)).ranked
    )


def test_nothing_fits_is_an_empty_ranking_not_an_error() -> None:
    tiny = Plan(
        model=ModelSpec.from_parameters(70 * 10**9),
        hardware=Hardware(gpus_per_node=1, gpu_memory=24 * GB),
        offload=Offload.none,
    )
    # parameter offload would fit it (the state in CPU RAM): kept off, nothing does
    assert everything(tiny).ranked
    found = everything(tiny, fixed=frozenset({"offload"}))
    assert found.ranked == () and found.fitting == 0 and found.estimated > 0


def test_a_field_the_search_does_not_move_cannot_be_fixed() -> None:
    with pytest.raises(ValueError, match="method"):
        search(seed_13b(), BY_SHAPE, fixed=frozenset({"method"}))


def test_the_pruning_drops_no_plan_that_could_be_the_fastest() -> None:
    """Every combination of the searched values, estimated whole: of the plans whose verdict
    is FITS, the search returns for each strategy, offload and micro-batch the one that
    recomputes least (the others are slower by the recomputed forward, the rest the same)."""
    base = seed_13b(micro_batch=1, grad_accum=4, loss=LossKind.full)
    found = everything(base, fixed=frozenset({"tp", "loss"}))
    least: dict[tuple[Strategy, Offload, int], Checkpointing] = {}
    for strategy, offload, b, mode in itertools.product(
        Strategy, Offload, (1, 2, 4), (Checkpointing.none, Checkpointing.selective,
                                       Checkpointing.full)
    ):  # fmt: skip
        plan = base.model_copy(
            update={
                "strategy": strategy,
                "offload": offload,
                "checkpointing": mode,
                "micro_batch": b,
                "grad_accum": 4 // b,
            }
        )
        try:
            plan.check_rules()
        except ValueError:
            continue
        if estimate(plan).budget.verdict is Verdict.fits:
            least.setdefault((strategy, offload, b), mode)
    searched = {
        (c.plan.strategy, c.plan.offload, c.plan.micro_batch): c.plan.checkpointing
        for c in found.ranked
    }
    assert len(searched) == len(found.ranked)
    # HSDP on one node is FSDP over the same GPUs: the search tries it once, as fsdp
    assert searched == {key: mode for key, mode in least.items() if key[0] is not Strategy.hsdp}
    assert any(key[0] is Strategy.fsdp for key in searched)
    assert {Checkpointing.none, Checkpointing.full} <= set(searched.values())


def test_a_plan_under_another_strategys_name_is_listed_once() -> None:
    """ZeRO-3 and FSDP hold the same on the generic stack, and on one data-parallel GPU (tp
    over every GPU) no strategy shards anything: with the same seconds, one of them is kept."""
    flat: Timing[float] = Timing(of=lambda plan: 1.0, seconds=lambda s: s)
    base = seed_13b(grad_accum=4)
    once = search(base, flat, keep=10**6)
    every = everything(base)  # its seconds tell the strategies apart: nothing merged
    assert once.fitting < every.fitting
    keys = [
        (c.peak, *(getattr(c.plan, n) for n in SEARCHED if n != "strategy")) for c in once.ranked
    ]
    assert len(keys) == len(set(keys))
    merged = {(c.peak, c.plan.tp, c.plan.offload, c.plan.checkpointing) for c in every.ranked}
    assert merged >= {
        (c.peak, c.plan.tp, c.plan.offload, c.plan.checkpointing) for c in once.ranked
    }


@pytest.mark.parametrize(
    ("stack", "runs"),
    [
        (StackName.deepspeed, {Strategy.zero1, Strategy.zero2}),  # AutoTP: ZeRO 0-2 only
        (StackName.fsdp2, {Strategy.fsdp, Strategy.fsdp_shard_grad_op, Strategy.hsdp}),
        (StackName.fsdp1, set()),
        (StackName.trainer, set()),
        (StackName.litgpt, set()),
    ],
)
def test_tensor_parallelism_only_with_the_strategies_the_stack_composes_it_with(
    stack: StackName, runs: set[Strategy]
) -> None:
    caps = CAPABILITIES[stack]
    assert set(caps.tensor_parallel) == runs
    base = llama_8b(method=Method.lora)
    base = base.evolve(stack=stack, **caps.suited(base))
    for strategy in caps.strategies:
        plan = base.model_copy(update={"strategy": strategy, "tp": 2})
        if strategy in runs:
            plan.check_rules()
            row = next(r for r in estimate(plan).strategies if r.strategy is strategy)
            assert row.applicable
            continue
        with pytest.raises(ValueError, match="tensor parallelism"):
            plan.check_rules()
    found = everything(base)
    assert found.ranked
    assert all(c.plan.tp == 1 or c.plan.strategy in runs for c in found.ranked)
