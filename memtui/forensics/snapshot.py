"""The summary of a PyTorch memory snapshot, per device: where the reserved memory is, what
the trace did over time, and what the allocations were for.

The structure read is the one torch/cuda/memory.py `_snapshot` documents and
torch/csrc/cuda/Module.cpp `THCPModule_memorySnapshot` writes:
- `segments`: one per cudaMalloc'd (or mapped, for expandable segments) range, with `device`,
  `address`, `total_size`, `stream`, `segment_type` and `blocks`; each block has `size` (the
  allocator's rounded size), `requested_size` (what the program asked for), `state`
  (`active_allocated`, `active_pending_free` - the docstring says `active_awaiting_free` -
  or `inactive`) and `frames`;
- `device_traces[device]`: the recorded history, each entry with `action` (alloc,
  free_requested, free_completed, segment_alloc, segment_free, segment_map, segment_unmap,
  oom, snapshot), `addr` (`device_free` for oom), `size`, `stream`, `frames`, `time_us`;
- `allocator_settings`: the allocator's configuration.

The identities the numbers keep (what segsum in torch/cuda/_memory_viz.py checks):
reserved = allocated + awaiting_free + free_external, allocated = requested + free_internal.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import replace
from typing import Any

from memtui.forensics.allocator import K_SMALL_SIZE, findings
from memtui.forensics.attribution import Attributor
from memtui.forensics.model import (
    AllocatorSettings,
    DeviceSummary,
    FileSummary,
    Oom,
    Timeline,
)
from memtui.forensics.reader import RawFile, SnapshotError
from memtui.text import shown

TIMELINE_POINTS = 240
_ALLOC_STATES = ("active_allocated",)
_PENDING_STATES = ("active_pending_free", "active_awaiting_free")
_SEG_UP = ("segment_alloc", "segment_map")
_SEG_DOWN = ("segment_free", "segment_unmap")
_SIZED = ("alloc", "free_requested", "free_completed", *_SEG_UP, *_SEG_DOWN)


class _Budget:
    """A bound on the items visited: a pickle can repeat one object through memo references
    (2 bytes each), so a small file could name the same block a billion times. PyTorch never
    shares a segment, block or trace entry, and each costs far more than 2 bytes, so real
    files stay far below one item per 2 bytes."""

    def __init__(self, file_bytes: int) -> None:
        self.left = max(2_000_000, file_bytes // 2)

    def spend(self, n: int, where: str) -> None:
        self.left -= n
        if self.left < 0:
            raise SnapshotError(
                f"{where}: more items than the file has bytes for (objects repeated through "
                "pickle references); not a snapshot PyTorch wrote"
            )


def _int(value: Any, what: str) -> int:
    """A byte count of the file: a whole number, never negative (the allocator's sizes are
    size_t: torch/csrc/cuda/Module.cpp writes them as int64 from unsigned values)."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise SnapshotError(f"{what} is {type(value).__name__}, not a whole number of bytes")
    if value < 0:
        raise SnapshotError(f"{what} is {value:,}, a negative size; not a snapshot PyTorch wrote")
    return value


def _device_of(seg: dict[str, Any], where: str, traced: int) -> int:
    """The segment's CUDA device index: a whole number from 0, and one the file traces when it
    has traces (`device_traces` holds one list per device: torch/csrc/cuda/Module.cpp
    `THCPModule_memorySnapshot`)."""
    dev = seg.get("device", 0)
    if isinstance(dev, bool) or not isinstance(dev, int) or dev < 0:
        raise SnapshotError(f"{where}: device {shown(repr(dev), 40)} is not a GPU index")
    if traced and dev >= traced:
        raise SnapshotError(
            f"{where}: device {dev:,}, but the file traces devices 0 to {traced - 1} only"
        )
    return dev


