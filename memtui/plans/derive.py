"""Merged facts -> the plan's fields: which stack runs the job, in which precision, on how
many GPUs, with every field's origin.

The decisions that need several facts at once live here, each following the software that
makes it:
- stack: DeepSpeed's engine is the deepspeed stack (ZeRO stage 0, or no bf16/fp16, is plain
  data parallel in fp32 or with BF16_Optimizer: the generic stack); FSDP version 2 is fsdp2,
  version 1 fsdp1 (NO_SHARD: the generic stack's DDP); the Trainer alone is the trainer stack.
- precision (memtui.estimator.choices.Precision): DeepSpeed's engine casts the model to bf16
  with fp32 master weights (bf16-mixed); accelerate's FSDP with mixed precision keeps fp32
  shards and computes in bf16 (bf16-mixed), without it the model's own dtype; the Trainer's
  DDP is the model's load dtype with or without autocast (bf16 weights: bf16; fp32 weights
  with --bf16: bf16-autocast). When the files leave the choice open (no load dtype given), a
  base plan's precision that fits what they say is kept; else the larger one is assumed.
- DeepSpeed's batch: train_batch_size = micro-batch x accumulation x data-parallel GPUs,
  completed and checked as runtime/config.py _set_batch_related_parameters does.
A fact memtui cannot size (`Unsupported`) is an error unless a flag replaces its field.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from memtui.estimator.choices import Precision, StackName, Strategy
from memtui.estimator.report import Provenance
from memtui.estimator.versions import PackageVersion
from memtui.plans.facts import JOB_FACTS, ConfigError, Fact, Facts, Unsupported

if TYPE_CHECKING:
    from memtui.estimator.plan import Plan

_HALF = {"bf16", "fp16", "fp8"}


@dataclass
class Derived:
    """The plan fields the files decide, with their origins and what had to be assumed."""

    changes: dict[str, Any] = field(default_factory=dict)
    provenance: list[Provenance] = field(default_factory=list)
    assumptions: list[str] = field(default_factory=list)
    gpus_unknown: str | None = None
    """Why the files give no GPU count per node (None: they give it); the command layer
    counts the node's GPUs, or says the count it assumed."""
    visible_devices: str | None = None
    """CUDA_VISIBLE_DEVICES of the launch that runs one process per visible GPU (None: the
    launch sets none; the command layer then reads memtui's own environment)."""
    ignored: list[str] = field(default_factory=list)
    """The files' settings memtui does not size (`Facts.ignored`)."""

    def set(self, name: str, value: Any, *origins: str) -> None:
        """Set plan field `name` (dotted for nested: hardware.nodes) from `origins`."""
        head, _, leaf = name.partition(".")
        if leaf:
            self.changes.setdefault(head, {})[leaf] = value
        else:
            self.changes[name] = value
        self.record(name, value, *origins)

    def record(self, name: str, value: Any, *origins: str) -> None:
        """Say where `name` came from (without changing it: the model is resolved apart)."""
        shown = getattr(value, "value", value)
        if isinstance(shown, tuple):
            shown = ",".join(shown)
        elif shown is None:
            shown = "auto"  # a DeepSpeed bucket left to the model's hidden size
        source = ", ".join(dict.fromkeys(o for o in origins if o))
        self.provenance = [p for p in self.provenance if p.field != name]
        self.provenance.append(Provenance(field=name, value=str(shown), source=source))


