"""The caching allocator's rules that decide whether a request fits, and what follows.

Constants and rules from c10/cuda/CUDACachingAllocator.cpp (DeviceCachingAllocator):
requests are rounded up (`round_size`: at least 512 bytes, then multiples of 512); a request
of at most 1 MiB comes from the small pool (2 MiB segments), larger ones from the large pool;
a new segment is cudaMalloc'd at `get_allocation_size`: 2 MiB for small requests, 20 MiB for
requests under 10 MiB, else the request rounded up to 2 MiB. A free block is reused only by
the same pool and stream (`get_free_block`), and, when `max_split_size` is set, a block at or
above it is not handed to a request below it. Before raising an OOM the allocator frees every
cached segment that is entirely free (`release_cached_blocks`), so the free memory an OOM
snapshot still shows sits in *inactive blocks of segments partly in use*: it cannot be
returned to CUDA, and a request larger than the largest of them cannot use it. That is
fragmentation; `expandable_segments:True` (Note [Expandable Segments] in the same file) lets
segments grow in place so the slivers stay reusable.
"""

from __future__ import annotations

from memtui.estimator.terms import TermKind
from memtui.estimator.units import GiB, MiB, ceil_div
from memtui.forensics.model import AllocatorSettings, Attribution, DeviceSummary, Finding

K_SMALL_SIZE = 1 * MiB
K_SMALL_BUFFER = 2 * MiB
K_LARGE_BUFFER = 20 * MiB
K_MIN_LARGE_ALLOC = 10 * MiB
K_ROUND_LARGE = 2 * MiB

#: Free memory in inactive blocks above this share (of the allocated memory for free space
#: inside blocks, of the reserved memory for free space outside them) is called out: 3 %, a
#: threshold for advice. Not the estimator's planning margin (memtui/estimator/plan.py
#: OverheadSettings.fragmentation, 10 % of the allocated peak), which sizes what a plan
#: leaves the allocator rather than what is worth a remark.
FRAGMENTATION_ALLOWANCE = 0.03


def segment_size_for(request: int) -> int:
    """Bytes cudaMalloc is asked for when no cached block fits a (rounded) request
    (CUDACachingAllocator.cpp `get_allocation_size`)."""
    if request <= K_SMALL_SIZE:
        return K_SMALL_BUFFER
    if request < K_MIN_LARGE_ALLOC:
        return K_LARGE_BUFFER
    return K_ROUND_LARGE * ceil_div(request, K_ROUND_LARGE)


def gib(n: int) -> str:
    """Bytes as GiB with two decimals (the unit of PyTorch's own OOM message)."""
    return f"{n / GiB:,.2f} GiB"


def findings(
    d: DeviceSummary,
    settings: AllocatorSettings,
    largest_usable: int | None,
    blocked_by_split_size: bool,
) -> tuple[Finding, ...]:
    """Fragmentation, the OOM's cause and the advice that follows, each with its number.

    `largest_usable`: the largest inactive block the failed request could have taken (its pool
    and stream); `blocked_by_split_size`: a larger block existed but max_split_size kept it
    whole."""
    out: list[Finding] = []
    free_ext = d.free_external or 0
    reserved = d.reserved or 0
    blocks = d.inactive_blocks or 0
    largest = d.largest_free_block or 0
    expandable = settings.expandable_segments is True
    if d.free_internal and d.free_internal > FRAGMENTATION_ALLOWANCE * (d.allocated or 0):
        out.append(
            Finding(
                "note",
                f"{gib(d.free_internal)} of the allocated blocks is rounding (allocated - "
                "requested): the allocator hands out multiples of 512 bytes and whole "
                "blocks when splitting would leave less than 1 MiB",
                d.free_internal,
            )
        )
    if d.oom is not None:
        out.extend(_oom_findings(d, settings, largest_usable, blocked_by_split_size))
    elif reserved and free_ext > FRAGMENTATION_ALLOWANCE * reserved:
        share = free_ext / reserved
        out.append(
            Finding(
                "fragmentation",
                f"{gib(free_ext)} ({share:.0%} of reserved) is free in {blocks} inactive blocks; "
                f"the largest is {gib(largest)}: a request above that needs a new segment",
                free_ext,
            )
        )
        if not expandable:
            out.append(_expandable_advice(free_ext, blocks, largest))
    if d.counters.get("num_alloc_retries"):
        n = d.counters["num_alloc_retries"]
        out.append(
            Finding(
                "fragmentation",
                f"num_alloc_retries = {n}: {n} time(s) cudaMalloc failed and the allocator "
                "had to free its cached segments and retry (alloc_block with isRetry): the "
                "process ran at the edge of the card",
                None,
            )
        )
    split = d.counters.get("inactive_split_bytes")
    if split and d.source == "memory_stats" and reserved:
        out.append(
            Finding(
                "fragmentation",
                f"inactive_split_bytes = {gib(split)} ({split / reserved:.0%} of reserved): free "
                "memory inside partly used segments, which empty_cache() cannot return",
                split,
            )
        )
        if not expandable and split > FRAGMENTATION_ALLOWANCE * reserved:
            out.append(_expandable_advice(split, d.counters.get("inactive_split", 0), None))
    return tuple(out)


