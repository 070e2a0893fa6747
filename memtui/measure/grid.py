"""Tiny models and the grid of plans measured through real stacks on CPU.

One place for the configurations `tests/test_measure_stacks.py` checks in CI (the rows marked
`ci`) and `benchmarks/accuracy.py --stack ...` tabulates in docs/accuracy.md (every row): hidden
256, 2 layers, vocabulary 4096 unless a row says otherwise, random weights, a sequence of 256
and a micro-batch of 2. The `custom loop` rows are memtui's own step run as a hand-written loop
that keeps the model output until after the optimizer step (`--loop custom`), the model code
being transformers' own. Torch-free: only config dicts and plans.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from memtui.estimator.configs import architecture_from_config
from memtui.estimator.plan import Hardware, ModelSpec, Plan


def llama(
    kv: int = 4, vocab: int = 4096, tie: bool = False, model_type: str = "llama"
) -> dict[str, Any]:
    """A 2-layer LLaMA-style config.json (SwiGLU, RMSNorm, GQA with `kv` heads of 8)."""
    return {
        "model_type": model_type,
        "hidden_size": 256,
        "intermediate_size": 688,
        "num_attention_heads": 8,
        "num_key_value_heads": kv,
        "num_hidden_layers": 2,
        "vocab_size": vocab,
        "tie_word_embeddings": tie,
        "rms_norm_eps": 1e-5,
    }


def gpt2(vocab: int = 4096, dropout: bool = True) -> dict[str, Any]:
    """A 2-layer GPT-2 config.json with its default dropouts (0.1 on the attention
    probabilities, the residuals and the embeddings) or none."""
    config: dict[str, Any] = {
        "model_type": "gpt2",
        "n_embd": 256,
        "n_layer": 2,
        "n_head": 8,
        "vocab_size": vocab,
        "n_positions": 1024,
        "activation_function": "gelu_new",
    }
    if not dropout:
        config.update(attn_pdrop=0.0, resid_pdrop=0.0, embd_pdrop=0.0)
    return config


def plan_for(config: dict[str, Any], fields: dict[str, Any], name: str = "test") -> Plan:
    """The plan of `fields` for the model of `config` (sequence 256, micro-batch 2)."""
    arch = architecture_from_config(dict(config))
    base: dict[str, Any] = {"seq_len": 256, "micro_batch": 2}
    return Plan(model=ModelSpec.from_architecture(name, arch), **{**base, **fields})


TRAINER: dict[str, Any] = {
    "stack": "trainer",
    "strategy": "ddp",
    "hardware": Hardware(gpus_per_node=1),
}
FSDP2: dict[str, Any] = {
    "stack": "fsdp2",
    "strategy": "fsdp",
    "hardware": Hardware(gpus_per_node=2),
}
CUSTOM: dict[str, Any] = {
    "stack": "generic",
    "loop": "custom",
    "loop_keeps_output": True,
    "hardware": Hardware(gpus_per_node=1),
}
"""A hand-written loop (memtui/measure/step.py): `output = model(...)`, `output.loss.backward()`,
the optimizer step, the output dropped after it; bf16 weights with an fp32 master."""
REENTRANT: dict[str, Any] = {"checkpointing": "full", "checkpoint_variant": "reentrant"}
LORA: dict[str, Any] = {"method": "lora", "lora_rank": 8}  # PEFT's default rank
QV: dict[str, Any] = {**LORA, "lora_targets": ("q_proj", "v_proj")}  # PEFT's llama default


@dataclass(frozen=True)
class Row:
    """One plan of the grid."""

    name: str
    config: dict[str, Any]
    fields: dict[str, Any]
    ci: bool = True
    """Checked in CI (tests/test_measure_stacks.py); else tabulated only."""
    why: str = ""
    """Why a row stays out of CI: a known gap or a deliberately conservative estimate."""

    @property
    def plan(self) -> Plan:
        return plan_for(self.config, self.fields)


STACK_GRID: tuple[Row, ...] = (
    Row("trainer bf16", llama(), {**TRAINER, "precision": "bf16"}),
    Row("trainer bf16 ckpt", llama(), {**TRAINER, "precision": "bf16", "checkpointing": "full"}),
    Row("trainer fp32+autocast", llama(), {**TRAINER, "precision": "bf16-autocast"}),
    Row("trainer fp32+autocast ckpt", llama(), {**TRAINER, "precision": "bf16-autocast",
                                                "checkpointing": "full"}),
    # a small vocabulary: the forward's end (autocast's cache) sets the peak, not the loss
    Row("trainer fp32+autocast ckpt V=1024", llama(vocab=1024),
        {**TRAINER, "precision": "bf16-autocast", "checkpointing": "full"}),
    Row("trainer fp32", llama(), {**TRAINER, "precision": "fp32"}),
    Row("trainer fp32 eager", llama(), {**TRAINER, "precision": "fp32", "attention": "eager"}),
    Row("trainer sgd-momentum", llama(), {**TRAINER, "precision": "bf16",
                                          "optimizer": "sgd-momentum"}, ci=False),
    Row("trainer adafactor", llama(), {**TRAINER, "precision": "bf16-autocast",
                                       "optimizer": "adafactor"}),
    Row("trainer LoRA all-linear", llama(), {**TRAINER, **LORA, "precision": "bf16"}),
    Row("trainer LoRA q,v", llama(), {**TRAINER, **QV, "precision": "bf16"}),
    Row("trainer LoRA all-linear ckpt", llama(), {**TRAINER, **LORA, "precision": "bf16",
                                                  "checkpointing": "full"}),
    Row("trainer LoRA q,v fp32+autocast", llama(), {**TRAINER, **QV,
                                                    "precision": "bf16-autocast"}),
    Row("trainer LoRA all-linear + lm_head saved", llama(),
        {**TRAINER, **LORA, "precision": "bf16", "modules_to_save": ("lm_head",)}),
    Row("trainer LoRA all-linear dropout 0.05", llama(), {**TRAINER, **LORA, "precision": "bf16",
                                                          "lora_dropout": 0.05}, ci=False,
        why="the first layer's q, k, v adapters keep no dropout mask (their input needs no "
        "gradient: the embedding is frozen); the estimate counts them, 3h bytes per token"),
    Row("trainer GPT-2 dropout eager", gpt2(), {**TRAINER, "precision": "bf16",
                                                "attention": "eager"}),
    Row("trainer GPT-2 dropout eager ckpt", gpt2(), {**TRAINER, "precision": "bf16",
                                                     "attention": "eager",
                                                     "checkpointing": "full"}),
    Row("trainer GPT-2 no dropout", gpt2(dropout=False), {**TRAINER, "precision": "bf16"}),
    Row("trainer GPT-2 no dropout fp32+autocast ckpt", gpt2(dropout=False),
        {**TRAINER, "precision": "bf16-autocast", "checkpointing": "full"}),
    Row("trainer GPT-2 LoRA c_attn", gpt2(), {**TRAINER, **LORA, "precision": "bf16",
                                              "attention": "eager",
                                              "lora_targets": ("c_attn",)}, ci=False),
    # torch's reentrant CheckpointFunction, the Trainer's default before transformers 5.0
    Row("trainer fp32+autocast ckpt V=1024 reentrant", llama(vocab=1024),
        {**TRAINER, **REENTRANT, "precision": "bf16-autocast"}),
    Row("trainer bf16 ckpt V=1024 reentrant", llama(vocab=1024),
        {**TRAINER, **REENTRANT, "precision": "bf16"}),
    Row("trainer LoRA all-linear ckpt reentrant", llama(), {**TRAINER, **LORA, **REENTRANT,
                                                            "precision": "bf16"}),
    Row("trainer GPT-2 dropout eager ckpt reentrant", gpt2(),
        {**TRAINER, **REENTRANT, "precision": "bf16", "attention": "eager"}),
    Row("custom loop keeping its output", llama(), {**CUSTOM}),
    Row("custom loop keeping its output, LoRA", llama(), {**CUSTOM, **LORA}),
    Row("custom loop keeping its output, ckpt", llama(), {**CUSTOM, "checkpointing": "full"}),
    Row("fsdp2 bf16-mixed", llama(), {**FSDP2}),
    Row("fsdp2 bf16-mixed ckpt", llama(), {**FSDP2, "checkpointing": "full"}, ci=False),
    Row("fsdp2 bf16", llama(), {**FSDP2, "precision": "bf16"}, ci=False),
    Row("fsdp2 fp32", llama(), {**FSDP2, "precision": "fp32"}, ci=False),
    Row("fsdp2 LoRA all-linear", llama(), {**FSDP2, **LORA}),
    Row("fsdp2 ckpt accumulation 2", llama(), {**FSDP2, "checkpointing": "full",
                                               "grad_accum": 2}),
    Row("fsdp2 tied embeddings", llama(tie=True), {**FSDP2}, ci=False),
    Row("fsdp2 GPT-2 shard-grad-op", gpt2(), {**FSDP2, "strategy": "fsdp-shard-grad-op",
                                              "attention": "eager"}),
    Row("fsdp2 ckpt V=1024", llama(vocab=1024), {**FSDP2, "checkpointing": "full"}, ci=False,
        why="a layer's backward sets the peak: the estimate counts all of a unit's gradients "
        "there (an upper bound)"),
)  # fmt: skip
"""Every plan measured through a real stack."""


def deep(vocab: int = 1024) -> dict[str, Any]:
    """A 4-layer LLaMA-style config.json: hidden 256, MLP 512, 4 heads of which 2 for K/V."""
    return {**llama(kv=2, vocab=vocab), "num_hidden_layers": 4, "num_attention_heads": 4,
            "intermediate_size": 512}  # fmt: skip


DPO: dict[str, Any] = {**TRAINER, "precision": "bf16", "objective": "dpo"}
GRPO: dict[str, Any] = {
    **TRAINER,
    "precision": "bf16",
    "objective": "grpo",
    "num_generations": 2,
    "max_prompt_length": 32,
    "max_completion_length": 32,
    "vllm_mode": "none",
    "grad_accum": 2,
}
"""GRPO with Transformers' generate: 2 completions of 32 tokens per 32-token prompt, a
micro-batch of 2, steps_per_generation = gradient_accumulation_steps = 2 (TRL's default)."""

OBJECTIVE_GRID: tuple[Row, ...] = (
    Row("dpo full", llama(), {**DPO}),
    Row("dpo LoRA", llama(), {**DPO, **LORA}),
    Row("dpo full ckpt", llama(), {**DPO, "checkpointing": "full"}),
    Row("dpo LoRA ckpt", llama(), {**DPO, **LORA, "checkpointing": "full"}),
    Row("dpo full s64 b1", llama(), {**DPO, "seq_len": 64, "micro_batch": 1}, ci=False),
    Row("dpo LoRA s64 b1", llama(), {**DPO, **LORA, "seq_len": 64, "micro_batch": 1},
        ci=False),
    Row("dpo full 4 layers V=1024 s128", deep(), {**DPO, "seq_len": 128}, ci=False),
    Row("dpo LoRA 4 layers V=1024 s128", deep(), {**DPO, **LORA, "seq_len": 128}, ci=False),
    Row("reward full", llama(), {**DPO, "objective": "reward"}),
    Row("reward full s64 b1", llama(), {**DPO, "objective": "reward", "seq_len": 64,
                                        "micro_batch": 1}, ci=False),
    Row("reward full 4 layers V=1024 s128", deep(), {**DPO, "objective": "reward",
                                                     "seq_len": 128}, ci=False),
    Row("grpo full generate", llama(), {**GRPO}),
    Row("grpo LoRA generate", llama(), {**GRPO, **LORA}, ci=False),
    Row("grpo full generate 4 generations", llama(), {**GRPO, "num_generations": 4,
                                                      "micro_batch": 4}, ci=False),
    Row("reward LoRA", llama(), {**DPO, **LORA, "objective": "reward"}),
)  # fmt: skip
"""The objectives measured through real TRL trainers (memtui/measure/trl_step.py)."""
