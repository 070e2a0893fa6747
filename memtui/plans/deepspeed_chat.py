"""DeepSpeed-Chat's training scripts (DeepSpeedExamples applications/DeepSpeed-Chat,
`deepspeed main.py --zero_stage 3 --lora_dim 128 --max_seq_len 512 ...`) as facts.

Their `main.py` (step1_supervised_finetuning and step2_dpo_finetuning, DeepSpeedExamples
45b4b71) parses its own arguments with argparse, defaults in brackets:
`--per_device_train_batch_size` [16] (main.py:69), `--max_seq_len` [512] (:81),
`--gradient_accumulation_steps` [1] (:102), `--gradient_checkpointing` (:135), `--offload`
(:145), `--dtype` fp16 or bf16 [fp16] (:148), `--zero_stage` [0] (:154), `--lora_dim` [0]
(:159), `--lora_module_name` [decoder.layers.] (:163), `--only_optimize_lora` (:167), and
builds the DeepSpeed config itself (dschat/utils/ds_utils.py get_train_ds_config: the stage,
`offload_param` and `offload_optimizer` on the CPU with `--offload`, fp16 or bf16 enabled,
train_batch_size = micro-batch x accumulation x world size). `--lora_dim` > 0 puts a LoRA
of that rank on every nn.Linear whose name holds `--lora_module_name` and freezes its weight
(dschat/utils/module/lora.py:49, :96); the other parameters (embeddings, norms) still train
unless `--only_optimize_lora` (main.py:260-264).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from memtui.estimator.choices import Checkpointing, Method, Objective, Offload, Optimizer, RefModel
from memtui.plans.facts import Facts, as_int

#: Arguments only DeepSpeed-Chat's main.py has (the Trainer has none of them)
_OWN = frozenset({"zero_stage", "lora_dim", "max_seq_len", "only_optimize_lora", "offload",
                  "lora_module_name", "compute_fp32_loss"})  # fmt: skip
#: main.py's `action='store_true'` arguments (parse_args: --gradient_checkpointing :135,
#: --offload :145, --only_optimize_lora :167, --compute_fp32_loss, --enable_tensorboard,
#: --add_eot_token, --print_loss): given bare; a value after one is refused by argparse
STORE_TRUE = frozenset({"gradient_checkpointing", "offload", "only_optimize_lora",
                        "compute_fp32_loss", "enable_tensorboard", "add_eot_token",
                        "print_loss"})  # fmt: skip


def detect(args: Mapping[str, Any]) -> bool:
    """Whether a script's arguments are DeepSpeed-Chat's main.py's."""
    return bool(_OWN & set(args))


def read(
    facts: Facts, args: Mapping[str, Any], where: Callable[[str], str], launched_from: str = ""
) -> None:
    """DeepSpeed-Chat's main.py arguments, with its defaults, into `facts`; `launched_from`:
    the launch's folder and file (step2_dpo_finetuning's main.py trains DPO: main.py:296
    loads a reference model beside the one it trains)."""
    from memtui.plans.deepspeed_json import STAGES

    if "step2_dpo" in launched_from:  # a reference model beside the actor (main.py:296)
        facts.state("objective", Objective.dpo, "step2_dpo_finetuning")
        facts.state("ref_model", RefModel.copy, "step2_dpo_finetuning (main.py:296)")

    facts.state("engine", "deepspeed", where("deepspeed"))
    stage = as_int(facts, where("zero_stage"), args.get("zero_stage", 0), minimum=0)
    if stage not in STAGES:
        raise facts.error(where("zero_stage"), f"unknown ZeRO stage {stage} (0, 1, 2 or 3)")
    _state(facts, "strategy", STAGES[stage], "zero_stage", args, where)
    offload = args.get("offload") is True
    if offload:
        facts.state("offload", Offload.params if stage == 3 else Offload.optimizer,
                    where("offload"))  # fmt: skip
    else:
        facts.default("offload", Offload.none, where("offload"))
    dtype = str(args.get("dtype", "fp16"))
    if dtype not in ("fp16", "bf16"):
        raise facts.error(where("dtype"), f"fp16 or bf16, not {dtype!r}")
    _state(facts, "amp", dtype, "dtype", args, where)
    batch = as_int(facts, where("per_device_train_batch_size"),
                   args.get("per_device_train_batch_size", 16))  # fmt: skip
    _state(facts, "micro_batch", batch, "per_device_train_batch_size", args, where)
    accum = as_int(facts, where("gradient_accumulation_steps"),
                   args.get("gradient_accumulation_steps", 1))  # fmt: skip
    _state(facts, "grad_accum", accum, "gradient_accumulation_steps", args, where)
    seq = as_int(facts, where("max_seq_len"), args.get("max_seq_len", 512))
    _state(facts, "seq_len", seq, "max_seq_len", args, where)
    checkpointing = Checkpointing.full if args.get("gradient_checkpointing") is True else (
        Checkpointing.none)  # fmt: skip
    _state(facts, "checkpointing", checkpointing, "gradient_checkpointing", args, where)
    # FusedAdam, or DeepSpeedCPUAdam with --offload: AdamW's two fp32 moments
    facts.default("optimizer", Optimizer.adamw, "main.py (FusedAdam / DeepSpeedCPUAdam)")
    if args.get("model_name_or_path"):
        facts.state("model", str(args["model_name_or_path"]), where("model_name_or_path"))
    rank = as_int(facts, where("lora_dim"), args.get("lora_dim", 0), minimum=0)
    if rank > 0:
        facts.state("method", Method.lora, where("lora_dim"))
        facts.state("lora_rank", rank, where("lora_dim"))
        facts.state("lora_dropout", 0.0, f"{where('lora_dim')} (LinearLayer_LoRA dropout 0)")
        module = str(args.get("lora_module_name", "decoder.layers."))
        facts.state("lora_targets", ("all-linear",), where("lora_module_name"))
        facts.assume(f"LoRA on every linear layer under {module!r}: counted as all-linear")
        if args.get("only_optimize_lora") is True:
            facts.state("modules_to_save", (), where("only_optimize_lora"))
        else:
            facts.state("modules_to_save", ("embed_tokens",), where("only_optimize_lora"))
            facts.assume(
                "without --only_optimize_lora the parameters outside the LoRA layers train "
                "too: the embeddings counted as trained in full, the norms not counted"
            )
    else:
        facts.default("method", Method.full, where("lora_dim"))
    for key in ("compute_fp32_loss", "enable_mixed_precision_lora"):
        if args.get(key) is True:
            facts.assume(f"{where(key)} is not modelled")


def _state(
    facts: Facts, key: str, value: Any, arg: str, args: Mapping[str, Any],
    where: Callable[[str], str],
) -> None:  # fmt: skip
    """A stated fact when the argument is given, else main.py's default."""
    if arg in args:
        facts.state(key, value, where(arg))
    else:
        facts.default(key, value, f"{where(arg)} (main.py default)")
