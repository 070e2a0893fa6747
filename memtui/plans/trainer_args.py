"""Transformers' TrainingArguments <-> plan facts: a saved JSON/YAML of them, or a command line.

TrainingArguments (transformers 5.24 training_args.py; defaults in brackets):
`per_device_train_batch_size` [8], `gradient_accumulation_steps` [1], `bf16` / `fp16`
[False], `activation_checkpointing` (and its deprecated alias `gradient_checkpointing`)
[off] with `activation_checkpointing_kwargs` ({"offload": true}: saved inputs on the CPU;
{"every_n_layers": n}; {"use_reentrant": b}: the checkpointing variant), `optim`
[adamw_torch_fused on torch >= 2.8] with `optim_args`,
`use_liger_kernel` (Liger's fused linear cross-entropy), `deepspeed` (a JSON path or the
config inline), `fsdp` (True, or the deprecated "full_shard auto_wrap offload"-style string)
with `fsdp_config` (a dict or a JSON path; `version` [2], `reshard_after_forward`,
`cpu_offload`, `activation_checkpointing`: _process_fsdp_args, _apply_legacy_fsdp_to_config).

A training script's own arguments are read too, by the names of Transformers' examples
(run_clm.py: `model_name_or_path`, `torch_dtype`, `block_size`) and of TRL's parsers (trl 1.16
ModelConfig: `dtype`, `attn_implementation`, `use_peft`, `lora_r`, `lora_dropout`,
`lora_target_modules`, `lora_modules_to_save`, `load_in_4bit`, `use_bnb_nested_quant`;
SFTConfig: `max_length`, the older `max_seq_length`). A command line is read the way
HfArgumentParser reads one: `--key value`, `--key=value`, a bare `--flag` is True, and
`--flag False` is False; dashes and underscores are the same.

Every `optim` name of OptimizerNames maps to memtui's optimizer that holds at least as much
state (the verdict must never be optimistic); where that is not exact, an assumption says so.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from memtui.estimator.choices import (
    Attention,
    Checkpointing,
    CheckpointVariant,
    LossKind,
    Method,
    Objective,
    Offload,
    Optimizer,
    OptimizerKernel,
    Precision,
    StackName,
    VllmMode,
)
from memtui.estimator.stacks.hf_model import reentrant
from memtui.plans.facts import (
    Document,
    Facts,
    Unsupported,
    as_bool,
    as_float,
    as_int,
    as_names,
    mapping,
    parse_json,
    read_text,
)
from memtui.plans.fsdp import fsdp_version, read_fsdp, sharding_name, unprefixed

if TYPE_CHECKING:
    from memtui.estimator.plan import Plan

Opt = Optimizer
_3 = "keeps three moments per parameter; memtui sizes at most two (adamw)"
OPTIM: dict[str, tuple[Optimizer | Unsupported, str]] = {
    # transformers training_args.py OptimizerNames (5.24), and the names older releases took
    "adamw_torch": (Opt.adamw, ""),
    "adamw_torch_fused": (Opt.adamw, ""),
    "adamw_torch_xla": (Opt.adamw, ""),
    "adamw_torch_npu_fused": (Opt.adamw, ""),
    "adamw_apex_fused": (Opt.adamw, ""),
    "adamw_hf": (Opt.adamw, ""),
    "adamw_anyprecision": (Opt.adamw, "AnyPrecisionAdamW counted with fp32 moments"),
    "adamw_torch_4bit": (Opt.adamw8bit, "torchao's 4-bit AdamW counted as 8-bit (over)"),
    "adamw_torch_8bit": (Opt.adamw8bit, "torchao's AdamW8bit: block-wise 8-bit state"),
    "adafactor": (Opt.adafactor, ""),
    "ademamix": (Unsupported(f"ademamix {_3}"), ""),
    "ademamix_8bit": (Opt.adamw, "8-bit AdEMAMix (three 1-byte moments) counted as AdamW"),
    "sgd": (Opt.sgd, ""),
    "adagrad": (Opt.sgd_momentum, "Adagrad keeps one fp32 sum per parameter"),
    "adamw_bnb_8bit": (Opt.adamw8bit, ""),
    "adamw_8bit": (Opt.adamw8bit, ""),
    "lion_8bit": (Opt.lion, "8-bit Lion counted with an fp32 moment (over)"),
    "lion_32bit": (Opt.lion, ""),
    "paged_adamw_32bit": (Opt.paged_adamw, ""),
    "paged_adamw_8bit": (Opt.paged_adamw8bit, ""),
    "paged_ademamix_32bit": (Unsupported(f"paged_ademamix_32bit {_3}"), ""),
    "paged_ademamix_8bit": (Opt.paged_adamw, "paged 8-bit AdEMAMix counted as paged AdamW"),
    "paged_lion_32bit": (Opt.lion, "paged Lion counted on the GPU"),
    "paged_lion_8bit": (Opt.lion, "paged 8-bit Lion counted on the GPU with an fp32 moment"),
    "rmsprop": (Opt.sgd_momentum, "RMSprop keeps one fp32 average (more with momentum)"),
    "rmsprop_bnb": (Opt.sgd_momentum, "RMSprop keeps one fp32 average"),
    "rmsprop_bnb_8bit": (Opt.sgd_momentum, "8-bit RMSprop counted with an fp32 average"),
    "rmsprop_bnb_32bit": (Opt.sgd_momentum, "RMSprop keeps one fp32 average"),
    "galore_adamw": (Opt.adamw, "GaLore's low-rank state counted as full AdamW (over)"),
    "galore_adamw_8bit": (Opt.adamw8bit, "GaLore's low-rank state counted as full (over)"),
    "galore_adafactor": (Opt.adafactor, "GaLore's low-rank state counted as full (over)"),
    "galore_adamw_layerwise": (Opt.adamw, "GaLore's low-rank state counted as full (over)"),
    "galore_adamw_8bit_layerwise": (Opt.adamw8bit, "GaLore counted as full 8-bit AdamW"),
    "galore_adafactor_layerwise": (Opt.adafactor, "GaLore counted as full Adafactor"),
    "lomo": (Opt.sgd, "LOMO fuses its update into backward: no state"),
    "adalomo": (Opt.adafactor, "AdaLomo keeps a factored second moment"),
    "grokadamw": (Unsupported(f"grokadamw {_3}"), ""),
    "schedule_free_radam": (Opt.adamw, "schedule-free RAdam keeps two fp32 buffers"),
    "schedule_free_adamw": (Opt.adamw, "schedule-free AdamW keeps two fp32 buffers"),
    "schedule_free_sgd": (Opt.sgd_momentum, "schedule-free SGD keeps one fp32 buffer"),
    "apollo_adamw": (Opt.adamw, "APOLLO's low-rank state counted as full AdamW (over)"),
    "apollo_adamw_layerwise": (Opt.adamw, "APOLLO's low-rank state counted as full AdamW"),
    "stable_adamw": (Opt.adamw, ""),
}
#: TrainingArguments' `optim` default on torch >= 2.8 (training_args.py default_optim)
DEFAULT_OPTIM = "adamw_torch_fused"
# adamw_torch_fused is what every stack the Trainer runs assumes (OptimizerKernel.auto)
_KERNEL = {"adamw_torch": OptimizerKernel.foreach}
#: Keys whose value is a list on a command line (nargs="+" in their dataclasses)
LIST_KEYS = frozenset({"lora_target_modules", "lora_modules_to_save", "report_to", "fsdp"})
#: Boolean keys: a bare flag is True; a following true/false word is their value
BOOL_KEYS = frozenset(
    {
        "bf16", "fp16", "gradient_checkpointing", "activation_checkpointing", "use_peft",
        "load_in_4bit", "load_in_8bit", "use_bnb_nested_quant", "use_liger_kernel", "packing",
        "do_train", "do_eval", "torch_compile", "tf32", "bf16_full_eval", "fp16_full_eval",
    }
)  # fmt: skip
_DTYPES = {
    "bfloat16": "bf16", "bf16": "bf16", "float16": "fp16", "fp16": "fp16", "half": "fp16",
    "float32": "fp32", "fp32": "fp32", "float": "fp32", "auto": "auto",
}  # fmt: skip
_WORDS = {"true", "false", "yes", "no", "1", "0"}


def detect(data: dict[str, Any]) -> bool:
    keys = set(data)
    return bool(
        keys & {"per_device_train_batch_size", "per_gpu_train_batch_size", "optim"}
        or ({"output_dir", "gradient_accumulation_steps"} <= keys)
    )


#: Arguments that make a script's command line the Trainer's (or a Trainer script's)
KNOWN = frozenset(
    {
        "per_device_train_batch_size", "per_gpu_train_batch_size", "gradient_accumulation_steps",
        "output_dir", "optim", "bf16", "fp16", "deepspeed", "fsdp", "gradient_checkpointing",
        "activation_checkpointing", "model_name_or_path", "learning_rate", "num_train_epochs",
        "max_steps", "use_peft", "max_length", "max_seq_length",
    }
)  # fmt: skip


def parse_argv(tokens: list[str]) -> tuple[dict[str, Any], list[str]]:
    """(--key values, positional tokens) of a command line, as HfArgumentParser reads it."""
    args: dict[str, Any] = {}
    positional: list[str] = []
    i = 0
    while i < len(tokens):
        token = tokens[i]
        if not token.startswith("--") or len(token) == 2:
            positional.append(token)
            i += 1
            continue
        key, eq, value = token[2:].partition("=")
        key = key.replace("-", "_")
        following: list[str] = []  # the values after the key, one unless a list
        j = i + 1
        while j < len(tokens) and not tokens[j].startswith("--"):
            following.append(tokens[j])
            j += 1
            if key not in LIST_KEYS:
                break
        if eq:
            args[key] = value
        elif key.startswith("no_") and key[3:] in BOOL_KEYS and not following:
            args[key[3:]] = False
        elif key in BOOL_KEYS and (not following or following[0].lower() not in _WORDS):
            args[key] = True
            following = []
        elif key in LIST_KEYS and following:
            args[key] = following
        elif following:
            args[key] = following[0]
        else:
            args[key] = True
        i += 1 + len(following)
    return args, positional


def read(doc: Document) -> Facts:
    """A TrainingArguments JSON/YAML (to_json_string(), or the file HfArgumentParser reads)."""
    facts = doc.facts()
    read_args(facts, doc.data, lambda key: key, doc)
    return facts


def read_argv(facts: Facts, tokens: list[str], doc: Document) -> bool:
    """The Trainer's arguments on a command line into `facts`; False (and nothing read) when
    the arguments are not the Trainer's (a script of its own)."""
    args, _ = parse_argv(tokens)
    if not KNOWN & set(args):
        return False
    read_args(facts, args, lambda key: f"--{key}", doc)
    return True


