"""torchtune's recipe configs (`tune run RECIPE --config FILE key=value...`) <-> plan facts.

Keys as torchtune's recipes read them (recipes/*_finetune_*.py, recipes/configs/**; pytorch/
torchtune at bd2a0fc): `model._component_` (a builder: torchtune.models.llama3_1.
qlora_llama3_1_8b is Llama 3.1 8B under QLoRA) with the LoRA builders' `lora_attn_modules`
(q_proj, k_proj, v_proj, output_proj), `apply_lora_to_mlp`, `apply_lora_to_output`,
`lora_rank`, `lora_dropout`, `use_dora`, `quantize_base`; `batch_size`,
`gradient_accumulation_steps`, `tokenizer.max_seq_len` (null: as long as the data), `dtype`
(bf16, fp32), `optimizer._component_`, `optimizer_in_bwd`, `enable_activation_checkpointing`,
`enable_activation_offloading`, `fsdp_cpu_offload` (or `fsdp.cpu_offload`),
`tensor_parallel_dim`, `loss._component_` (CEWithChunkedOutputLoss, LinearCrossEntropyLoss,
torch.nn.CrossEntropyLoss; rlhf's DPOLoss and the other preference losses: the plan's objective,
with the reference their recipe keeps). Builders map to
the catalog (`BUILDERS`); a builder memtui does not know falls back to the config.json in
`checkpointer.checkpoint_dir`. A recipe runs on one GPU (`*_single_device`) or shards with
FSDP (`*_distributed`): the strategy comes from the launch, not the file.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any

from memtui.estimator.choices import (
    Checkpointing,
    LossKind,
    Method,
    Objective,
    Offload,
    Optimizer,
    OptimizerKernel,
    Precision,
    StackName,
)
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
)

if TYPE_CHECKING:
    from memtui.estimator.plan import Plan

#: torchtune's model builders (torchtune/models/*/__init__.py) -> the catalog's repo id; the
#: instruct builders share their base model's architecture
BUILDERS: dict[str, str] = {
    "llama2_7b": "meta-llama/Llama-2-7b-hf",
    "llama2_13b": "meta-llama/Llama-2-13b-hf",
    "llama2_70b": "meta-llama/Llama-2-70b-hf",
    "llama3_8b": "meta-llama/Meta-Llama-3-8B",
    "llama3_70b": "meta-llama/Meta-Llama-3-70B",
    "llama3_1_8b": "meta-llama/Llama-3.1-8B",
    "llama3_1_70b": "meta-llama/Llama-3.1-70B",
    "llama3_1_405b": "meta-llama/Llama-3.1-405B",
    "llama3_2_1b": "meta-llama/Llama-3.2-1B",
    "llama3_2_3b": "meta-llama/Llama-3.2-3B",
    "mistral_7b": "mistralai/Mistral-7B-v0.1",
    "gemma_2b": "google/gemma-2b",
    "gemma_7b": "google/gemma-7b",
    "gemma2_2b": "google/gemma-2-2b",
    "gemma2_9b": "google/gemma-2-9b",
    "gemma2_27b": "google/gemma-2-27b",
    "phi3_mini": "microsoft/Phi-3-mini-4k-instruct",
    "qwen2_5_0_5b": "Qwen/Qwen2.5-0.5B",
    "qwen2_5_1_5b_base": "Qwen/Qwen2.5-1.5B",
    "qwen2_5_1_5b_instruct": "Qwen/Qwen2.5-1.5B",
    "qwen2_5_3b": "Qwen/Qwen2.5-3B",
    "qwen2_5_7b_base": "Qwen/Qwen2.5-7B",
    "qwen2_5_7b_instruct": "Qwen/Qwen2.5-7B",
    "qwen2_5_14b_base": "Qwen/Qwen2.5-14B",
    "qwen2_5_14b_instruct": "Qwen/Qwen2.5-14B",
    "qwen2_5_32b_base": "Qwen/Qwen2.5-32B",
    "qwen2_5_32b_instruct": "Qwen/Qwen2.5-32B",
    "qwen2_5_72b_base": "Qwen/Qwen2.5-72B",
    "qwen2_5_72b_instruct": "Qwen/Qwen2.5-72B",
    "qwen3_8b_base": "Qwen/Qwen3-8B",
    "qwen3_8b_instruct": "Qwen/Qwen3-8B",
    "llama3_3_70b": "meta-llama/Llama-3.3-70B-Instruct",
    "phi4_14b": "microsoft/phi-4",
    "qwen3_0_6b_base": "Qwen/Qwen3-0.6B",
    "qwen3_0_6b_instruct": "Qwen/Qwen3-0.6B",
    "qwen3_1_7b_base": "Qwen/Qwen3-1.7B",
    "qwen3_1_7b_instruct": "Qwen/Qwen3-1.7B",
    "qwen3_4b_base": "Qwen/Qwen3-4B",
    "qwen3_4b_instruct": "Qwen/Qwen3-4B",
    "qwen3_14b_base": "Qwen/Qwen3-14B",
    "qwen3_14b_instruct": "Qwen/Qwen3-14B",
    "qwen3_32b": "Qwen/Qwen3-32B",
}
#: builders of models whose Hugging Face checkpoint fuses q/k/v and gate/up, which torchtune
#: builds apart (models/phi3/_component_builders.py phi3: q_proj, k_proj, v_proj; phi3_mlp:
#: gate_proj, up_proj; phi4 uses the same builders), so its LoRA names q/k/v apart
_UNFUSED = ("phi3_", "phi4_")
#: torchtune's module names -> PEFT's (Hugging Face) names in those families
_ATTENTION = {"q_proj": "q_proj", "k_proj": "k_proj", "v_proj": "v_proj", "output_proj": "o_proj"}
_MLP = ("gate_proj", "up_proj", "down_proj")
OPTIMIZERS: dict[str, Optimizer] = {
    "torch.optim.AdamW": Optimizer.adamw,
    "torch.optim.Adam": Optimizer.adamw,
    "torch.optim.SGD": Optimizer.sgd,
    "bitsandbytes.optim.AdamW8bit": Optimizer.adamw8bit,
    "bitsandbytes.optim.PagedAdamW8bit": Optimizer.paged_adamw8bit,
    "bitsandbytes.optim.PagedAdamW": Optimizer.paged_adamw,
    "bitsandbytes.optim.PagedAdamW32bit": Optimizer.paged_adamw,
    "bitsandbytes.optim.Lion": Optimizer.lion,
    "torchao.optim.AdamW8bit": Optimizer.adamw8bit,
    "torchao.prototype.low_bit_optim.AdamW8bit": Optimizer.adamw8bit,
    "transformers.optimization.Adafactor": Optimizer.adafactor,
}
_LOSSES = {
    "CEWithChunkedOutputLoss": LossKind.chunked,
    # chunked linear cross-entropy: logits never whole; the torchtune stack's nearest is the
    # chunked loss, which counts more (never optimistic)
    "LinearCrossEntropyLoss": LossKind.chunked,
    "CrossEntropyLoss": LossKind.full,
}


def detect(data: dict[str, Any]) -> bool:
    component = dig(data, "model._component_")
    return isinstance(component, str) and component.startswith("torchtune.")


def builder_of(component: str) -> tuple[str, str]:
    """(method prefix, base builder) of a model component: 'qlora', 'llama3_1_8b'."""
    name = component.rsplit(".", 1)[-1]
    match = re.match(r"(q?lora_|dora_|qdora_)?(.+)", name)
    assert match is not None
    return (match.group(1) or "").rstrip("_"), match.group(2)


def read(doc: Document) -> Facts:
    data = doc.data
    facts = doc.facts()
    facts.state("stack", StackName.torchtune, "model._component_")
    component = str(dig(data, "model._component_"))
    prefix, base = builder_of(component)
    if base in BUILDERS:
        facts.state("model", BUILDERS[base], "model._component_")
    elif dig(data, "checkpointer.checkpoint_dir"):
        folder = doc.locate(str(dig(data, "checkpointer.checkpoint_dir")))
        facts.state("model", str(folder), "checkpointer.checkpoint_dir")
        facts.assume(f"builder {base} not in memtui's catalog: the model from {folder}")
    else:
        raise facts.error("model._component_", f"builder {base} is not in memtui's catalog and "
                          "no checkpointer.checkpoint_dir names its config.json")  # fmt: skip
    if base.startswith(_UNFUSED):
        facts.state("unfused", True, "model._component_")
    _method(facts, data.get("model") or {}, prefix)
    dtype = str(data.get("dtype", "bf16")).lower()
    if dtype not in ("bf16", "fp32"):
        raise facts.error("dtype", f"bf16 or fp32, not {dtype!r}")
    facts.state("precision", Precision(dtype), "dtype")
    facts.state("micro_batch", as_int(facts, "batch_size", data.get("batch_size", 1)),
                "batch_size")  # fmt: skip
    accum = as_int(facts, "gradient_accumulation_steps", data.get("gradient_accumulation_steps", 1))
    facts.state("grad_accum", accum, "gradient_accumulation_steps")
    seq = dig(data, "tokenizer.max_seq_len")
    if seq is not None:
        facts.state("seq_len", as_int(facts, "tokenizer.max_seq_len", seq), "tokenizer.max_seq_len")
    else:
        facts.assume("tokenizer.max_seq_len is null (as long as the data): kept the plan's")
    _optimizer(facts, data.get("optimizer") or {})
    for key, field, value in (
        ("optimizer_in_bwd", "optimizer_in_backward", True),
        ("enable_activation_checkpointing", "checkpointing", Checkpointing.full),
        ("enable_activation_offloading", "activation_offload", True),
        ("fsdp_cpu_offload", "offload", Offload.params),
        ("fsdp.cpu_offload", "offload", Offload.params),  # the 405B configs' block
    ):
        setting = dig(data, key)
        if setting is not None and as_bool(facts, key, setting):
            facts.state(field, value, key)
    loss = str(dig(data, "loss._component_") or "").rsplit(".", 1)[-1]
    if loss in _PREFERENCE_LOSSES:
        _objective(facts, data, loss)
    elif loss:
        if loss not in _LOSSES:
            raise facts.error("loss._component_", f"unknown loss {loss}")
        facts.state("loss", _LOSSES[loss], "loss._component_")
        if loss == "LinearCrossEntropyLoss":
            facts.assume("LinearCrossEntropyLoss counted as the chunked loss (over-predicts)")
    if data.get("compile") and as_bool(facts, "compile", data["compile"]):
        facts.ignore("compile", "torch.compile's savings are not modelled (over)")
    if data.get("tensor_parallel_dim") is not None:
        tp = as_int(facts, "tensor_parallel_dim", data["tensor_parallel_dim"])
        facts.state("tp", tp, "tensor_parallel_dim")
    if data.get("custom_sharded_layers"):
        facts.ignore("custom_sharded_layers", "the layers it names are sharded as their own "
                     "FSDP units; not modelled (over)")  # fmt: skip
    return facts


def _method(facts: Facts, model: dict[str, Any], prefix: str) -> None:
    dora = model.get("use_dora") is not None and as_bool(facts, "model.use_dora", model["use_dora"])
    if prefix in ("dora", "qdora") or dora:
        key = "model.use_dora" if dora else "model._component_"
        facts.assume(f"{key}: DoRA counted as LoRA (without its magnitude vectors)")
    if not prefix:
        facts.state("method", Method.full, "model._component_")
        return
    quantized = prefix.startswith("q") or (
        model.get("quantize_base") is not None
        and as_bool(facts, "model.quantize_base", model["quantize_base"])
    )
    where = "model._component_" + (", quantize_base" if model.get("quantize_base") else "")
    facts.state("method", Method.qlora if quantized else Method.lora, where)
    facts.state("lora_rank", as_int(facts, "model.lora_rank", model.get("lora_rank", 8)),
                "model.lora_rank")  # fmt: skip
    if "lora_dropout" in model:
        dropout = as_float(facts, "model.lora_dropout", model["lora_dropout"])
        facts.state("lora_dropout", dropout, "model.lora_dropout")
    else:  # the builders' default moved (models/llama2/_model_builders.py lora_llama2_7b)
        facts.default("lora_dropout", 0.0, "model.lora_dropout")
        facts.assume("model.lora_dropout unset: 0.0, the builders' default since torchtune "
                     "0.3.0 (0.05 before it: --lora-dropout 0.05 for such a job)")  # fmt: skip
    attention = as_names(facts, "model.lora_attn_modules", model.get("lora_attn_modules", []))
    unknown = [n for n in attention if n not in _ATTENTION]
    if unknown:
        raise facts.error("model.lora_attn_modules", f"unknown module {unknown[0]!r} "
                          f"({', '.join(_ATTENTION)})")  # fmt: skip
    mlp = as_bool(facts, "model.apply_lora_to_mlp", model.get("apply_lora_to_mlp", False))
    output = as_bool(facts, "model.apply_lora_to_output", model.get("apply_lora_to_output", False))
    names = tuple(_ATTENTION[n] for n in _ATTENTION if n in attention)
    if len(names) == len(_ATTENTION) and mlp:
        targets: tuple[str, ...] = ("all-linear",)
    elif len(names) == len(_ATTENTION) and not mlp:
        targets = ("attention",)
    else:
        targets = names + (_MLP if mlp else ())
    if output:
        targets += ("lm_head",)
    if not targets:
        raise facts.error("model.lora_attn_modules", "no module to adapt")
    facts.state("lora_targets", targets,
                "model.lora_attn_modules, apply_lora_to_mlp, apply_lora_to_output")  # fmt: skip


def _optimizer(facts: Facts, block: dict[str, Any]) -> None:
    component = str(block.get("_component_", "torch.optim.AdamW"))
    found = OPTIMIZERS.get(component)
    if found is None:
        facts.state("optimizer", Unsupported(f"optimizer {component}"), "optimizer._component_")
        return
    if found is Optimizer.sgd and as_float(facts, "optimizer.momentum", block.get("momentum", 0)):
        found = Optimizer.sgd_momentum
    fused = as_bool(facts, "optimizer.fused", block.get("fused", False))
    facts.state("optimizer", found, "optimizer._component_" + (", fused" if fused else ""))
    if found is Optimizer.adamw and not fused:
        # torch.optim.AdamW without fused: True steps with foreach (its default on CUDA),
        # as torchtune's 2024 configs did; fused: True is the stack's default
        facts.state("optimizer_kernel", OptimizerKernel.foreach, "optimizer.fused")


# -- export -----------------------------------------------------------------------------------

_OPTIMIZER_COMPONENT = {
    Optimizer.adamw: "torch.optim.AdamW",
    Optimizer.adamw8bit: "bitsandbytes.optim.AdamW8bit",
    Optimizer.paged_adamw8bit: "bitsandbytes.optim.PagedAdamW8bit",
    Optimizer.paged_adamw: "bitsandbytes.optim.PagedAdamW",
    Optimizer.sgd: "torch.optim.SGD",
    Optimizer.sgd_momentum: "torch.optim.SGD",
    Optimizer.adafactor: "transformers.optimization.Adafactor",
    Optimizer.lion: "bitsandbytes.optim.Lion",
}


def builder_for(plan: Plan) -> str:
    """torchtune's builder for the plan's model (the first one of that catalog id)."""
    wanted = plan.model.name.lower()
    for builder, repo in BUILDERS.items():
        if repo.lower() == wanted or repo.split("/")[-1].lower() == wanted:
            return builder
    raise ConfigError(
        f"--format torchtune: torchtune has no builder for {plan.model.name} (it builds: "
        f"{', '.join(sorted({r.split('/')[-1] for r in BUILDERS.values()}))})"
    )


def export(plan: Plan) -> str:
    """The plan as a torchtune recipe config; the checkpointer and dataset are the user's."""
    import yaml

    if plan.stack is not StackName.torchtune:
        raise ConfigError(
            f"--format torchtune writes torchtune recipe configs: the plan's stack is "
            f"{plan.stack.value} (switch to --stack torchtune)"
        )
    builder = builder_for(plan)
    package = next(
        p
        for p in (
            "llama3_3",
            "llama3_1",
            "llama3_2",
            "llama3",
            "llama2",
            "mistral",
            "gemma2",
            "gemma",
            "phi3",
            "phi4",
            "qwen2_5",
            "qwen3",
        )
        if builder.startswith(p)
    )
    prefix = {Method.full: "", Method.lora: "lora_", Method.qlora: "qlora_"}[plan.method]
    model: dict[str, Any] = {"_component_": f"torchtune.models.{package}.{prefix}{builder}"}
    if plan.method is not Method.full:
        model.update(_lora_export(plan))
    optimizer: dict[str, Any] = {"_component_": _OPTIMIZER_COMPONENT[plan.optimizer], "lr": 2e-5}
    if plan.optimizer is Optimizer.adamw and plan.optimizer_kernel is not OptimizerKernel.foreach:
        optimizer["fused"] = True
    if plan.optimizer is Optimizer.sgd_momentum:
        optimizer["momentum"] = 0.9
    loss: dict[str, Any] = {
        "_component_": {
            LossKind.chunked: "torchtune.modules.loss.CEWithChunkedOutputLoss",
            LossKind.full: "torch.nn.CrossEntropyLoss",
        }[plan.loss]
    }
    kind = "full" if plan.method is Method.full else "lora"
    recipe = _export_objective(plan, loss, kind)
    config: dict[str, Any] = {
        "model": model,
        "tokenizer": {"max_seq_len": plan.seq_len},
        "batch_size": plan.micro_batch,
        "gradient_accumulation_steps": plan.grad_accum,
        "optimizer": optimizer,
        "optimizer_in_bwd": plan.optimizer_in_backward,
        "loss": loss,
        "dtype": plan.precision.value,
        "enable_activation_checkpointing": plan.checkpointing is Checkpointing.full,
        "enable_activation_offloading": plan.activation_offload,
        "fsdp_cpu_offload": plan.offload is Offload.params,
        "device": "cuda",
    }
    if plan.hardware.gpus > 1:
        nproc = plan.hardware.gpus_per_node
        run = f"tune run --nproc_per_node {nproc} {recipe}_distributed --config FILE"
    else:
        run = f"tune run {recipe}_single_device --config FILE"
    head = (
        f"# torchtune config written by memtui; merge it into the recipe's config "
        f"(tokenizer path, checkpointer, dataset)\n# run: {run}\n"
    )
    return head + yaml.safe_dump(config, sort_keys=False)


