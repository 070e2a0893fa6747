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

    @property
    def weight_bytes(self) -> int:
        """Bytes of one parameter as the model holds it (and of its gradient)."""
        return 4 if self is Precision.fp32 else 2

    @property
    def master_bytes(self) -> int:
        """Bytes of the fp32 master copy per trainable parameter (mixed precision only:
        Micikevicius et al. 2018)."""
        return 4 if self is Precision.bf16_mixed else 0

    @property
    def activation_bytes(self) -> int:
        """Bytes of one activation element in the compute dtype."""
        return 4 if self is Precision.fp32 else 2


class StateDtype(Choice):
    fp32 = "fp32"  # Adam moments in fp32 (seed 000 and seed 002's rule)
    bf16 = "bf16"  # PyTorch's AdamW keeps moments in the parameter dtype

    @property
    def bytes(self) -> int:
        """Bytes of one moment element."""
        return 4 if self is StateDtype.fp32 else 2


class Optimizer(Choice):
    adamw = "adamw"
    adamw8bit = "adamw8bit"
    paged_adamw8bit = "paged-adamw8bit"
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