def read_args(
    facts: Facts, args: Mapping[str, Any], where: Callable[[str], str], doc: Document
) -> None:
    """TrainingArguments and a script's model arguments, by name (see the module doc)."""
    facts.state("trainer", True, "TrainingArguments")
    batch = args.get("per_device_train_batch_size", args.get("per_gpu_train_batch_size"))
    if batch is not None:
        key = "per_device_train_batch_size" if "per_device_train_batch_size" in args else (
            "per_gpu_train_batch_size")  # fmt: skip
        facts.state("micro_batch", as_int(facts, where(key), batch), where(key))
    else:
        facts.default("micro_batch", 8, where("per_device_train_batch_size"))
    if "gradient_accumulation_steps" in args:
        key = "gradient_accumulation_steps"
        facts.state("grad_accum", as_int(facts, where(key), args[key]), where(key))
    else:
        facts.default("grad_accum", 1, where("gradient_accumulation_steps"))
    amp_precision(facts, args, where)
    checkpointing(facts, args, where)
    optim = args.get("optim", DEFAULT_OPTIM)
    optimizer(facts, where("optim"), str(optim), args.get("optim_args"), "optim" not in args)
    if "use_liger_kernel" in args and as_bool(facts, where("use_liger_kernel"),
                                              args["use_liger_kernel"]):  # fmt: skip
        facts.state("loss", LossKind.fused, where("use_liger_kernel"))
    else:
        facts.default("loss", LossKind.full, where("use_liger_kernel"))
    from memtui.plans.deepspeed_json import named

    named(facts, args.get("deepspeed"), where("deepspeed"), doc)
    fsdp_args(facts, args, where, doc)
    script_args(facts, args, where)
    objective_args(facts, args, where)


