"""axolotl's YAML config (`axolotl train config.yml`) <-> plan facts.

Keys as axolotl reads them (src/axolotl/utils/schemas/config.py, training.py, peft.py, fsdp.py,
model.py; defaults in brackets; docs.axolotl.ai/docs/config-reference.html):
`base_model` (or `base_model_config`), `adapter` lora / qlora with `load_in_4bit` (`load_in_8bit`
is an 8-bit base memtui does not size), `lora_r`, `lora_dropout` [0], `lora_target_modules` or
`lora_target_linear`, `lora_modules_to_save`, `bnb_config_kwargs.bnb_4bit_use_double_quant`
[True: loaders/model.py], `sequence_len` [512], `micro_batch_size` [1],
`gradient_accumulation_steps` [1] or the deprecated global `batch_size`, `optimizer`
[adamw_torch_fused: Transformers' `optim` names], `bf16` [auto] / `fp16` (autocast) and
`bfloat16` / `float16` (no autocast): the model is loaded in bf16 when bf16 or bfloat16 is set
(utils/config/__init__.py: cfg.torch_dtype), `gradient_checkpointing` (true, "offload") with
`gradient_checkpointing_kwargs` (its use_reentrant), `activation_offloading`,
`attn_implementation` / `flash_attention` / `sdp_attention` /
`eager_attention`, `liger_fused_linear_cross_entropy` / `cut_cross_entropy` (fused loss; on
by default once `plugins` lists CutCrossEntropyPlugin: integrations/cut_cross_entropy/args.py),
`deepspeed` (a JSON path or inline), `fsdp_config` with `fsdp_version` [1] (its keys with or
without the deprecated `fsdp_` prefix) and the deprecated `fsdp` list, `dp_shard_size`,
`dp_replicate_size`, `tensor_parallel_size`, `context_parallel_size`.
axolotl runs Transformers' Trainer, so the stack is the Trainer's, DeepSpeed's or FSDP's.
Named, not sized (`Facts.ignore`): Liger's other kernels, axolotl's LoRA and attention kernels,
`tiled_mlp`, `use_kernels`, `torch_compile`, `fp8`, `unfrozen_parameters`,
`context_parallel_size`. `rl` and `reward_model` are the plan's objective.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from memtui.estimator.choices import (
    Attention,
    Checkpointing,
    LossKind,
    Method,
    Objective,
    Offload,
    Optimizer,
    Precision,
    StackName,
    Strategy,
    VllmMode,
)
from memtui.estimator.strategies import strategy_spec
from memtui.plans.facts import (
    ConfigError,
    Document,
    Facts,
    Unsupported,
    as_bool,
    as_float,
    as_int,
    as_names,
    dig,
    prequantized,
)
from memtui.plans.fsdp import fsdp_version, read_fsdp, sharding_name, unprefixed
from memtui.plans.trainer_args import lora_targets, optim_name, optimizer, reentrant_variant

if TYPE_CHECKING:
    from memtui.estimator.plan import Plan

# axolotl's own optimizers (schemas/enums.py CustomSupportedOptimizers) beside Transformers'
CUSTOM_OPTIM: dict[str, tuple[Optimizer, str]] = {
    "optimi_adamw": (Optimizer.adamw, ""),
    "ao_adamw_8bit": (Optimizer.adamw8bit, ""),
    "ao_adamw_4bit": (Optimizer.adamw8bit, "torchao 4-bit AdamW counted as 8-bit (over)"),
    "ao_adamw_fp8": (Optimizer.adamw8bit, "torchao fp8 AdamW: one byte per moment"),
    "adopt_adamw": (Optimizer.adamw, ""),
    "came_pytorch": (Optimizer.adamw, "CAME counted as AdamW"),
    "muon": (Optimizer.adamw, "Muon counted as AdamW (its AdamW part; over for matrices)"),
    "dion": (Optimizer.adamw, "Dion counted as AdamW (over)"),
    "flash_adamw": (Optimizer.adamw, ""),
    "flash_adam": (Optimizer.adamw, ""),
    "flash_sgd": (Optimizer.sgd_momentum, ""),
    "flash_sgdw": (Optimizer.sgd_momentum, ""),
    "flash_lion": (Optimizer.lion, ""),
    "q_galore_adamw8bit": (Optimizer.adamw8bit, "Q-GaLore counted as full 8-bit AdamW"),
}


#: axolotl's preference and RL trainers (schemas/enums.py RLType) -> what SFT sizing leaves out
#: settings whose savings memtui does not model (each sized without it, so over), with what
#: each does (schemas/config.py; integrations/liger/args.py)
_UNMODELLED = {
    "liger_rms_norm": "Liger's fused RMSNorm",
    "liger_layer_norm": "Liger's fused LayerNorm",
    "liger_glu_activation": "Liger's fused SwiGLU/GeGLU",
    "liger_swiglu": "Liger's fused SwiGLU",
    "liger_rope": "Liger's fused RoPE",
    "lora_mlp_kernel": "axolotl's LoRA MLP kernels",
    "lora_qkv_kernel": "axolotl's LoRA QKV kernels",
    "lora_o_kernel": "axolotl's LoRA output-projection kernel",
    "tiled_mlp": "ALST's tiled MLP",
    "fused_attn_kernel": "axolotl's fused attention kernel",
    "use_kernels": "the Hub's kernels (use_kernels)",
    "torch_compile": "torch.compile",
}


def detect(data: dict[str, Any]) -> bool:
    return "base_model" in data or bool(
        {"micro_batch_size", "sequence_len"} & set(data) and "datasets" in data
    )


def read(doc: Document) -> Facts:
    data = doc.data
    facts = doc.facts()
    facts.state("trainer", True, "axolotl runs Transformers' Trainer")
    model = data.get("base_model_config") or data.get("base_model")
    if model:
        key = "base_model_config" if data.get("base_model_config") else "base_model"
        facts.state("model", str(model), key)
    _precision(facts, data)
    _sizes(facts, data)
    name = str(data.get("optimizer") or "adamw_torch_fused")
    if name.lower() in CUSTOM_OPTIM:
        value, note = CUSTOM_OPTIM[name.lower()]
        facts.state("optimizer", value, "optimizer")
        if note:
            facts.assume(note)
    else:
        optimizer(facts, "optimizer", name, data.get("optim_args"), "optimizer" not in data)
    _levers(facts, data)
    _adapter(facts, data)
    _unmodelled(facts, data)
    if model:
        prequantized(facts, key, str(model), facts.get("method") is Method.qlora)
    from memtui.plans.deepspeed_json import named

    named(facts, data.get("deepspeed"), "deepspeed", doc)
    _fsdp(facts, data)
    _parallel(facts, data)
    _objective(facts, data)
    return facts


def _precision(facts: Facts, data: dict[str, Any]) -> None:
    bf16 = data.get("bf16", "auto")
    auto = str(bf16).lower() == "auto"
    if auto:
        facts.assume("bf16: auto taken as bf16 (any GPU since Ampere)")
    amp = "bf16" if auto or as_bool(facts, "bf16", bf16) else None
    if amp is None and data.get("fp16") and as_bool(facts, "fp16", data["fp16"]):
        amp = "fp16"
    pure = next((k for k in ("bfloat16", "float16") if data.get(k) and as_bool(facts, k, data[k])),
                None)  # fmt: skip
    if amp:
        facts.state("amp", amp, "bf16" if amp == "bf16" else "fp16")
    else:
        facts.state("amp", "no", "bf16")
    load = "bf16" if amp == "bf16" or pure == "bfloat16" else "fp16" if amp or pure else "fp32"
    facts.state("load_dtype", load, pure or ("bf16" if amp != "fp16" else "fp16"))


def _sizes(facts: Facts, data: dict[str, Any]) -> None:
    micro = as_int(facts, "micro_batch_size", data.get("micro_batch_size") or 1)
    facts.state("micro_batch", micro, "micro_batch_size")
    facts.state("seq_len", as_int(facts, "sequence_len", data.get("sequence_len") or 512),
                "sequence_len")  # fmt: skip
    if data.get("gradient_accumulation_steps"):
        key = "gradient_accumulation_steps"
        facts.state("grad_accum", as_int(facts, key, data[key]), key)
    elif data.get("batch_size"):  # deprecated: the batch per GPU over all micro-batches
        batch = as_int(facts, "batch_size", data["batch_size"])
        if batch % micro:
            raise facts.error(
                "batch_size", f"{batch} is not a multiple of micro_batch_size {micro}"
            )
        facts.state("grad_accum", batch // micro, "batch_size")
    else:
        facts.default("grad_accum", 1, "gradient_accumulation_steps")


def _levers(facts: Facts, data: dict[str, Any]) -> None:
    ckpt = data.get("gradient_checkpointing")
    if ckpt not in (None, False) and (str(ckpt).startswith("offload") or as_bool(
            facts, "gradient_checkpointing", ckpt)):  # fmt: skip
        facts.state("checkpointing", Checkpointing.full, "gradient_checkpointing")
        if str(ckpt).startswith("offload"):
            facts.state("activation_offload", True, "gradient_checkpointing")
        kwargs = data.get("gradient_checkpointing_kwargs")
        if isinstance(kwargs, dict):  # handed to TrainingArguments as it is
            reentrant_variant(facts, kwargs, "gradient_checkpointing_kwargs")
    else:
        facts.default("checkpointing", Checkpointing.none, "gradient_checkpointing")
    offload = data.get("activation_offloading")
    if offload not in (None, False) and str(offload).lower() != "false":
        facts.state("activation_offload", True, "activation_offloading")
    impl = str(data.get("attn_implementation") or "").lower()
    if impl == "eager" or data.get("eager_attention"):
        facts.state("attention", Attention.eager, "attn_implementation")
    elif impl or data.get("flash_attention") or data.get("sdp_attention"):
        key = "attn_implementation" if impl else "flash_attention"
        facts.state("attention", Attention.flash, key)
    plugins = [str(p).rsplit(".", 1)[-1] for p in data.get("plugins") or []]
    # integrations/cut_cross_entropy/args.py: cut_cross_entropy defaults to True once the
    # plugin is listed
    cce = "CutCrossEntropyPlugin" in plugins and data.get("cut_cross_entropy") is not False
    for key in ("liger_fused_linear_cross_entropy", "cut_cross_entropy"):
        if data.get(key) and as_bool(facts, key, data[key]):
            facts.state("loss", LossKind.fused, key)
            break
    else:
        if cce:
            facts.state("loss", LossKind.fused, "plugins (CutCrossEntropyPlugin)")
            return
        if data.get("chunked_cross_entropy"):
            facts.state("loss", LossKind.chunked, "chunked_cross_entropy")
        else:
            facts.default("loss", LossKind.full, "liger_fused_linear_cross_entropy")


def _adapter(facts: Facts, data: dict[str, Any]) -> None:
    adapter = str(data.get("adapter") or "").lower()
    eight = data.get("load_in_8bit") and as_bool(facts, "load_in_8bit", data["load_in_8bit"])
    four = data.get("load_in_4bit") and as_bool(facts, "load_in_4bit", data["load_in_4bit"])
    if not adapter:
        if four or eight:
            raise facts.error(
                "load_in_4bit" if four else "load_in_8bit",
                "a quantized base trains only with an adapter (adapter: qlora)",
            )
        facts.state("method", Method.full, "adapter")
        return
    if adapter not in ("lora", "qlora"):
        facts.state("method", Unsupported(f"adapter {adapter!r}"), "adapter")
        return
    if adapter == "qlora" and not four:
        raise facts.error("adapter", "qlora needs load_in_4bit: true")
    if eight:
        facts.state("method", Unsupported("8-bit base models (load_in_8bit)"), "load_in_8bit")
        return
    facts.state("method", Method.qlora if four else Method.lora, "adapter")
    if data.get("lora_r") is None:
        raise facts.error("lora_r", "missing: an adapter needs its rank")
    facts.state("lora_rank", as_int(facts, "lora_r", data["lora_r"]), "lora_r")
    facts.state("lora_dropout", as_float(facts, "lora_dropout", data.get("lora_dropout") or 0.0),
                "lora_dropout")  # fmt: skip
    if data.get("lora_target_linear") and as_bool(facts, "lora_target_linear",
                                                  data["lora_target_linear"]):  # fmt: skip
        # utils/lora.py: every linear module is added to lora_target_modules
        where = "lora_target_linear" + (", lora_target_modules" if data.get("lora_target_modules")
                                        else "")  # fmt: skip
        facts.state("lora_targets", ("all-linear",), where)
    elif data.get("lora_target_modules"):
        key = "lora_target_modules"
        facts.state("lora_targets", lora_targets(facts, key, data[key]), key)
    if data.get("lora_modules_to_save"):
        key = "lora_modules_to_save"
        facts.state("modules_to_save", as_names(facts, key, data[key]), key)
    if four:
        nested = dig(data, "bnb_config_kwargs.bnb_4bit_use_double_quant")
        double = True if nested is None else as_bool(facts, "bnb_config_kwargs", nested)
        # load_in_4bit is bitsandbytes' NF4, double-quantized unless the nested key says not
        where = "load_in_4bit, bnb_config_kwargs.bnb_4bit_use_double_quant"
        facts.state("qlora_double_quant", double, where)


def _unmodelled(facts: Facts, data: dict[str, Any]) -> None:
    """Settings memtui reads but cannot size: each named with what memtui did instead."""
    for key, what in _UNMODELLED.items():
        if data.get(key) not in (None, False) and str(data[key]).lower() != "false":
            facts.ignore(key, f"sized without the saving of {what} (over)")
    if data.get("fp8") and as_bool(facts, "fp8", data["fp8"]):
        facts.ignore("fp8", "torchao's float8 matmuls counted as bf16 (over)")
    if data.get("gptq") and as_bool(facts, "gptq", data["gptq"]):
        facts.assume("gptq: the GPTQ-quantized base counted as a 16-bit base (over)")
    quant = data.get("model_quantization_config")
    if quant:
        dequantize = dig(data, "model_quantization_config_kwargs.dequantize")
        if dequantize:
            facts.assume(f"model_quantization_config {quant} with dequantize: the base is "
                         "sized dequantized, as it loads")  # fmt: skip
        else:
            facts.assume(f"model_quantization_config {quant}: the quantized base counted as a "
                         "16-bit base (over)")  # fmt: skip
    if data.get("unfrozen_parameters"):
        if facts.get("method") is Method.full:
            facts.ignore("unfrozen_parameters", "only the parameters it names train; sized "
                         "with every parameter trainable (over)")  # fmt: skip
        else:
            facts.ignore("unfrozen_parameters", "not modelled beside the adapter (only the "
                         "adapter counted as trainable)")  # fmt: skip


def _fsdp(facts: Facts, data: dict[str, Any]) -> None:
    config = data.get("fsdp_config") or {}
    items = data.get("fsdp") or []
    if not config and not items:
        return
    if not isinstance(config, dict):
        raise facts.error("fsdp_config", f"expected a mapping, got {config!r}")
    settings = unprefixed(config)
    raw = data.get("fsdp_version", settings.get("version", 1))
    version = fsdp_version(facts, "fsdp_version", raw)
    for item in items if isinstance(items, list) else str(items).split():
        lowered = str(item).lower()
        if lowered == "offload":
            settings.setdefault("offload_params", True)
        elif lowered != "auto_wrap":
            settings.setdefault("sharding_strategy", sharding_name(facts, "fsdp", item))

    def where(key: str) -> str:
        return f"fsdp_config.{key}" if key in settings and key in unprefixed(config) else "fsdp"

    read_fsdp(facts, settings, where, version)


def _parallel(facts: Facts, data: dict[str, Any]) -> None:
    if data.get("tensor_parallel_size"):
        tp = as_int(facts, "tensor_parallel_size", data["tensor_parallel_size"])
        if tp > 1:
            facts.state("tp", tp, "tensor_parallel_size")
    if data.get("context_parallel_size") and as_int(facts, "context_parallel_size",
                                                    data["context_parallel_size"]) > 1:  # fmt: skip
        facts.ignore("context_parallel_size", "context parallel not modelled: activations "
                     "counted whole (over)")  # fmt: skip
    replicate = as_int(facts, "dp_replicate_size", data.get("dp_replicate_size") or 1)
    shard = as_int(facts, "dp_shard_size", data.get("dp_shard_size") or 1)
    if shard > 1 and replicate == 1:
        # accelerate's ParallelismConfig shards FSDP over dp_shard x cp: the GPUs over tp
        facts.assume(f"dp_shard_size {shard}: FSDP shards over all GPUs but tensor parallel "
                     "ones (dp_shard x cp); more GPUs would replicate (HSDP), which memtui sizes "
                     "only with dp_replicate_size")  # fmt: skip
    if data.get("dp_shard_size") and data.get("dp_replicate_size"):
        # utils/distributed.py _get_parallel_config_kwargs: with both data-parallel sizes
        # given, any world but their product with tp and cp is refused
        cp = as_int(facts, "context_parallel_size", data.get("context_parallel_size") or 1)
        tp = as_int(facts, "tensor_parallel_size", data.get("tensor_parallel_size") or 1)
        facts.state("world_size", replicate * shard * tp * cp, "dp_shard_size")
    if replicate > 1 and shard > 1:
        facts.state("strategy", Strategy.hsdp, "dp_shard_size, dp_replicate_size")
        facts.state("hsdp_shard", shard, "dp_shard_size")


def export(plan: Plan) -> str:
    """The plan as an axolotl config (`axolotl train FILE`); datasets are the user's to add."""
    import yaml

    if plan.stack not in (StackName.trainer, StackName.deepspeed, StackName.fsdp1,
                          StackName.fsdp2):  # fmt: skip
        raise ConfigError(
            f"--format axolotl writes an axolotl config: the plan's stack is {plan.stack.value} "
            "(axolotl runs the trainer, deepspeed, fsdp2 and fsdp1 stacks)"
        )
    if plan.precision is Precision.bf16_autocast:
        raise ConfigError(
            "axolotl loads the model in its autocast dtype: fp32 weights under bf16 autocast "
            "(bf16-autocast) is no axolotl setup; choose precision bf16"
        )
    config: dict[str, Any] = {
        "base_model": plan.model.name,
        "sequence_len": plan.seq_len,
        "micro_batch_size": plan.micro_batch,
        "gradient_accumulation_steps": plan.grad_accum,
        "optimizer": optim_name(plan),
        "bf16": plan.precision in (Precision.bf16_mixed,)
        or (plan.precision is Precision.bf16 and plan.stack is StackName.trainer),
        "gradient_checkpointing": "offload"
        if plan.activation_offload
        else plan.checkpointing is Checkpointing.full,
        "attn_implementation": "eager" if plan.attention is Attention.eager else "sdpa",
        "datasets": [],
    }
    if plan.precision is Precision.bf16 and plan.stack is not StackName.trainer:
        config["bfloat16"] = True  # bf16 weights without autocast
    if plan.optimizer is Optimizer.sgd_momentum:
        config["optim_args"] = "momentum=0.9"
    if plan.loss is LossKind.fused:
        config["plugins"] = ["axolotl.integrations.liger.LigerPlugin"]
        config["liger_fused_linear_cross_entropy"] = True
    if plan.method is not Method.full:
        config["adapter"] = plan.method.value
        config["lora_r"] = plan.lora_rank
        config["lora_alpha"] = 2 * plan.lora_rank
        config["lora_dropout"] = plan.lora_dropout
        if plan.lora_targets == ("all-linear",):
            config["lora_target_linear"] = True
        else:
            config["lora_target_modules"] = list(plan.lora_targets)
        if plan.modules_to_save:
            config["lora_modules_to_save"] = list(plan.modules_to_save)
        if plan.method is Method.qlora:
            config["load_in_4bit"] = True
            config["bnb_config_kwargs"] = {"bnb_4bit_use_double_quant": plan.qlora_double_quant}
    if plan.stack is StackName.deepspeed:
        import json

        from memtui.plans.deepspeed_json import export as deepspeed

        config["deepspeed"] = json.loads(deepspeed(plan))
    elif plan.stack in (StackName.fsdp1, StackName.fsdp2):
        _export_fsdp(plan, config)
    if plan.tp > 1:
        config["tensor_parallel_size"] = plan.tp
    _export_objective(plan, config)
    return "# axolotl config written by memtui: add your datasets\n" + yaml.safe_dump(
        config, sort_keys=False
    )


