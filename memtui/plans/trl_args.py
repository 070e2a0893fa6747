"""TRL's trainer configs (SFTConfig, DPOConfig, GRPOConfig...) as TrlParser reads them.

A TRL training script (`trl sft|dpo|grpo|kto|reward|rloo`, `python trl/scripts/sft.py`,
alignment-handbook's `scripts/sft.py --config recipe.yaml`, TRL's `examples/scripts/*.py`)
parses TrainingArguments subclassed by TRL, TRL's ModelConfig and ScriptArguments with
`TrlParser.parse_args_and_config` (trl 1.16 scripts/utils.py:303): the `--config` YAML's values
replace the dataclasses' defaults, the command line replaces the YAML's values, and a key no
dataclass has is refused by a script (`Unknown arguments from config file`) or, under the `trl`
command, handed to `accelerate launch` (cli/commands/training.py TrainingCommand.run: its
`config_remaining` become the launch arguments; `--accelerate_config` becomes
`--config_file`, cli/accelerate_config.py).

TRL's defaults that differ from TrainingArguments' (trl 1.16, the same at trl main f2cd577,
1.10.0.dev0):
- `gradient_checkpointing` True (trainer/base_config.py:62, `_BaseConfig`, every trainer);
- `bf16` True unless `fp16` is set (base_config.py:68 default None, :108 `__post_init__`);
- `max_length` 1024 (sft_config.py:202, dpo_config.py:195, kto_config.py:166,
  reward_config.py:144, experimental/orpo/orpo_config.py:79, experimental/cpo/cpo_config.py:99);
  GRPOConfig and RLOOConfig have none (`max_completion_length` 512, grpo_config.py:494,
  rloo_config.py:315, and the prompt as long as the dataset's);
- ModelConfig `dtype` "float32" (trainer/model_config.py:89): the scripts load the model in it
  (scripts/sft.py:80 `dtype=model_args.dtype`);
- SFTConfig `activation_offloading` False (sft_config.py:291): True offloads the saved
  activations to the CPU.
ModelConfig's LoRA keys (`use_peft`, `lora_r` 16, `lora_dropout` 0.05, `lora_target_modules`,
`load_in_4bit`, `use_bnb_nested_quant`) are read by `memtui.plans.trainer_args.script_args`.

The trainer the launch names (`trl dpo`, `scripts/grpo.py`) is the plan's objective; its
config's keys may name a variant (`loss_type: ipo`, `memtui.plans.trainer_args.objective_args`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import PurePath
from typing import Any

from memtui.estimator.choices import Checkpointing, Objective
from memtui.plans import trainer_args
from memtui.plans.facts import Document, Facts, Unsupported, as_bool, as_int

_SOURCE = "trl 1.16"


@dataclass(frozen=True)
class Trainer:
    """One TRL trainer: its config class and the objective it trains."""

    name: str
    """The `trl` subcommand (sft, dpo, ...)."""
    config: str
    """Its config class and where its `max_length` default is (trl 1.16)."""
    max_length: int | None
    """The config's `max_length` default; None: it has none (GRPO, RLOO)."""
    objective: Objective | Unsupported = Objective.sft
    """What it trains (its config's keys may name a variant: `loss_type: ipo`)."""


TRAINERS = {
    t.name: t
    for t in (
        Trainer("sft", "SFTConfig (trainer/sft_config.py:202)", 1024),
        Trainer("dpo", "DPOConfig (trainer/dpo_config.py:195)", 1024, Objective.dpo),
        Trainer("kto", "KTOConfig (trainer/kto_config.py:166)", 1024, Objective.kto),
        Trainer("reward", "RewardConfig (trainer/reward_config.py:144)", 1024, Objective.reward),
        Trainer("orpo", "ORPOConfig (experimental/orpo/orpo_config.py:79)", 1024,
                Objective.orpo),
        Trainer("cpo", "CPOConfig (experimental/cpo/cpo_config.py:99)", 1024, Objective.cpo),
        Trainer("grpo", "GRPOConfig (trainer/grpo_config.py:494)", None, Objective.grpo),
        Trainer("rloo", "RLOOConfig (trainer/rloo_config.py:315)", None, Objective.rloo),
        Trainer("online_dpo", "OnlineDPOConfig (experimental/online_dpo)", None,
                Unsupported("online DPO (generations judged by a reward model or a judge)")),
    )
}  # fmt: skip
"""The trainers by `trl` subcommand (trl 1.16 cli/commands/__init__.py get_commands) and
script name."""

#: Script names that are not a trainer's own name (TRL examples/scripts, alignment-handbook)
_SCRIPT_NAMES = {"reward_modeling": "reward", "gspo": "grpo", "run_orpo": "orpo",
                 "run_sft": "sft", "run_dpo": "dpo"}  # fmt: skip

