"""DeepSpeed's JSON config <-> plan facts (https://www.deepspeed.ai/docs/config-json/).

Keys read, as DeepSpeed 0.19 parses them (deepspeed/runtime/config.py, zero/config.py,
precision_config.py):
- `zero_optimization.stage` 0-3 (the deprecated `"zero_optimization": true` is stage 1,
  zero/config.py read_zero_config_deprecated); `offload_optimizer.device` and
  `offload_param.device` (cpu, nvme, none), with the deprecated booleans `cpu_offload` and
  `cpu_offload_param`; `reduce_bucket_size`, `stage3_prefetch_bucket_size`,
  `stage3_max_live_parameters`, `stage3_param_persistence_threshold` (each also by its
  field name without `stage3_`, as DeepSpeedZeroConfig accepts), `overlap_comm`,
  `sub_group_size`;
- `bf16.enabled` (or the old `bfloat16`), `fp16.enabled` (both on is DeepSpeed's own error);
  `data_types.grad_accum_dtype`;
- `train_micro_batch_size_per_gpu`, `gradient_accumulation_steps`, `train_batch_size`
  (checked and completed as runtime/config.py _set_batch_related_parameters does, once the
  GPU count is known: `memtui.plans.derive`);
- `optimizer.type` (DEEPSPEED_OPTIMIZERS; without it the Trainer's `optim` decides).
"auto" is Transformers' placeholder (integrations/deepspeed.py HfTrainerDeepSpeedConfig):
batch sizes and bf16/fp16 come from the Trainer's arguments, and the bucket sizes from the
model's hidden size, which a plan keeps as None ("auto") for the deepspeed stack to resolve.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from memtui.estimator.choices import Offload, Optimizer, StackName, Strategy
from memtui.plans.facts import (
    Document,
    Facts,
    Unsupported,
    as_bool,
    as_int,
    dig,
    is_auto,
)

if TYPE_CHECKING:
    from memtui.estimator.plan import Plan

STAGES = {0: Strategy.ddp, 1: Strategy.zero1, 2: Strategy.zero2, 3: Strategy.zero3}

# DEEPSPEED_OPTIMIZERS (runtime/config.py) and the 1-bit family (runtime/fp16/onebit/):
# memtui's optimizer with at least as much state, never less (the verdict must not be
# optimistic); the note says what was counted.
OPTIMIZERS: dict[str, tuple[Optimizer, str]] = {
    "adam": (Optimizer.adamw, ""),
    "adamw": (Optimizer.adamw, ""),
    "lamb": (Optimizer.adamw, "Lamb keeps Adam's two fp32 moments"),
    "onebitadam": (Optimizer.adamw, "1-bit Adam keeps Adam's moments"),
    "zerooneadam": (Optimizer.adamw, "0/1 Adam keeps Adam's moments"),
    "onebitlamb": (Optimizer.adamw, "1-bit Lamb keeps Adam's moments"),
    "muadam": (Optimizer.adamw, ""),
    "muadamw": (Optimizer.adamw, ""),
    "lion": (Optimizer.lion, ""),
    "adagrad": (Optimizer.sgd_momentum, "Adagrad keeps one fp32 sum per parameter"),
    "musgd": (Optimizer.sgd_momentum, "MuSGD counted with a momentum buffer"),
    "muon": (Optimizer.adamw, "Muon (one momentum, AdamW for the rest) counted as AdamW"),
}
_PRECISION_KEYS = (("bf16", "bf16"), ("bfloat16", "bf16"), ("fp16", "fp16"))
_BUCKETS = {
    # plan field: (key names DeepSpeed accepts, "auto" allowed, minimum memtui takes)
    "reduce_bucket_size": (("reduce_bucket_size",), True, 1),
    "prefetch_bucket_size": (("stage3_prefetch_bucket_size", "prefetch_bucket_size"), True, 0),
    "persistence_threshold": (
        ("stage3_param_persistence_threshold", "param_persistence_threshold"),
        True,
        0,
    ),
    "max_live_parameters": (("stage3_max_live_parameters", "max_live_parameters"), False, 1),
    "sub_group_size": (("sub_group_size",), False, 1),
}


def detect(data: dict[str, Any]) -> bool:
    """A DeepSpeed config: its own top-level keys."""
    keys = {"zero_optimization", "train_micro_batch_size_per_gpu", "train_batch_size"}
    # bf16 / fp16 are objects here ({"enabled": ...}), booleans in the Trainer's arguments
    blocks = any(isinstance(data.get(k), dict) for k in ("bf16", "bfloat16", "fp16"))
    return bool(keys & set(data)) or blocks


def read(doc: Document) -> Facts:
    facts = doc.facts()
    data = doc.data
    facts.state("engine", "deepspeed", "zero_optimization")
    _zero(facts, data.get("zero_optimization"))
    _precision(facts, data)
    for key, field in (
        ("train_micro_batch_size_per_gpu", "micro_batch"),
        ("gradient_accumulation_steps", "grad_accum"),
        ("train_batch_size", "train_batch_size"),
    ):
        value = data.get(key)
        if value is not None and not is_auto(value):
            facts.state(field, as_int(facts, key, value), key)
    grad_dtype = dig(data, "data_types.grad_accum_dtype")
    if grad_dtype is not None:
        if str(grad_dtype).lower() not in ("fp32", "bf16", "fp16"):
            raise facts.error(
                "data_types.grad_accum_dtype", f"fp32, bf16 or fp16, not {grad_dtype!r}"
            )
        facts.state("deepspeed.grad_accum_fp32", str(grad_dtype).lower() == "fp32", "data_types")
    kind = dig(data, "optimizer.type")
    if kind is not None:
        found = OPTIMIZERS.get(str(kind).lower().replace("_", ""))
        if found is None:
            facts.state(
                "optimizer",
                Unsupported(f"optimizer type {kind!r} is not one DeepSpeed 0.19 builds"),
                "optimizer.type",
                rank=1,
            )
        else:
            facts.state("optimizer", found[0], "optimizer.type", rank=1)
            if found[1]:
                facts.assume(found[1])
    return facts


def named(facts: Facts, value: Any, where: str, doc: Document) -> None:
    """A DeepSpeed config a Trainer-style config names (TrainingArguments.deepspeed,
    axolotl's `deepspeed`): inline as a mapping, or a path read with the other files. A bare
    flag (DeepSpeed's own scripts take `--deepspeed --deepspeed_config FILE`) names none."""
    if isinstance(value, dict):
        found = read(Document(doc.path, f"{facts.source}:{where}", value, doc.cwd))
        facts.values.update(found.values)
        facts.assumptions += found.assumptions
    elif isinstance(value, str) and value.strip().lower() not in ("true", "false", ""):
        facts.refer(doc.locate(value), where)


def _zero(facts: Facts, zero: Any) -> None:
    if isinstance(zero, bool):  # the deprecated boolean form: true is stage 1
        facts.state("strategy", Strategy.zero1 if zero else Strategy.ddp, "zero_optimization")
        return
    if zero is None:
        facts.default("strategy", Strategy.ddp, "zero_optimization.stage")
        return
    if not isinstance(zero, dict):
        raise facts.error("zero_optimization", f"expected an object, got {zero!r}")
    stage = zero.get("stage", 0)
    if isinstance(stage, bool) or str(stage).strip() not in {"0", "1", "2", "3"}:
        raise facts.error("zero_optimization.stage", f"unknown ZeRO stage {stage!r} (0, 1, 2 or 3)")
    strategy = STAGES[int(stage)]
    facts.state("strategy", strategy, "zero_optimization.stage")
    optimizer = _device(facts, zero, "offload_optimizer", "cpu_offload")
    params = _device(facts, zero, "offload_param", "cpu_offload_param")
    if params and strategy is not Strategy.zero3:
        facts.assume(f"offload_param is used by ZeRO stage 3 only: ignored at stage {stage}")
        params = None
    if params and not optimizer:
        facts.assume(
            "offload_param without offload_optimizer: memtui offloads parameters only with "
            "the optimizer state, so none is counted (over-predicts)"
        )
    offload = Offload.params if params and optimizer else Offload.optimizer if optimizer else None
    where = params or optimizer
    if offload is not None and where is not None:
        facts.state("offload", offload, where)
    elif "offload_optimizer" in zero or "offload_param" in zero or "cpu_offload" in zero:
        facts.state("offload", Offload.none, "zero_optimization.offload_optimizer")
    else:
        facts.default("offload", Offload.none, "zero_optimization.offload_optimizer")
    for field, (keys, auto_ok, minimum) in _BUCKETS.items():
        for key in keys:
            if key in zero:
                _bucket(facts, f"zero_optimization.{key}", zero[key], field, auto_ok, minimum)
                break
    if "overlap_comm" in zero:
        overlap = as_bool(facts, "zero_optimization.overlap_comm", zero["overlap_comm"])
        facts.state("deepspeed.overlap_comm", overlap, "zero_optimization.overlap_comm")


def _device(facts: Facts, zero: dict[str, Any], key: str, deprecated: str) -> str | None:
    """Where `key` offloads to: its key path when off the GPU, else None."""
    block = zero.get(key)
    if block is None and deprecated in zero:  # zero/config.py: cpu_offload -> device cpu
        on = as_bool(facts, f"zero_optimization.{deprecated}", zero[deprecated])
        return f"zero_optimization.{deprecated}" if on else None
    if block is None:
        return None
    if not isinstance(block, dict):
        raise facts.error(f"zero_optimization.{key}", f"expected an object, got {block!r}")
    device = str(block.get("device", "none")).lower()
    if device not in ("cpu", "nvme", "none"):
        raise facts.error(f"zero_optimization.{key}.device", f"cpu, nvme or none, not {device!r}")
    if device == "nvme":
        facts.assume(f"{key} to nvme: off the GPU like cpu (memtui does not size NVMe)")
    return None if device == "none" else f"zero_optimization.{key}.device"


def _bucket(facts: Facts, where: str, value: Any, field: str, auto_ok: bool, low: int) -> None:
    if is_auto(value) and auto_ok:
        facts.state(f"deepspeed.{field}", None, where)  # None is "auto" in the plan
        return
    number = as_int(facts, where, value, minimum=0)
    if number < low:
        facts.assume(f"{where} {number}: counted as {low}, the smallest memtui sizes")
        number = low
    facts.state(f"deepspeed.{field}", number, where)


def _precision(facts: Facts, data: dict[str, Any]) -> None:
    enabled: dict[str, str] = {}
    for key, amp in _PRECISION_KEYS:
        block = data.get(key)
        if block is None or amp in enabled or (key == "bfloat16" and "bf16" in data):
            continue
        if not isinstance(block, dict):
            raise facts.error(key, f"expected an object with 'enabled', got {block!r}")
        flag = block.get("enabled", False)
        if is_auto(flag):
            continue  # the Trainer's --bf16 / --fp16 decide
        if as_bool(facts, f"{key}.enabled", flag):
            enabled[amp] = f"{key}.enabled"
    if len(enabled) == 2:  # runtime/config.py asserts the same
        raise facts.error("bf16.enabled", "bf16 and fp16 cannot both be enabled")
    for amp, where in enabled.items():
        facts.state("amp", amp, where)
    if not enabled and not any(is_auto(dig(data, f"{k}.enabled")) for k, _ in _PRECISION_KEYS):
        facts.default("amp", "no", "bf16.enabled")  # DeepSpeed's default: fp32


def export(plan: Plan) -> str:
    """The plan as a DeepSpeed config for the deepspeed stack (Transformers' "auto" where the
    plan leaves a bucket to the model's hidden size)."""
    from memtui.plans.facts import ConfigError

    if plan.stack is not StackName.deepspeed:
        raise ConfigError(
            f"--format deepspeed writes ZeRO configs: the plan's stack is {plan.stack.value} "
            "(switch to --stack deepspeed)"
        )
    stage = {s: n for n, s in STAGES.items()}[plan.strategy]
    ds = plan.deepspeed
    zero: dict[str, Any] = {"stage": stage}
    if plan.offload is not Offload.none:
        zero["offload_optimizer"] = {"device": "cpu", "pin_memory": True}
    if plan.offload is Offload.params:
        zero["offload_param"] = {"device": "cpu", "pin_memory": True}
    if ds.overlap_comm is not None:
        zero["overlap_comm"] = ds.overlap_comm
    zero["reduce_bucket_size"] = _auto(ds.reduce_bucket_size)
    if plan.strategy is Strategy.zero3:
        zero["stage3_prefetch_bucket_size"] = _auto(ds.prefetch_bucket_size)
        zero["stage3_param_persistence_threshold"] = _auto(ds.persistence_threshold)
        zero["stage3_max_live_parameters"] = ds.max_live_parameters
        zero["sub_group_size"] = ds.sub_group_size
    config: dict[str, Any] = {
        "train_micro_batch_size_per_gpu": plan.micro_batch,
        "gradient_accumulation_steps": plan.grad_accum,
        "train_batch_size": plan.micro_batch * plan.grad_accum * plan.data_parallel,
        "bf16": {"enabled": True},  # the deepspeed stack runs bf16 (its precisions)
        "zero_optimization": zero,
    }
    if ds.grad_accum_fp32:
        config["data_types"] = {"grad_accum_dtype": "fp32"}
    if plan.optimizer is Optimizer.lion:
        config["optimizer"] = {"type": "Lion", "params": {"lr": "auto"}}
    elif plan.optimizer is not Optimizer.adamw:
        # the Trainer's `optim` builds it (DeepSpeed has no 8-bit or paged type): ZeRO accepts
        # an optimizer outside ZERO_SUPPORTED_OPTIMIZERS only when told (runtime/engine.py
        # _configure_zero_optimizer), and its own CPU Adam only with offload unless told
        config["zero_allow_untested_optimizer"] = True
        if plan.offload is not Offload.none:
            config["zero_force_ds_cpu_optimizer"] = False
    return json.dumps(config, indent=2) + "\n"


def _auto(value: int | None) -> int | str:
    return "auto" if value is None else value