def _expandable_advice(free: int, blocks: int, largest: int | None) -> Finding:
    tail = f"; the largest is {gib(largest)}" if largest is not None else ""
    return Finding(
        "advice",
        f"set PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True: {gib(free)} sits in {blocks} "
        f"inactive blocks{tail}; expandable segments grow in place, so freed space stays "
        "usable by larger requests (CUDACachingAllocator.cpp, Note [Expandable Segments])",
        free,
    )


def _oom_findings(
    d: DeviceSummary,
    settings: AllocatorSettings,
    largest_usable: int | None,
    blocked_by_split_size: bool,
) -> list[Finding]:
    assert d.oom is not None
    oom = d.oom
    r = oom.requested
    free_ext = d.free_external or 0
    cuda_free = oom.device_free or 0
    blocks = d.inactive_blocks or 0
    usable = largest_usable if largest_usable is not None else (d.largest_free_block or 0)
    need = r if settings.expandable_segments else segment_size_for(r)
    out = [
        Finding(
            "out_of_memory",
            f"a request of {gib(r)} failed (trace event {oom.index:,}); CUDA had "
            f"{gib(cuda_free)} free, the allocator {gib(free_ext)} free in {blocks} inactive "
            f"blocks, the largest usable one {gib(usable)}",
            r,
        )
    ]
    if blocked_by_split_size and settings.max_split_size:
        out.append(
            Finding(
                "fragmentation",
                f"a free block large enough existed, but it is at or above max_split_size "
                f"({gib(settings.max_split_size)}) and the request is below it: such blocks are "
                "kept whole for large requests (CUDACachingAllocator.cpp get_free_block)",
                settings.max_split_size,
            )
        )
        out.append(
            Finding(
                "advice",
                f"raise or drop max_split_size_mb (now {settings.max_split_size // MiB} MiB) in "
                "PYTORCH_CUDA_ALLOC_CONF, or turn on expandable_segments:True",
                settings.max_split_size,
            )
        )
    elif usable < r and free_ext + cuda_free >= need:
        out.append(
            Finding(
                "fragmentation",
                f"fragmentation caused this OOM: {gib(free_ext + cuda_free)} was free in total "
                f"(inactive blocks + CUDA), enough for the {gib(need)} needed, but no single "
                f"block held {gib(r)} (largest usable {gib(usable)}) and CUDA alone had "
                f"{gib(cuda_free)}",
                free_ext,
            )
        )
        if settings.expandable_segments is not True:
            out.append(_expandable_advice(free_ext, blocks, usable))
        else:
            out.append(
                Finding(
                    "advice",
                    "expandable segments are already on: shrink the largest transient "
                    f"tensors (the failed request was {gib(r)}), e.g. a smaller micro-batch "
                    "or sequence, or chunk the loss",
                    r,
                )
            )
    else:
        short = need - free_ext - cuda_free
        out.append(
            Finding(
                "out_of_memory",
                f"not fragmentation: even every free byte ({gib(free_ext)} in the allocator + "
                f"{gib(cuda_free)} in CUDA) is {gib(max(short, 0))} short of the "
                f"{gib(need)} needed; the working set is too large",
                max(short, 0),
            )
        )
        out.extend(_shrink_advice(d.at_oom, short))
    return out


def _shrink_advice(at_oom: Attribution | None, short: int) -> list[Finding]:
    """What to shrink, from what was live at the OOM (activations and logits scale with the
    micro-batch: Korthikanti et al. 2022, Table 2, and memtui's logits term b*s*V)."""
    if at_oom is None or not at_oom.total:
        return [
            Finding(
                "advice",
                f"free at least {gib(max(short, 0))}: a smaller micro-batch, activation "
                "checkpointing, or sharding the optimizer state",
                max(short, 0),
            )
        ]
    live = at_oom.by_term
    total = at_oom.total
    per_batch = live[TermKind.activations] + live[TermKind.logits]
    out = []
    if per_batch:
        out.append(
            Finding(
                "advice",
                f"halve the micro-batch (keep the global batch with gradient accumulation): "
                f"activations and logits held {gib(per_batch)} ({per_batch / total:.0%} of live "
                f"memory) at the OOM and scale with it, so about {gib(per_batch // 2)} less",
                per_batch // 2,
            )
        )
    if live[TermKind.activations] > max(short, 0):
        out.append(
            Finding(
                "advice",
                f"activation checkpointing: activations held {gib(live[TermKind.activations])} "
                "at the OOM; full checkpointing keeps one layer input per layer (about an order "
                "of magnitude less, Korthikanti et al. 2022)",
                live[TermKind.activations],
            )
        )
    state = (
        live[TermKind.optimizer_states] + live[TermKind.master_weights] + live[TermKind.gradients]
    )
    if state > max(short, 0):
        out.append(
            Finding(
                "advice",
                f"shard or shrink the training state: gradients, master weights and optimizer "
                f"state held {gib(state)} (ZeRO/FSDP divide it by the GPUs; 8-bit AdamW cuts "
                "the moments to a quarter)",
                state,
            )
        )
    return out