def derive(facts: Facts, base: Plan, given: set[str]) -> Derived:
    """The plan fields `facts` decide over `base`; `given`: fields the flags set (they win,
    so a value memtui cannot size in such a field is no error)."""
    out = Derived(assumptions=list(facts.assumptions), ignored=list(facts.ignored))
    values = _mixed_precision(facts.values, out)
    for key, fact in values.items():
        if isinstance(fact.value, Unsupported) and key not in given:
            raise ConfigError(
                f"{fact.origin}: {fact.value.reason}: memtui cannot size it (give --"
                f"{key.replace('_', '-')} to choose the nearest it can)"
            )
    plain = {
        k: f for k, f in values.items() if k not in JOB_FACTS and k != "hsdp_shard"
        and not isinstance(f.value, Unsupported)
    }  # fmt: skip
    stack, stack_origin = _stack(values, base, out)
    if stack is not None:
        out.set("stack", stack, *stack_origin)
    for key, fact in plain.items():
        if key.startswith("versions."):  # a pinned version, with the file and line pinning it
            out.set(key, PackageVersion(version=fact.value, source=fact.origin), fact.origin)
        elif key not in ("stack", "precision"):
            out.set(key, fact.value, fact.origin)
    _precision(values, base, stack or base.stack, out)
    _hardware(values, base, out)
    _deepspeed_batch(values, base, out)
    if "gpus_per_node" not in out.changes.get("hardware", {}):
        said = values.get("gpus_default")
        out.gpus_unknown = said.value if said else "no file gives the GPU count"
        shown = values.get("visible_devices")
        out.visible_devices = shown.value if shown else None
    if stack is StackName.deepspeed and "trainer" not in values:
        _unresolved_autos(values, base, out)
    return out


def _mixed_precision(values: dict[str, Fact], out: Derived) -> dict[str, Fact]:
    """The `amp` the job runs: the Trainer's (or DeepSpeed's) when stated, else accelerate's
    `mixed_precision`, else the Trainer's default. TrainingArguments sets the Accelerator's
    mixed precision from bf16 / fp16 over ACCELERATE_MIXED_PRECISION, which accelerate launch
    sets from its config (transformers 5.24 training_args.py:1614-1618, trainer.py:744)."""
    launcher = values.get("launcher_amp")
    if launcher is None:
        return values
    values = {k: f for k, f in values.items() if k != "launcher_amp"}
    stated = values.get("amp")
    if stated is None or stated.default:
        values["amp"] = launcher
    elif stated.value != launcher.value:
        out.assumptions.append(
            f"{stated.origin} ({stated.value}) wins over {launcher.origin} ({launcher.value}): "
            "the Trainer sets the Accelerator's mixed precision"
        )
    return values


def _unresolved_autos(values: dict[str, Fact], base: Plan, out: Derived) -> None:
    """DeepSpeed's "auto" batch sizes and precision without the Trainer's arguments to fill
    them (an `amp` fact is missing only when bf16 / fp16 are "auto": deepspeed_json)."""
    if "amp" not in values:
        out.assumptions.append(
            "bf16 / fp16 'enabled' are 'auto' and no Trainer arguments fill them: sized as "
            "bf16 (the Trainer without --bf16 or --fp16 trains in fp32: --precision fp32)"
        )
    for key, name, value in (
        ("micro_batch", "train_micro_batch_size_per_gpu", base.micro_batch),
        ("grad_accum", "gradient_accumulation_steps", base.grad_accum),
    ):
        if key not in values and key not in out.changes:
            out.assumptions.append(
                f"{name} is 'auto' or missing and no Trainer arguments fill it: kept {value} "
                "(give the Trainer's arguments too, or the flag)"
            )


def _origin(values: dict[str, Fact], *keys: str) -> list[str]:
    return [values[k].origin for k in keys if k in values]


