"""Live GPU telemetry: snapshot models, sources (NVML, replay, synthetic) and a recorder.

Public API (importing this package does not import pynvml; NVML loads on the first poll):
- models: `NodeSnapshot`, `DeviceSnapshot`, `ProcessSnapshot`, `SourceState`
- sources: `TelemetrySource` (protocol), `NvmlSource`, `ReplaySource`, `SyntheticSource`,
  `BoundedSource` (timeout guard and exit hook), `open_nvml()` (the live source as
  `memtui watch` and the UI use it)
- `Recorder` (JSONL trace writer), `read_trace()`, `select_devices()`, `parse_only()`
"""

from __future__ import annotations

from memtui.telemetry.models import (
    TRACE_FORMAT,
    DeviceSnapshot,
    NodeSnapshot,
    ProcessSnapshot,
    SourceState,
)
from memtui.telemetry.nvml import REDISCOVER_EVERY, STEADY_CALLS_PER_GPU, NvmlSource
from memtui.telemetry.recorder import Recorder, read_trace
from memtui.telemetry.replay import ReplaySource
from memtui.telemetry.source import (
    BoundedSource,
    TelemetrySource,
    matches_only,
    parse_only,
    select_devices,
)
from memtui.telemetry.synthetic import H100_80GB_TOTAL_BYTES, SyntheticSource

__all__ = [
    "H100_80GB_TOTAL_BYTES",
    "REDISCOVER_EVERY",
    "STEADY_CALLS_PER_GPU",
    "TRACE_FORMAT",
    "BoundedSource",
    "DeviceSnapshot",
    "NodeSnapshot",
    "NvmlSource",
    "ProcessSnapshot",
    "Recorder",
    "ReplaySource",
    "SourceState",
    "SyntheticSource",
    "TelemetrySource",
    "matches_only",
    "open_nvml",
    "parse_only",
    "read_trace",
    "select_devices",
]


def open_nvml(only: tuple[str, ...] = (), timeout_s: float = 5.0) -> BoundedSource:
    """The live source as the UI and `memtui watch` use it: NVML behind a poll timeout."""
    return BoundedSource(NvmlSource(only), timeout_s=timeout_s)
