"""What the monitor keeps of each GPU over time, and what it reads from it (pure: no Textual).

`Trends` keeps a window of samples per GPU (time, used memory, utilisation, power) for the
detail view's graphs; `projection` fits a line to the recent used memory and says when it
reaches the card; `nearest_to_oom` names the GPU with the least memory left. The unit of a
trend is the second (of the snapshots' own clock), never a training step: NVML sees memory,
not steps.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass

from memtui.telemetry import ClusterSnapshot, DeviceKey, DeviceSnapshot

#: Samples kept across all GPUs: an hour at 1 Hz for 8 GPUs (some 3 MB); a source of many
#: GPUs keeps a shorter window per GPU, never less than `MIN_SAMPLES`.
SAMPLE_BUDGET = 8 * 3600
MIN_SAMPLES = 60
#: Seconds of used memory the projection fits a line to.
PROJECTION_S = 30.0
#: Fewest samples, and shortest span in seconds, a projection is made from.
PROJECTION_MIN_SAMPLES = 5
PROJECTION_MIN_SPAN_S = 5.0
#: Growth below this many bytes a second is noise (a caching allocator's jitter), not a trend.
STEADY_BELOW = 1024**2


@dataclass(frozen=True)
class Sample:
    """One poll of one GPU: what the detail view graphs."""

    time: float
    """Unix time of the poll, seconds."""
    used: int | None
    """Bytes (memory.used)."""
    utilization: int | None
    """Percent (utilization.gpu)."""
    power_mw: int | None
    """Milliwatts (power.draw)."""


@dataclass(frozen=True)
class Projection:
    """Used memory's trend: a least-squares line over the last `window_s` seconds."""

    rate: float
    """Bytes a second (negative: shrinking)."""
    window_s: float
    """Seconds the line was fitted over."""
    seconds_to_full: float | None
    """Seconds until used memory reaches the card at this rate; None when not growing."""


class Trends:
    """A bounded window of `Sample`s per GPU, keyed by `DeviceKey`."""

    def __init__(self, budget: int = SAMPLE_BUDGET) -> None:
        self.budget = budget
        self._samples: dict[DeviceKey, deque[Sample]] = {}
        self._per_gpu = budget

    def record(self, snapshot: ClusterSnapshot) -> None:
        """Add one poll (a lost GPU adds nothing: its graph shows the gap in time)."""
        rows = list(snapshot.rows())
        per_gpu = max(MIN_SAMPLES, self.budget // max(1, len(rows)))
        if per_gpu != self._per_gpu:  # more GPUs than before: shorter windows for all
            self._per_gpu = per_gpu
            self._samples = {k: deque(v, maxlen=per_gpu) for k, v in self._samples.items()}
        for key, _, device in rows:
            if device.lost:
                continue
            samples = self._samples.get(key)
            if samples is None:
                samples = self._samples[key] = deque(maxlen=per_gpu)
            samples.append(
                Sample(snapshot.time, device.memory_used, device.utilization_gpu, device.power_mw)
            )

    def samples(self, key: DeviceKey, since: float | None = None) -> tuple[Sample, ...]:
        """The GPU's samples, oldest first; only those at or after `since` when given."""
        found = self._samples.get(key, ())
        if since is None:
            return tuple(found)
        return tuple(s for s in found if s.time >= since)


def projection(samples: tuple[Sample, ...], room: int | None) -> Projection | None:
    """The trend of used memory over the last `PROJECTION_S` seconds of `samples`, and when
    it fills `room` (the bytes free at the last sample); None with too few samples (fewer
    than 5, or under 5 s of them).

    Ordinary least squares of used bytes on time (the slope cov(t, u) / var(t)): a single
    spike moves it less than a difference of the first and last samples would."""
    known = [(s.time, s.used) for s in samples if s.used is not None]
    if not known:
        return None
    end = known[-1][0]
    recent = [(t, u) for t, u in known if t >= end - PROJECTION_S]
    span = end - recent[0][0]
    if len(recent) < PROJECTION_MIN_SAMPLES or span < PROJECTION_MIN_SPAN_S:
        return None
    n = len(recent)
    mean_t = sum(t for t, _ in recent) / n
    mean_u = sum(u for _, u in recent) / n
    var = sum((t - mean_t) ** 2 for t, _ in recent)
    rate = sum((t - mean_t) * (u - mean_u) for t, u in recent) / var
    full = max(0.0, room / rate) if room is not None and rate >= STEADY_BELOW else None
    return Projection(rate, span, full)


def free_bytes(device: DeviceSnapshot) -> int | None:
    """What the next allocation can take: memory.free, else total - used (the driver's
    reservation is in neither with memory info v2)."""
    if device.memory_free is not None:
        return device.memory_free
    if device.memory_used is None or not device.memory_total:
        return None
    return max(0, device.memory_total - device.memory_used)


def nearest_to_oom(
    snapshot: ClusterSnapshot,
) -> tuple[DeviceKey, DeviceSnapshot] | None:
    """The GPU with the fewest bytes free (`free_bytes`), lost and unreadable GPUs left out:
    where the next allocation fails first. None when no GPU has a figure."""
    best: tuple[int, DeviceKey, DeviceSnapshot] | None = None
    for key, _, device in snapshot.rows():
        free = None if device.lost else free_bytes(device)
        if free is None:
            continue
        if best is None or free < best[0]:
            best = (free, key, device)
    return None if best is None else (best[1], best[2])