#: Keys of a TrlParser config that no TRL dataclass has, which `trl`'s CLI hands to
#: `accelerate launch` (cli/commands/training.py) and memtui reads
LAUNCH_KEYS = frozenset(
    {"num_processes", "num_machines", "mixed_precision", "config_file", "accelerate_config"}
)

#: Keys only TRL's configs have: a YAML with one of them (and a model) is a TrlParser config
_TRL_KEYS = frozenset(
    {
        "dataset_mixture", "dataset_name", "datasets", "chat_template", "dataset_num_proc",
        "dataset_text_field", "max_prompt_length", "max_completion_length", "num_generations",
        "beta", "packing", "padding_free", "completion_only_loss", "assistant_only_loss",
        "eos_token", "dataset_train_split", "use_vllm",
    }
)  # fmt: skip


def script_trainer(script: str | None) -> Trainer | None:
    """The TRL trainer a training script is named after (sft.py, dpo.py, sft_gpt_oss.py...)."""
    if not script:
        return None
    stem = PurePath(script).stem
    name = _SCRIPT_NAMES.get(stem, stem)
    return TRAINERS.get(name) or (TRAINERS["sft"] if name.startswith("sft_") else None)


def detect(data: dict[str, Any]) -> bool:
    return "model_name_or_path" in data and bool(_TRL_KEYS & set(data))


def read(doc: Document) -> Facts:
    """A TrlParser config read alone (`--from recipe.yaml`): the trainer its keys suggest."""
    facts = doc.facts()
    data = doc.data
    if {"num_generations", "max_completion_length"} & set(data):
        trainer = TRAINERS["grpo"]
    elif {"beta", "max_prompt_length"} & set(data):
        trainer = TRAINERS["dpo"]
    else:
        trainer = TRAINERS["sft"]
    facts.assume(
        f"a TRL config without its launch line: read with {trainer.config.split()[0]}'s "
        "defaults (give the launch line to name the trainer)"
    )
    read_trl(facts, data, lambda key: key, doc, trainer)
    return facts


def read_trl(
    facts: Facts,
    args: Mapping[str, Any],
    where: Callable[[str], str],
    doc: Document,
    trainer: Trainer,
) -> None:
    """TrlParser's arguments (the `--config` YAML with the command line over it) into
    `facts`, with `trainer`'s config defaults where TRL's differ from TrainingArguments'."""
    args = dict(args)
    if "max_seq_length" in args and "max_length" not in args:
        facts.assume(
            f"{where('max_seq_length')}: read as max_length (TRL renamed it; TrlParser of "
            "TRL >= 0.20 refuses max_seq_length)"
        )
    on = {k: as_bool(facts, where(k), args[k]) for k in ("bf16", "fp16") if k in args}
    if not any(on.values()):  # else read_args states the one that is on
        if "bf16" in on:  # `bf16: false` leaves accelerate's mixed_precision, if any
            facts.default("amp", "no", where("bf16"))
        else:  # bf16 = not fp16 when bf16 is not given
            facts.state("amp", "bf16", f"bf16 ({_SOURCE} default: not fp16, base_config.py:108)")
    if not {"gradient_checkpointing", "activation_checkpointing"} & set(args):
        # given, read_args reads it (`--gradient_checkpointing False` turns it off)
        facts.default("checkpointing", Checkpointing.full,
                      f"gradient_checkpointing ({_SOURCE} default, base_config.py:62)")  # fmt: skip
    if trainer.max_length is not None:
        facts.default("seq_len", trainer.max_length,
                      f"max_length ({_SOURCE} {trainer.config} default)")  # fmt: skip
    elif not {"max_length", "max_seq_length"} & set(args):
        completion = as_int(facts, where("max_completion_length"),
                            args.get("max_completion_length", 512))  # fmt: skip
        facts.assume(
            f"{trainer.name}: completions of up to {completion} tokens after a prompt "
            "TRL does not bound: the sequence length is memtui's (--seq-len sets it)"
        )
    if not {"dtype", "torch_dtype"} & set(args):
        facts.default("load_dtype", "fp32", f"dtype ({_SOURCE} ModelConfig default, "
                      "model_config.py:89)")  # fmt: skip
    if "activation_offloading" in args and as_bool(
        facts, where("activation_offloading"), args["activation_offloading"]
    ):
        facts.state("activation_offload", True, where("activation_offloading"))
    if trainer.objective is not Objective.sft:
        # the trainer's own objective; a config key naming a variant (loss_type: ipo) wins
        # (trainer_args.objective_args, read below)
        facts.state("objective", trainer.objective, f"trl {trainer.name}")
    kwargs = args.get("model_init_kwargs")
    if isinstance(kwargs, Mapping):
        for key in ("dtype", "torch_dtype"):
            if key in kwargs and key not in args:
                args[key] = kwargs[key]
    trainer_args.read_args(facts, {k: v for k, v in args.items() if k not in LAUNCH_KEYS},
                           where, doc)  # fmt: skip
    launch = {k: args[k] for k in LAUNCH_KEYS & set(args)}
    if launch:
        launch_options(facts, launch, where, doc)


