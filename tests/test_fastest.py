"""The fastest plan that fits (`memtui.estimator.search`, `memtui plan --fastest`): every plan it
returns fits with the top of its error band by the estimator's own verdict, keeps the user's
fixed choices and the global batch, runs on the plan's stack, and the pruning drops no plan a
search without it finds."""

from __future__ import annotations

import itertools
import json
import re
from pathlib import Path

import pytest
from reference_plans import ANALYSIS_13B_FLAGS
from ui_helpers import screen_of, wait_for

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


# -- `memtui plan --fastest`, `memtui export --fastest`, the dashboard's key --------------


def run_cli(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    from memtui.cli import main

    code = main(list(argv))
    out = capsys.readouterr()
    return code, out.out, out.err


SEED = ("--params", "13B", "--gpus", "4", "--gpu-memory", "80GB")
"""The seed's job (the 13B analysis, docs/references.md): 13B full fine-tune, bf16 mixed
AdamW (memtui's defaults), 4 x 80 GB on NVLink (the default link)."""


def test_the_seed_plan_answers_full_sharding_with_per_block_wrapping(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """The 13B analysis: "only full sharding (FSDP/ZeRO-3, 52 GB) leaves room ... So the answer
    is FSDP with per-block wrapping". On its textbook step (the analysis's flags) and on
    DeepSpeed's books, the fastest plan that fits shards everything, each alternative with
    its step time."""
    code, out, _ = run_cli(capsys, "plan", "--fastest", *ANALYSIS_13B_FLAGS)
    assert code == 0
    # FSDP or ZeRO-3 (the generic stack's books are the same for both; ZeRO-3's offloaded
    # step runs DeepSpeed's CPU Adam, faster than torch's AdamW on the CPU under FSDP)
    full = r"fastest: (fsdp|zero3) \(full sharding over 4 GPUs, per-block wrapping\)"
    assert re.search(full, out)
    names = {s.value for s in Strategy}
    rows = [
        row for line in out.splitlines() if (row := line.split())[1:2] and row[1] in names
        and row[0].isdigit()
    ]  # fmt: skip
    assert [row[0] for row in rows] == ["1", "2", "3", "4", "5"]
    assert all(float(row[10]) > 0 for row in rows)  # the s/step of each
    code, out, _ = run_cli(capsys, "plan", "--fastest", *ANALYSIS_13B_FLAGS, "--json")
    document = json.loads(out)
    plans = document["plans"]
    assert plans[0]["plan"]["strategy"] in {"fsdp", "zero3"}
    seconds = [p["step_time"]["seconds"] for p in plans]
    assert seconds == sorted(seconds) and seconds[0] > 0
    for entry in plans:
        budget = entry["budget"]
        assert budget["verdict"] == "FITS"
        assert budget["peak"] <= budget["band_top"] <= budget["capacity"]
        assert entry["step_time"]["tokens_per_second_per_gpu"] > 0
        assert {p["kind"] for p in entry["step_time"]["parts"]} >= {"forward", "optimizer"}
    # DeepSpeed's own books, with the runtime's memory: ZeRO-3, nothing offloaded; CPU
    # offload ("a last resort", the analysis) comes after it, slower
    code, out, _ = run_cli(capsys, "plan", "--fastest", *SEED, "--stack", "deepspeed", "--json")
    plans = json.loads(out)["plans"]
    first = plans[0]["plan"]
    assert (first["strategy"], first["offload"]) == ("zero3", "none")
    offloaded = [p for p in plans if p["plan"]["offload"] != "none"]
    assert offloaded and all(
        p["step_time"]["seconds"] > plans[0]["step_time"]["seconds"] for p in offloaded
    )


def test_flags_given_are_kept_and_the_files_values_are_not(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    code, out, _ = run_cli(
        capsys, "plan", "--fastest", *SEED, "--stack", "deepspeed", "--offload", "optimizer",
        "--checkpointing", "none", "--json",
    )  # fmt: skip
    document = json.loads(out)
    assert code == 0 and document["fixed"] == ["checkpointing", "offload"]
    assert {(p["plan"]["offload"], p["plan"]["checkpointing"]) for p in document["plans"]} == {
        ("optimizer", "none")
    }
    # a DeepSpeed config's ZeRO-2 is where the search starts, not a choice it keeps
    ds = tmp_path / "ds.json"
    ds.write_text(json.dumps({"zero_optimization": {"stage": 2}, "bf16": {"enabled": True}}))
    code, out, _ = run_cli(capsys, "plan", "--fastest", *SEED, "--from", str(ds), "--json")
    document = json.loads(out)
    assert document["stack"] == "deepspeed" and document["fixed"] == []
    assert document["plans"][0]["plan"]["strategy"] == "zero3"
    assert document["plans"][0]["changes"]["strategy"] == "zero3"
    # and `memtui export --fastest` writes the winner as the user's own file, edited
    out_file = tmp_path / "ds-fastest.json"
    code, out, _err = run_cli(
        capsys, "export", "--fastest", *SEED, "--from", str(ds), "-o", str(out_file)
    )
    assert code == 0 and f"wrote {out_file}" in out
    written = json.loads(out_file.read_text())
    assert written["zero_optimization"]["stage"] == 3


def test_an_export_of_the_winner_says_what_its_format_cannot_hold(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    target = tmp_path / "ds.json"
    code, _out, err = run_cli(
        capsys, "export", "--fastest", *SEED, "--stack", "deepspeed", "--format", "deepspeed",
        "-o", str(target),
    )  # fmt: skip
    assert code == 0 and json.loads(target.read_text())["zero_optimization"]["stage"] == 3
    # a DeepSpeed config holds no checkpointing and no loss kernel: the Trainer's arguments do
    assert "does not hold the fastest plan's" in err and "checkpointing full" in err
    yaml = tmp_path / "axolotl.yaml"
    code, _, err = run_cli(
        capsys, "export", "--fastest", *SEED, "--stack", "deepspeed", "--format", "axolotl",
        "-o", str(yaml),
    )  # fmt: skip
    assert code == 0 and "does not hold" not in err


def test_plan_without_fastest_or_with_nothing_that_fits_is_one_line(
    capsys: pytest.CaptureFixture[str],
) -> None:
    code, _, err = run_cli(capsys, "plan", *SEED)
    assert code == 2 and "give --fastest" in err
    code, _out, err = run_cli(
        capsys, "plan", "--fastest", "--params", "70B", "--gpus", "1", "--gpu-memory", "24GB",
        "--offload", "none", "--stack", "generic",
    )  # fmt: skip
    assert code == 1
    assert "no plan fits with the top of the error band" in err and "offload" in err
    assert len(err.strip().splitlines()) == 1


async def test_the_dashboards_key_searches_in_a_worker_and_enter_adopts_the_fastest() -> None:
    from memtui.ui.app import make_app
    from memtui.ui.fastest_screen import FastestScreen
    from memtui.ui.widgets.fastest_table import FastestTable

    plan = seed_13b(stack=StackName.deepspeed, strategy=Strategy.zero2)
    app = make_app(plan, None, plan_only_reason="no GPU here (test)")
    async with app.run_test(size=(120, 40)) as pilot:
        screen = screen_of(app)
        await pilot.press("v")
        await wait_for(pilot, lambda: isinstance(app.screen, FastestScreen))
        shown = app.screen
        assert isinstance(shown, FastestScreen)
        assert shown.found.base == plan and shown.found.ranked
        winner = shown.found.ranked[0].plan
        table = shown.query_one(FastestTable)
        assert table.view is not None and len(table.view.rows()) == len(shown.found.ranked)
        await pilot.press("enter")
        await wait_for(pilot, lambda: app.screen is screen)
        assert screen.plan == winner and screen.plan.strategy is Strategy.zero3
        # escape keeps the plan
        await pilot.press("v")
        await wait_for(pilot, lambda: isinstance(app.screen, FastestScreen))
        await pilot.press("escape")
        await wait_for(pilot, lambda: app.screen is screen)
        assert screen.plan == winner
