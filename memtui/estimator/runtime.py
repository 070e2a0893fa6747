"""Memory a GPU holds that is not the model's: the CUDA context, NCCL's buffers and what the
caching allocator loses to fragmentation (the plan's `overhead` settings say how much)."""

from __future__ import annotations

from memtui.estimator.plan import Plan


def overhead_bytes(plan: Plan) -> int:
    """CUDA context + NCCL (with more than one GPU) + allocator fragmentation, per GPU."""
    o = plan.overhead
    if not o.enabled:
        return 0
    nccl = o.nccl if plan.hardware.gpus > 1 else 0
    return o.cuda_context + nccl + round(o.fragmentation * plan.hardware.gpu_memory)


def overhead_source(plan: Plan) -> str:
    if not plan.overhead.enabled:
        return "turned off (--overhead none)"
    return "CUDA context + NCCL buffers + allocator fragmentation"