def amp_precision(facts: Facts, args: Mapping[str, Any], where: Callable[[str], str]) -> None:
    """`bf16` / `fp16` (autocast through accelerate) and the dtype the script loads in."""
    on = [k for k in ("bf16", "fp16") if k in args and as_bool(facts, where(k), args[k])]
    if len(on) == 2:
        raise facts.error(where("bf16"), "bf16 and fp16 cannot both be set")
    if on:
        facts.state("amp", on[0], where(on[0]))
    else:
        facts.default("amp", "no", where("bf16"))
    for key in ("dtype", "torch_dtype"):
        if args.get(key) is not None:
            dtype = _DTYPES.get(str(args[key]).lower().removeprefix("torch."))
            if dtype is None:
                raise facts.error(where(key), f"unknown dtype {args[key]!r}")
            facts.state("load_dtype", dtype, where(key))
            break


def checkpointing(facts: Facts, args: Mapping[str, Any], where: Callable[[str], str]) -> None:
    for key in ("activation_checkpointing", "gradient_checkpointing"):
        if args.get(key) is not None and as_bool(facts, where(key), args[key]):
            break
    else:
        facts.default("checkpointing", Checkpointing.none, where("activation_checkpointing"))
        for kwargs_key in ("activation_checkpointing_kwargs", "gradient_checkpointing_kwargs"):
            if isinstance(args.get(kwargs_key), dict):  # the variant, for when it is turned on
                reentrant_variant(facts, args[kwargs_key], where(kwargs_key))
        return
    kwargs_key = f"{key.split('_')[0]}_checkpointing_kwargs"
    kwargs = args.get(kwargs_key) or {}
    if isinstance(kwargs, str):
        kwargs = mapping(parse_json(kwargs, f"{facts.source}:{where(kwargs_key)}"),
                         where(kwargs_key), "kwargs")  # fmt: skip
    every = kwargs.get("every_n_layers", 1) if isinstance(kwargs, dict) else 1
    if as_int(facts, where(kwargs_key), every) > 1:
        facts.state("checkpointing", Checkpointing.none, where(kwargs_key))
        facts.assume(f"checkpointing every {every} layers: counted as none (over-predicts)")
        return
    facts.state("checkpointing", Checkpointing.full, where(key))
    if isinstance(kwargs, dict) and kwargs.get("offload"):
        facts.state("activation_offload", True, where(kwargs_key))
    if isinstance(kwargs, dict):
        reentrant_variant(facts, kwargs, where(kwargs_key))


