"""What the user wants to train, and on what: the immutable input of the estimator.

A `Plan` is a frozen pydantic model; the UI replaces it with `evolve(...)` (validated) and
the CLI builds it from flags. Every field says what it means and its unit.
"""

from __future__ import annotations

import operator
from typing import Annotated

from pydantic import AfterValidator, Field, model_validator

from memtui.errors import PlanError
from memtui.estimator.architecture import (
    Architecture,
    ExpertAdapters,
    QuantMethod,
    expert_adapters,
)
from memtui.estimator.capabilities import CAPABILITIES
from memtui.estimator.choices import (
    Attention,
    Checkpointing,
    CheckpointVariant,
    Loop,
    LossKind,
    Method,
    Objective,
    Offload,
    Optimizer,
    OptimizerKernel,
    Precision,
    ReduceDtype,
    RefModel,
    StackName,
    StateDtype,
    Strategy,
    TensorParallelStyle,
    VllmMode,
)
from memtui.estimator.frozen import Frozen
from memtui.estimator.knobs import POWERS_OF_TWO, Entry, FlagGroup, Knob
from memtui.estimator.loops import loop_for
from memtui.estimator.memo import memoised
from memtui.estimator.objectives import check_objective
from memtui.estimator.strategies import offload_runs
from memtui.estimator.units import GiB
from memtui.estimator.versions import Versions

MAX_PARAMETERS = 10**14
"""The most parameters a plan may have: some 50x the largest published models (Switch-C 1.6T,
Kimi K2 1.04T parameters), so no real model is refused, while a typo (1e30) is; and a term of
up to ~20 B/param stays below 2^53 bytes, where float64 sums are exact to the byte."""
MAX_BYTES = 2**50
"""The most bytes a GPU's memory or an overhead term may be given: 1 PiB, some 3,500x the
largest card (B300, 288 GB), so past it a size is a typo."""
MAX_ELEMENTS = MAX_PARAMETERS
"""The most elements a DeepSpeed bucket or threshold may be given (no buffer outgrows the
model)."""


def _at_most(limit: int, why: str) -> AfterValidator:
    """A check that a number is at most `limit`, whose error says the limit and why."""

    def check(value: int) -> int:
        if value > limit:
            raise PlanError(f"{value:.3g} is above {limit:.3g} ({why})")
        return value

    return AfterValidator(check)


Parameters = Annotated[
    int, Field(gt=0), _at_most(MAX_PARAMETERS, "50x the largest published model: a typo?")
]
Bytes = Annotated[int, _at_most(MAX_BYTES, "1 PiB, far beyond any GPU: a typo?")]
Elements = Annotated[int, _at_most(MAX_ELEMENTS, "more than any model has: a typo?")]

ACTIVATION_FIELDS = frozenset(
    {"micro_batch", "seq_len", "grad_accum", "attention", "checkpointing", "checkpoint_variant"}
)
"""Plan fields that change only what one micro-batch holds, never the static state."""


class ModelSpec(Frozen):
    """The model: its parameter count and, when known, its architecture."""

    name: str
    """What the user called it: a catalog id, a path, or the bare count."""
    parameters: Parameters
    """Total parameters (exact when read from an architecture)."""
    architecture: Architecture
    """The real architecture, or a shape assumed from the count (`architecture.assumed`)."""

    @classmethod
    def from_parameters(cls, parameters: int, name: str | None = None) -> ModelSpec:
        """A bare parameter count: state is exact, activations use an assumed shape."""
        return cls(
            name=name or f"{parameters / 1e9:g}B parameters (bare count)",
            parameters=parameters,
            architecture=Architecture.assumed_from_parameters(parameters),
        )

    @classmethod
    def from_architecture(cls, name: str, architecture: Architecture) -> ModelSpec:
        return cls(name=name, parameters=architecture.parameter_count, architecture=architecture)

    @property
    def default_method(self) -> Method:
        """Full, or the adapters a pre-quantized checkpoint trains: QLoRA on a bitsandbytes
        4-bit one (QLoRA's own base), LoRA on the others."""
        stored = self.architecture.quantized
        if stored is None:
            return Method.full
        return Method.qlora if stored.method is QuantMethod.bnb_4bit else Method.lora