def _stack(values: dict[str, Fact], base: Plan, out: Derived) -> tuple[StackName | None, list[str]]:
    if "stack" in values:
        return values["stack"].value, [values["stack"].origin]
    engine = values["engine"].value if "engine" in values else None
    strategy = values["strategy"].value if "strategy" in values else None
    amp = values["amp"].value if "amp" in values else None
    origins = _origin(values, "engine", "strategy")
    if engine == "deepspeed":
        if strategy is Strategy.ddp:
            out.assumptions.append(
                "ZeRO stage 0 is plain data parallelism: sized by the generic stack "
                "(DeepSpeed's BF16_Optimizer keeps an fp32 gradient buffer)"
            )
            if amp in _HALF:
                out.set("fp32_grad_buffer", True, *_origin(values, "strategy"))
            return StackName.generic, origins
        if amp == "no":
            out.assumptions.append(
                "DeepSpeed without bf16/fp16 trains in fp32: sized by the generic stack "
                "(memtui's deepspeed stack runs bf16)"
            )
            return StackName.generic, [*origins, *_origin(values, "amp")]
        return StackName.deepspeed, origins
    if engine == "fsdp":
        if strategy is Strategy.ddp:
            out.assumptions.append("FSDP NO_SHARD replicates like DDP: sized by the generic stack")
            return StackName.generic, origins
        version = values["fsdp_version"].value if "fsdp_version" in values else 2
        return (StackName.fsdp1 if version == 1 else StackName.fsdp2), [
            *origins,
            *_origin(values, "fsdp_version"),
        ]
    if engine == "ddp" or "trainer" in values:
        return StackName.trainer, [*origins, *_origin(values, "trainer")]
    return None, []


def _precision(values: dict[str, Fact], base: Plan, stack: StackName, out: Derived) -> None:
    """The precision the stack runs, from the mixed-precision and load-dtype facts."""
    if "precision" in values:
        out.set("precision", values["precision"].value, values["precision"].origin)
        return
    amp = values["amp"].value if "amp" in values else None
    load = values["load_dtype"].value if "load_dtype" in values else None
    origins = _origin(values, "amp", "load_dtype") or _origin(values, "engine")
    if amp == "fp16" or load == "fp16":
        out.assumptions.append("fp16 counted as bf16 (the same widths)")
    fits, fallback = _precisions(stack, amp, load)
    if not fits:
        return
    if base.precision in fits and base.stack is stack and len(fits) > 1:
        return  # the files leave it open and the base plan's choice fits them
    choice = base.precision if base.precision in fits and len(fits) > 1 else fallback
    if len(fits) > 1:
        out.assumptions.append(
            f"the files do not say which dtype the model is loaded in: {choice.value} assumed "
            f"(also possible: {', '.join(p.value for p in fits if p is not choice)}; "
            "--precision sets it)"
        )
    out.set("precision", choice, *origins)


def _precisions(
    stack: StackName, amp: str | None, load: str | None
) -> tuple[tuple[Precision, ...], Precision]:
    """(precisions the facts allow on `stack`, the one to assume first)."""
    p = Precision
    half_load = load in ("bf16", "fp16", "auto")
    if stack is StackName.deepspeed:
        return (p.bf16_mixed,), p.bf16_mixed
    if stack is StackName.generic:
        if amp is None:
            return (), p.bf16_mixed
        return ((p.bf16_mixed,), p.bf16_mixed) if amp in _HALF else ((p.fp32,), p.fp32)
    if stack in (StackName.fsdp1, StackName.fsdp2):
        if amp in _HALF:
            return (p.bf16_mixed,), p.bf16_mixed
        if amp == "no":
            if load is None:
                return (p.fp32, p.bf16), p.fp32
            return ((p.bf16,), p.bf16) if half_load else ((p.fp32,), p.fp32)
        return (p.bf16_mixed, p.bf16, p.fp32), p.bf16_mixed
    if stack is StackName.trainer:
        if half_load:
            return (p.bf16,), p.bf16
        if load == "fp32":
            if amp is None:
                return (p.bf16_autocast, p.fp32), p.bf16_autocast
            return ((p.bf16_autocast,), p.bf16_autocast) if amp in _HALF else ((p.fp32,), p.fp32)
        if amp in _HALF:  # fp32 weights under autocast hold more: assumed first
            return (p.bf16_autocast, p.bf16), p.bf16_autocast
        if amp == "no":
            return (p.fp32, p.bf16), p.fp32
        return (p.bf16_autocast, p.bf16, p.fp32), p.bf16_autocast
    return (), p.bf16_mixed  # torchtune and litgpt state their dtype themselves