def reentrant_variant(facts: Facts, kwargs: Mapping[str, Any], where: str) -> None:
    """The checkpointing variant a `gradient_checkpointing_kwargs` mapping names: its
    `use_reentrant`, handed to torch.utils.checkpoint (absent: the release's default)."""
    if kwargs.get("use_reentrant") is None:
        return
    given = as_bool(facts, f"{where}.use_reentrant", kwargs["use_reentrant"])
    variant = CheckpointVariant.reentrant if given else CheckpointVariant.non_reentrant
    facts.state("checkpoint_variant", variant, f"{where}.use_reentrant")


def optimizer(facts: Facts, where: str, name: str, optim_args: Any, default: bool) -> None:
    """An `optim` name (OptimizerNames) as memtui's optimizer."""
    key = name.strip().lower().removeprefix("optimizernames.")
    found = OPTIM.get(key)
    if found is None:
        value: Optimizer | Unsupported = Unsupported(
            f"optim {name!r} is not a Transformers optimizer"
        )
        note = ""
    else:
        value, note = found
    if value is Optimizer.sgd and "momentum" in str(optim_args or ""):
        momentum = str(optim_args).split("momentum=")[-1].split(",")[0]
        if as_float(facts, "optim_args", momentum) > 0:
            value = Optimizer.sgd_momentum
    # torch.optim.AdamW with its default foreach step; "adamw_torch_fused" passes fused=True
    # (trainer.py get_optimizer_cls_and_kwargs), the stacks' default
    kernel = _KERNEL.get(key)
    if default:
        facts.default("optimizer", value, where)
        if kernel:
            facts.default("optimizer_kernel", kernel, where)
    else:
        facts.state("optimizer", value, where)
        if kernel:
            facts.state("optimizer_kernel", kernel, where)
    if note:
        facts.assume(note)


