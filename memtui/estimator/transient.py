"""Memory that exists only during a phase of the step: communication buffers and the
optimizer step's temporaries. The peak is the larger of the backward pass (activations,
logits and buffers) and the optimizer step (its temporaries, once activations are freed).
"""

from __future__ import annotations

from dataclasses import dataclass

from memtui.estimator.choices import Method, Offload, OptimizerKernel, Precision, Strategy
from memtui.estimator.optimizers import optimizer_spec
from memtui.estimator.plan import Plan
from memtui.estimator.state import StaticState, trainable_tensors
from memtui.estimator.strategies import strategy_spec

# DeepSpeed's default reduce_bucket_size for ZeRO-1/2: 5e8 elements (DeepSpeed config docs).
DEEPSPEED_REDUCE_BUCKET = 500_000_000


@dataclass(frozen=True)
class Transient:
    persistent: int
    """Buffers alive through the whole step (DDP's gradient buckets)."""
    backward: int
    """Buffers alive in forward/backward (gathered units, reduce-scatter buffers)."""
    step: int
    """Temporaries of the optimizer step on the GPU."""
    detail: str

    def peak_extra(self, activations: int) -> int:
        """Bytes above static + activations at the step's peak."""
        return self.persistent + max(self.backward, self.step - activations)


def unit_parameters(plan: Plan) -> tuple[float, float]:
    """(a decoder layer, everything outside the layers) in parameters per tensor-parallel
    rank: the units FSDP and ZeRO-3 gather when wrapping per block (the root unit holds the
    embeddings, the final norm and lm_head)."""
    arch = plan.model.architecture
    scale = plan.model.parameters / arch.parameter_count / plan.tp
    return arch.layer_parameters * scale, arch.outside_layer_parameters * scale


def dequantized_weight(plan: Plan, compute_bytes: int = 2) -> int:
    """QLoRA: the largest 4-bit linear dequantized for its matmul, in forward and again in
    backward (bitsandbytes MatMul4Bit: gemm_4bit's fallback dequantizes the whole weight for
    inputs of more than 1536 rows, and backward dequantizes it again rather than saving it;
    torchao's NF4Tensor likewise), in the compute dtype (bf16, as QLoRA recipes set
    bnb_4bit_compute_dtype)."""
    if plan.method is not Method.qlora:
        return 0
    arch = plan.model.architecture
    largest = max(lin.d_in * lin.d_out for lin in arch.linear_layers if lin.group != "head")
    return round(compute_bytes * largest / plan.tp)


def step_order(plan: Plan) -> list[int]:
    """Elements of the trainable matrices in the order a per-tensor step visits them: the
    Trainer's weight-decay group (trainer.py get_decay_parameter_names: every weight but the
    norms and biases, which form the second group) in module order, the input embedding
    first, the decoder layers', then the rest (lm_head). Vectors are left out: they are
    stepped after, and are small (unless nothing else trains: an adapter given as a share)."""
    tensors = [t for t in trainable_tensors(plan) if t.rows] or list(trainable_tensors(plan))
    layers = [t.numel for t in tensors if t.count > 1]
    outside = [t.numel for t in tensors if t.count == 1]
    return [*outside[:1], *layers, *outside[1:]]


def _step(
    plan: Plan, strategy: Strategy, state: StaticState, moment_bytes: int
) -> tuple[float, float, str]:
    """(bytes, unrounded; this GPU's trainable parameters; why) of the optimizer step's own
    temporaries on the GPU, for moments of `moment_bytes`."""
    local = state.trainable / plan.tp / strategy_spec(strategy).divisors(plan)[2]
    temp, why = optimizer_spec(plan.optimizer).step_temporaries(
        local,
        lambda: step_order(plan),
        moment_bytes,
        plan.precision,
    )
    return temp, local, why


def optimizer_temporaries(
    plan: Plan, strategy: Strategy, state: StaticState, moment_bytes: int, fused: bool
) -> tuple[int, str]:
    """GPU bytes the optimizer's own step allocates (0 when it runs on the CPU or in one
    fused kernel: torch's fused AdamW, DeepSpeed's FusedAdam, bitsandbytes' 8-bit kernels)."""
    if plan.offload is not Offload.none:
        return 0, "optimizer step runs on the CPU"
    if plan.optimizer_kernel is not OptimizerKernel.auto:
        fused = plan.optimizer_kernel is OptimizerKernel.fused
    if fused and optimizer_spec(plan.optimizer).step == "foreach":
        return 0, "fused optimizer kernel"
    temp, _, why = _step(plan, strategy, state, moment_bytes)
    return round(temp), why


def communication_buffers(
    plan: Plan, strategy: Strategy, state: StaticState
) -> tuple[int, int, str]:
    """(persistent, backward-phase) buffer bytes per GPU and a description."""
    if plan.hardware.gpus == 1:
        return 0, 0, "one GPU: no communication buffers"
    arch = plan.model.architecture
    scale = plan.model.parameters / arch.parameter_count
    wb = gb = plan.precision.weight_bytes  # gradients in the parameter dtype
    t = plan.tp
    trainable_share = state.trainable / plan.model.parameters
    layer, outside = arch.layer_parameters * scale, arch.outside_layer_parameters * scale
    how = strategy_spec(strategy)
    if how.shards_weights:
        # FSDP with per-block wrapping: the block being computed and the prefetched one are
        # gathered, the root unit (embeddings, lm_head) stays gathered through fwd+bwd, and
        # the unsharded gradients of a unit wait for their reduce-scatter (PyTorch FSDP notes).
        gathered = wb * (outside + 2 * layer) / t
        grads = gb * (outside + layer) * trainable_share / t
        return (
            0,
            round(gathered + grads),
            (
                f"gathered root unit + 2 blocks {gathered / 1e9:.2f} GB, "
                f"unsharded gradients of a unit {grads / 1e9:.2f} GB"
            ),
        )
    if how.framework == "fsdp":  # SHARD_GRAD_OP: a unit's gradients wait for reduce-scatter
        grads = gb * (outside + layer) * trainable_share / t
        return 0, round(grads), f"unsharded gradients of a unit {grads / 1e9:.2f} GB"
    if how.framework == "ddp":
        # torch DDP without gradient_as_bucket_view keeps its buckets beside the gradients.
        bucket = gb * state.trainable / t
        return round(bucket), 0, f"DDP gradient buckets {bucket / 1e9:.2f} GB"
    bucket = gb * min(DEEPSPEED_REDUCE_BUCKET, state.trainable / t)
    return 0, round(bucket), f"DeepSpeed reduce bucket {bucket / 1e9:.2f} GB"


def step_temporaries(plan: Plan, strategy: Strategy, state: StaticState) -> tuple[int, str]:
    """GPU bytes the optimizer step allocates on top of the state (0 when it runs on CPU)."""
    if plan.offload is not Offload.none:
        return 0, "optimizer step runs on the CPU"
    temp, local, why = _step(plan, strategy, state, plan.optimizer_state_dtype.bytes)
    if plan.precision is Precision.bf16_mixed and not plan.fp32_grad_buffer:
        # The fp32 master update needs fp32 gradients: DeepSpeed copies the local partition,
        # FSDP's mixed precision keeps fp32 gradient shards.
        temp += 4 * local
        why += " + fp32 gradient copy"
    return round(temp), why


def transient(plan: Plan, strategy: Strategy, state: StaticState) -> Transient:
    persistent, backward, buffers = communication_buffers(plan, strategy, state)
    step, why = step_temporaries(plan, strategy, state)
    return Transient(persistent, backward, step, f"{buffers}; optimizer step: {why}")
