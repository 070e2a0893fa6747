"""One line at the top of the live view: the GPU nearest to OOM and where its trend leads.

    Nearest to OOM: GPU 3, 78.1/80.0 GB used, 1.9 GB free · used grows 120 MB/s (last 30 s):
    full in ~16 s

"Nearest" is the fewest bytes free (`memtui.ui.trends.nearest_to_oom`); the trend is a line
fitted to its used memory (`memtui.ui.trends.projection`), per second of the snapshots' clock:
NVML sees memory, never a training step.
"""

from __future__ import annotations

from dataclasses import dataclass

from rich.cells import cell_len
from rich.text import Text
from textual.reactive import reactive

from memtui.telemetry import ClusterSnapshot
from memtui.text import shown
from memtui.ui.alerts import row_name
from memtui.ui.trends import (
    STEADY_BELOW,
    Projection,
    Trends,
    free_bytes,
    nearest_to_oom,
    projection,
)
from memtui.ui.units import num, size
from memtui.ui.widgets.view_widget import ViewWidget
from memtui.ui.widgets.word_fit import cut_text

#: A projected fill sooner than this many seconds is drawn as a warning.
SOON_S = 300.0


def rate_text(rate: float, unit: str) -> str:
    """Bytes a second in the rate's own scale: MB/s beside GB, MiB/s beside GiB."""
    small = "MB" if unit == "GB" else "MiB"
    return f"{size(int(abs(rate)), small, 0)}/s"


def duration_text(seconds: float) -> str:
    """ "~40 s", "~12 min", "~3.5 h": a projection is never precise to the second."""
    if seconds < 120:
        return f"~{seconds:.0f} s"
    if seconds < 7200:
        return f"~{seconds / 60:.0f} min"
    return f"~{seconds / 3600:.1f} h"


def trend_text(trend: Projection | None, unit: str, short: bool = False) -> str:
    """What the used memory does: grows (and when the card is full), shrinks, or holds;
    `short` leaves out the window it was fitted over."""
    if trend is None:
        return "trend: too few samples yet"
    window = "" if short else f" (last {trend.window_s:.0f} s)"
    if trend.seconds_to_full is not None:
        return (f"used grows {rate_text(trend.rate, unit)}{window}: "
                f"full in {duration_text(trend.seconds_to_full)}")  # fmt: skip
    if trend.rate <= -STEADY_BELOW:
        return f"used shrinks {rate_text(trend.rate, unit)}{window}"
    return f"used steady{window}"


@dataclass(frozen=True)
class OomView:
    """The line's words (none: no GPU with memory figures), longest first: the widget draws
    the longest that fits its width, so nothing is cut mid-word; and whether it warns."""

    variants: tuple[str, ...]
    warn: bool = False

    @property
    def text(self) -> str | None:
        """The whole line (its longest variant)."""
        return self.variants[0] if self.variants else None

    @classmethod
    def of(cls, snapshot: ClusterSnapshot | None, trends: Trends, unit: str) -> OomView:
        found = nearest_to_oom(snapshot) if snapshot is not None else None
        if snapshot is None or found is None:
            return cls(())
        key, device = found
        name = row_name(key, device, len(snapshot.nodes) > 1)
        free = free_bytes(device)
        trend = projection(trends.samples(key), free)
        gpu = f"GPU {shown(name, 60)}"
        used = f"{num(device.memory_used, unit)}/{size(device.memory_total, unit)} used"
        variants = (
            f"Nearest to OOM: {gpu}, {used}, {size(free, unit)} free · {trend_text(trend, unit)}",
            f"Nearest to OOM: {gpu}, {size(free, unit)} free · {trend_text(trend, unit, True)}",
            f"Nearest to OOM: {gpu}, {size(free, unit)} free",
        )
        full = trend.seconds_to_full if trend is not None else None
        return cls(variants, full is not None and full < SOON_S)


class OomLine(ViewWidget):
    """The nearest-to-OOM line; empty (no height) without live memory figures."""

    DEFAULT_CSS = """
    OomLine { height: 1; padding: 0 1; text-wrap: nowrap; text-overflow: ellipsis; }
    OomLine.-warn { color: $warning; text-style: bold; }
    """

    view: reactive[OomView | None] = reactive(None)
    """Set by the screen after every poll."""

    def watch_view(self, view: OomView | None) -> None:
        self.set_class(bool(view and view.warn), "-warn")
        self.display = bool(view and view.variants)
        self.show(Text(self._fitting(), no_wrap=True, overflow="ellipsis"), 1)

    def on_resize(self) -> None:
        self.redraw()

    def _fitting(self) -> str:
        """The longest variant that fits the line; when none does, the shortest cut after a
        whole word with "…" (`cut_text`), never mid-word by the ellipsis overflow."""
        variants = self.view.variants if self.view is not None else ()
        room = self.content_size.width or 10**6  # before the first layout: the longest
        fits = next((v for v in variants if cell_len(v) <= room), None)
        if fits is not None:
            return fits
        return cut_text(variants[-1], room) if variants else ""
