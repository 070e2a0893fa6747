"""The closed sets of options a plan is made of; each value is its CLI spelling.

Byte widths live on the enums (`Precision.weight_bytes`, `StateDtype.bytes`) so no module
recomputes them; what a strategy or an optimizer does lives in `strategies` and `optimizers`.
"""

from __future__ import annotations

from enum import Enum


class Choice(str, Enum):
    """A closed set of options whose values are the CLI spellings."""

    def __str__(self) -> str:
        return self.value


class Method(Choice):
    full = "full"
    lora = "lora"
    qlora = "qlora"


class Precision(Choice):
    bf16_mixed = "bf16-mixed"  # bf16 compute, fp32 master weights (ZeRO paper's setting)
    bf16 = "bf16"  # pure bf16 parameters, no master copy
    fp32 = "fp32"
    # fp32 parameters, bf16 matmuls under torch.autocast: Transformers' Trainer with bf16=True
    # on a model loaded without torch_dtype, Lightning's "bf16-mixed"
    bf16_autocast = "bf16-autocast"

    @property
    def weight_bytes(self) -> int:
        """Bytes of one parameter as the model holds it (and of its gradient)."""
        return 4 if self in (Precision.fp32, Precision.bf16_autocast) else 2

    @property
    def master_bytes(self) -> int:
        """Bytes of the fp32 master copy per trainable parameter (mixed precision only:
        Micikevicius et al. 2018)."""
        return 4 if self is Precision.bf16_mixed else 0

    @property
    def activation_bytes(self) -> int:
        """Bytes of one activation element in the compute dtype."""
        return 4 if self is Precision.fp32 else 2

    @property
    def residual_bytes(self) -> int:
        """Bytes of one element of the residual stream: autocast computes matmuls in bf16 but
        adds their outputs to the fp32 embeddings (the embedding is not autocast), so the
        stream, the norms and the checkpointed layer inputs stay fp32."""
        return 4 if self in (Precision.fp32, Precision.bf16_autocast) else 2


class StackName(Choice):
    """The software that runs the plan; each keeps its own books (memtui/estimator/stacks/)."""

    generic = "generic"  # memtui's own model of a step (the design's formulas)
    trainer = "trainer"  # Transformers' Trainer + accelerate (DDP), PEFT's defaults
    deepspeed = "deepspeed"  # DeepSpeed ZeRO 1/2/3 through Transformers, "auto" resolved
    fsdp2 = "fsdp2"  # PyTorch fully_shard through accelerate / Trainer
    fsdp1 = "fsdp1"  # FullyShardedDataParallel through accelerate
    torchtune = "torchtune"  # torchtune's recipes: pure bf16, its own LoRA and losses
    litgpt = "litgpt"  # Lightning's LitGPT (lit-gpt): Fabric, its own model code


class Loop(Choice):
    auto = "auto"  # the stack's own loop (StackCapabilities.own_loop)
    trainer = "trainer"  # Transformers' Trainer.training_step
    accelerate = "accelerate"  # accelerate's examples: output = model(**batch); backward
    custom = "custom"  # a hand-written loop: its choices are flags (--loop-keeps-output)
    torchtune = "torchtune"  # torchtune's recipes' train()
    litgpt = "litgpt"  # LitGPT's fit()


class LossKind(Choice):
    full = "full"  # logits materialised whole, then cross-entropy (transformers' ForCausalLMLoss)
    chunked = "chunked"  # cross-entropy over chunks of the logits (torchtune, lit-gpt)
    fused = "fused"  # fused linear cross-entropy: logits never whole (Liger, Apple's CCE)


class OptimizerKernel(Choice):
    auto = "auto"  # the stack's own default (its configs' optimizer)
    fused = "fused"  # torch.optim's fused=True: one kernel, no temporaries
    foreach = "foreach"  # torch.optim's default on CUDA without fused=True: temporaries


class ReduceDtype(Choice):
    """The dtype gradients are reduced in across data-parallel ranks."""

    auto = "auto"  # the parameter dtype (accelerate's MixedPrecisionPolicy, DDP's buckets)
    bf16 = "bf16"
    fp32 = "fp32"  # FSDP2 MixedPrecisionPolicy(reduce_dtype=torch.float32): torchtitan's