def fsdp_args(
    facts: Facts, args: Mapping[str, Any], where: Callable[[str], str], doc: Document
) -> None:
    """`fsdp` and `fsdp_config` as _process_fsdp_args reads them (version 2 by default)."""
    fsdp = args.get("fsdp")
    if fsdp in (None, False, "", []) or (isinstance(fsdp, str) and fsdp.lower() == "false"):
        return
    config = args.get("fsdp_config") or {}
    if isinstance(config, str):
        path = doc.locate(config)
        shown = f"{facts.source}:{where('fsdp_config')} {config}"
        config = mapping(parse_json(read_text(path, shown), shown), shown, "fsdp_config")
    settings = unprefixed(mapping(config, f"{facts.source}:{where('fsdp_config')}", "fsdp_config"))
    version = fsdp_version(facts, where("fsdp_config"), settings.get("version", 2))
    if settings.get("cpu_offload") is not None:
        settings.setdefault("offload_params", settings["cpu_offload"])
    items = fsdp.split() if isinstance(fsdp, str) else fsdp if isinstance(fsdp, list) else []
    for item in items:
        lowered = str(item).lower()
        if lowered in ("true", "auto_wrap"):
            continue
        if lowered == "offload":
            settings.setdefault("offload_params", True)
            continue
        name = sharding_name(facts, where("fsdp"), item)
        if version == 2 and name not in ("FULL_SHARD", "SHARD_GRAD_OP"):
            raise facts.error(where("fsdp"), f"{item} is only available with FSDP1 (version 1)")
        settings.setdefault("reshard_after_forward", name == "FULL_SHARD" if version == 2 else name)

    def key_of(key: str) -> str:
        return f"{where('fsdp_config')}.{key}" if key in settings else where("fsdp")

    read_fsdp(facts, settings, key_of, version)


def script_args(facts: Facts, args: Mapping[str, Any], where: Callable[[str], str]) -> None:
    """A training script's model and data arguments (HF examples, TRL's ModelConfig)."""
    if args.get("model_name_or_path"):
        facts.state("model", str(args["model_name_or_path"]), where("model_name_or_path"))
    for key in ("max_length", "max_seq_length", "block_size"):
        if args.get(key) not in (None, "None"):
            facts.state("seq_len", as_int(facts, where(key), args[key]), where(key))
            break
    if args.get("attn_implementation"):
        eager = str(args["attn_implementation"]).lower() == "eager"
        attention = Attention.eager if eager else Attention.flash
        facts.state("attention", attention, where("attn_implementation"))
    four_bit = "load_in_4bit" in args and as_bool(
        facts, where("load_in_4bit"), args["load_in_4bit"]
    )
    peft = "use_peft" in args and as_bool(facts, where("use_peft"), args["use_peft"])
    if four_bit and not peft:
        raise facts.error(where("load_in_4bit"), "a 4-bit model trains only with LoRA (use_peft)")
    if "load_in_8bit" in args and as_bool(facts, where("load_in_8bit"), args["load_in_8bit"]):
        facts.state("method", Unsupported("8-bit base models (load_in_8bit)"), "load_in_8bit")
    elif peft:
        facts.state("method", Method.qlora if four_bit else Method.lora,
                    where("load_in_4bit" if four_bit else "use_peft"))  # fmt: skip
        facts.state(
            "lora_rank", as_int(facts, where("lora_r"), args.get("lora_r", 16)), where("lora_r")
        )  # fmt: skip  (TRL's ModelConfig default 16)
        dropout = as_float(facts, where("lora_dropout"), args.get("lora_dropout", 0.05))
        facts.state("lora_dropout", dropout, where("lora_dropout"))
        targets = args.get("lora_target_modules")
        if targets:
            facts.state("lora_targets", lora_targets(facts, where("lora_target_modules"), targets),
                        where("lora_target_modules"))  # fmt: skip
        saved = args.get("lora_modules_to_save")
        if saved:
            names = as_names(facts, where("lora_modules_to_save"), saved)
            facts.state("modules_to_save", names, where("lora_modules_to_save"))
        if four_bit:
            nested = as_bool(facts, where("use_bnb_nested_quant"),
                             args.get("use_bnb_nested_quant", False))  # fmt: skip
            facts.state("qlora_double_quant", nested, where("use_bnb_nested_quant"))