def _export_fsdp(plan: Plan, config: dict[str, Any]) -> None:
    from memtui.plans.accelerate_yaml import sharding_of

    version = 1 if plan.stack is StackName.fsdp1 else 2
    fsdp: dict[str, Any] = {
        "offload_params": plan.offload is Offload.params,
        "auto_wrap_policy": "TRANSFORMER_BASED_WRAP",
        "state_dict_type": "SHARDED_STATE_DICT",
    }
    config["fsdp_version"] = version
    if version == 2:
        fsdp["reshard_after_forward"] = sharding_of(plan, 2)
        if plan.strategy is Strategy.hsdp:
            config["dp_shard_size"] = strategy_spec(plan.strategy).shard_count(plan)
            config["dp_replicate_size"] = plan.hardware.nodes
    else:
        config["fsdp"] = [str(sharding_of(plan, 1)).lower(), "auto_wrap"]
    config["fsdp_config"] = fsdp


# schemas/enums.py RLType: the trainers axolotl builds with `rl:` (core/trainers/ builders)
_RL = {
    "dpo": Objective.dpo,
    "ipo": Objective.ipo,
    "orpo": Objective.orpo,
    "kto": Objective.kto,
    "simpo": Objective.simpo,
    "grpo": Objective.grpo,
}


def _objective(facts: Facts, data: dict[str, Any]) -> None:
    """`rl:` (TRL's DPO, ORPO, KTO, CPO-SimPO and GRPO trainers), `reward_model: true`
    (TRL's RewardTrainer), `rl_beta` and the `trl:` block (schemas/trl.py TRLConfig: beta,
    num_generations, max_completion_length, use_vllm, vllm_mode,
    vllm_gpu_memory_utilization), `vllm.gpu_memory_utilization` (schemas/vllm.py)."""
    rl = data.get("rl")
    trl: dict[str, Any] = data["trl"] if isinstance(data.get("trl"), dict) else {}
    if data.get("process_reward_model") and as_bool(facts, "process_reward_model",
                                                    data["process_reward_model"]):  # fmt: skip
        why = "a process reward model (token classification)"
        facts.state("objective", Unsupported(why), "process_reward_model")
        return
    if rl:
        name = str(rl).lower()
        if name not in _RL:
            facts.state("objective", Unsupported(f"rl: {name}"), "rl")
            return
        facts.state("objective", _RL[name], "rl")
    elif data.get("reward_model") and as_bool(facts, "reward_model", data["reward_model"]):
        facts.state("objective", Objective.reward, "reward_model")
        return
    else:
        facts.default("objective", Objective.sft, "rl")
        return
    beta = trl.get("beta", data.get("rl_beta"))
    if beta is not None:
        facts.state("beta", as_float(facts, "trl.beta", beta), "trl.beta" if "beta" in trl
                    else "rl_beta")  # fmt: skip
    for key, field in (("num_generations", "num_generations"),
                       ("max_completion_length", "max_completion_length")):  # fmt: skip
        if trl.get(key) is not None:
            facts.state(field, as_int(facts, f"trl.{key}", trl[key]), f"trl.{key}")
    if data.get("max_prompt_len") is not None:
        prompt = as_int(facts, "max_prompt_len", data["max_prompt_len"])
        facts.state("max_prompt_length", prompt, "max_prompt_len")
    if not (trl.get("use_vllm") and as_bool(facts, "trl.use_vllm", trl["use_vllm"])):
        facts.default("vllm_mode", VllmMode.none, "trl.use_vllm")
        return
    mode = str(trl.get("vllm_mode") or "server").lower()
    if mode not in ("server", "colocate"):
        raise facts.error("trl.vllm_mode", f"unknown mode {mode!r} (server, colocate)")
    if "vllm_mode" not in trl:
        facts.assume("trl.use_vllm without trl.vllm_mode: a vLLM server (axolotl vllm-serve)")
    facts.state("vllm_mode", VllmMode(mode), "trl.vllm_mode")
    vllm: dict[str, Any] = data["vllm"] if isinstance(data.get("vllm"), dict) else {}
    share = trl.get("vllm_gpu_memory_utilization", vllm.get("gpu_memory_utilization"))
    if share is not None and mode == "colocate":
        where = ("trl.vllm_gpu_memory_utilization" if "vllm_gpu_memory_utilization" in trl
                 else "vllm.gpu_memory_utilization")  # fmt: skip
        facts.state("vllm_gpu_memory_utilization", as_float(facts, where, share), where)
    if trl.get("vllm_enable_sleep_mode") is not None:
        sleep = as_bool(facts, "trl.vllm_enable_sleep_mode", trl["vllm_enable_sleep_mode"])
        facts.state("vllm_sleep_mode", sleep, "trl.vllm_enable_sleep_mode")


