"""What each sharding strategy does, in one place: which state it shards over which GPUs,
which collectives it runs, and which stage comes next.

Sources: the ZeRO paper (Rajbhandari et al. 2020, sec. 5 and Table 1: stage 1 shards the
optimizer state, stage 2 the gradients too, stage 3 the parameters too), PyTorch FSDP's
ShardingStrategy (FULL_SHARD = ZeRO-3, SHARD_GRAD_OP = ZeRO-2, HYBRID_SHARD = full shard
inside a node and replicas across nodes) and DDP (everything replicated, gradients
all-reduced).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal, Protocol

from memtui.estimator.choices import Offload, Strategy

Framework = Literal["ddp", "deepspeed", "fsdp"]


class _Node(Protocol):
    @property
    def gpus_per_node(self) -> int: ...


class Parallelism(Protocol):
    """What a strategy reads of a plan (`memtui.estimator.plan.Plan`): its GPUs per node,
    tensor-parallel degree and data-parallel width."""

    @property
    def hardware(self) -> _Node: ...
    @property
    def tp(self) -> int: ...
    @property
    def data_parallel(self) -> int: ...


@dataclass(frozen=True)
class StrategySpec:
    """One strategy's sharding and communication pattern."""

    strategy: Strategy
    framework: Framework
    """Whose implementation the name refers to: it decides the communication buffers."""
    shards_weights: bool
    """Parameters are sharded and all-gathered for each unit's forward and backward."""
    shards_gradients: bool
    """Gradients are reduce-scattered to their shard (else all-reduced whole)."""
    shards_optimizer: bool
    """Master weights and optimizer state are sharded."""
    hybrid: bool = False
    """Shards inside a node only and replicates across nodes (HSDP)."""
    next_stage: Strategy | None = None
    """The strategy that shards one more kind of state (the "shard further" lever)."""

    def shard_count(self, plan: Parallelism) -> int:
        """N: the GPUs one copy of the sharded state is spread over (inside a node for HSDP;
        tensor parallelism takes its share of the GPUs first)."""
        if self.hybrid:
            return max(1, plan.hardware.gpus_per_node // plan.tp)
        return plan.data_parallel

    def divisors(self, plan: Parallelism) -> tuple[int, int, int]:
        """What (weights, gradients, master + optimizer state) are divided by per GPU."""
        n = self.shard_count(plan)
        return (
            n if self.shards_weights else 1,
            n if self.shards_gradients else 1,
            n if self.shards_optimizer else 1,
        )


STRATEGIES: dict[Strategy, StrategySpec] = {
    s.strategy: s
    for s in (
        StrategySpec(Strategy.ddp, "ddp", False, False, False, next_stage=Strategy.zero1),
        StrategySpec(Strategy.zero1, "deepspeed", False, False, True, next_stage=Strategy.zero2),
        StrategySpec(Strategy.zero2, "deepspeed", False, True, True, next_stage=Strategy.zero3),
        StrategySpec(Strategy.zero3, "deepspeed", True, True, True),
        StrategySpec(Strategy.fsdp, "fsdp", True, True, True),
        StrategySpec(
            Strategy.fsdp_shard_grad_op, "fsdp", False, True, True, next_stage=Strategy.fsdp
        ),
        # HSDP's next stage, full sharding across every node, only exists with several nodes
        StrategySpec(
            Strategy.hsdp, "fsdp", True, True, True, hybrid=True, next_stage=Strategy.fsdp
        ),
    )
}
"""Every strategy's spec; `strategy_spec(strategy)` reads it."""


def strategy_spec(strategy: Strategy) -> StrategySpec:
    """The spec of `strategy`."""
    return STRATEGIES[strategy]


def offload_runs(offload: Offload, strategy: Strategy) -> bool:
    """Whether `strategy` can run with `offload`: parameter offload moves the parameter shards
    to CPU RAM (ZeRO-Infinity's offload_param, FSDP's CPUOffload), so it needs a strategy that
    shards the parameters."""
    return offload is not Offload.params or STRATEGIES[strategy].shards_weights