def lora_targets(facts: Facts, where: str, value: Any) -> tuple[str, ...]:
    """PEFT's target_modules: names, or "all-linear"."""
    names = as_names(facts, where, value)
    return ("all-linear",) if names in (("all-linear",), ("all_linear",)) else names


# -- export -----------------------------------------------------------------------------------

_OPTIM_NAME = {
    Optimizer.adamw: DEFAULT_OPTIM,
    Optimizer.adamw8bit: "adamw_bnb_8bit",
    Optimizer.paged_adamw8bit: "paged_adamw_8bit",
    Optimizer.paged_adamw: "paged_adamw_32bit",
    Optimizer.sgd: "sgd",
    Optimizer.sgd_momentum: "sgd",
    Optimizer.adafactor: "adafactor",
    Optimizer.lion: "lion_32bit",
}
"""memtui's optimizer -> the `optim` name that builds it."""


def optim_name(plan: Plan) -> str:
    """The `optim` name that builds the plan's optimizer with its step kernel."""
    if plan.optimizer is Optimizer.adamw and plan.optimizer_kernel is OptimizerKernel.foreach:
        return "adamw_torch"
    return _OPTIM_NAME[plan.optimizer]


def export_args(plan: Plan) -> dict[str, Any]:
    """The plan as the keys of TrainingArguments + TRL's SFTConfig and ModelConfig (what
    `trl sft` parses); `memtui.plans.registry` also writes the DeepSpeed / FSDP settings."""
    from memtui.plans.facts import ConfigError

    if plan.stack not in (StackName.trainer, StackName.deepspeed, StackName.fsdp1,
                          StackName.fsdp2):  # fmt: skip
        raise ConfigError(
            f"--format trainer-args writes Transformers' Trainer arguments: the plan's stack "
            f"is {plan.stack.value} (use trainer, deepspeed, fsdp2 or fsdp1)"
        )
    args: dict[str, Any] = {
        "model_name_or_path": plan.model.name,
        "per_device_train_batch_size": plan.micro_batch,
        "gradient_accumulation_steps": plan.grad_accum,
        "max_length": plan.seq_len,
        # --bf16 turns on autocast; the dtype the script loads the model in decides the rest
        "bf16": plan.precision in (Precision.bf16_mixed, Precision.bf16_autocast)
        or (plan.precision is Precision.bf16 and plan.stack is StackName.trainer),
        "dtype": "bfloat16" if plan.precision is Precision.bf16 else "float32",
        "gradient_checkpointing": plan.checkpointing is Checkpointing.full,
        "optim": optim_name(plan),
        "use_liger_kernel": plan.loss is LossKind.fused,
        "attn_implementation": "eager" if plan.attention is Attention.eager else "sdpa",
    }
    if plan.optimizer is Optimizer.sgd_momentum:
        args["optim_args"] = "momentum=0.9"
    kwargs: dict[str, Any] = {"offload": True} if plan.activation_offload else {}
    if plan.checkpointing is Checkpointing.full and plan.checkpoint_variant is not (
        CheckpointVariant.auto
    ):
        kwargs["use_reentrant"] = reentrant(plan)  # a given variant; auto: the release's
    if kwargs:
        args["gradient_checkpointing_kwargs"] = kwargs
    if plan.method is not Method.full:
        args.update(
            use_peft=True,
            lora_r=plan.lora_rank,
            lora_dropout=plan.lora_dropout,
            lora_target_modules=list(plan.lora_targets)
            if plan.lora_targets != ("all-linear",)
            else "all-linear",
        )
        if plan.modules_to_save:
            args["lora_modules_to_save"] = list(plan.modules_to_save)
        if plan.method is Method.qlora:
            args["load_in_4bit"] = True
            args["use_bnb_nested_quant"] = plan.qlora_double_quant
    _export_objective(plan, args)
    return args


