"""One GPU row (or the plan's own row): live use and the predicted budget on one scale.

Wide layout, two lines:
    GPU 0 ▲ ███████████████░░░░░░│·········································
            used 44.1 / budget 42.5 / cap 85.5 GB  head 40.9  peak 45.0  ▃▅▆▇  OVER BUDGET
Narrow layout (the screen's `-narrow` class), one line:
    0▲ ██████████░░│······ 44.1/42.5 GB OVER
Colours come from the theme through the GPU panel's component classes (`ROW_STYLES`, resolved
once by the panel and handed down in `RowData.styles`: a component class declared on every row
cost each row a stylesheet pass per class); the status is also written out. `row_text` draws
a row as text, for a `GpuRow` and for the cluster view's compact rows alike.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from rich.style import Style
from rich.text import Text
from textual.reactive import reactive
from textual.widget import Widget

from memtui.estimator import Budget
from memtui.telemetry import DeviceSnapshot
from memtui.telemetry.text import printable
from memtui.ui.bar import render_bar, sparkline
from memtui.ui.gpu_state import RowStatus
from memtui.ui.themes import TERM_VARIABLES
from memtui.ui.units import num

_SHORT = {
    RowStatus.UNDER: "ok",
    RowStatus.OVER: "OVER",
    RowStatus.NEAR_CAPACITY: "NEAR",
    RowStatus.OVER_AND_NEAR: "OVER+NEAR",
    RowStatus.LOST: "LOST",
    RowStatus.UNKNOWN: "n/a",
}
_STATUS_CLASS = {
    RowStatus.UNDER: "ok",
    RowStatus.OVER: "alert",
    RowStatus.NEAR_CAPACITY: "near",  # $warning: close to the card, not past the plan
    RowStatus.OVER_AND_NEAR: "alert",
    RowStatus.LOST: "lost",
    RowStatus.UNKNOWN: "dim",
}


_PLAIN = Style()

#: The row's style names; the panel declares them as `gpu-row--NAME` component classes.
ROW_STYLES = (
    *TERM_VARIABLES,
    "over",
    "track",
    "mark",
    "ok",
    "alert",
    "near",
    "lost",
    "dim",
    "label",
)

#: History values a row keeps: what its sparkline draws (so an unchanged GPU is not redrawn).
SPARK_WIDTH = 8


@dataclass(frozen=True)
class RowData:
    """Everything one row shows; replaced whole so a row refreshes once per poll."""

    budget: Budget
    unit: str
    device: DeviceSnapshot | None = None
    """None: the plan's own row (plan-only mode and the reference bar above live rows)."""
    status: RowStatus | None = None
    peak: int | None = None
    history: tuple[int, ...] = ()
    styles: Mapping[str, Style] = field(default_factory=dict)
    """The theme's style for each name of `ROW_STYLES` (set by the panel; a new theme is new
    data, so the row redraws)."""


class GpuRow(Widget):
    """A GPU's bar and numbers. The screen sets `data`; the row only draws it."""

    DEFAULT_CSS = """
    GpuRow { height: 2; }
    GpuRow.-narrow { height: 1; }
    """

    data: reactive[RowData | None] = reactive(None)
    """What to draw; set by the GPU panel."""
    narrow: reactive[bool] = reactive(False, layout=True)
    """One line instead of two (terminals under 100 columns)."""

    def watch_narrow(self, narrow: bool) -> None:
        self.set_class(narrow, "-narrow")

    def watch_data(self, data: RowData | None) -> None:
        status = data.status if data else None
        near = status is RowStatus.NEAR_CAPACITY
        # the mark on the row, beside the notification ($warning near capacity, else $error)
        self.set_class(bool(status and status.alert), "-alert")
        self.set_class(near, "-near")

    def render(self) -> Text:
        data = self.data
        if data is None:
            return Text("")
        return row_text(data, self.size.width, self.narrow)


