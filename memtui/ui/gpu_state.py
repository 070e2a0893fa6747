"""Per-GPU state the screen keeps between polls: peaks, a short history, and the row status.

The status is a comparison of measured bytes against the job's budget (memtui/ui/budgets.py:
the estimator's per-GPU figure, whole from `estimate`) and the card's capacity; a GPU no job's
budget covers is judged against its capacity only. Statuses are
words as well as colours (docs/architecture.md, "The screen": colour is never the only signal).
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field
from enum import Enum

from memtui.telemetry import ClusterSnapshot, DeviceKey, DeviceSnapshot

#: Share of the card's memory past which a GPU is "near capacity" (the issue's alert line).
NEAR_CAPACITY = 0.95
#: Polls kept per GPU: what its sparkline draws, and no more (a job of 1,024 GPUs kept a
#: minute of them, 60 ints a GPU, for a line that shows 8).
HISTORY = 8


class RowStatus(str, Enum):
    """What a GPU row says, in words, beside its colour."""

    UNDER = "under budget"
    UNBUDGETED = "no job budget"
    """No job's budget covers this GPU: only its capacity is judged."""
    OVER = "OVER BUDGET"
    BUDGET_OVER_CARD = "BUDGET > CARD"
    """The job's budget per GPU is more than this card holds: however little it uses now,
    the job is planned past the card (never "under budget")."""
    NEAR_CAPACITY = "NEAR CAPACITY"
    OVER_AND_NEAR = "OVER BUDGET, NEAR CAPACITY"
    LOST = "GPU LOST"
    UNKNOWN = "no memory data"

    @property
    def alert(self) -> bool:
        """Whether this status raises an alert (notification and a mark on the row)."""
        return self in (
            RowStatus.OVER,
            RowStatus.NEAR_CAPACITY,
            RowStatus.OVER_AND_NEAR,
            RowStatus.BUDGET_OVER_CARD,
        )


def classify(device: DeviceSnapshot, budget_bytes: int | None) -> RowStatus:
    """The row's status: used memory against the job's budget per GPU (None: no budget
    covers this GPU) and the card's capacity."""
    if device.lost:
        return RowStatus.LOST
    used, total = device.memory_used, device.memory_total
    if used is None or not total:
        return RowStatus.UNKNOWN
    near = used >= total * NEAR_CAPACITY
    if budget_bytes is None:
        return RowStatus.NEAR_CAPACITY if near else RowStatus.UNBUDGETED
    over = used > budget_bytes
    if budget_bytes > total and not near:  # near the card is the sooner danger: said first
        return RowStatus.BUDGET_OVER_CARD
    if over and near:
        return RowStatus.OVER_AND_NEAR
    if over:
        return RowStatus.OVER
    if near:
        return RowStatus.NEAR_CAPACITY
    return RowStatus.UNDER


@dataclass
class GpuTrack:
    """One GPU's peak since start and its recent used bytes."""

    peak: int = 0
    history: deque[int] = field(default_factory=lambda: deque(maxlen=HISTORY))


class GpuHistory:
    """Peaks and histories of every GPU seen, keyed by `DeviceKey` (host, UUID or label):
    GPU 0 of one host is not GPU 0 of another."""

    def __init__(self) -> None:
        self.tracks: dict[DeviceKey, GpuTrack] = {}

    def record(self, snapshot: ClusterSnapshot) -> None:
        """Add one poll; lost or unreadable GPUs keep their last peak and history. A peak the
        source knows (Prometheus: since the job began) counts too."""
        for key, _, device in snapshot.rows():
            track = self.tracks.get(key)
            if track is None:
                track = self.tracks[key] = GpuTrack()
            if device.memory_used is not None and not device.lost:
                track.peak = max(track.peak, device.memory_used, device.memory_peak or 0)
                track.history.append(device.memory_used)

    def get(self, key: DeviceKey) -> GpuTrack:
        """The track of a GPU (empty if never seen)."""
        return self.tracks.get(key) or GpuTrack()