def export(plan: Plan) -> str:
    """TrainingArguments JSON (HfArgumentParser.parse_json_file reads it); FSDP inline."""
    args = export_args(plan)
    if plan.stack in (StackName.fsdp1, StackName.fsdp2):
        args["fsdp"] = True
        args["fsdp_config"] = fsdp_config(plan)
    elif plan.stack is StackName.deepspeed:
        from memtui.plans.deepspeed_json import export as deepspeed

        args["deepspeed"] = json.loads(deepspeed(plan))
    return json.dumps(args, indent=2) + "\n"


def fsdp_config(plan: Plan) -> dict[str, Any]:
    """Trainer's fsdp_config for an FSDP plan (version, resharding, offload)."""
    from memtui.plans.accelerate_yaml import sharding_of

    version = 1 if plan.stack is StackName.fsdp1 else 2
    config: dict[str, Any] = {"version": version, "auto_wrap_policy": "TRANSFORMER_BASED_WRAP"}
    config["reshard_after_forward"] = sharding_of(plan, version)
    config["cpu_offload"] = plan.offload is Offload.params
    return config


# The keys only one family of TRL 1.16's configs has (trl/trainer/*_config.py): what names
# the trainer a config is for, the SFTConfig's otherwise. DPOConfig.loss_type is a list of
# DPO's losses (ipo among them); CPOConfig's "simpo" is SimPO's; KTOConfig's are KTO's.
_DPO_KEYS = ("precompute_ref_log_probs", "f_divergence_type", "sync_ref_model", "ld_alpha",
             "rpo_alpha", "ref_model_init_kwargs")  # fmt: skip
# (max_completion_length is also an older DPOConfig's and KTOConfig's: not a sign of GRPO)
_ONLINE_KEYS = ("num_generations", "use_vllm", "vllm_mode", "vllm_gpu_memory_utilization",
                "steps_per_generation")  # fmt: skip
# DPOTrainer._compute_loss's loss types (SFTConfig.loss_type's "nll" and "dft" are not DPO's)
_DPO_LOSSES = frozenset({"sigmoid", "hinge", "ipo", "exo_pair", "nca_pair", "robust", "bco_pair",
                         "sppo_hard", "aot", "aot_unpaired", "apo_zero", "apo_down", "discopop",
                         "sigmoid_norm"})  # fmt: skip