def settings_of(data: dict[str, Any]) -> AllocatorSettings:
    raw = data.get("allocator_settings")
    if not isinstance(raw, dict):
        return AllocatorSettings()
    mss = raw.get("max_split_size")
    # SIZE_MAX (no limit, the default) is written as int64_t(SIZE_MAX) = -1
    max_split = mss if isinstance(mss, int) and 0 < mss < 2**62 else None
    gc = raw.get("garbage_collection_threshold")
    conf = raw.get("PYTORCH_CUDA_ALLOC_CONF", raw.get("PYTORCH_ALLOC_CONF"))
    known = {
        "expandable_segments",
        "max_split_size",
        "garbage_collection_threshold",
        "PYTORCH_CUDA_ALLOC_CONF",
        "PYTORCH_ALLOC_CONF",
    }
    other = tuple(
        (str(k), str(v)[:80]) for k, v in raw.items() if k not in known and not isinstance(v, list)
    )
    exp = raw.get("expandable_segments")
    return AllocatorSettings(
        expandable_segments=bool(exp) if isinstance(exp, (bool, int)) else None,
        max_split_size=max_split,
        garbage_collection_threshold=float(gc) if isinstance(gc, (int, float)) else None,
        conf=str(conf) if conf is not None else None,
        recorded=True,
        other=other,
    )


def summarise_snapshot(raw: RawFile, device: int | None = None) -> FileSummary:
    """Summarise a snapshot RawFile (kind `snapshot` or `segments`)."""
    data = raw.data
    segments = data.get("segments") or []
    traces = data.get("device_traces") or []
    if not isinstance(traces, list):
        raise SnapshotError(f"{raw.path}: `device_traces` is not a list")
    settings = settings_of(data)
    budget = _Budget(raw.file_bytes)
    by_device: dict[int, list[dict[str, Any]]] = {}
    for i, seg in enumerate(segments):
        if not isinstance(seg, dict):
            raise SnapshotError(f"{raw.path}: segment {i} is not a dict")
        by_device.setdefault(_device_of(seg, f"{raw.path}: segment {i}", len(traces)), []).append(
            seg
        )
    budget.spend(len(segments), raw.path)
    devices = sorted(set(by_device) | {i for i, t in enumerate(traces) if t})
    if device is not None:
        if device not in devices:
            found = ", ".join(map(str, devices)) or "none"
            raise SnapshotError(f"{raw.path}: no device {device} in the file (devices: {found})")
        devices = [device]
    attributor = Attributor()
    notes = []
    categories = any(
        isinstance(e, dict) and "category" in e
        for t in traces
        if isinstance(t, list)
        for e in t[:50]
    )
    if categories and not settings.recorded:
        notes.append(
            "converted from a torch.profiler trace (torch.cuda._memory_viz profile_plot): its "
            "segments span the addresses seen, not memory PyTorch reserved"
        )
    if raw.kind == "segments":
        notes.append("segments only (torch.cuda.memory_snapshot()): no trace, no timeline")
    profiler = categories and not settings.recorded
    summaries = []
    for dev in devices:
        trace = traces[dev] if dev < len(traces) and isinstance(traces[dev], list) else []
        summary = _device(
            raw.path, dev, by_device.get(dev, []), trace, settings, attributor, budget
        )
        if profiler:  # the "segments" are address spans: free space in them means nothing
            summary = replace(summary, findings=())
        summaries.append(summary)
    return FileSummary(
        path=raw.path,
        kind=raw.kind,
        file_bytes=raw.file_bytes,
        devices=tuple(summaries),
        settings=settings,
        notes=tuple(notes),
        trace_events=sum(len(t) for t in traces if isinstance(t, list)),
    )


