"""FSDP settings as accelerate reads them, shared by the accelerate, Trainer and axolotl codecs.

accelerate 1.15 (utils/dataclasses.py FullyShardedDataParallelPlugin.__post_init__,
utils/constants.py FSDP_SHARDING_STRATEGY): FSDP1 takes `sharding_strategy` (deprecated) or
`reshard_after_forward` as a name (FULL_SHARD, SHARD_GRAD_OP, NO_SHARD, HYBRID_SHARD,
HYBRID_SHARD_ZERO2, any case) or as the integer of torch's ShardingStrategy (1-5, the form
old accelerate configs wrote); FSDP2 takes `reshard_after_forward` as a boolean (True: full
shard, False: shard-grad-op). `offload_params` offloads parameters, gradients and the step
(CPUOffload / CPUOffloadPolicy), `activation_checkpointing` checkpoints every wrapped layer,
`activation_checkpointing_offload` (FSDP2) moves the saved inputs to CPU RAM.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from memtui.estimator.choices import Checkpointing, Offload, Strategy
from memtui.plans.facts import Facts, as_bool, as_int

#: torch.distributed.fsdp.ShardingStrategy by value and name (accelerate's list is 1-based)
SHARDING = ("FULL_SHARD", "SHARD_GRAD_OP", "NO_SHARD", "HYBRID_SHARD", "HYBRID_SHARD_ZERO2")
STRATEGY_OF = {
    "FULL_SHARD": Strategy.fsdp,
    "SHARD_GRAD_OP": Strategy.fsdp_shard_grad_op,
    "NO_SHARD": Strategy.ddp,  # replicated: DDP's layout
    "HYBRID_SHARD": Strategy.hsdp,
    # shards gradients and optimizer inside a node: the same as SHARD_GRAD_OP on one node
    "HYBRID_SHARD_ZERO2": Strategy.fsdp_shard_grad_op,
}


def sharding_name(facts: Facts, where: str, value: Any) -> str:
    """A sharding strategy as accelerate accepts it: a name in any case or its number."""
    text = str(value).strip().upper()
    if text.isdigit() and 1 <= int(text) <= len(SHARDING):
        return SHARDING[int(text) - 1]
    if text in SHARDING:
        return text
    raise facts.error(where, f"unknown sharding strategy {value!r} ({', '.join(SHARDING)} or 1-5)")


def state_strategy(facts: Facts, name: str, where: str) -> None:
    facts.state("strategy", STRATEGY_OF[name], where)
    if name == "HYBRID_SHARD_ZERO2":
        facts.assume(
            "HYBRID_SHARD_ZERO2 counted as SHARD_GRAD_OP: the same on one node; across nodes "
            "the state is sharded inside each node only"
        )


def read_fsdp(
    facts: Facts, settings: Mapping[str, Any], where: Callable[[str], str], version: int
) -> None:
    """State engine, version, strategy, offload and checkpointing from FSDP `settings` (keys
    without the `fsdp_` prefix; `where(key)` spells a key as the file does)."""
    facts.state("engine", "fsdp", where("version"))
    facts.state("fsdp_version", version, where("version"))
    reshard = settings.get("reshard_after_forward")
    legacy = settings.get("sharding_strategy")
    if version == 2:
        if reshard is not None:
            full = as_bool(facts, where("reshard_after_forward"), reshard)
            key = "reshard_after_forward"
            facts.state(
                "strategy", Strategy.fsdp if full else Strategy.fsdp_shard_grad_op, where(key)
            )
        elif legacy is not None:
            state_strategy(facts, sharding_name(facts, where("sharding_strategy"), legacy),
                           where("sharding_strategy"))  # fmt: skip
        else:
            facts.default("strategy", Strategy.fsdp, where("reshard_after_forward"))
    else:
        key = "reshard_after_forward" if reshard is not None else "sharding_strategy"
        value = reshard if reshard is not None else legacy
        if value is None:
            facts.default("strategy", Strategy.fsdp, where("sharding_strategy"))
        else:
            state_strategy(facts, sharding_name(facts, where(key), value), where(key))
    if "offload_params" in settings:
        if as_bool(facts, where("offload_params"), settings["offload_params"]):
            facts.state("offload", Offload.params, where("offload_params"))
        else:
            facts.default("offload", Offload.none, where("offload_params"))
    if "activation_checkpointing" in settings and as_bool(
        facts, where("activation_checkpointing"), settings["activation_checkpointing"]
    ):
        facts.state("checkpointing", Checkpointing.full, where("activation_checkpointing"))
    key = "activation_checkpointing_offload"
    if key in settings and as_bool(facts, where(key), settings[key]):
        facts.state("activation_offload", True, where(key))


def fsdp_version(facts: Facts, where: str, value: Any) -> int:
    version = as_int(facts, where, value)
    if version not in (1, 2):
        raise facts.error(where, f"FSDP version 1 or 2, not {value!r}")
    return version


def unprefixed(settings: Mapping[str, Any]) -> dict[str, Any]:
    """FSDP keys without their `fsdp_` prefix, as accelerate and axolotl normalise them."""
    return {str(k).removeprefix("fsdp_"): v for k, v in settings.items()}