def objective_args(facts: Facts, args: Mapping[str, Any], where: Callable[[str], str]) -> None:
    """The TRL config a file or command line is (DPOConfig, KTOConfig, CPOConfig, RewardConfig,
    GRPOConfig) and its objective's settings; a TrainingArguments / SFTConfig one is SFT."""
    keys = set(args)
    losses = args.get("loss_type")
    loss = str(losses[0] if isinstance(losses, list) and losses else losses or "").lower()
    if keys & set(_ONLINE_KEYS):
        facts.state("objective", Objective.grpo, where(min(keys & set(_ONLINE_KEYS))))
        facts.assume("GRPOConfig's keys (RLOOConfig shares them): sized as GRPO")
    elif {"desirable_weight", "undesirable_weight"} & keys or loss in ("kto", "apo_zero_unpaired"):
        facts.state("objective", Objective.kto, where("loss_type" if loss else "desirable_weight"))
    elif "center_rewards_coefficient" in keys:
        facts.state("objective", Objective.reward, where("center_rewards_coefficient"))
    elif loss == "simpo" or "simpo_gamma" in keys:
        facts.state("objective", Objective.simpo, where("loss_type" if loss else "simpo_gamma"))
    elif "cpo_alpha" in keys:
        facts.state("objective", Objective.cpo, where("cpo_alpha"))
    elif loss in _DPO_LOSSES or keys & set(_DPO_KEYS):
        objective = Objective.ipo if loss == "ipo" else Objective.dpo
        facts.state(
            "objective", objective, where("loss_type" if loss else min(keys & set(_DPO_KEYS)))
        )
    elif facts.get("objective") in (None, Objective.sft):
        facts.default("objective", Objective.sft, where("loss_type"))
        return
    # else the trainer the launch names (trl dpo, scripts/grpo.py) said the objective
    facts.assume("a TRL trainer: sized with whole logits (TRL 1.16's fused LM head needs less: "
                 "--loss fused)")  # fmt: skip
    if not {"activation_checkpointing", "gradient_checkpointing"} & keys:
        # DPOConfig, KTOConfig, RewardConfig, GRPOConfig: gradient_checkpointing defaults True
        facts.state("checkpointing", Checkpointing.full, where("gradient_checkpointing")
                    + " (TRL's default True)")  # fmt: skip
    if args.get("beta") is not None:
        facts.state("beta", as_float(facts, where("beta"), args["beta"]), where("beta"))
    if "precompute_ref_log_probs" in args:
        value = as_bool(facts, where("precompute_ref_log_probs"), args["precompute_ref_log_probs"])
        facts.state("precompute_ref_log_probs", value, where("precompute_ref_log_probs"))
    for key in ("num_generations", "max_completion_length", "max_prompt_length"):
        if args.get(key) not in (None, "None"):
            facts.state(key, as_int(facts, where(key), args[key]), where(key))
    if "use_vllm" in args and as_bool(facts, where("use_vllm"), args["use_vllm"]):
        mode = str(args.get("vllm_mode", "colocate")).lower()  # GRPOConfig.vllm_mode's default
        if mode not in ("colocate", "server"):
            raise facts.error(where("vllm_mode"), f"unknown mode {mode!r} (colocate, server)")
        facts.state("vllm_mode", VllmMode(mode), where("vllm_mode"))
        if args.get("vllm_gpu_memory_utilization") is not None:
            key = "vllm_gpu_memory_utilization"
            facts.state(key, as_float(facts, where(key), args[key]), where(key))
        if "vllm_enable_sleep_mode" in args:
            key = "vllm_enable_sleep_mode"
            facts.state("vllm_sleep_mode", as_bool(facts, where(key), args[key]), where(key))
    elif facts.get("objective") is Objective.grpo:
        facts.default("vllm_mode", VllmMode.none, where("use_vllm"))


def _export_objective(plan: Plan, args: dict[str, Any]) -> None:
    """The TRL config keys `objective_args` reads the plan's objective back from."""
    from memtui.plans.facts import ConfigError

    named = {Objective.dpo: "sigmoid", Objective.ipo: "ipo", Objective.kto: "kto",
             Objective.simpo: "simpo"}  # fmt: skip
    if plan.objective is Objective.sft:
        return
    if plan.objective is Objective.reward:
        args["center_rewards_coefficient"] = None  # RewardConfig's own key (its default)
    elif plan.objective in named:
        losses = named[plan.objective]
        args["loss_type"] = [losses] if plan.objective in (Objective.dpo, Objective.ipo) else losses
        if plan.objective in (Objective.dpo, Objective.ipo, Objective.kto):
            args["precompute_ref_log_probs"] = plan.precompute_ref_log_probs
    elif plan.objective is Objective.grpo:
        args.update(
            num_generations=plan.num_generations,
            max_completion_length=plan.max_completion_length,
            use_vllm=plan.vllm_mode is not VllmMode.none,
        )
        if plan.vllm_mode is not VllmMode.none:
            args["vllm_mode"] = plan.vllm_mode.value
            args["vllm_gpu_memory_utilization"] = plan.vllm_gpu_memory_utilization
            args["vllm_enable_sleep_mode"] = plan.vllm_sleep_mode
    else:
        raise ConfigError(
            f"--objective {plan.objective.value} has no TRL config memtui writes (TRL 1.16: "
            "dpo, ipo, kto, simpo, reward, grpo)"
        )
    if plan.beta is not None:
        args["beta"] = plan.beta