class Hardware(Frozen):
    """The node(s): how many GPUs, how much memory each, how fast they talk."""

    gpus_per_node: Annotated[
        int, Knob(FlagGroup.hardware, "--gpus", "GPUs per node (default 8)", label="GPUs/node")
    ] = Field(8, ge=1, le=1024)
    """GPUs in one node."""
    nodes: Annotated[
        int, Knob(FlagGroup.hardware, "--nodes", "nodes (default 1)", label="Nodes")
    ] = Field(1, ge=1, le=100_000)
    """Nodes; GPUs in all = gpus_per_node x nodes."""
    gpu_memory: Annotated[Bytes, Knob(FlagGroup.hardware)] = Field(81559 * 2**20, gt=0)
    """Bytes per GPU, as NVML reports the total (default: H100 80GB, 81559 MiB)."""
    gpu_name: str = "H100 80GB SXM"
    """The card, for display."""
    intra_node_bandwidth: Annotated[float, Knob(FlagGroup.hardware, label="Intra-node")] = Field(
        450e9, gt=0
    )
    """Bytes/s per GPU per direction inside a node (NVLink 4: 450 GB/s)."""
    inter_node_bandwidth: Annotated[float, Knob(FlagGroup.hardware, label="Inter-node")] = Field(
        50e9, gt=0
    )
    """Bytes/s per GPU per direction across nodes (one 400 Gb/s NDR port per GPU)."""
    compute_capability: float = Field(9.0, ge=3, le=20)
    """The card's CUDA compute capability (H100: 9.0): PyTorch sizes its cuBLAS workspace by
    it (aten/src/ATen/cuda/CublasHandlePool.cpp)."""

    @property
    def gpus(self) -> int:
        return self.gpus_per_node * self.nodes


class OverheadSettings(Frozen):
    """Memory that is not the model's tensors: the CUDA context, NCCL's buffers, cuBLAS's
    workspace and what the caching allocator reserves beyond the tensors it holds."""

    enabled: Annotated[bool, Knob(FlagGroup.overhead, label="Overhead")] = True
    """False: show the model's tensors alone (`--overhead none`)."""
    cuda_context: Annotated[
        Bytes,
        Knob(FlagGroup.overhead, "--cuda-context", None, Entry.size, "SIZE", "CUDA context"),
    ] = Field(512 * 2**20, ge=0)
    """Bytes of CUDA context + kernel images per process, outside PyTorch's allocator (only
    nvidia-smi sees it). CUDA 11.7+ with lazy module loading: 287 MB on the GPU of PyTorch
    PR #86509, 300-400 MB per PyTorch's maintainers (issues #107667, #109888); no published
    H100 figure, so 512 MiB until benchmarks/cuda_check.py measures it."""
    nccl: Annotated[
        Bytes, Knob(FlagGroup.overhead, "--nccl-buffers", None, Entry.size, "SIZE", "NCCL buffers")
    ] = Field(1 * GiB, ge=0)
    """Bytes NCCL keeps once communicators exist, outside PyTorch's allocator: NCCL_BUFFSIZE
    4 MiB (+ LL and LL128 buffers) per channel per peer (nccl src/init.cc); 544-688 MB per
    group on 4 x A100 (NVIDIA/nccl #964), about 1.6 GB after an all-reduce (#864), NVLS adds
    about 288 MiB per rank on NVSwitch systems. 1 GiB, only with more than one GPU."""
    fragmentation: Annotated[
        float,
        Knob(
            FlagGroup.overhead,
            "--fragmentation",
            "allocator reserve beyond the allocated peak (0.10)",
            Entry.fraction,
            "FRACTION",
            "Fragmentation",
        ),
    ] = Field(0.10, ge=0, le=1)
    """What the caching allocator reserves beyond its allocated peak, as a fraction of it
    (max_memory_reserved / max_memory_allocated - 1): freed blocks it keeps cached that the
    next requests cannot reuse, 2 MiB rounding of large blocks (c10/cuda/
    CUDACachingAllocator.cpp). A planning figure until benchmarks/cuda_check.py calibrates
    it; expandable segments cut it to `expandable_fragmentation`."""
    expandable_fragmentation: Annotated[
        float, Knob(FlagGroup.overhead, label="Frag. (expand.)")
    ] = Field(0.02, ge=0, le=1)
    """The same with PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True, whose segments grow in
    2 MiB pages and unmap freed ones (the allocator's own remedy for fragmentation)."""


