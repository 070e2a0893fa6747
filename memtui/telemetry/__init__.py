"""Live GPU telemetry: snapshot models, sources (NVML, replay, synthetic) and a recorder.

Public API (importing this package does not import pynvml; NVML loads on the first poll):
- models: `NodeSnapshot`, `DeviceSnapshot`, `ProcessSnapshot`, `SourceState`
- sources: `TelemetrySource` (protocol), `NvmlSource`, `ReplaySource`, `SyntheticSource`,
  `BoundedSource` (timeout guard), `open_source()` (what `memtui watch` and the UI use)
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
from memtui.telemetry.source import (
    BoundedSource,
    TelemetrySource,
    matches_only,
    parse_only,
    select_devices,
)

__all__ = [
    "TRACE_FORMAT",
    "BoundedSource",
    "DeviceSnapshot",
    "NodeSnapshot",
    "ProcessSnapshot",
    "SourceState",
    "TelemetrySource",
    "matches_only",
    "parse_only",
    "select_devices",
]
