"""Live GPU telemetry: snapshot models, sources (NVML, replay, synthetic, Prometheus), the
registry that opens them, the first poll, and a recorder.

Public API (importing this package imports neither pynvml nor the HTTP client: NVML loads on
the first poll, `memtui.telemetry.prometheus` when a Prometheus source is opened):
- models: `ClusterSnapshot`, `NodeSnapshot`, `DeviceSnapshot`, `ProcessSnapshot`,
  `DeviceKey`, `SourceState` (`.terminal`), `as_cluster()`
- sources: `TelemetrySource` (protocol), `SourceInfo`/`SourceKind` (what a source is),
  `NvmlSource`, `ReplaySource`, `SyntheticSource`, `BoundedSource` (timeout guard and exit
  hook), `open_source()` (the registry `memtui watch` and the dashboard both use),
  `FirstPoll` (a poll started before the UI), `poll_safely()`
- `Recorder` (JSONL trace writer), `read_trace()`, `select_devices()`, `parse_only()`
"""

from __future__ import annotations

from memtui.telemetry.first_poll import FirstPoll
from memtui.telemetry.models import (
    CLUSTER_TRACE_FORMAT,
    TRACE_FORMAT,
    ClusterSnapshot,
    DeviceKey,
    DeviceSnapshot,
    NodeSnapshot,
    ProcessSnapshot,
    SourceState,
    as_cluster,
)
from memtui.telemetry.nvml import REDISCOVER_EVERY, STEADY_CALLS_PER_GPU, NvmlSource
from memtui.telemetry.recorder import Recorder, read_trace
from memtui.telemetry.registry import open_source
from memtui.telemetry.replay import ReplaySource
from memtui.telemetry.source import (
    BoundedSource,
    SourceInfo,
    SourceKind,
    TelemetrySource,
    matches_only,
    parse_only,
    poll_safely,
    select_devices,
)
from memtui.telemetry.synthetic import H100_80GB_TOTAL_BYTES, SyntheticSource

__all__ = [
    "CLUSTER_TRACE_FORMAT",
    "H100_80GB_TOTAL_BYTES",
    "REDISCOVER_EVERY",
    "STEADY_CALLS_PER_GPU",
    "TRACE_FORMAT",
    "BoundedSource",
    "ClusterSnapshot",
    "DeviceKey",
    "DeviceSnapshot",
    "FirstPoll",
    "NodeSnapshot",
    "NvmlSource",
    "ProcessSnapshot",
    "Recorder",
    "ReplaySource",
    "SourceInfo",
    "SourceKind",
    "SourceState",
    "SyntheticSource",
    "TelemetrySource",
    "as_cluster",
    "matches_only",
    "open_source",
    "parse_only",
    "poll_safely",
    "read_trace",
    "select_devices",
]
