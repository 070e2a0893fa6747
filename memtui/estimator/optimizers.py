"""What each optimizer keeps per parameter and what its step allocates, in one place.

Sources: AdamW (Loshchilov & Hutter 2019; torch.optim.AdamW keeps exp_avg and exp_avg_sq),
bitsandbytes' block-wise 8-bit optimizers (Dettmers et al. 2022: one byte per moment plus one
fp32 absmax per block; tensors under `min_8bit_size` = 4096 elements keep 32-bit state),
SGD with momentum (torch.optim.SGD's momentum_buffer), Lion (Chen et al. 2023: one moment),
Adafactor (Shazeer & Stern 2018: factored second moment, row and column sums per matrix;
transformers' default beta1=None keeps no first moment).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Literal

from memtui.estimator.choices import Optimizer, Precision
from memtui.estimator.units import ceil_div

# bitsandbytes keeps tensors with fewer elements than this in 32-bit state (min_8bit_size).
BNB_MIN_8BIT_SIZE = 4096

StateLayout = Literal["dense", "blockwise-8bit", "factored"]
StepTemporaries = Literal["foreach", "per-tensor-fp32", "none"]


@dataclass(frozen=True)
class OptimizerSpec:
    """One optimizer's state layout and the temporaries of its step."""

    optimizer: Optimizer
    label: str
    moments: int
    """Moment buffers per parameter (AdamW 2, Lion and SGD with momentum 1, SGD 0)."""
    layout: StateLayout = "dense"
    paged: bool = False
    """bitsandbytes' paged variant: the state lives in unified memory that can be evicted to
    CPU RAM under pressure (counted on the GPU: it is there whenever it fits)."""
    step: StepTemporaries = "none"
    moment_width: int | None = None
    """Bytes per moment element whatever the parameters' dtype (bitsandbytes' 32-bit
    optimizers keep fp32 state: optim/optimizer.py Optimizer2State.init_state); None: the
    stack's moment dtype."""

    @property
    def eight_bit(self) -> bool:
        return self.layout == "blockwise-8bit"

    def state_bytes(self, numel: int, rows: int, cols: int, moment_bytes: int, block: int) -> int:
        """State bytes for one tensor of `numel` elements (`rows` x `cols` when a matrix)."""
        if self.layout == "blockwise-8bit":
            if numel < BNB_MIN_8BIT_SIZE:
                return self.moments * 4 * numel  # small tensors keep 32-bit state
            blocks = ceil_div(numel, block)
            return self.moments * (numel + 4 * blocks)  # 1 byte per moment + fp32 absmax
        if self.layout == "factored":
            # the second moment as row + column sums for a matrix, in full for a vector (fp32)
            return 4 * (rows + cols if rows and cols else numel)
        return self.moments * (self.moment_width or moment_bytes) * numel

    def step_temporaries(
        self,
        local: float,
        numels: Callable[[], Sequence[int]],
        moment_bytes: int,
        precision: Precision,
    ) -> tuple[float, str]:
        """GPU bytes the step allocates beyond the state, for `local` trainable parameters
        on this GPU whose tensors have `numels()` elements, in the order the step visits
        them; and why."""
        if self.step == "foreach":
            # torch.optim's foreach AdamW materialises sqrt(v) for every tensor of the group
            # (_multi_tensor_adamw); Lion's update makes one interpolated copy of m.
            return moment_bytes * local, "foreach temporaries (one moment-sized copy)"
        if self.step == "per-tensor-fp32":
            # transformers' Adafactor works one tensor at a time in fp32: the update (grad^2 +
            # eps, then the factored estimate) and its product with the gradient; with bf16
            # parameters and no master copy it also upcasts the gradient and the parameter
            # (optimization.py Adafactor.step; measured by `memtui measure`).
            # The previous tensor's `update` is a loop variable, alive until this tensor's
            # `update = grad**2 + eps` is assigned: it sits beside this tensor's copies
            # (measured: `memtui measure`, row "trainer adafactor").
            copies = 4 if precision is Precision.bf16 else 2
            sizes = numels()
            worst = max(copies * n + prev for prev, n in zip((0, *sizes[:-1]), sizes, strict=True))
            return 4 * worst, f"{copies} per-tensor fp32 copies + the previous update (Adafactor)"
        # bitsandbytes' fused 8-bit kernels and in-place SGD allocate nothing sizeable
        return 0, "fused or in-place update"


OPTIMIZERS: dict[Optimizer, OptimizerSpec] = {
    o.optimizer: o
    for o in (
        OptimizerSpec(Optimizer.adamw, "AdamW", 2, step="foreach"),
        OptimizerSpec(Optimizer.adamw8bit, "8-bit AdamW", 2, layout="blockwise-8bit"),
        OptimizerSpec(
            Optimizer.paged_adamw8bit, "paged 8-bit AdamW", 2, layout="blockwise-8bit", paged=True
        ),
        OptimizerSpec(Optimizer.paged_adamw, "paged AdamW (32-bit)", 2, paged=True, moment_width=4),
        OptimizerSpec(Optimizer.sgd, "SGD", 0),
        OptimizerSpec(Optimizer.sgd_momentum, "SGD with momentum", 1),
        OptimizerSpec(
            Optimizer.adafactor, "Adafactor", 0, layout="factored", step="per-tensor-fp32"
        ),
        OptimizerSpec(Optimizer.lion, "Lion", 1, step="foreach"),
    )
}


def optimizer_spec(optimizer: Optimizer) -> OptimizerSpec:
    """The spec of `optimizer`."""
    return OPTIMIZERS[optimizer]
