"""What the forensics reader returns: frozen records, bytes as integers everywhere.

A `FileSummary` holds one `DeviceSummary` per device found in a PyTorch memory snapshot or a
`torch.cuda.memory_stats()` dump. Fields a source cannot know are None (a stats dump has no
blocks, so no largest free block); the JSON form (`device_json`) keeps them as null.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum
from typing import Any

from memtui.estimator.terms import TermKind


class Unattributed(str, Enum):
    """Where bytes go that no rule gives to a plan term: a bucket beside the terms."""

    unattributed = "unattributed"


UNATTRIBUTED = Unattributed.unattributed
#: Plan terms an allocation can be attributed to: the estimator's budget terms that live in
#: PyTorch's caching allocator (declared `allocated`; not `overhead`: the CUDA context and
#: NCCL's buffers are allocated outside it, so no snapshot block can be theirs).
ALLOCATOR_TERMS = TermKind.held_by_allocator
Bucket = TermKind | Unattributed
"""A term an allocation is attributed to, or `unattributed`."""
BUCKETS: tuple[Bucket, ...] = (*ALLOCATOR_TERMS, UNATTRIBUTED)


@dataclass(frozen=True)
class AllocatorSettings:
    """The caching allocator's configuration recorded in the snapshot (`allocator_settings`,
    written by torch/csrc/cuda/Module.cpp `THCPModule_memorySnapshot`); None: not recorded."""

    expandable_segments: bool | None = None
    max_split_size: int | None = None
    """Bytes; None when unlimited (PyTorch's default, SIZE_MAX, pickled as -1) or unknown."""
    garbage_collection_threshold: float | None = None
    conf: str | None = None
    """The PYTORCH_CUDA_ALLOC_CONF (or PYTORCH_ALLOC_CONF) string the process ran with."""
    recorded: bool = False
    """False: the file carries no allocator_settings (older PyTorch, a profiler conversion)."""
    other: tuple[tuple[str, str], ...] = ()
    """Every other recorded setting, as text (roundup_power2_divisions, ...)."""


@dataclass(frozen=True)
class Attribution:
    """Bytes of a set of allocations per plan term, from their stack frames (heuristic)."""

    by_term: dict[Bucket, int]
    """Every key of BUCKETS, `unattributed` included."""
    by_rule: tuple[tuple[Bucket, str, int], ...] = ()
    """(term, rule, bytes), largest first: which rule put how much where."""
    unattributed_sites: tuple[tuple[str, int], ...] = ()
    """(innermost frame, bytes), largest first: where the unattributed bytes were allocated."""
    count: int = 0
    """Allocations counted."""
    measure: str = "size"
    """`size`: block sizes (what memory_allocated counts); `requested`: the trace's sizes."""

    @property
    def total(self) -> int:
        return sum(self.by_term.values())


@dataclass(frozen=True)
class Oom:
    """The allocator's `oom` trace entry: the request that failed."""

    requested: int
    """Bytes asked for, after the allocator's rounding (CUDACachingAllocator.cpp `malloc`
    records `params.size()`, the rounded size, in the OOM entry)."""
    device_free: int | None
    """Bytes CUDA reported free at that moment (cudaMemGetInfo)."""
    index: int
    """Position in the device's trace."""
    time_us: int | None = None
    stream: int | None = None
    live: int | None = None
    """Live requested bytes at the OOM, reconstructed from the trace."""
    reserved: int | None = None
    """Reserved bytes at the OOM, reconstructed from the trace's segment events."""
    term: Bucket | None = None
    """The plan term the failed request was for, from the OOM entry's frames (heuristic)."""
    site: str | None = None
    """The frame that decided `term`, or the innermost Python frame."""


@dataclass(frozen=True)
class Timeline:
    """Live bytes over the trace, as memory_viz's Active Memory Timeline counts them: an
    allocation's requested size from its `alloc` to its `free_completed` (MemoryViz.js
    `process_alloc_data`). One point per bucket of events, the bucket's maximum."""

    events: int
    allocated: tuple[int, ...]
    reserved: tuple[int, ...]
    peak: int
    peak_index: int
    peak_time_us: int | None = None
    start_time_us: int | None = None
    end_time_us: int | None = None
    oom_indices: tuple[int, ...] = ()
    start_allocated: int = 0
    """Live bytes before the first event (allocations older than the recorded history)."""


@dataclass(frozen=True)
class Finding:
    """One conclusion or piece of advice, with the number that justifies it."""

    kind: str
    """`fragmentation`, `out_of_memory`, `advice`, `note`."""
    text: str
    figure: int | None = None
    """The justifying number in bytes (None when it is a count or a ratio said in `text`)."""


@dataclass(frozen=True)
class DeviceSummary:
    """One device of a snapshot or a memory_stats dump."""

    device: int
    source: str
    """`snapshot` or `memory_stats`."""
    reserved: int | None = None
    allocated: int | None = None
    """Block sizes of live allocations: what torch.cuda.memory_allocated counts."""
    requested: int | None = None
    """What the program asked for: allocated less the allocator's rounding."""
    awaiting_free: int | None = None
    """Blocks freed by the program but waiting for other streams (state active_pending_free)."""
    free_internal: int | None = None
    """Rounding inside live blocks: allocated - requested."""
    free_external: int | None = None
    """Inactive blocks: reserved and free, but cut out of segments that are partly in use."""
    largest_free_block: int | None = None
    inactive_blocks: int | None = None
    segments: int | None = None
    peak_allocated: int | None = None
    peak_reserved: int | None = None
    counters: dict[str, int] = field(default_factory=dict)
    """memory_stats counters (num_alloc_retries, num_ooms, inactive_split_bytes, ...)."""
    oom: Oom | None = None
    """The last OOM of the trace (the one the snapshot's state follows)."""
    ooms: int = 0
    at_snapshot: Attribution | None = None
    at_peak: Attribution | None = None
    at_oom: Attribution | None = None
    timeline: Timeline | None = None
    findings: tuple[Finding, ...] = ()


@dataclass(frozen=True)
class FileSummary:
    """Everything memtui read from one file."""

    path: str
    kind: str
    """`snapshot`, `segments` (torch.cuda.memory_snapshot()'s list), `memory_stats`."""
    file_bytes: int
    devices: tuple[DeviceSummary, ...]
    settings: AllocatorSettings = AllocatorSettings()
    notes: tuple[str, ...] = ()
    trace_events: int = 0


def _attribution_json(a: Attribution | None) -> dict[str, Any] | None:
    if a is None:
        return None
    return {
        "by_term": {k.value: b for k, b in a.by_term.items()},
        "measure": a.measure,
        "allocations": a.count,
        "by_rule": [{"term": t.value, "rule": r, "bytes": b} for t, r, b in a.by_rule],
        "unattributed_sites": [{"frame": f, "bytes": b} for f, b in a.unattributed_sites],
    }


def device_json(summary: FileSummary, d: DeviceSummary) -> dict[str, Any]:
    """The documented `--json` object of one device: bytes as integers, null when unknown."""
    s = summary.settings
    oom = None
    if d.oom is not None:
        oom = {
            "requested": d.oom.requested,
            "device_free": d.oom.device_free,
            "trace_index": d.oom.index,
            "time_us": d.oom.time_us,
            "live_at_oom": d.oom.live,
            "reserved_at_oom": d.oom.reserved,
            "term": None if d.oom.term is None else d.oom.term.value,
            "site": d.oom.site,
        }
    by_term = d.at_snapshot.by_term if d.at_snapshot is not None else {}
    t = d.timeline
    return {
        "file": summary.path,
        "source": d.source,
        "device": d.device,
        "reserved": d.reserved,
        "allocated": d.allocated,
        "requested": d.requested,
        "awaiting_free": d.awaiting_free,
        "free_internal": d.free_internal,
        "free_external": d.free_external,
        "largest_free_block": d.largest_free_block,
        "inactive_blocks": d.inactive_blocks,
        "segments": d.segments,
        "peak_allocated": d.peak_allocated,
        "peak_reserved": d.peak_reserved,
        "oom": oom,
        "ooms": d.ooms,
        "by_term": {k.value: b for k, b in by_term.items()},
        "attribution": {
            "at_snapshot": _attribution_json(d.at_snapshot),
            "at_peak": _attribution_json(d.at_peak),
            "at_oom": _attribution_json(d.at_oom),
            "method": "heuristic: stack-frame rules in memtui/forensics/attribution.py",
        },
        "timeline": None
        if t is None
        else {
            "events": t.events,
            "peak": t.peak,
            "peak_index": t.peak_index,
            "peak_time_us": t.peak_time_us,
            "allocated": list(t.allocated),
            "reserved": list(t.reserved),
        },
        "counters": dict(d.counters),
        "allocator_settings": {
            "recorded": s.recorded,
            "expandable_segments": s.expandable_segments,
            "max_split_size": s.max_split_size,
            "garbage_collection_threshold": s.garbage_collection_threshold,
            "conf": s.conf,
        },
        "findings": [{"kind": f.kind, "text": f.text, "bytes": f.figure} for f in d.findings],
    }
