"""The stacks' capability table: one record per stack, read by the plan's rules, the report's
strategy table, the stack switch and the stacks themselves."""

from __future__ import annotations

from dataclasses import replace

import pytest

from memtui.estimator import Offload, Plan, StackName, Strategy, estimate
from memtui.estimator.capabilities import CAPABILITIES, OneGpuOnly, fsdp_shard_bytes
from memtui.estimator.choices import Precision
from memtui.estimator.plan import Hardware, ModelSpec
from memtui.estimator.stacks import STACKS
from memtui.estimator.strategies import STRATEGIES, offload_runs

SEVEN_B = ModelSpec.from_parameters(7 * 10**9)


def test_every_stack_has_its_record_and_reads_it() -> None:
    assert list(CAPABILITIES) == list(StackName)
    for name, caps in CAPABILITIES.items():
        assert caps.name is name
        assert STACKS[name].capabilities is caps


def test_fsdp1_runs_what_fsdp2_runs_under_its_own_name() -> None:
    one, two = CAPABILITIES[StackName.fsdp1], CAPABILITIES[StackName.fsdp2]
    # and ShardingStrategy.NO_SHARD besides (ddp), which fully_shard has no equivalent of
    assert one.strategies == (*two.strategies, Strategy.ddp)
    # and no tensor parallelism: accelerate's ParallelismConfig composes it with FSDP2 only
    assert one.tensor_parallel == () != two.tensor_parallel
    same = replace(one, name=two.name, label=two.label, strategies=two.strategies,
                   tensor_parallel=two.tensor_parallel)  # fmt: skip
    assert same == two
    assert one.label == "FSDP1 (FullyShardedDataParallel)"


def test_torchtunes_ddp_is_refused_on_several_gpus_only() -> None:
    caps = CAPABILITIES[StackName.torchtune]
    assert caps.why_not(Strategy.ddp, 1) is None
    assert caps.why_not(Strategy.ddp, 8) == (
        "torchtune's distributed recipes shard with FSDP: use fsdp on more than one GPU "
        "(ddp stands for its single-device recipes)"
    )
    assert caps.why_not(Strategy.zero3, 1) == "the torchtune stack runs ddp, fsdp, not zero3"
    plan = Plan(model=SEVEN_B, strategy=Strategy.ddp, precision=Precision.bf16)
    assert caps.suited(plan) == {"strategy": Strategy.fsdp}
    one_gpu = plan.evolve(hardware={"gpus_per_node": 1})
    assert caps.suited(one_gpu) == {}


def test_a_rule_in_the_table_reaches_the_plan_the_report_and_the_switch(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # a throwaway rule on the generic stack, set in the table alone
    why = "zero1 on one GPU only (a throwaway rule)"
    rule = OneGpuOnly(Strategy.zero1, instead=Strategy.zero3, why=why)
    caps = replace(CAPABILITIES[StackName.generic], one_gpu_only=(rule,))
    monkeypatch.setitem(CAPABILITIES, StackName.generic, caps)
    with pytest.raises(ValueError, match="a throwaway rule"):
        Plan(model=SEVEN_B, strategy=Strategy.zero1)
    plan = Plan(model=SEVEN_B, strategy=Strategy.fsdp)
    row = next(r for r in estimate(plan).strategies if r.strategy is Strategy.zero1)
    assert not row.applicable and row.note == why
    one_gpu = Plan(model=SEVEN_B, strategy=Strategy.zero1, hardware=Hardware(gpus_per_node=1))
    assert STACKS[StackName.generic].suited(one_gpu) == {}
    assert caps.suited(plan.model_copy(update={"strategy": Strategy.zero1})) == {
        "strategy": Strategy.zero3
    }


def test_parameter_offload_runs_only_where_the_parameters_are_sharded() -> None:
    for strategy, spec in STRATEGIES.items():
        assert offload_runs(Offload.params, strategy) is spec.shards_weights
        assert offload_runs(Offload.optimizer, strategy)
        assert offload_runs(Offload.none, strategy)


def test_only_fsdp_gathers_a_full_state_dict_in_its_shards_width() -> None:
    gathers = {n for n, c in CAPABILITIES.items() if c.full_state_width is not None}
    assert gathers == {StackName.fsdp2, StackName.fsdp1}
    # accelerate upcasts trainable parameters to fp32 unless the plan is pure bf16
    assert [fsdp_shard_bytes(p) for p in Precision] == [4, 2, 4, 4]