def _hardware(values: dict[str, Fact], base: Plan, out: Derived) -> None:
    """GPUs per node and nodes: stated, or from a world size, or HSDP's shard groups."""
    hw = out.changes.get("hardware", {})
    tp = out.changes.get("tp", base.tp)
    if "hsdp_shard" in values:
        shard = values["hsdp_shard"].value * tp
        total = hw.get("gpus_per_node", base.hardware.gpus_per_node) * hw.get(
            "nodes", base.hardware.nodes
        )
        world = values["world_size"].value if "world_size" in values else total
        if world % shard:
            raise ConfigError(f"{values['hsdp_shard'].origin}: HSDP groups of {shard} GPUs do "
                              f"not divide {world} GPUs")  # fmt: skip
        if shard != hw.get("gpus_per_node", base.hardware.gpus_per_node):
            out.assumptions.append(
                f"HSDP shards inside groups of {shard} GPUs: sized as nodes of {shard} GPUs "
                "(memtui shards HSDP inside a node)"
            )
        out.set("hardware.gpus_per_node", shard, values["hsdp_shard"].origin)
        out.set("hardware.nodes", world // shard, values["hsdp_shard"].origin)
        return
    if "world_size" in values and "gpus_per_node" not in hw:
        world = values["world_size"].value
        if world != base.hardware.gpus:
            nodes = hw.get("nodes", 1)
            if world % nodes:
                raise ConfigError(f"{values['world_size'].origin}: {world} processes do not "
                                  f"split over {nodes} nodes")  # fmt: skip
            out.set("hardware.gpus_per_node", world // nodes, values["world_size"].origin)
            out.set("hardware.nodes", nodes, values["world_size"].origin)


def _deepspeed_batch(values: dict[str, Fact], base: Plan, out: Derived) -> None:
    """DeepSpeed's train_batch_size against micro-batch x accumulation x GPUs."""
    if "train_batch_size" not in values:
        return
    total = values["train_batch_size"]
    micro_fact, accum_fact = values.get("micro_batch"), values.get("grad_accum")
    hw = out.changes.get("hardware", {})
    tp = out.changes.get("tp", base.tp)
    known = "gpus_per_node" in hw or "nodes" in hw
    gpus = hw.get("gpus_per_node", base.hardware.gpus_per_node) * hw.get(
        "nodes", base.hardware.nodes
    )
    world = gpus // tp
    tbs = total.value
    if micro_fact is not None and accum_fact is not None:
        micro, accum = micro_fact.value, accum_fact.value
        if tbs % (micro * accum):
            raise ConfigError(
                f"{total.origin} {tbs} is not micro-batch {micro} x accumulation {accum} x "
                "GPUs: DeepSpeed refuses it"
            )
        needed = tbs // (micro * accum)
        if needed != world:
            if known:
                raise ConfigError(
                    f"{total.origin} {tbs} != micro-batch {micro} x accumulation {accum} x "
                    f"{world} GPUs: DeepSpeed refuses it"
                )
            out.set("hardware.gpus_per_node", needed * tp, total.origin)
            out.set("hardware.nodes", 1, total.origin)
            out.assumptions.append(
                f"{total.origin}: {needed} data-parallel GPUs on one node (the files give no "
                "GPU count)"
            )
        return
    if micro_fact is not None:  # runtime/config.py: accumulation from the global batch
        accum = tbs // micro_fact.value // world
        if accum < 1:
            raise ConfigError(f"{total.origin} {tbs} is smaller than micro-batch "
                              f"{micro_fact.value} x {world} GPUs")  # fmt: skip
        out.set("grad_accum", accum, total.origin, micro_fact.origin)
    elif accum_fact is not None:
        micro = tbs // world // accum_fact.value
        if micro < 1:
            raise ConfigError(f"{total.origin} {tbs} is smaller than accumulation "
                              f"{accum_fact.value} x {world} GPUs")  # fmt: skip
        out.set("micro_batch", micro, total.origin, accum_fact.origin)
    else:
        if tbs < world:
            raise ConfigError(f"{total.origin} {tbs} is smaller than {world} GPUs")
        out.set("micro_batch", tbs // world, total.origin)
        out.set("grad_accum", 1, total.origin)
