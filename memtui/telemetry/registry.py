"""One place that opens a telemetry source from command-line options: `open_source`.

`memtui` (the dashboard) and `memtui watch` both call it with their parsed flags (any object
with the attributes below; a missing one takes its default), so a source is chosen, built and
guarded the same way everywhere. Each entry of `SOURCES` says when its source is chosen and
how to open it; the first whose `chosen` holds wins, NVML last as the default. Adding a source
is its module (whose `SourceInfo` takes the `SourceKind` that describes its readings), one
entry here, and its flags in `memtui/commands/source_flags.py` (which the CLI reads without
importing telemetry).

Options read: `replay`, `speed` (replay; 0 or None steps a line per poll), `demo`,
`demo_gpus`, `demo_card`, `demo_total_bytes`, `demo_budget_bytes`, `demo_start`, `seed`,
`prometheus` (URL), `job`, `hosts`, `selector`, `bearer_token_file`, `basic_auth_file`,
`stale_after`, `only`, `timeout` (seconds a live poll may take).
A bad option value raises ValueError with a one-line message naming the flag.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from memtui.errors import SourceError
from memtui.telemetry.source import BoundedSource, TelemetrySource, parse_only


@dataclass(frozen=True)
class Entry:
    """One kind of source: when the options choose it, and how to open it."""

    chosen: Callable[[Any], bool]
    open: Callable[[Any], TelemetrySource]


def _option(options: Any, name: str, default: Any = None) -> Any:
    return getattr(options, name, default)


def _open_replay(options: Any) -> TelemetrySource:
    from memtui.telemetry.replay import ReplaySource

    speed = _option(options, "speed", 1.0)
    return ReplaySource(options.replay, speed=speed or None, only=_only(options))


def _open_demo(options: Any) -> TelemetrySource:
    from memtui.telemetry.synthetic import H100_80GB_TOTAL_BYTES, SyntheticSource

    total = _option(options, "demo_total_bytes")
    kwargs: dict[str, Any] = {
        "card": _option(options, "demo_card") or "NVIDIA H100 80GB HBM3",
        "total_bytes": H100_80GB_TOTAL_BYTES if total is None else total,
        "budget_bytes": _option(options, "demo_budget_bytes"),
        "seed": _option(options, "seed", 0),
        "start": _option(options, "demo_start"),
        "only": _only(options),
    }
    try:
        return SyntheticSource(_option(options, "demo_gpus", 8), **kwargs)
    except ValueError as err:
        raise SourceError(f"--demo: {err}") from None


def _open_prometheus(options: Any) -> TelemetrySource:
    from memtui.telemetry.prometheus import PrometheusSource

    timeout = _option(options, "timeout", 5.0)
    source = PrometheusSource.from_options(options, deadline_s=timeout * 0.8)
    return BoundedSource(source, timeout_s=timeout)


def _open_nvml(options: Any) -> TelemetrySource:
    from memtui.telemetry.nvml import NvmlSource

    return BoundedSource(NvmlSource(_only(options)), timeout_s=_option(options, "timeout", 5.0))


def _only(options: Any) -> tuple[str, ...]:
    return parse_only(_option(options, "only"))


#: Every source, in the order they are tried; NVML, last, is the default.
SOURCES: tuple[Entry, ...] = (
    Entry(lambda o: bool(_option(o, "replay")), _open_replay),
    Entry(lambda o: bool(_option(o, "demo")), _open_demo),
    Entry(lambda o: bool(_option(o, "prometheus")), _open_prometheus),
    Entry(lambda o: True, _open_nvml),
)


def open_source(options: Any) -> TelemetrySource:
    """The source the options choose, opened (nothing is polled yet); live ones (NVML,
    Prometheus) behind the timeout guard. Raises ValueError for a bad option value."""
    entry = next(e for e in SOURCES if e.chosen(options))
    return entry.open(options)
