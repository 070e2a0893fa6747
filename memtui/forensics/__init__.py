"""After the OOM: read PyTorch's memory snapshot (or memory_stats dump) and say where the memory
went, in the plan's terms (docs/architecture.md, "The import contract": pure, no Textual, no torch).

    summary = read_summary("oom.pickle")            # worker-thread friendly, no UI
    summary.devices[0].free_external                # bytes
    compare_plan(summary.devices[0], estimate(plan)) # the plan's terms beside them

`reader` refuses every class a pickle names (nothing in a file is run); `snapshot` and `stats`
summarise; `attribution` holds the frame rules; `allocator` the allocator's rules and advice;
`compare` the plan's prediction beside the attribution; `export` writes what memory_viz opens.
"""

from __future__ import annotations

from pathlib import Path

from memtui.forensics.model import DeviceSummary, FileSummary
from memtui.forensics.reader import RawFile, SnapshotError, load


def summarise(raw: RawFile, device: int | None = None) -> FileSummary:
    """The summary of a file already read."""
    if raw.kind == "memory_stats":
        from memtui.forensics.stats import summarise_stats

        return summarise_stats(raw, device)
    from memtui.forensics.snapshot import summarise_snapshot

    return summarise_snapshot(raw, device)


def read_summary(path: str | Path, device: int | None = None) -> FileSummary:
    """Read and summarise `path`; SnapshotError (one line) for anything else."""
    return summarise(load(path), device)


__all__ = [
    "DeviceSummary",
    "FileSummary",
    "RawFile",
    "SnapshotError",
    "load",
    "read_summary",
    "summarise",
]