def _export_objective(plan: Plan, config: dict[str, Any]) -> None:
    """The objective's keys, as `_objective` reads them."""
    if plan.objective is Objective.sft:
        return
    if plan.objective is Objective.reward:
        config["reward_model"] = True
        return
    names = {v: k for k, v in _RL.items()}
    if plan.objective not in names:
        raise ConfigError(f"axolotl has no rl: {plan.objective.value} (its RLType: "
                          f"{', '.join(_RL)})")  # fmt: skip
    config["rl"] = names[plan.objective]
    trl: dict[str, Any] = {}
    if plan.beta is not None:
        trl["beta"] = plan.beta
    if plan.objective is Objective.grpo:
        trl["num_generations"] = plan.num_generations
        trl["max_completion_length"] = plan.max_completion_length
        config["max_prompt_len"] = plan.max_prompt_length
        if plan.vllm_mode is not VllmMode.none:
            trl["use_vllm"] = True
            trl["vllm_mode"] = plan.vllm_mode.value
            if plan.vllm_mode is VllmMode.colocate:
                trl["vllm_gpu_memory_utilization"] = plan.vllm_gpu_memory_utilization
                trl["vllm_enable_sleep_mode"] = plan.vllm_sleep_mode
    if trl:
        config["trl"] = trl