def launch_options(
    facts: Facts, options: Mapping[str, Any], where: Callable[[str], str], doc: Document
) -> None:
    """`accelerate launch` options in a TRL config (trl's CLI passes a config's keys that no
    dataclass has to `accelerate launch`; a script started without `trl` refuses them)."""
    from memtui.plans.accelerate_yaml import launcher_amp, machines

    if "num_processes" in options:
        machines(facts, options, where)
    for key in ("accelerate_config", "config_file"):
        if options.get(key):
            facts.refer(doc.locate(str(options[key])), where(key))
    if options.get("mixed_precision") is not None:
        launcher_amp(facts, str(options["mixed_precision"]), where("mixed_precision"))


#: PEFT's examples/sft/train.py ModelArguments that are not TRL's ModelConfig's
_PEFT_EXAMPLE = frozenset({"use_peft_lora", "use_4bit_quantization", "use_8bit_quantization",
                           "use_nested_quant", "use_flash_attn", "use_unsloth",
                           "bnb_4bit_quant_storage_dtype"})  # fmt: skip


def is_peft_example(args: Mapping[str, Any]) -> bool:
    """Whether a script's arguments are PEFT's examples/sft/train.py's."""
    return bool(_PEFT_EXAMPLE & set(args))


def read_peft_example(
    facts: Facts, args: Mapping[str, Any], where: Callable[[str], str], doc: Document
) -> None:
    """PEFT's examples/sft/train.py (peft 5d602fd): HfArgumentParser over its own
    ModelArguments and TRL's SFTConfig (train.py:54), so SFTConfig's defaults hold. Its
    ModelArguments: `use_peft_lora`, `lora_r` [64] (train.py:29), `lora_dropout` [0.1] (:28),
    `lora_target_modules` ["q_proj,k_proj,v_proj,o_proj,down_proj,up_proj,gate_proj"] (:30,
    comma-separated, or "all-linear": utils.py:163), `use_4bit_quantization`,
    `use_8bit_quantization`, `use_nested_quant`, `use_flash_attn`; the model loads in
    `bnb_4bit_quant_storage_dtype` when that is a float dtype, else float32 (utils.py:134)."""
    model = dict(args)

    def on(key: str) -> bool:
        return key in args and as_bool(facts, where(key), args[key])

    model["use_peft"] = on("use_peft_lora")
    model["load_in_4bit"] = on("use_4bit_quantization")
    model["load_in_8bit"] = on("use_8bit_quantization")
    model["use_bnb_nested_quant"] = on("use_nested_quant")
    model.setdefault("lora_r", 64)
    model.setdefault("lora_dropout", 0.1)
    given = args.get("lora_target_modules",
                     "q_proj,k_proj,v_proj,o_proj,down_proj,up_proj,gate_proj")  # fmt: skip
    targets = ",".join(given) if isinstance(given, list) else str(given)
    model["lora_target_modules"] = targets if targets == "all-linear" else targets.split(",")
    storage = str(args.get("bnb_4bit_quant_storage_dtype", "uint8"))
    floating = {"bfloat16": "bf16", "float16": "fp16", "float32": "fp32"}.get(storage)
    load = floating if model["load_in_4bit"] and floating else "fp32"
    facts.state("load_dtype", load, f"{where('bnb_4bit_quant_storage_dtype')} (train.py loads "
                "in it when 4-bit and a float, else float32: utils.py:134)")  # fmt: skip
    if on("use_flash_attn"):
        model["attn_implementation"] = "flash_attention_2"
    if on("use_unsloth"):
        facts.assume(f"{where('use_unsloth')}: Unsloth's kernels are not modelled (sized as PEFT)")
    names = {"use_peft": "use_peft_lora", "load_in_4bit": "use_4bit_quantization",
             "load_in_8bit": "use_8bit_quantization", "use_bnb_nested_quant": "use_nested_quant",
             "attn_implementation": "use_flash_attn"}  # fmt: skip
    read_trl(facts, model, lambda key: where(names.get(key, key)), doc, TRAINERS["sft"])
