"""accelerate's config file (`accelerate config`, `accelerate launch --config_file`) <-> facts.

Keys as accelerate 1.15 reads them (commands/config/config_args.py ClusterConfig and
BaseConfig.process_config; commands/launch.py _validate_launch_command copies every
`fsdp_config` / `deepspeed_config` entry to the launch arguments):
- `distributed_type` NO, MULTI_GPU (DDP), FSDP, DEEPSPEED; `mixed_precision` no, fp16, bf16,
  fp8 (the deprecated top-level `fp16: true` is fp16); `num_processes` (every GPU of every
  machine) and `num_machines`;
- `fsdp_config`: `fsdp_version` (1 unless set: FullyShardedDataParallelPlugin reads
  FSDP_VERSION with default "1"), `fsdp_sharding_strategy` (deprecated; a name or 1-5),
  `fsdp_reshard_after_forward`, `fsdp_offload_params`, `fsdp_activation_checkpointing`,
  `fsdp_activation_checkpointing_offload` (memtui.plans.fsdp);
- `deepspeed_config`: `deepspeed_config_file` (then the others are ignored, as accelerate
  warns), else `zero_stage` (DeepSpeedPlugin default 2), `offload_optimizer_device`,
  `offload_param_device` (none, cpu, nvme), `gradient_accumulation_steps`;
- `parallelism_config`: `parallelism_config_dp_replicate_size` and `_dp_shard_size` (HSDP
  under FSDP2: full shard inside groups of dp_shard GPUs, replicas across them),
  `parallelism_config_tp_size` (tensor parallel), `parallelism_config_cp_size`.
The same settings reach a running job's workers as environment variables (utils/launch.py
prepare_multi_gpu_env: ACCELERATE_MIXED_PRECISION, ACCELERATE_USE_FSDP, FSDP_*, ACCELERATE_
USE_DEEPSPEED, ACCELERATE_DEEPSPEED_*): `environment_config` turns them back into this file's
keys for attach.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from memtui.estimator.choices import Checkpointing, Offload, Precision, StackName, Strategy
from memtui.estimator.strategies import strategy_spec
from memtui.plans.facts import ConfigError, Document, Facts, as_bool, as_int, mapping
from memtui.plans.fsdp import fsdp_version, read_fsdp, unprefixed

if TYPE_CHECKING:
    from memtui.estimator.plan import Plan

_ENGINES = {"NO": "ddp", "MULTI_GPU": "ddp", "FSDP": "fsdp", "DEEPSPEED": "deepspeed"}
_AMP = ("no", "fp16", "bf16", "fp8")
_OFFLOAD_DEVICES = ("none", "cpu", "nvme")


def detect(data: dict[str, Any]) -> bool:
    return "distributed_type" in data or "compute_environment" in data


def read(doc: Document) -> Facts:
    facts = doc.facts()
    read_config(facts, doc.data, doc)
    return facts


def read_config(facts: Facts, data: Mapping[str, Any], doc: Document) -> None:
    """The facts of an accelerate config (`data` as the file or the environment has it)."""
    kind = data.get("distributed_type", "")
    # YAML 1.1 reads an unquoted `distributed_type: NO` as false
    kind = "NO" if kind is False else str(kind).upper().removeprefix("DISTRIBUTEDTYPE.")
    if not kind:
        raise facts.error("distributed_type", "missing (accelerate requires it)")
    engine = _ENGINES.get(kind)
    if engine is None:
        raise facts.error(
            "distributed_type", f"{kind}: memtui sizes NO, MULTI_GPU, FSDP and DEEPSPEED"
        )
    if engine != "deepspeed":
        facts.state("engine", engine, "distributed_type")
    if engine == "ddp":
        facts.state("strategy", Strategy.ddp, "distributed_type")
    amp = data.get("mixed_precision")
    if amp is None and data.get("fp16") is not None:  # process_config: the old `fp16` key
        amp = "fp16" if as_bool(facts, "fp16", data["fp16"]) else None
        key = "fp16"
    else:
        key = "mixed_precision"
    if amp is not None:
        text = str(amp).lower()
        if text not in _AMP:
            raise facts.error(key, f"no, fp16, bf16 or fp8, not {amp!r}")
        launcher_amp(facts, text, key)
    if kind == "NO":
        # launch_command runs simple_launcher for NO: one process whatever num_processes says
        # (accelerate 1.15 commands/launch.py launch_command, _validate_launch_command)
        facts.state("hardware.gpus_per_node", 1, "distributed_type NO (one process)")
        facts.state("hardware.nodes", 1, "distributed_type NO (one process)")
        if str(data.get("num_processes", 1)) not in ("1", "-1"):
            facts.assume(f"distributed_type NO runs one process: num_processes "
                         f"{data['num_processes']} is not used")  # fmt: skip
    else:
        machines(facts, data, lambda key: key)
    if engine == "fsdp":
        settings = unprefixed(mapping(data.get("fsdp_config") or {}, facts.source, "fsdp_config"))
        version = fsdp_version(facts, "fsdp_config.fsdp_version", settings.get("version", 1))

        def where(key: str) -> str:
            return f"fsdp_config.fsdp_{key}"

        read_fsdp(facts, settings, where, version)
    if engine == "deepspeed":
        _deepspeed(facts, mapping(data.get("deepspeed_config") or {}, facts.source,
                                  "deepspeed_config"), doc)  # fmt: skip
    _parallelism(facts, mapping(data.get("parallelism_config") or {}, facts.source,
                                "parallelism_config"))  # fmt: skip


def launcher_amp(facts: Facts, text: str, where: str) -> None:
    """accelerate's `mixed_precision`: the Trainer's own `bf16` / `fp16`, when given, win
    (transformers 5.24 training_args.py:1614-1618 sets the Accelerator's mixed_precision from
    them over ACCELERATE_MIXED_PRECISION; trainer.py:744 passes it on): `derive` decides."""
    if text not in _AMP:
        raise facts.error(where, f"no, fp16, bf16 or fp8, not {text!r}")
    facts.state("launcher_amp", text, where)
    if text == "fp8":
        facts.assume("fp8 mixed precision counted as bf16 (memtui has no fp8 terms)")


def machines(facts: Facts, data: Mapping[str, Any], where: Callable[[str], str]) -> None:
    """`num_processes` (every GPU of every machine) and `num_machines`."""
    count = as_int(facts, where("num_machines"), data.get("num_machines", 1))
    processes = data.get("num_processes")
    if processes is None or str(processes) == "-1":
        if count > 1:
            facts.state("hardware.nodes", count, where("num_machines"))
        return  # accelerate launch then needs --num_processes (its own error)
    total = as_int(facts, where("num_processes"), processes)
    if total % count:
        raise facts.error(
            where("num_processes"), f"{total} processes do not split evenly over {count} machines"
        )
    facts.state("hardware.gpus_per_node", total // count, where("num_processes"))
    facts.state("hardware.nodes", count, where("num_machines"))


def _deepspeed(facts: Facts, ds: Mapping[str, Any], doc: Document) -> None:
    facts.state("engine", "deepspeed", "distributed_type")
    if ds.get("deepspeed_config_file") not in (None, "", "none"):
        facts.refer(doc.locate(str(ds["deepspeed_config_file"])),
                    "deepspeed_config.deepspeed_config_file")  # fmt: skip
        return
    stage = ds.get("zero_stage", 2)
    if str(stage) not in {"0", "1", "2", "3"}:
        raise facts.error("deepspeed_config.zero_stage", f"unknown ZeRO stage {stage!r}")
    from memtui.plans.deepspeed_json import STAGES

    facts.state("strategy", STAGES[int(stage)], "deepspeed_config.zero_stage")
    devices = {}
    for key in ("offload_optimizer_device", "offload_param_device"):
        device = str(ds.get(key, "none")).lower()
        if device not in _OFFLOAD_DEVICES:
            raise facts.error(f"deepspeed_config.{key}", f"none, cpu or nvme, not {device!r}")
        devices[key] = device != "none"
    if devices["offload_param_device"] and devices["offload_optimizer_device"]:
        facts.state("offload", Offload.params, "deepspeed_config.offload_param_device")
    elif devices["offload_optimizer_device"]:
        facts.state("offload", Offload.optimizer, "deepspeed_config.offload_optimizer_device")
    else:
        facts.default("offload", Offload.none, "deepspeed_config.offload_optimizer_device")
    if "gradient_accumulation_steps" in ds:
        where = "deepspeed_config.gradient_accumulation_steps"
        facts.state("grad_accum", as_int(facts, where, ds["gradient_accumulation_steps"]), where)


def _parallelism(facts: Facts, pc: Mapping[str, Any]) -> None:
    def size(name: str) -> int:
        key = f"parallelism_config_{name}_size"
        return as_int(facts, f"parallelism_config.{key}", pc.get(key, 1))

    replicate, shard, tp, cp = size("dp_replicate"), size("dp_shard"), size("tp"), size("cp")
    if tp > 1:
        facts.state("tp", tp, "parallelism_config.parallelism_config_tp_size")
    if cp > 1:
        facts.assume(f"context parallel {cp} not modelled: activations counted whole (over)")
    sp = size("sp")  # DeepSpeed's Ulysses sequence parallelism (ALST), accelerate 1.15
    if sp > 1:
        facts.assume(f"parallelism_config_sp_size {sp}: sequence parallelism not modelled, "
                     "activations counted whole (over)")  # fmt: skip
    if replicate > 1 and shard > 1:
        where = "parallelism_config.parallelism_config_dp_shard_size"
        facts.state("strategy", Strategy.hsdp, where)
        facts.state("hsdp_shard", shard, where)
        facts.state("world_size", replicate * shard * tp * cp, where)


def environment_config(env: Mapping[str, str]) -> dict[str, Any] | None:
    """The accelerate config a worker's environment carries (utils/launch.py sets it), or
    None when accelerate did not launch it."""
    amp = env.get("ACCELERATE_MIXED_PRECISION")
    if amp is None and "ACCELERATE_USE_FSDP" not in env and "ACCELERATE_USE_DEEPSPEED" not in env:
        return None
    config: dict[str, Any] = {"distributed_type": "MULTI_GPU", "mixed_precision": amp or "no"}
    if env.get("ACCELERATE_USE_FSDP", "").lower() == "true":
        config["distributed_type"] = "FSDP"
        config["fsdp_config"] = {
            f"fsdp_{k.removeprefix('FSDP_').lower()}": v
            for k, v in env.items()
            if k.startswith("FSDP_")
        }
    elif env.get("ACCELERATE_USE_DEEPSPEED", "").lower() == "true":
        config["distributed_type"] = "DEEPSPEED"
        prefix = "ACCELERATE_DEEPSPEED_"
        ds = {k.removeprefix(prefix).lower(): v for k, v in env.items() if k.startswith(prefix)}
        if "ACCELERATE_GRADIENT_ACCUMULATION_STEPS" in env:
            ds["gradient_accumulation_steps"] = env["ACCELERATE_GRADIENT_ACCUMULATION_STEPS"]
        config["deepspeed_config"] = ds
    prefix = "PARALLELISM_CONFIG_"
    sizes = {k.lower(): v for k, v in env.items() if k.startswith(prefix) and k.endswith("_SIZE")}
    if sizes:
        config["parallelism_config"] = sizes
    return config


# -- export -----------------------------------------------------------------------------------


def sharding_of(plan: Plan, version: int) -> bool | str:
    """FSDP's resharding for the plan's strategy: a bool (FSDP2) or a strategy name (FSDP1)."""
    if version == 2:
        return plan.strategy is not Strategy.fsdp_shard_grad_op
    return {
        Strategy.fsdp: "FULL_SHARD",
        Strategy.fsdp_shard_grad_op: "SHARD_GRAD_OP",
        Strategy.hsdp: "HYBRID_SHARD",
    }[plan.strategy]


def export(plan: Plan) -> str:
    """The plan as an accelerate config YAML (`accelerate launch --config_file FILE`)."""
    import yaml

    hw = plan.hardware
    kinds = {
        StackName.trainer: "MULTI_GPU" if hw.gpus > 1 else "NO",
        StackName.fsdp1: "FSDP",
        StackName.fsdp2: "FSDP",
        StackName.deepspeed: "DEEPSPEED",
    }
    if plan.stack not in kinds:
        raise ConfigError(
            f"--format accelerate writes accelerate configs: the plan's stack is "
            f"{plan.stack.value} (use trainer, fsdp2, fsdp1 or deepspeed)"
        )
    autocast = (Precision.bf16_mixed, Precision.bf16_autocast)
    config: dict[str, Any] = {
        "compute_environment": "LOCAL_MACHINE",
        "debug": False,
        "distributed_type": kinds[plan.stack],
        "downcast_bf16": "no",
        "machine_rank": 0,
        "main_training_function": "main",
        "mixed_precision": "bf16" if plan.precision in autocast else "no",
        "num_machines": hw.nodes,
        "num_processes": hw.gpus,
        "rdzv_backend": "static",
        "same_network": True,
        "use_cpu": False,
    }
    if plan.stack in (StackName.fsdp1, StackName.fsdp2):
        version = 1 if plan.stack is StackName.fsdp1 else 2
        fsdp: dict[str, Any] = {
            "fsdp_version": version,
            "fsdp_auto_wrap_policy": "TRANSFORMER_BASED_WRAP",
            "fsdp_reshard_after_forward": sharding_of(plan, version),
            "fsdp_offload_params": plan.offload is Offload.params,
            "fsdp_activation_checkpointing": plan.checkpointing is Checkpointing.full,
            "fsdp_state_dict_type": "SHARDED_STATE_DICT",
            "fsdp_cpu_ram_efficient_loading": True,
        }
        if plan.activation_offload and version == 2:
            fsdp["fsdp_activation_checkpointing_offload"] = True
        if version == 1:
            fsdp.update(fsdp_sync_module_states=True, fsdp_use_orig_params=True)
        config["fsdp_config"] = fsdp
        if plan.strategy is Strategy.hsdp and version == 2:
            config["parallelism_config"] = {
                "parallelism_config_dp_replicate_size": hw.gpus // (hw.gpus_per_node),
                "parallelism_config_dp_shard_size": strategy_spec(plan.strategy).shard_count(plan),
            }
    if plan.tp > 1:
        config.setdefault("parallelism_config", {})["parallelism_config_tp_size"] = plan.tp
    if plan.stack is StackName.deepspeed:
        offload = {
            Offload.none: ("none", "none"),
            Offload.optimizer: ("cpu", "none"),
            Offload.params: ("cpu", "cpu"),
        }[plan.offload]
        from memtui.plans.deepspeed_json import STAGES

        config["deepspeed_config"] = {
            "zero_stage": {s: n for n, s in STAGES.items()}[plan.strategy],
            "offload_optimizer_device": offload[0],
            "offload_param_device": offload[1],
            "gradient_accumulation_steps": plan.grad_accum,
            "zero3_init_flag": plan.strategy is Strategy.zero3,
        }
    return "# accelerate config written by memtui (accelerate launch --config_file FILE)\n" + (
        yaml.safe_dump(config, sort_keys=True)
    )