class DeepSpeedSettings(Frozen):
    """The ZeRO settings that size DeepSpeed's buffers (deepspeed/runtime/zero/config.py);
    None means "auto", resolved as Transformers' HfTrainerDeepSpeedConfig does from the
    model's hidden size."""

    reduce_bucket_size: Annotated[
        Elements | None,
        Knob(FlagGroup.deepspeed, "--ds-reduce-bucket", None, Entry.count, "ELEMENTS"),
    ] = Field(None, ge=1)
    """Elements of the gradient reduce bucket (auto: hidden^2; DeepSpeed's own default 5e8)."""
    prefetch_bucket_size: Annotated[
        Elements | None,
        Knob(FlagGroup.deepspeed, "--ds-prefetch-bucket", None, Entry.count, "ELEMENTS"),
    ] = Field(None, ge=0)
    """ZeRO-3: elements gathered ahead of use (auto: 0.9 hidden^2; DeepSpeed's 5e7)."""
    max_live_parameters: Annotated[
        Elements,
        Knob(FlagGroup.deepspeed, "--ds-max-live-parameters", None, Entry.count, "ELEMENTS"),
    ] = Field(10**9, ge=1)
    """ZeRO-3: at most this many gathered elements alive (stage3_max_live_parameters)."""
    persistence_threshold: Annotated[
        Elements | None,
        Knob(FlagGroup.deepspeed, "--ds-persistence-threshold", None, Entry.count, "ELEMENTS"),
    ] = Field(None, ge=0)
    """ZeRO-3: parameters this small are never partitioned (auto: 10 hidden; 1e5)."""
    overlap_comm: Annotated[bool | None, Knob(FlagGroup.deepspeed, "--ds-overlap-comm")] = None
    """Double the reduce bucket to overlap communication; None: DeepSpeed's default (on for
    ZeRO-3 only)."""
    grad_accum_fp32: Annotated[
        bool,
        Knob(
            FlagGroup.deepspeed,
            "--ds-grad-accum-fp32",
            "data_types.grad_accum_dtype fp32 (ZeRO-1: BF16_Optimizer)",
        ),
    ] = False
    """data_types.grad_accum_dtype fp32: ZeRO-1 then runs BF16_Optimizer, which keeps a full
    fp32 gradient buffer (runtime/bf16_optimizer.py)."""
    sub_group_size: Elements = Field(10**9, ge=1)
    """ZeRO-3: the optimizer steps sub-groups of this many elements at a time."""


