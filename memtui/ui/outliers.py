"""The GPUs of a job worth a look (pure: no Textual): the one nearest its capacity, ranks far
above the job's median (the rank-0 surplus: rank 0 often holds extra buffers, and OOMs first),
and hosts that stopped reporting.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass

from memtui.telemetry import ClusterSnapshot, DeviceKey, DeviceSnapshot

#: A rank is "far above the median" past this share of the median...
ABOVE_MEDIAN_SHARE = 0.10
#: ...and by at least this many bytes (a few hundred MiB of noise is not an outlier).
ABOVE_MEDIAN_BYTES = 1024**3
#: At most this many ranks above the median are named (the largest first).
MAX_NAMED = 3


@dataclass(frozen=True)
class Outliers:
    """What `find_outliers` found; empty fields when nothing stands out."""

    nearest: tuple[DeviceKey, DeviceSnapshot] | None = None
    """The GPU using the largest share of its card."""
    median: int | None = None
    """Median used bytes over the GPUs that answered."""
    above: tuple[tuple[DeviceKey, DeviceSnapshot], ...] = ()
    """Ranks far above the median, the largest first (at most `MAX_NAMED`)."""
    above_count: int = 0
    """How many ranks are far above the median in all."""
    silent_hosts: tuple[str, ...] = ()
    """Hosts whose node is not OK (stopped reporting, stale samples)."""


def find_outliers(snapshot: ClusterSnapshot) -> Outliers:
    """The outliers of a snapshot (meant for many GPUs; works for any)."""
    live = [
        (key, d)
        for key, _, d in snapshot.rows()
        if not d.lost and d.memory_used is not None and d.memory_total
    ]
    silent = tuple(n.hostname or "" for n in snapshot.nodes if not n.ok)
    if not live:
        return Outliers(silent_hosts=silent)
    nearest = max(live, key=lambda kd: kd[1].used_fraction or 0.0)
    median = int(statistics.median(d.memory_used or 0 for _, d in live))
    limit = max(median * (1 + ABOVE_MEDIAN_SHARE), median + ABOVE_MEDIAN_BYTES)
    above = sorted(
        (kd for kd in live if (kd[1].memory_used or 0) > limit),
        key=lambda kd: -(kd[1].memory_used or 0),
    )
    return Outliers(
        nearest=nearest,
        median=median,
        above=tuple(above[:MAX_NAMED]),
        above_count=len(above),
        silent_hosts=silent,
    )
