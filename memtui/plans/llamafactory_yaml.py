"""LLaMA-Factory's YAML (`llamafactory-cli train config.yaml`) -> plan facts (import only).

LLaMA-Factory's arguments are Transformers' Seq2SeqTrainingArguments (read by
`trainer_args.read_args`: batch size, accumulation, bf16/fp16, optim, deepspeed, fsdp) plus
its own (src/llamafactory/hparams/; defaults in brackets): `model_name_or_path`,
`finetuning_type` [lora] (full, freeze, lora, oft), `lora_rank` [8], `lora_dropout` [0],
`lora_target` [all], `additional_target` (PEFT modules_to_save), `quantization_bit` with
`quantization_method` [bnb] and `double_quantization` [True], `pure_bf16`, `cutoff_len`
[2048], `flash_attn` [auto] (disabled, sdpa, fa2, fa3), `disable_gradient_checkpointing`
[False: LLaMA-Factory checkpoints by default, model_utils/checkpointing.py], `use_reentrant_gc`
[True: reentrant checkpointing],
`use_unsloth_gc` (offloads the checkpointed inputs), `enable_liger_kernel`, `stage`.
The dtype follows model/adapter.py: the model loads in bf16 with bf16 or pure_bf16, and the
trainable parameters are upcast to fp32 unless pure_bf16 (or ZeRO-3, which keeps its own fp32
master): a full fine-tune with bf16 is fp32 weights under autocast, LoRA a bf16 base with fp32
adapters. Named, not sized (`Facts.ignore`): GaLore, APOLLO, BAdam, Adam-mini, Muon,
mixture-of-depths, its kernels, fp8. `stage` rm/dpo/kto is the plan's objective (ppo is
refused: its value head and reward adapter are LLaMA-Factory's own).
"""

from __future__ import annotations

from typing import Any

from memtui.estimator.choices import (
    Attention,
    Checkpointing,
    CheckpointVariant,
    LossKind,
    Method,
    Objective,
    RefModel,
)
from memtui.plans.facts import (
    Document,
    Facts,
    Unsupported,
    as_bool,
    as_float,
    as_int,
    as_names,
    prequantized,
)
from memtui.plans.trainer_args import lora_targets, read_args

_STAGES = ("pt", "sft", "rm", "ppo", "dpo", "kto")
#: switches whose memory memtui does not model, sized without them (over), with what each does
#: (hparams/finetuning_args.py, model_args.py, training_args.py)
_UNMODELLED = {
    "use_galore": "GaLore's low-rank optimizer state: sized with full AdamW state and gradients",
    "use_apollo": "APOLLO's low-rank optimizer state: sized with full AdamW state and gradients",
    "use_badam": "BAdam trains one block at a time: sized with every block trainable (its "
    "parameters kept in half precision)",
    "use_adam_mini": "Adam-mini keeps one second moment per block: sized as AdamW",
    "use_muon": "Muon keeps one momentum for matrices: sized as AdamW",
    "mixture_of_depths": "mixture-of-depths skips tokens per layer: sized with every token",
    "use_v1_kernels": "LLaMA-Factory's fused kernels: their savings not modelled",
    "use_unsloth": "Unsloth's kernels: their savings not modelled",
    "fp8": "fp8 matmuls counted as bf16",
}


def detect(data: dict[str, Any]) -> bool:
    keys = set(data)
    return "model_name_or_path" in keys and bool(
        keys & {"stage", "finetuning_type", "cutoff_len", "template", "lora_target"}
    )


def read(doc: Document) -> Facts:
    data = doc.data
    facts = doc.facts()
    read_args(facts, data, lambda key: key, doc)  # its TrainingArguments part
    kind = str(data.get("finetuning_type", "lora")).lower()
    stage = str(data.get("stage", "sft")).lower()
    if stage not in _STAGES:
        raise facts.error("stage", f"unknown stage {stage!r} ({', '.join(_STAGES)})")
    asft = bool(data.get("use_asft_loss")) and as_bool(facts, "use_asft_loss",
                                                       data["use_asft_loss"])  # fmt: skip
    _objective(facts, data, stage)
    if asft:  # train/sft/workflow.py: create_ref_model for the ASFT loss
        facts.state("method", Unsupported("use_asft_loss keeps a reference model beside the "
                                          "trained one"), "use_asft_loss")  # fmt: skip
    elif kind in ("full", "freeze"):
        facts.state("method", Method.full, f"finetuning_type (stage {stage})")
        if kind == "freeze":
            facts.assume("freeze tuning (the last layers only) counted as a full fine-tune")
    elif kind == "lora":
        _lora(facts, data, stage)
    else:
        facts.state("method", Unsupported(f"finetuning_type {kind}"), "finetuning_type")
    pure = bool(data.get("pure_bf16")) and as_bool(facts, "pure_bf16", data["pure_bf16"])
    amp = facts.get("amp")
    half = "bf16" if amp == "bf16" or pure else "fp16" if amp == "fp16" else None
    if half is None:  # hparams/parser.py: infer_optim_dtype picks bf16 where the GPU has it
        half = "bf16"
        facts.assume("no bf16/fp16 given: the model loads in bf16 (infer_optim_dtype)")
    # model/adapter.py init_adapter: trainable parameters stay in half precision under
    # pure_bf16 and BAdam, else a full fine-tune upcasts them to fp32
    badam = bool(data.get("use_badam")) and as_bool(facts, "use_badam", data["use_badam"])
    upcast = not pure and not badam and facts.get("method") is Method.full
    where = (
        "pure_bf16"
        if pure
        else "use_badam"
        if badam and facts.get("method") is Method.full
        else "bf16"
    )
    facts.state("load_dtype", "fp32" if upcast else half, where)
    if pure:
        facts.state("amp", "no", "pure_bf16")
    facts.state("seq_len", as_int(facts, "cutoff_len", data.get("cutoff_len", 2048)), "cutoff_len")
    flash = str(data.get("flash_attn", "auto")).lower()
    attention = Attention.eager if flash == "disabled" else Attention.flash
    facts.state("attention", attention, "flash_attn")
    key = "disable_gradient_checkpointing"
    if data.get(key) is not None and as_bool(facts, key, data[key]):
        facts.state("checkpointing", Checkpointing.none, key)
    else:
        facts.state("checkpointing", Checkpointing.full, f"{key} (LLaMA-Factory default False)")
        # ModelArguments.use_reentrant_gc [True], handed to gradient_checkpointing_enable as
        # use_reentrant (model/model_utils/checkpointing.py prepare_model_for_training)
        gc = "use_reentrant_gc"
        given = as_bool(facts, gc, data[gc]) if data.get(gc) is not None else True
        variant = CheckpointVariant.reentrant if given else CheckpointVariant.non_reentrant
        said = gc if data.get(gc) is not None else f"{gc} (LLaMA-Factory default True)"
        facts.state("checkpoint_variant", variant, said)
        if data.get("use_unsloth_gc") and as_bool(facts, "use_unsloth_gc", data["use_unsloth_gc"]):
            facts.state("activation_offload", True, "use_unsloth_gc")
    if data.get("enable_liger_kernel") and as_bool(facts, "enable_liger_kernel",
                                                   data["enable_liger_kernel"]):  # fmt: skip
        facts.state("loss", LossKind.fused, "enable_liger_kernel")
    for key, what in _UNMODELLED.items():
        if data.get(key) not in (None, False) and str(data[key]).lower() != "false":
            facts.ignore(key, f"{what} (over)")
    if data.get("ray_num_workers"):  # hparams/training_args.py RayArguments, under USE_RAY=1
        facts.ignore("ray_num_workers", f"{data['ray_num_workers']} Ray workers when launched "
                     "with USE_RAY=1; the GPU count is not taken from it")  # fmt: skip
    if data.get("model_name_or_path"):
        prequantized(facts, "model_name_or_path", str(data["model_name_or_path"]),
                     facts.get("method") is Method.qlora)  # fmt: skip
    return facts