class Plan(Frozen):
    """Everything the estimator needs; frozen, replaced whole on every change."""

    model: Annotated[ModelSpec, Knob(FlagGroup.model, label="Model")]
    hardware: Hardware = Hardware()
    method: Annotated[Method, Knob(FlagGroup.method, "--method", label="Method")] = Method.full
    lora_rank: Annotated[
        int, Knob(FlagGroup.method, "--lora-rank", label="LoRA rank", steps=POWERS_OF_TWO)
    ] = Field(16, ge=1, le=4096)
    """LoRA rank r: each adapted linear d_in -> d_out gains r (d_in + d_out) parameters."""
    lora_targets: Annotated[tuple[str, ...], Knob(FlagGroup.method, label="LoRA targets")] = (
        "all-linear",
    )
    """'attention', 'all-linear', or module names (q_proj, v_proj, ...), as PEFT takes them."""
    lora_fraction: Annotated[
        float | None,
        Knob(
            FlagGroup.method,
            "--lora-fraction",
            "adapter size as a share of the model: 0.025 or 2.5% (bare counts)",
            Entry.fraction,
            label="LoRA fraction",
        ),
    ] = Field(None, gt=0, le=1)
    """Adapter size as a fraction of the model, for a bare parameter count (the rule-of-thumb
    analysis, docs/references.md: 0.025)."""
    qlora_double_quant: Annotated[
        bool,
        Knob(
            FlagGroup.method,
            "--double-quant",
            "QLoRA double quantization (default on)",
            label="QLoRA 2x quant",
        ),
    ] = True
    """QLoRA double quantization: 4.127 instead of 4.5 bits per base parameter."""
    qlora_upcast: Annotated[
        bool,
        Knob(
            FlagGroup.method,
            "--kbit-upcast",
            "QLoRA: PEFT's fp32 upcast of non-quantized parameters (default on)",
            label="QLoRA upcast",
        ),
    ] = True
    """PEFT's prepare_model_for_kbit_training casts non-quantized parameters to fp32."""
    qlora_keeps_inputs: Annotated[
        bool,
        Knob(
            FlagGroup.method,
            "--qlora-keeps-inputs",
            "QLoRA's 4-bit linears keep their inputs (bitsandbytes before 0.43.2)",
            label="4-bit saves in",
        ),
    ] = False
    """The 4-bit base linears keep their inputs for backward, as bitsandbytes did before
    0.43.2 (MatMul4Bit saved its input A; fixed in PR #1270, July 2024)."""
    lora_dropout: Annotated[
        float,
        Knob(
            FlagGroup.method,
            "--lora-dropout",
            "LoRA dropout (PEFT default 0; above 0 each adapter keeps a mask and a copy)",
            Entry.probability,
            label="LoRA dropout",
        ),
    ] = Field(0.0, ge=0, lt=1)
    """LoRA dropout (PEFT's LoraConfig default 0.0; lit-gpt 0.05): above 0 every adapted
    linear keeps a mask and its dropped input."""
    modules_to_save: Annotated[
        tuple[str, ...],
        Knob(
            FlagGroup.method,
            "--modules-to-save",
            "modules trained in full beside the adapters: lm_head,embed_tokens",
            Entry.names,
            "NAMES",
            "Full modules",
        ),
    ] = ()
    """Modules trained in full beside the adapters (PEFT modules_to_save: lm_head,
    embed_tokens), each a trainable copy of the original."""
    precision: Annotated[Precision, Knob(FlagGroup.optimizer, "--precision", label="Precision")] = (
        Precision.bf16_mixed
    )
    fp32_grad_buffer: Annotated[bool, Knob(FlagGroup.optimizer, label="fp32 grad buf")] = False
    """Keep an fp32 gradient-accumulation buffer (+4 B/param; Megatron, DeepSpeed)."""
    optimizer: Annotated[Optimizer, Knob(FlagGroup.optimizer, "--optimizer", label="Optimizer")] = (
        Optimizer.adamw
    )
    optimizer_state_dtype: Annotated[
        StateDtype, Knob(FlagGroup.optimizer, "--optimizer-state-dtype", label="Opt. state")
    ] = StateDtype.fp32
    """Dtype of Adam-like moments (fp32: 8 B/param for AdamW; bf16: 4 B/param)."""
    optimizer_kernel: Annotated[
        OptimizerKernel,
        Knob(
            FlagGroup.optimizer,
            "--optimizer-kernel",
            "AdamW/Lion step: fused (no temporaries), foreach (torch's default without "
            "fused=True: one moment-sized temporary), auto: the stack's default",
            label="Opt. kernel",
        ),
    ] = OptimizerKernel.auto
    """How torch.optim's AdamW or Lion steps: fused (one kernel per group, no temporaries),
    foreach (its default on CUDA without fused=True: a moment-sized temporary), or the
    stack's default (Trainer's adamw_torch_fused, torchtune's fused: True configs)."""
    optimizer_block_size: Annotated[
        int,
        Knob(
            FlagGroup.optimizer,
            "--optimizer-block-size",
            "8-bit optimizers' absmax block (256 current bitsandbytes, 2048 paper)",
            label="8-bit block",
            steps=tuple(2**k for k in range(4, 13)),
        ),
    ] = Field(256, ge=16)
    """Block of the 8-bit optimizers' fp32 absmax: 256 in current bitsandbytes, 2048 in the
    8-bit optimizers paper (Dettmers et al. 2022) and older releases."""
    strategy: Annotated[Strategy, Knob(FlagGroup.sharding, "--strategy", label="Strategy")] = (
        Strategy.fsdp
    )
    offload: Annotated[Offload, Knob(FlagGroup.sharding, "--offload", label="Offload")] = (
        Offload.none
    )
    reduce_dtype: Annotated[
        ReduceDtype,
        Knob(
            FlagGroup.sharding,
            "--reduce-dtype",
            "dtype of the gradients' reduce-scatter or all-reduce: auto (the parameter "
            "dtype), bf16, fp32 (an FSDP2 MixedPrecisionPolicy(reduce_dtype=float32))",
            label="Reduce dtype",
        ),
    ] = ReduceDtype.auto
    """The dtype gradients travel in between data-parallel ranks (communication volume and
    step time; the memory budget books the stack's own reduce buffers)."""
    micro_batch: Annotated[
        int, Knob(FlagGroup.activations, "--micro-batch", label="Micro-batch")
    ] = Field(1, ge=1, le=65536)
    """Sequences per GPU per forward pass."""
    seq_len: Annotated[
        int, Knob(FlagGroup.activations, "--seq-len", label="Seq length", steps=POWERS_OF_TWO)
    ] = Field(4096, ge=1, le=10_000_000)
    """Tokens per sequence."""
    grad_accum: Annotated[int, Knob(FlagGroup.activations, "--grad-accum", label="Grad accum")] = (
        Field(1, ge=1, le=65536)
    )
    """Micro-batches per optimizer step."""
    attention: Annotated[
        Attention, Knob(FlagGroup.activations, "--attention", label="Attention")
    ] = Attention.flash
    checkpointing: Annotated[
        Checkpointing, Knob(FlagGroup.activations, "--checkpointing", label="Checkpointing")
    ] = Checkpointing.none
    checkpoint_variant: Annotated[
        CheckpointVariant,
        Knob(
            FlagGroup.activations,
            "--checkpoint-variant",
            "full checkpointing's torch.utils.checkpoint: reentrant (use_reentrant=True, "
            "Trainer's default before transformers 5.0) or non-reentrant (auto: the loop's "
            "default for the plan's versions)",
            label="Ckpt variant",
        ),
    ] = CheckpointVariant.auto
    """torch.utils.checkpoint's variant under full checkpointing (`memtui.estimator.stacks.
    hf_model.reentrant`)."""
    tp: Annotated[
        int,
        Knob(
            FlagGroup.activations,
            "--tp",
            "tensor-parallel degree (sequence parallel on)",
            label="Tensor par.",
            steps=POWERS_OF_TWO,
        ),
    ] = Field(1, ge=1, le=1024)
    """Tensor-parallel degree (with sequence parallelism); divides weights and activations."""
    tp_style: Annotated[
        TensorParallelStyle,
        Knob(
            FlagGroup.activations,
            "--tp-style",
            "how tensor parallelism splits a layer, which sets its collectives: auto (the "
            "stack's own), megatron (one gather per attention and MLP: Megatron-LM, "
            "torchtune, torchtitan), per-projection (q, k, v, gate, up each gather their "
            "sequence-sharded input), replicated (per projection, no sequence parallelism: "
            "transformers' tp_plan, DeepSpeed AutoTP)",
            label="TP style",
        ),
    ] = TensorParallelStyle.auto
    """How tensor parallelism splits a layer: its collectives, and which saved activations
    are split over the ranks (`memtui.estimator.activations.TpSplit`): without sequence
    parallelism (replicated) the residual stream, the norms and the column-parallel linears'
    inputs stay whole on every rank; with it they are sharded along the sequence, except the
    gathered linear inputs of a stack built on torch's ColwiseParallel, which keeps them
    (`TensorParallelPlan.saves_gathered_input`). The logits follow the stack's lm_head
    (`TensorParallelPlan.logits_gathered`)."""
    overhead: OverheadSettings = OverheadSettings()
    stack: Annotated[
        StackName,
        Knob(
            FlagGroup.stack,
            "--stack",
            "the software that runs the job; its own bookkeeping sizes every term "
            "(generic: memtui's model of a step). Switching stack adapts strategy, precision "
            "and loss flags not given to ones it runs",
            label="Stack",
        ),
    ] = StackName.generic
    """The software that runs the plan; its own bookkeeping sizes every term."""
    loss: Annotated[
        LossKind,
        Knob(
            FlagGroup.activations,
            "--loss",
            "full: logits whole (transformers); chunked (torchtune, LitGPT); fused: "
            "linear cross-entropy (Liger, CCE)",
            label="Loss",
        ),
    ] = LossKind.full
    """How the loss meets the logits: whole (transformers), chunked, or a fused linear
    cross-entropy that never holds them whole."""
    optimizer_in_backward: Annotated[
        bool,
        Knob(
            FlagGroup.activations,
            "--optimizer-in-backward",
            "step and free each gradient in its hook (torchtune; no grad accumulation)",
            label="Opt. in bwd",
        ),
    ] = False
    """Step each parameter in its gradient hook and free the gradient there (torchtune's
    optimizer_in_bwd): no full set of gradients, no gradient accumulation."""
    activation_offload: Annotated[
        bool,
        Knob(
            FlagGroup.activations,
            "--activation-offload",
            "checkpointed layer inputs to pinned CPU RAM (needs --checkpointing full)",
            label="Act. offload",
        ),
    ] = False
    """Move the checkpointed layer inputs to pinned CPU memory during forward (torchtune's
    enable_activation_offloading; needs full checkpointing)."""
    expandable_segments: Annotated[
        bool,
        Knob(
            FlagGroup.overhead,
            "--expandable-segments",
            "PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True",
            label="Expandable seg.",
        ),
    ] = False
    """PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True (less fragmentation)."""
    deepspeed: DeepSpeedSettings = DeepSpeedSettings()
    """ZeRO's buffer sizes (the deepspeed stack)."""
    versions: Versions = Versions()
    """The frameworks' versions the plan is for: the stacks follow their code."""
    loop: Annotated[
        Loop,
        Knob(
            FlagGroup.stack,
            "--loop",
            "the training loop around the model: what it keeps alive through backward "
            "(auto: the stack's own; custom: a hand-written loop, see --loop-keeps-output)",
            label="Loop",
        ),
    ] = Loop.auto
    """The loop that runs the step (`memtui.estimator.loops`)."""
    loop_keeps_output: Annotated[
        bool,
        Knob(
            FlagGroup.stack,
            "--loop-keeps-output",
            "--loop custom: the loop holds the model output until after backward and the "
            "optimizer step (output = model(**batch); loss = output.loss)",
            label="Loop keeps output",
        ),
    ] = True
    """A custom loop keeps the model's output (its logits) referenced through backward, as
    hand-written loops that read `output.loss` do (the default: not optimistic)."""
    objective: Annotated[
        Objective,
        Knob(
            FlagGroup.objective,
            "--objective",
            "what the step optimises: sft, preference (dpo, ipo, orpo, simpo, cpo, kto), "
            "reward modelling, online RL (ppo, rloo, grpo)",
            label="Objective",
        ),
    ] = Objective.sft
    """The training objective; each keeps its own models and batches (TRL's trainers,
    memtui/estimator/objectives.py)."""
    ref_model: Annotated[
        RefModel,
        Knob(
            FlagGroup.objective,
            "--ref-model",
            "the reference model: adapter-disabled (the PEFT base), copy, none; auto: TRL's",
            label="Reference",
        ),
    ] = RefModel.auto
    """The reference of an objective that keeps one (auto: TRL's choice, the base with the
    adapter disabled under PEFT, else a frozen copy)."""
    precompute_ref_log_probs: Annotated[
        bool,
        Knob(
            FlagGroup.objective,
            "--precompute-ref-log-probs",
            "reference log-probs computed before training (DPOConfig): no reference in the step",
            label="Precompute ref",
        ),
    ] = False
    """DPOConfig.precompute_ref_log_probs: the reference scores the dataset before training
    and is not kept during it."""
    beta: Annotated[
        float | None,
        Knob(
            FlagGroup.objective,
            "--beta",
            "KL coefficient (GRPO: a reference is kept when above 0); default: TRL's",
            Entry.probability,
            label="Beta (KL)",
        ),
    ] = Field(None, ge=0)
    """The KL coefficient; None: the trainer's default (GRPOConfig.beta 0.0 in TRL 1.16,
    DPOConfig.beta 0.1). Only GRPO's memory depends on it: beta 0 loads no reference."""
    num_generations: Annotated[
        int,
        Knob(
            FlagGroup.objective,
            "--num-generations",
            "online RL: completions sampled per prompt (GRPOConfig default 8)",
            label="Generations",
            steps=POWERS_OF_TWO,
        ),
    ] = Field(8, ge=1, le=65536)
    """Completions per prompt (GRPOConfig.num_generations, default 8)."""
    max_prompt_length: Annotated[
        int,
        Knob(
            FlagGroup.objective,
            "--max-prompt-length",
            "online RL: prompt tokens (the sequence trained is prompt + completion)",
            label="Prompt length",
            steps=POWERS_OF_TWO,
        ),
    ] = Field(512, ge=1, le=10_000_000)
    """Online RL: tokens of a prompt; the sequences generated and trained are prompt +
    completion tokens (seq_len is the preference and SFT sequences' length)."""
    max_completion_length: Annotated[
        int,
        Knob(
            FlagGroup.objective,
            "--max-completion-length",
            "online RL: generated tokens per completion (GRPOConfig default 512)",
            label="Completion len",
            steps=POWERS_OF_TWO,
        ),
    ] = Field(512, ge=1, le=10_000_000)
    """Online RL: tokens generated per completion (GRPOConfig.max_completion_length, 512 in
    TRL 1.16)."""
    vllm_mode: Annotated[
        VllmMode,
        Knob(
            FlagGroup.objective,
            "--vllm-mode",
            "online RL generation: vLLM colocated, a vLLM server on other GPUs, or none "
            "(Transformers' generate)",
            label="vLLM mode",
        ),
    ] = VllmMode.none
    """Where completions are generated (GRPOConfig.use_vllm False by default: generate)."""
    vllm_gpu_memory_utilization: Annotated[
        float,
        Knob(
            FlagGroup.objective,
            "--vllm-gpu-memory-utilization",
            "colocated vLLM's share of the card (GRPOConfig default 0.3)",
            Entry.fraction,
            label="vLLM share",
        ),
    ] = Field(0.3, gt=0, le=1)
    """Colocated vLLM's fraction of the card's memory (weights, activations, KV cache)."""
    vllm_sleep_mode: Annotated[
        bool,
        Knob(
            FlagGroup.objective,
            "--vllm-sleep-mode",
            "colocated vLLM frees its weights and KV cache while the trainer steps",
            label="vLLM sleep",
        ),
    ] = False
    """GRPOConfig.vllm_enable_sleep_mode: vLLM sleeps (level 2) during the training step."""

    @model_validator(mode="after")
    def _check(self) -> Plan:
        return self.check_rules()

    def check_rules(self) -> Plan:
        """The cross-field rules, also for a plan made without validation (`model_copy`);
        raises ValueError when one is broken."""
        if self.hardware.gpus % self.tp:
            raise PlanError(f"tp ({self.tp}) must divide the GPU count ({self.hardware.gpus})")
        arch = self.model.architecture
        if self.tp > 1 and not arch.assumed:  # a bare count's heads are a guess: not checked
            # Megatron-LM gives each TP rank whole heads and whole KV groups: divide()
            # asserts num_attention_heads and num_query_groups are multiples of the TP size
            # (megatron/core/transformer/attention.py; Shoeybi et al. 2019 sec. 3)
            for what, heads in (("attention heads", arch.num_heads), ("KV heads", arch.kv_heads)):
                if heads % self.tp:
                    raise PlanError(
                        f"tp ({self.tp}) must divide the model's {what} ({heads}): each "
                        "tensor-parallel rank holds whole heads"
                    )
        if arch.quantized is not None and self.method is Method.full:
            # transformers 5.24 trainer_utils.py validate_quantization_for_training
            raise PlanError(
                f"the checkpoint is pre-quantized ({arch.quantized.method.value}): only "
                "adapters train on it (a full fine-tune of a quantized model is refused by "
                "transformers); choose method lora or qlora"
            )
        if not offload_runs(self.offload, self.strategy):
            raise PlanError(
                "parameter offload needs a strategy that shards parameters (zero3, fsdp, hsdp)"
            )
        if not self.lora_targets:
            raise PlanError("no LoRA targets: use attention, all-linear or module names")
        if self.lora_fraction is not None and round(self.model.parameters * self.lora_fraction) < 1:
            raise PlanError(
                f"lora_fraction {self.lora_fraction:g} of {self.model.parameters:,} parameters "
                "is not one adapter parameter"
            )
        # checked whatever the method: the LoRA levers and the method key switch to LoRA
        _lora_layers(self.model.architecture, self.lora_targets, self.expert_adapters)
        if self.modules_to_save:
            self.model.architecture.saved_modules(self.modules_to_save)
        if self.optimizer_in_backward and self.grad_accum > 1:
            raise PlanError(
                "optimizer_in_backward steps each parameter as its gradient arrives: "
                "gradient accumulation (grad_accum > 1) is impossible with it"
            )
        if self.optimizer_in_backward and self.offload is not Offload.none:
            raise PlanError("optimizer_in_backward runs the step on the GPU: no offload")
        if self.activation_offload and self.checkpointing is not Checkpointing.full:
            raise PlanError(
                "activation_offload moves the checkpointed layer inputs: it needs "
                "checkpointing full"
            )
        check_objective(self)
        CAPABILITIES[self.stack].check(self)
        loop_for(self.stack, self.loop)
        return self

    @property
    def state_key(self) -> tuple[object, ...]:
        """Every field the static state can depend on (all but ACTIVATION_FIELDS), as a
        hashable key: a new field is part of it unless it is declared activation-only."""
        return _STATE_FIELDS(self)  # type: ignore[no-any-return]

    @property
    def expert_adapters(self) -> ExpertAdapters:
        """What LoRA's target names reach of stacked MoE experts under the plan's versions;
        torchtune's and LitGPT's own model code keeps one module per expert projection
        (litgpt model.py LLaMAMoE's ModuleList of LLaMAMLP) and its own LoRA, never PEFT's."""
        if self.stack in (StackName.torchtune, StackName.litgpt):
            return ExpertAdapters.modules
        return expert_adapters(self.versions)

    @property
    def data_parallel(self) -> int:
        """N: the GPUs that share (shard) the training state."""
        return self.hardware.gpus // self.tp


# memoised on the architecture by value: the lever list checks a plan per lever and the
# search one per candidate (a target that matches nothing raises again each time)
_lora_layers = memoised(Architecture.lora_layers)

# one C-level getter for the hot path (the micro-batch search asks for the key per candidate)
_STATE_FIELDS = operator.attrgetter(
    *(name for name in Plan.model_fields if name not in ACTIVATION_FIELDS)
)
