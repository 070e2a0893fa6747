"""What the user wants to train, and on what: the immutable input of the estimator.

A `Plan` is a frozen pydantic model; the UI replaces it with `evolve(...)` (validated) and
the CLI builds it from flags. Every field says what it means and its unit.
"""

from __future__ import annotations

import operator

from pydantic import Field, model_validator

from memtui.estimator.architecture import Architecture
from memtui.estimator.choices import (
    Attention,
    Checkpointing,
    Method,
    Offload,
    Optimizer,
    Precision,
    StateDtype,
    Strategy,
)
from memtui.estimator.frozen import Frozen
from memtui.estimator.strategies import strategy_spec
from memtui.estimator.units import GiB

ACTIVATION_FIELDS = frozenset(
    {"micro_batch", "seq_len", "grad_accum", "attention", "checkpointing"}
)
"""Plan fields that change only what one micro-batch holds, never the static state."""


class ModelSpec(Frozen):
    """The model: its parameter count and, when known, its architecture."""

    name: str
    """What the user called it: a catalog id, a path, or the bare count."""
    parameters: int = Field(gt=0)
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


class Hardware(Frozen):
    """The node(s): how many GPUs, how much memory each, how fast they talk."""

    gpus_per_node: int = Field(8, ge=1, le=1024)
    """GPUs in one node."""
    nodes: int = Field(1, ge=1, le=100_000)
    """Nodes; GPUs in all = gpus_per_node x nodes."""
    gpu_memory: int = Field(81559 * 2**20, gt=0)
    """Bytes per GPU, as NVML reports the total (default: H100 80GB, 81559 MiB)."""
    gpu_name: str = "H100 80GB SXM"
    """The card, for display."""
    intra_node_bandwidth: float = Field(450e9, gt=0)
    """Bytes/s per GPU per direction inside a node (NVLink 4: 450 GB/s)."""
    inter_node_bandwidth: float = Field(50e9, gt=0)
    """Bytes/s per GPU per direction across nodes (one 400 Gb/s NDR port per GPU)."""

    @property
    def gpus(self) -> int:
        return self.gpus_per_node * self.nodes


class OverheadSettings(Frozen):
    """Memory that is not the model's: CUDA context, NCCL, allocator fragmentation."""

    enabled: bool = True
    """False: show the model's memory alone (`--overhead none`)."""
    cuda_context: int = Field(512 * 2**20, ge=0)
    """Bytes of CUDA context + PyTorch kernels per process. CUDA 12 with lazy module loading
    measures 300-600 MiB on A100/H100 (PyTorch CUDA semantics notes); 512 MiB by default."""
    nccl: int = Field(1 * GiB, ge=0)
    """Bytes NCCL keeps once communicators exist (channels x NCCL_BUFFSIZE 4 MiB per peer plus
    its work FIFO; about 1-2 GiB on 8-GPU nodes per DESIGN.md); only with more than one GPU."""
    fragmentation: float = Field(0.03, ge=0, le=0.5)
    """Fraction of the card lost to the caching allocator's fragmentation ("a few percent",
    DESIGN.md section 5; PyTorch memory_stats reserved - allocated)."""


class Plan(Frozen):
    """Everything the estimator needs; frozen, replaced whole on every change."""

    model: ModelSpec
    hardware: Hardware = Hardware()
    method: Method = Method.full
    lora_rank: int = Field(16, ge=1, le=4096)
    """LoRA rank r: each adapted linear d_in -> d_out gains r (d_in + d_out) parameters."""
    lora_targets: tuple[str, ...] = ("all-linear",)
    """'attention', 'all-linear', or module names (q_proj, v_proj, ...), as PEFT takes them."""
    lora_fraction: float | None = Field(None, gt=0, le=1)
    """Adapter size as a fraction of the model, for a bare parameter count (seed 002: 0.025)."""
    qlora_double_quant: bool = True
    """QLoRA double quantization: 4.127 instead of 4.5 bits per base parameter."""
    qlora_upcast: bool = True
    """PEFT's prepare_model_for_kbit_training casts non-quantized parameters to fp32."""
    precision: Precision = Precision.bf16_mixed
    fp32_grad_buffer: bool = False
    """Keep an fp32 gradient-accumulation buffer (+4 B/param; Megatron, DeepSpeed)."""
    optimizer: Optimizer = Optimizer.adamw
    optimizer_state_dtype: StateDtype = StateDtype.fp32
    """Dtype of Adam-like moments (fp32: 8 B/param for AdamW; bf16: 4 B/param)."""
    optimizer_block_size: int = Field(256, ge=16)
    """Block of the 8-bit optimizers' fp32 absmax: 256 in current bitsandbytes, 2048 in the
    8-bit optimizers paper (Dettmers et al. 2022) and older releases."""
    strategy: Strategy = Strategy.fsdp
    offload: Offload = Offload.none
    micro_batch: int = Field(1, ge=1, le=65536)
    """Sequences per GPU per forward pass."""
    seq_len: int = Field(4096, ge=1, le=10_000_000)
    """Tokens per sequence."""
    grad_accum: int = Field(1, ge=1, le=65536)
    """Micro-batches per optimizer step."""
    attention: Attention = Attention.flash
    checkpointing: Checkpointing = Checkpointing.none
    tp: int = Field(1, ge=1, le=1024)
    """Tensor-parallel degree (with sequence parallelism); divides weights and activations."""
    overhead: OverheadSettings = OverheadSettings()

    @model_validator(mode="after")
    def _check(self) -> Plan:
        if self.hardware.gpus % self.tp:
            raise ValueError(f"tp ({self.tp}) must divide the GPU count ({self.hardware.gpus})")
        if self.offload is Offload.params and not strategy_spec(self.strategy).shards_weights:
            raise ValueError(
                "parameter offload needs a strategy that shards parameters (zero3, fsdp, hsdp)"
            )
        if not self.lora_targets:
            raise ValueError("no LoRA targets: use attention, all-linear or module names")
        # checked whatever the method: the LoRA levers and the method key switch to LoRA
        self.model.architecture.lora_layers(self.lora_targets)
        return self

    @property
    def state_key(self) -> tuple[object, ...]:
        """Every field the static state can depend on (all but ACTIVATION_FIELDS), as a
        hashable key: a new field is part of it unless it is declared activation-only."""
        return _STATE_FIELDS(self)  # type: ignore[no-any-return]

    @property
    def data_parallel(self) -> int:
        """N: the GPUs that share (shard) the training state."""
        return self.hardware.gpus // self.tp


# one C-level getter for the hot path (the micro-batch search asks for the key per candidate)
_STATE_FIELDS = operator.attrgetter(
    *(name for name in Plan.model_fields if name not in ACTIVATION_FIELDS)
)