def _lora(facts: Facts, data: dict[str, Any], stage: str) -> None:
    bits = data.get("quantization_bit")
    method = Method.lora
    if bits is not None:
        bits = as_int(facts, "quantization_bit", bits)
        quant = str(data.get("quantization_method", "bnb")).lower()
        if bits != 4 or quant not in ("bnb", "bitsandbytes"):
            facts.state("method", Unsupported(f"{bits}-bit {quant} base models"),
                        "quantization_bit")  # fmt: skip
            return
        method = Method.qlora
        double = as_bool(facts, "double_quantization", data.get("double_quantization", True))
        facts.state("qlora_double_quant", double, "double_quantization")
    where = "finetuning_type, quantization_bit" if bits else "finetuning_type"
    facts.state("method", method, f"{where} (stage {stage})")
    facts.state("lora_rank", as_int(facts, "lora_rank", data.get("lora_rank", 8)), "lora_rank")
    dropout = as_float(facts, "lora_dropout", data.get("lora_dropout", 0.0))
    facts.state("lora_dropout", dropout, "lora_dropout")
    target = data.get("lora_target", "all")
    names = ("all-linear",) if str(target).strip() == "all" else lora_targets(facts, "lora_target",
                                                                              target)  # fmt: skip
    facts.state("lora_targets", names, "lora_target")
    if data.get("additional_target"):
        saved = as_names(facts, "additional_target", data["additional_target"])
        facts.state("modules_to_save", saved, "additional_target")


# hparams/finetuning_args.py RLHFArguments.pref_loss [sigmoid]: the losses with a reference
# (use_ref_model: every pref_loss but orpo and simpo) are DPO's books
_PREF_LOSSES = {
    "sigmoid": Objective.dpo,
    "hinge": Objective.dpo,
    "kto_pair": Objective.dpo,
    "bco_pair": Objective.dpo,
    "ipo": Objective.ipo,
    "orpo": Objective.orpo,
    "simpo": Objective.simpo,
}


def _objective(facts: Facts, data: dict[str, Any], stage: str) -> None:
    """`stage` and the RLHF keys: rm is RewardTrainer's books (train/rm/trainer.py
    PairwiseTrainer: chosen and rejected through a value head), dpo and kto run TRL's
    trainers through CustomDPOTrainer / CustomKTOTrainer, whose concatenated_forward takes
    the whole fp32 logits; the reference is create_ref_model's (train/trainer_utils.py: none
    under LoRA, the adapter disabled; a copy for a full fine-tune or a `ref_model`)."""
    if stage in ("pt", "sft"):
        facts.state("objective", Objective.sft, "stage")
        return
    if stage == "ppo":
        why = "LLaMA-Factory's PPO (a value head on the policy, a reward adapter or model)"
        facts.state("objective", Unsupported(why), "stage")
        return
    if stage == "rm":
        facts.state("objective", Objective.reward, "stage")
        return
    if stage == "kto":
        facts.state("objective", Objective.kto, "stage")
    else:
        loss = str(data.get("pref_loss", "sigmoid")).lower()
        if loss not in _PREF_LOSSES:
            raise facts.error("pref_loss", f"unknown loss {loss!r} ({', '.join(_PREF_LOSSES)})")
        facts.state("objective", _PREF_LOSSES[loss], "pref_loss")
    if data.get("pref_beta") is not None:
        facts.state("beta", as_float(facts, "pref_beta", data["pref_beta"]), "pref_beta")
    if data.get("ref_model"):
        facts.state("ref_model", RefModel.copy, "ref_model")