class TensorParallelStyle(Choice):
    """How tensor parallelism splits a decoder layer (its collectives:
    `memtui.estimator.communication.tensor_parallel_passes`)."""

    auto = "auto"  # the stack's own plan (StackCapabilities.tensor_parallel_plan)
    megatron = "megatron"  # one gather per attention and MLP, sequence parallel
    per_projection = "per-projection"  # each column projection gathers its own input
    replicated = "replicated"  # per projection, activations replicated between blocks


class StateDtype(Choice):
    fp32 = "fp32"  # Adam moments in fp32 (both reference analyses, docs/references.md)
    bf16 = "bf16"  # PyTorch's AdamW keeps moments in the parameter dtype

    @property
    def bytes(self) -> int:
        """Bytes of one moment element."""
        return 4 if self is StateDtype.fp32 else 2


class Optimizer(Choice):
    adamw = "adamw"
    adamw8bit = "adamw8bit"
    paged_adamw8bit = "paged-adamw8bit"
    paged_adamw = "paged-adamw"  # bitsandbytes PagedAdamW: 32-bit state in managed memory
    sgd = "sgd"
    sgd_momentum = "sgd-momentum"
    adafactor = "adafactor"
    lion = "lion"


class Strategy(Choice):
    ddp = "ddp"
    zero1 = "zero1"
    zero2 = "zero2"
    zero3 = "zero3"
    fsdp = "fsdp"  # FULL_SHARD: same state layout as ZeRO-3
    fsdp_shard_grad_op = "fsdp-shard-grad-op"  # SHARD_GRAD_OP: same as ZeRO-2
    hsdp = "hsdp"  # HYBRID_SHARD: full shard inside a node, replicate across nodes


class Offload(Choice):
    none = "none"
    optimizer = "optimizer"  # master weights + optimizer state live in CPU RAM
    params = "params"  # the parameter shards too (ZeRO-Infinity / FSDP CPUOffload)


class Attention(Choice):
    flash = "flash"  # FlashAttention / SDPA: no s x s scores stored
    eager = "eager"


class Checkpointing(Choice):
    none = "none"
    selective = "selective"  # recompute the attention core only (Korthikanti et al. 2022)
    full = "full"  # keep each layer's input, recompute the layer in backward


class CheckpointVariant(Choice):
    """Which torch.utils.checkpoint a full recomputation runs (torch/utils/checkpoint.py
    `checkpoint(use_reentrant=...)`, read in torch 2.13)."""

    auto = "auto"  # the loop's default for the plan's versions (stacks/hf_model.py)
    # CheckpointFunction (use_reentrant=True): the layer is rebuilt whole, its output held
    # while the inner backward runs
    reentrant = "reentrant"
    # _checkpoint_without_reentrant_generator (use_reentrant=False): saved-tensor hooks,
    # the rebuild stops at the last tensor backward needs (early stop)
    non_reentrant = "non-reentrant"


class Objective(Choice):
    """What the step optimises; each keeps its own models and batches (memtui/estimator/
    objectives.py, from TRL's trainers)."""

    sft = "sft"  # next-token cross-entropy on one sequence per example
    dpo = "dpo"  # chosen and rejected sequences against a reference (TRL DPOTrainer)
    ipo = "ipo"  # DPOTrainer's loss_type="ipo": DPO's books, another loss
    orpo = "orpo"  # chosen and rejected, no reference (odds ratio)
    simpo = "simpo"  # chosen and rejected, no reference (length-normalised margin)
    cpo = "cpo"  # chosen and rejected, no reference (contrastive preference)
    kto = "kto"  # one completion per example and a KL batch, against a reference
    reward = "reward"  # a sequence-classification head scoring chosen and rejected
    ppo = "ppo"  # policy, reference, value and reward models, generated completions
    rloo = "rloo"  # policy, reference and reward models, generated completions
    grpo = "grpo"  # policy, a reference when beta != 0, generated completions


class VllmMode(Choice):
    """Where online RL generates its completions (TRL GRPOConfig use_vllm, vllm_mode)."""

    colocate = "colocate"  # vLLM in the trainer's process, on the trainer's GPUs
    server = "server"  # a vLLM server on other GPUs (`trl vllm-serve`)
    none = "none"  # no vLLM: Transformers' generate with the policy itself


class RefModel(Choice):
    """What the reference model of an objective that keeps one is."""

    auto = "auto"  # TRL's choice: adapter-disabled under PEFT, else a copy; none when not needed
    adapter_disabled = "adapter-disabled"  # the PEFT base with the adapter off: no copy
    copy = "copy"  # a second frozen copy of the model
    none = "none"  # no reference (reference-free losses, GRPO with beta 0)
