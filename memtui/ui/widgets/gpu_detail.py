"""One GPU in full: every reading, the memory trend, and history graphs with axes.

    GPU 3  NVIDIA H100 80GB HBM3  GPU-5f3a...
    memory 64.4/85.5 GB used, 20.6 GB free · util 93% · memory controller 38% · 67°C · ...
    used grows 120 MB/s (last 30 s): full in ~3 min
    Memory used (GB)
     85.5 │            ▁▃▅▆▇███████
     42.8 │      ▂▄▆███████████████
      0.0 │▁▂▄▆██████████████████████
          └──────────────────────────
          -5 min        -2 min    now

Each graph column is the largest sample of its slice of the window (memory: the peak is what
runs out), the y axis from 0 to the card's memory, 100 %, or the power limit (else the
largest draw seen); a slice without samples is blank, so a gap in polling shows as one.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from rich.console import Group
from rich.text import Text
from textual.reactive import reactive

from memtui.telemetry import DeviceSnapshot
from memtui.telemetry.readings import watts
from memtui.text import shown
from memtui.ui.trends import Projection, Sample
from memtui.ui.units import num, size
from memtui.ui.widgets.oom_line import duration_text, trend_text
from memtui.ui.widgets.view_widget import ViewWidget

_LEVELS = " ▁▂▃▄▅▆▇█"
_AXIS_WIDTH = 8  # "  85.5 │"


def graph(
    points: Sequence[tuple[float, float | None]],
    start: float,
    end: float,
    width: int,
    height: int,
    top: float,
    label: Callable[[float], str],
) -> list[str]:
    """`points` (time, value) between `start` and `end` as `height` rows of bars under a
    y axis (0, top / 2, top labelled) and over an x axis (the window's start, middle, now)."""
    columns = max(1, width - _AXIS_WIDTH)
    peaks: list[float | None] = [None] * columns
    span = max(end - start, 1e-9)
    for t, v in points:
        if v is None or not start <= t <= end:
            continue
        c = min(columns - 1, int((t - start) / span * columns))
        peaks[c] = v if peaks[c] is None else max(v, peaks[c])  # type: ignore[type-var]
    top = top if top > 0 else 1.0
    eighths = [None if v is None else round(min(v, top) / top * height * 8) for v in peaks]
    rows = []
    for r in range(height):
        floor = (height - 1 - r) * 8
        cells = "".join(" " if e is None else _LEVELS[max(0, min(8, e - floor))] for e in eighths)
        if r == 0:
            tick = label(top)
        elif r == height // 2 and height > 2:
            tick = label(top * (height - r) / height)  # the row's upper bound
        elif r == height - 1:
            tick = label(0)
        else:
            tick = ""
        rows.append(f"{tick[: _AXIS_WIDTH - 2]:>{_AXIS_WIDTH - 2}} │{cells}")
    rows.append(" " * (_AXIS_WIDTH - 1) + "└" + "─" * columns)
    left, middle = f"-{_ago(end - start)}", f"-{_ago((end - start) / 2)}"
    ticks = left.ljust(columns // 2 - len(middle) // 2) + middle
    rows.append(" " * _AXIS_WIDTH + ticks.ljust(columns - 3)[: max(0, columns - 3)] + "now")
    return rows


def _ago(seconds: float) -> str:
    return f"{seconds:.0f} s" if seconds < 120 else f"{seconds / 60:g} min"


@dataclass(frozen=True)
class DetailView:
    """What the detail view draws; built by its screen from the snapshot and the trends."""

    name: str
    """How the GPU is named ("3", "gpu07/3")."""
    device: DeviceSnapshot
    samples: tuple[Sample, ...]
    """The window's samples, oldest first."""
    window_s: float
    now: float
    """Unix time the window ends at (the latest poll)."""
    unit: str
    trend: Projection | None
    graph_height: int = 5
    width: int = 80


def _value(value: int | None, suffix: str) -> str:
    return "n/a" if value is None else f"{value}{suffix}"


def readings_line(device: DeviceSnapshot, unit: str) -> str:
    """Every reading, each "n/a" when the GPU does not give it."""
    power = "n/a" if device.power_mw is None else watts(device.power_mw)
    limit = "n/a" if device.power_limit_mw is None else watts(device.power_limit_mw)
    return (
        f"memory {num(device.memory_used, unit)}/{size(device.memory_total, unit)} used, "
        f"{size(device.memory_free, unit)} free, reserved {size(device.memory_reserved, unit)}"
        f" · util {_value(device.utilization_gpu, '%')}"
        f" · memory controller {_value(device.utilization_memory, '%')}"
        f" · {_value(device.temperature_c, '°C')}"
        f" · power {power} of {limit}"
        f" · SM {_value(device.clock_sm_mhz, ' MHz')}"
        f" · memory clock {_value(device.clock_memory_mhz, ' MHz')}"
    )


def detail_renderable(view: DetailView) -> tuple[Group, int]:
    """The view as Rich text and the lines it takes."""
    d, unit = view.device, view.unit
    start = view.now - view.window_s
    title = f"GPU {shown(view.name, 60)}  {shown(d.name or 'unknown GPU')}  {shown(d.uuid or '')}"
    head = Text(title, style="bold", no_wrap=True, overflow="ellipsis")
    lines: list[Text] = [head, Text(readings_line(d, unit), overflow="fold")]
    if d.lost:
        lines.append(Text(f"GPU LOST: {shown(d.error or 'no answer')}", style="bold"))
    lines.append(Text(f"{trend_text(view.trend, unit)}; window {duration_text(view.window_s)}"
                      " (keys 1-4: 1, 5, 15, 60 min; left/right: another GPU)"))  # fmt: skip
    scale = 1e9 if unit == "GB" else 2**30
    memory_top = (d.memory_total or max((s.used or 0 for s in view.samples), default=0)) / scale
    power_seen = max((s.power_mw or 0 for s in view.samples), default=0)
    power_top = (d.power_limit_mw or power_seen) / 1000
    Points = list[tuple[float, float | None]]
    graphs: list[tuple[str, Points, float, Callable[[float], str]]] = [
        (f"Memory used ({unit})", [(s.time, None if s.used is None else s.used / scale)
                                   for s in view.samples], memory_top, lambda v: f"{v:.1f}"),
        ("GPU utilisation (%)", [(s.time, s.utilization) for s in view.samples], 100.0,
         lambda v: f"{v:.0f}"),
        ("Power draw (W)", [(s.time, None if s.power_mw is None else s.power_mw / 1000)
                            for s in view.samples], power_top, lambda v: f"{v:.0f}"),
    ]  # fmt: skip
    for title, points, top, label in graphs:
        if all(v is None for _, v in points):
            lines.append(Text(f"{title}: n/a (no samples in this window)", style="bold"))
            continue
        lines.append(Text(title, style="bold"))
        rows = graph(points, start, view.now, view.width, view.graph_height, top, label)
        lines.extend(Text(row, no_wrap=True, overflow="crop") for row in rows)
    return Group(*lines), len(lines) + 1  # the readings line may fold once


class GpuDetail(ViewWidget):
    """The detail view's body; its screen sets `view` after every poll and key."""

    DEFAULT_CSS = "GpuDetail { height: auto; padding: 0 1; }"

    view: reactive[DetailView | None] = reactive(None)

    def watch_view(self, view: DetailView | None) -> None:
        if view is None:
            self.show("no such GPU in the latest poll", 1)
            return
        renderable, lines = detail_renderable(view)
        self.show(renderable, lines)
