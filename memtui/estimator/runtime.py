"""Memory a GPU holds beyond the model's tensors, and the three figures users compare with.

- allocated: what `torch.cuda.max_memory_allocated` counts: every tensor, cuBLAS's workspace
  included (it is allocated through the caching allocator).
- reserved: `torch.cuda.max_memory_reserved`: allocated plus what the caching allocator keeps
  cached beyond it (fragmentation and rounding).
- device: what nvidia-smi / NVML shows for the process: reserved plus memory outside the
  allocator: the CUDA context, NCCL's buffers and CUDA managed memory (bitsandbytes' paged
  optimizer state). The verdict compares this one with the card.
The plan's `overhead` settings give each part's size and say where it comes from.
"""

from __future__ import annotations

from typing import Literal, NamedTuple

from memtui.estimator.plan import Plan
from memtui.estimator.units import MiB

Where = Literal["allocated", "reserved", "outside"]

# aten/src/ATen/cuda/CublasHandlePool.cpp (getChosenWorkspaceSize): 4096 * 8 KiB = 32 MiB per
# handle and stream on sm90 and newer, else 4096 * 2 KiB + 16 * 8 KiB; one stream runs the
# training matmuls (the all-gather and reduce streams run no GEMMs).
CUBLAS_WORKSPACE_HOPPER = 4096 * 8 * 1024
CUBLAS_WORKSPACE_OLDER = 4096 * 2 * 1024 + 16 * 8 * 1024


# named tuples, not frozen dataclasses: every breakdown makes five of them on the estimator's
# hot path (the lever list and the micro-batch search), and a tuple is made the fastest


class RuntimePart(NamedTuple):
    """One piece of the runtime overhead."""

    name: str
    bytes: int
    where: Where
    source: str


class Runtime(NamedTuple):
    """The runtime overhead's parts and the three totals they make with the tensors."""

    parts: tuple[RuntimePart, ...]
    allocated: int
    """Tensors + workspace (max_memory_allocated)."""
    reserved: int
    """allocated + the allocator's reserve (max_memory_reserved)."""
    device: int
    """reserved + everything outside the allocator (nvidia-smi)."""

    @property
    def total(self) -> int:
        """The overhead term: every part."""
        return sum(p.bytes for p in self.parts)


def runtime(plan: Plan, tensors: int, managed: int = 0) -> Runtime:
    """The overhead around `tensors` bytes of allocator tensors per GPU; `managed` bytes of
    them (paged optimizer state) live in CUDA managed memory instead, outside the allocator."""
    o = plan.overhead
    in_allocator = tensors - managed
    if not o.enabled:
        return Runtime((), in_allocator, in_allocator, tensors)
    hopper = plan.hardware.compute_capability >= 9
    workspace = CUBLAS_WORKSPACE_HOPPER if hopper else CUBLAS_WORKSPACE_OLDER
    allocated = in_allocator + workspace
    fraction = o.expandable_fragmentation if plan.expandable_segments else o.fragmentation
    reserve = round(fraction * allocated)
    nccl = o.nccl if plan.hardware.gpus > 1 else 0
    parts = (
        RuntimePart(
            "cuBLAS workspace",
            workspace,
            "allocated",
            f"{workspace / MiB:g} MiB per stream for compute capability "
            f"{plan.hardware.compute_capability:g} (PyTorch CublasHandlePool.cpp)",
        ),
        RuntimePart(
            "allocator reserve",
            reserve,
            "reserved",
            f"{fraction:.0%} of the allocated peak cached beyond it"
            + (" (expandable segments)" if plan.expandable_segments else ""),
        ),
        RuntimePart("CUDA context", o.cuda_context, "outside", "context and kernel images"),
        RuntimePart(
            "NCCL buffers",
            nccl,
            "outside",
            "communicator buffers" if nccl else "one GPU: no communicator",
        ),
    )
    reserved = allocated + reserve
    return Runtime(parts, allocated, reserved, reserved + o.cuda_context + nccl + managed)