def _lora_export(plan: Plan) -> dict[str, Any]:
    targets = set(plan.lora_targets)
    attention = [t for t, hf in _ATTENTION.items() if hf in targets]
    mlp = set(_MLP) <= targets
    if "all-linear" in targets:
        attention, mlp = list(_ATTENTION), True
    elif "attention" in targets:
        attention = list(_ATTENTION)
    loose = targets - {"all-linear", "attention", "lm_head", *_ATTENTION.values(), *_MLP}
    partial_mlp = bool(targets & set(_MLP)) and not mlp
    if loose or partial_mlp or not (attention or mlp):
        raise ConfigError(
            "--format torchtune: torchtune adapts q/k/v/output projections, the whole MLP and "
            f"the output layer; LoRA targets {', '.join(plan.lora_targets)} are not that"
        )
    return {
        "lora_attn_modules": attention,
        "apply_lora_to_mlp": mlp,
        "apply_lora_to_output": "lm_head" in targets,
        "lora_rank": plan.lora_rank,
        "lora_alpha": 2 * plan.lora_rank,
        "lora_dropout": plan.lora_dropout,
    }


# torchtune/rlhf/loss/dpo.py (DPOLoss, RSOLoss: hinge) and the older IPOLoss / SimPOLoss, the
# losses of recipes/lora_dpo_single_device.py, lora_dpo_distributed.py, full_dpo_distributed.py
_PREFERENCE_LOSSES = {
    "DPOLoss": Objective.dpo,
    "RSOLoss": Objective.dpo,
    "IPOLoss": Objective.ipo,
    "SimPOLoss": Objective.simpo,
}


