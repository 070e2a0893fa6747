"""The same summary from `torch.cuda.memory_stats()` counters, for jobs that log those.

The counters (torch/csrc/cuda/Module.cpp `THCPModule_memoryStats`, flattened with dots by
torch/cuda/memory.py `memory_stats`): `allocated_bytes.all.*` are block sizes (what
memory_allocated reports), `requested_bytes.all.*` what the program asked for,
`active_bytes.all.*` allocated plus blocks waiting on other streams, `reserved_bytes.all.*`
the segments, `inactive_split_bytes.all.current` the free blocks inside partly used segments.
So: free_internal = allocated - requested, free_external = reserved - active. There are no
blocks, frames or trace: no largest free block, no attribution, no failed request (only the
`num_ooms` count); those stay unknown rather than guessed.
"""

from __future__ import annotations

from memtui.forensics.allocator import findings
from memtui.forensics.model import AllocatorSettings, DeviceSummary, FileSummary, Timeline
from memtui.forensics.reader import RawFile, SnapshotError

#: Counters kept beside the summary (the ones that speak about fragmentation and pressure).
COUNTERS = (
    "num_alloc_retries",
    "num_ooms",
    "num_device_alloc",
    "num_device_free",
    "num_sync_all_streams",
    "max_split_size",
    "inactive_split_bytes.all.current",
    "inactive_split_bytes.all.peak",
    "inactive_split.all.current",
    "oversize_allocations.current",
    "oversize_segments.current",
    "segment.all.current",
)


def _get(stats: dict[str, int], key: str) -> int | None:
    value = stats.get(key)
    return value if isinstance(value, int) else None


def summarise_stats(raw: RawFile, device: int | None = None) -> FileSummary:
    """One DeviceSummary per device of the last sample; a timeline when there are several."""
    samples: list[list[dict[str, int]]] = raw.data
    last = samples[-1]
    indices = list(range(len(last)))
    if device is not None:
        if device not in indices:
            raise SnapshotError(
                f"{raw.path}: no device {device} in the file (devices: "
                f"{', '.join(map(str, indices))})"
            )
        indices = [device]
    devices = []
    for i in indices:
        stats = last[i]
        if _get(stats, "allocated_bytes.all.current") is None:
            raise SnapshotError(
                f"{raw.path}: device {i} has no allocated_bytes.all.current counter"
            )
        devices.append(_device(i, stats, [s[i] for s in samples if i < len(s)]))
    notes: tuple[str, ...] = ()
    if len(samples) > 1:
        notes = (f"{len(samples)} memory_stats samples (JSON lines): the last is summarised",)
    return FileSummary(
        path=raw.path,
        kind="memory_stats",
        file_bytes=raw.file_bytes,
        devices=tuple(devices),
        settings=AllocatorSettings(),
        notes=notes,
    )


def _device(index: int, stats: dict[str, int], history: list[dict[str, int]]) -> DeviceSummary:
    allocated = _get(stats, "allocated_bytes.all.current")
    reserved = _get(stats, "reserved_bytes.all.current")
    requested = _get(stats, "requested_bytes.all.current")
    active = _get(stats, "active_bytes.all.current")
    counters = {}
    for key in COUNTERS:
        value = _get(stats, key)
        if value is not None:
            counters[key.split(".all.")[0].removesuffix(".current")] = value
    timeline = None
    if len(history) > 1:
        alloc = [_get(s, "allocated_bytes.all.current") or 0 for s in history]
        res = [_get(s, "reserved_bytes.all.current") or 0 for s in history]
        peak_i = max(range(len(alloc)), key=alloc.__getitem__)
        timeline = Timeline(
            events=len(history),
            allocated=tuple(alloc),
            reserved=tuple(res),
            peak=alloc[peak_i],
            peak_index=peak_i,
        )
    summary = DeviceSummary(
        device=index,
        source="memory_stats",
        reserved=reserved,
        allocated=allocated,
        requested=requested,
        awaiting_free=active - allocated if active is not None and allocated is not None else None,
        free_internal=allocated - requested
        if allocated is not None and requested is not None
        else None,
        free_external=reserved - active if reserved is not None and active is not None else None,
        inactive_blocks=counters.get("inactive_split"),
        segments=counters.get("segment"),
        peak_allocated=_get(stats, "allocated_bytes.all.peak"),
        peak_reserved=_get(stats, "reserved_bytes.all.peak"),
        counters=counters,
        ooms=counters.get("num_ooms", 0),
        timeline=timeline,
    )
    from dataclasses import replace

    return replace(summary, findings=findings(summary, AllocatorSettings(), None, False))