class _Blocks:
    """The blocks of one device's segments, walked once."""

    def __init__(self, path: str, segments: list[dict[str, Any]], budget: _Budget) -> None:
        self.reserved = self.allocated = self.requested = self.pending = 0
        self.free_internal = self.free_external = self.inactive = 0
        self.largest = 0
        #: largest inactive block per (small pool?, stream): what a request can reuse
        self.largest_by_pool: dict[tuple[bool, int], int] = {}
        self.live: list[tuple[int, Any]] = []  # (size, frames) of active_allocated blocks
        #: address -> (requested, frames) of blocks a program still holds (pending included)
        self.held: dict[int, tuple[int, Any]] = {}
        self.held_allocated: dict[int, tuple[int, Any]] = {}
        for s, seg in enumerate(segments):
            where = f"{path}: segment {s}"
            total = _int(seg.get("total_size"), f"{where} total_size")
            self.reserved += total
            blocks = seg.get("blocks") or []
            if not isinstance(blocks, list):
                raise SnapshotError(f"{where}: blocks is not a list")
            budget.spend(len(blocks), where)
            stream = seg.get("stream", 0)
            small = seg.get("segment_type") == "small" or total <= 2 * K_SMALL_SIZE
            addr = seg.get("address")
            addr = addr if isinstance(addr, int) else None
            held = 0
            for b, block in enumerate(blocks):
                if not isinstance(block, dict):
                    raise SnapshotError(f"{where}, block {b}: not a dict")
                size = _int(block.get("size"), f"{where}, block {b}: size")
                held += size
                state = block.get("state")
                baddr = block.get("address", addr)
                if state in _ALLOC_STATES:
                    req = block.get("requested_size", size)
                    req = _int(req, f"{where}, block {b}: requested_size")
                    if req > size:  # the block is the request rounded up, never less
                        raise SnapshotError(
                            f"{where}, block {b}: requested_size {req:,} is more than the "
                            f"block's size {size:,}; not a snapshot PyTorch wrote"
                        )
                    frames = block.get("frames")
                    self.allocated += size
                    self.requested += req
                    self.free_internal += size - req
                    self.live.append((size, frames))
                    if isinstance(baddr, int):
                        self.held[baddr] = (req, frames)
                        self.held_allocated[baddr] = (req, frames)
                elif state in _PENDING_STATES:
                    self.pending += size
                    if isinstance(baddr, int):
                        self.held[baddr] = (_int(block.get("requested_size", size), "size"),
                                            block.get("frames"))  # fmt: skip
                elif state == "inactive":
                    self.free_external += size
                    self.inactive += 1
                    self.largest = max(self.largest, size)
                    key = (small, stream if isinstance(stream, int) else 0)
                    self.largest_by_pool[key] = max(self.largest_by_pool.get(key, 0), size)
                else:
                    raise SnapshotError(
                        f"{where}, block {b}: unknown state {shown(repr(state), 40)}"
                    )
                if addr is not None:
                    addr += size
            if held > total:  # the blocks split the segment: they never add up to more
                raise SnapshotError(
                    f"{where}: its blocks hold {held:,} bytes, more than the segment's "
                    f"total_size {total:,}; not a snapshot PyTorch wrote"
                )


def _device(
    path: str,
    dev: int,
    segments: list[dict[str, Any]],
    trace: list[Any],
    settings: AllocatorSettings,
    attributor: Attributor,
    budget: _Budget,
) -> DeviceSummary:
    blocks = _Blocks(path, segments, budget)
    at_snapshot = attributor.tally(blocks.live, "size")
    timeline = oom = at_peak = at_oom = None
    ooms = 0
    if trace:
        budget.spend(len(trace), f"{path}: device {dev} trace")
        walk = _TraceWalk(path, dev, trace, blocks, attributor)
        timeline, oom, at_peak, at_oom, ooms = (
            walk.timeline,
            walk.oom,
            walk.at_peak,
            walk.at_oom,
            walk.ooms,
        )
    summary = DeviceSummary(
        device=dev,
        source="snapshot",
        reserved=blocks.reserved,
        allocated=blocks.allocated,
        requested=blocks.requested,
        awaiting_free=blocks.pending,
        free_internal=blocks.free_internal,
        free_external=blocks.free_external,
        largest_free_block=blocks.largest,
        inactive_blocks=blocks.inactive,
        segments=len(segments),
        peak_allocated=timeline.peak if timeline else None,
        peak_reserved=max(timeline.reserved) if timeline and timeline.reserved else None,
        oom=oom,
        ooms=ooms,
        at_snapshot=at_snapshot,
        at_peak=at_peak,
        at_oom=at_oom,
        timeline=timeline,
    )
    usable, split_blocked = _usable_for(oom, blocks, settings)
    return _with_findings(summary, settings, usable, split_blocked)