def row_text(data: RowData, width: int, narrow: bool, label: str | None = None) -> Text:
    """A row as text, `width` cells wide: two lines, or one when `narrow` (the cluster view's
    compact rows too). `label` replaces the device's own ("gpu07/3" across hosts)."""
    styles = data.styles

    def style(name: str) -> Style:
        return styles.get(name, _PLAIN)

    device, budget, unit = data.device, data.budget, data.unit
    scale = (device.memory_total if device else None) or budget.capacity
    used = device.memory_used if device and not device.lost else None
    status = data.status
    mark = "▲" if status and status.alert else ("✕" if status is RowStatus.LOST else " ")
    if device is None:
        label = "plan" if narrow else "Plan "
    elif label is None:
        label = device.label if narrow else f"GPU {device.label}"
    head = Text.assemble((label.ljust(4 if narrow else 6), style("label")))
    mark_style = _STATUS_CLASS[status] if status and status.alert else "dim"
    head.append(mark + " ", style(mark_style))
    numbers = _numbers(data, used, scale, unit, narrow, style)
    if narrow:
        bar = render_bar(max(4, width - len(head) - len(numbers) - 1), scale, budget.terms,
                         used, style)  # fmt: skip
        return Text.assemble(head, bar, " ", numbers, no_wrap=True, overflow="crop")
    indent = " " * len(head)
    if device is None or device.lost:
        bar = render_bar(max(4, width - len(head)), scale, budget.terms, used, style)
        return Text.assemble(head, bar, "\n", indent, numbers, no_wrap=True)
    # used/budget beside the bar; the status and the rest on the second line
    tail = Text(f"{num(used, unit)}/{num(budget.total, unit)} {unit}")
    bar = render_bar(max(4, width - len(head) - len(tail) - 1), scale, budget.terms, used,
                     style)  # fmt: skip
    return Text.assemble(head, bar, " ", tail, "\n", indent, numbers, no_wrap=True)


def _numbers(
    data: RowData,
    used: int | None,
    scale: int,
    unit: str,
    narrow: bool,
    style: Callable[[str], Style],
) -> Text:
    budget, device, status = data.budget, data.device, data.status
    text = Text(no_wrap=True)
    if device is None:  # the plan's own row
        verdict = "FITS" if budget.fits else "DOES NOT FIT"
        verdict_style = style("ok" if budget.fits else "alert")
        if narrow:
            text.append(f"{num(budget.total, unit)}/{num(budget.capacity, unit)} {unit} ")
            text.append(verdict, verdict_style)
            return text
        # the verdict first: on a narrow pane (100 columns) the numbers are cropped, not it
        text.append(verdict, verdict_style)
        text.append(
            f"  budget {num(budget.total, unit)} / cap {num(budget.capacity, unit)} {unit}"
            f"  headroom {num(budget.headroom, unit)}"
        )
        return text
    if device.lost:
        text.append(printable(device.error or "lost"), style("dim"))
        text.append("  ")
        text.append("GPU LOST" if not narrow else "LOST", style("lost"))
        return text
    assert status is not None
    word_style = style(_STATUS_CLASS[status])
    if narrow:
        text.append(f"{num(used, unit)}/{num(budget.total, unit)} {unit} ")
        text.append(_SHORT[status], word_style)
        if device.error:  # a GPU that answers but with a problem (e.g. MIG unlisted)
            text.append(f" ! {printable(device.error)}", style("near"))
        return text
    # the status first: on a narrow pane the numbers may be cropped, never the verdict
    text.append(status.value, word_style)
    if device.error:  # said before the numbers, so a narrow pane still shows it
        text.append(f"  ! {printable(device.error)}", style("near"))
    text.append(
        f"  cap {num(device.memory_total, unit)}  head {num(device.memory_free, unit)}"
        f"  peak {num(data.peak, unit)} {unit}  "
    )
    text.append(sparkline(data.history, scale, SPARK_WIDTH), style("dim"))
    return text