def _objective(facts: Facts, data: dict[str, Any], loss: str) -> None:
    """A DPO recipe's loss: chosen and rejected concatenated (the recipes'
    concatenated_forward, whole fp32 logits: the full loss), the reference the LoRA base with
    the adapter disabled (lora_dpo_*: disable_adapter) or the `ref_checkpointer`'s copy
    (full_dpo_distributed)."""
    facts.state("objective", _PREFERENCE_LOSSES[loss], "loss._component_")
    facts.state("loss", LossKind.full, "loss._component_")
    beta = dig(data, "loss.beta")
    if beta is not None:
        facts.state("beta", as_float(facts, "loss.beta", beta), "loss.beta")


def _export_objective(plan: Plan, loss: dict[str, Any], kind: str) -> str:
    """The recipe's loss block for the plan's objective (filled in), and the recipe's name
    before _single_device / _distributed."""
    if plan.objective is Objective.sft:
        return f"{kind}_finetune"
    if plan.objective is not Objective.dpo:  # IPOLoss and SimPOLoss left torchtune.rlhf
        raise ConfigError(
            f"torchtune has no recipe for --objective {plan.objective.value} memtui writes "
            "(dpo: DPOLoss)"
        )
    if plan.loss is not LossKind.full:
        raise ConfigError("torchtune's DPO recipes take the whole logits: --loss full")
    if kind == "full" and plan.hardware.gpus == 1:
        raise ConfigError("torchtune's full DPO recipe is full_dpo_distributed: more GPUs")
    loss.clear()
    loss["_component_"] = "torchtune.rlhf.loss.DPOLoss"
    if plan.beta is not None:
        loss["beta"] = plan.beta
    return f"{kind}_dpo"