def _with_findings(
    summary: DeviceSummary, settings: AllocatorSettings, usable: int | None, split: bool
) -> DeviceSummary:
    return replace(summary, findings=findings(summary, settings, usable, split))


def _usable_for(
    oom: Oom | None, blocks: _Blocks, settings: AllocatorSettings
) -> tuple[int | None, bool]:
    """The largest inactive block the failed request could take (same pool and stream), and
    whether a larger one was kept whole by max_split_size."""
    if oom is None:
        return None, False
    small = oom.requested <= K_SMALL_SIZE
    stream = oom.stream if isinstance(oom.stream, int) else None
    candidates = [
        size
        for (is_small, s), size in blocks.largest_by_pool.items()
        if is_small == small and (stream is None or s == stream)
    ]
    largest = max(candidates, default=0)
    mss = settings.max_split_size
    if mss and oom.requested < mss <= largest:
        below = [
            size
            for (is_small, s), size in blocks.largest_by_pool.items()
            if is_small == small and (stream is None or s == stream) and size < mss
        ]
        return max(below, default=0), True
    return largest, False


class _TraceWalk:
    """Two passes over one device's trace: live bytes over time (with the peak and the OOMs),
    then which allocations were live at the peak and at the last OOM."""

    def __init__(
        self, path: str, dev: int, trace: list[Any], blocks: _Blocks, attributor: Attributor
    ) -> None:
        self.oom: Oom | None = None
        self.ooms = 0
        self.at_oom = None
        where = f"{path}: device {dev} trace"
        completed = any(isinstance(e, dict) and e.get("action") == "free_completed" for e in trace)
        # memory_viz removes an allocation at free_completed (MemoryViz.js process_alloc_data);
        # a trace recorded with skip_actions=["free_completed"] only has free_requested
        free_action = "free_completed" if completed else "free_requested"
        end_live = blocks.held if completed else blocks.held_allocated
        end_total = sum(r for r, _ in end_live.values())
        n = len(trace)
        points = min(n, TIMELINE_POINTS)
        edges = [((k + 1) * n + points - 1) // points for k in range(points)]
        cur = res = 0
        peak, peak_i = 0, -1  # -1: the peak is the state before the first event
        bucket_a: list[int] = []
        bucket_r: list[int] = []
        bmax = rmax = None
        k, edge = 0, edges[0]
        oom_at: list[tuple[int, int, int]] = []  # (index, live, reserved) relative
        try:
            for i, e in enumerate(trace):
                action = e["action"]
                if action in _SIZED:
                    _int(e["size"], f"{where}: entry {i} size")
                if action == "alloc":
                    cur += e["size"]
                elif action == free_action:
                    cur -= e["size"]
                elif action in _SEG_UP:
                    res += e["size"]
                elif action in _SEG_DOWN:
                    res -= e["size"]
                elif action == "oom":
                    oom_at.append((i, cur, res))
                if cur > peak:
                    peak, peak_i = cur, i
                if bmax is None or cur > bmax:
                    bmax = cur
                if rmax is None or res > rmax:
                    rmax = res
                if i + 1 == edge:
                    bucket_a.append(bmax)
                    bucket_r.append(rmax)
                    bmax = rmax = None
                    k += 1
                    edge = edges[k] if k < points else -1
        except (KeyError, TypeError) as err:
            raise SnapshotError(
                f"{where}: entry {i} is malformed ({type(err).__name__}: {err}); expected "
                "action, addr and size as torch/cuda/memory.py TraceEntry documents"
            ) from None
        start = end_total - cur
        res_start = blocks.reserved - res
        self.start = start
        first_t = _time(trace[0])
        last_t = _time(trace[-1])
        self.timeline = Timeline(
            events=n,
            allocated=tuple(start + v for v in bucket_a),
            reserved=tuple(res_start + v for v in bucket_r),
            peak=start + peak,
            peak_index=peak_i,
            peak_time_us=_time(trace[max(peak_i, 0)]),
            start_time_us=first_t,
            end_time_us=last_t,
            oom_indices=tuple(i for i, _, _ in oom_at),
            start_allocated=start,
        )
        self.ooms = len(oom_at)
        if oom_at:
            i, live, reserved = oom_at[-1]
            e = trace[i]
            verdict = attributor.classify(e.get("frames"))
            self.oom = Oom(
                term=verdict.term,
                site=verdict.site,
                requested=_int(e.get("size"), f"{where}: oom entry {i} size"),
                device_free=e.get("device_free") if isinstance(e.get("device_free"), int) else None,
                index=i,
                time_us=_time(e),
                stream=e.get("stream") if isinstance(e.get("stream"), int) else None,
                live=start + live,
                reserved=res_start + reserved,
            )
        marks = {peak_i: "peak"}
        if self.oom is not None:
            marks[self.oom.index] = "oom"
        live_at = self._replay(trace, free_action, end_live, marks)
        peak_items = live_at["peak"]
        self.at_peak = attributor.tally(_with_residual(peak_items, start + peak), "requested")
        if self.oom is not None:
            self.at_oom = attributor.tally(
                _with_residual(live_at["oom"], self.oom.live or 0), "requested"
            )

    @staticmethod
    def _replay(
        trace: list[Any],
        free_action: str,
        end_live: dict[int, tuple[int, Any]],
        marks: dict[int, str],
    ) -> dict[str, list[tuple[int, Any]]]:
        """(requested, frames) of the allocations live just after each marked event."""
        live: dict[Any, tuple[int, Any]] = {}
        older: dict[Any, tuple[int, Any, int]] = {}  # freed in the trace, never alloc'd in it
        seen: set[Any] = set()
        taken: dict[str, tuple[int, list[tuple[int, Any]]]] = {
            name: (i, []) for i, name in marks.items() if i < 0
        }
        for i, e in enumerate(trace):
            action = e["action"]
            if action == "alloc":
                live[e["addr"]] = (e["size"], e.get("frames"))
                seen.add(e["addr"])
            elif action == free_action:
                addr = e["addr"]
                if live.pop(addr, None) is None and addr not in seen:
                    older[addr] = (e["size"], e.get("frames"), i)
                    seen.add(addr)
            if i in marks:
                taken[marks[i]] = (i, list(live.values()))
        # blocks held at the end that no alloc of the trace made were live from the start
        survivors = [v for addr, v in end_live.items() if addr not in live]
        out: dict[str, list[tuple[int, Any]]] = {}
        for name, (i, items) in taken.items():
            before = [(s, f) for s, f, freed in older.values() if freed > i]
            out[name] = items + before + survivors
        return out


def _with_residual(items: list[tuple[int, Any]], total: int) -> Iterable[tuple[int, Any]]:
    """The items, plus what the trace says was live but no known allocation accounts for
    (history older than the trace whose blocks are gone): counted as unattributed."""
    known = sum(s for s, _ in items)
    if total > known:
        return [*items, (total - known, None)]
    return items


def _time(e: Any) -> int | None:
    t = e.get("time_us") if isinstance(e, dict) else None
    return t if isinstance(t, int) else None
