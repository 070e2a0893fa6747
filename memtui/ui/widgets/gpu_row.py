"""One GPU row (or the plan's own row): live use and the predicted budget on one scale.

Wide layout, two lines (the plan's own row shows budget/capacity beside its bar):
    GPU 0 ▲ ███████████████████████│█████████··········· 64.4/46.1 GB
            OVER BUDGET  cap 85.5  head 20.6  peak 64.4 GB  util 93%  67°C  412/700 W  ▆▆▆▆
Narrow layout (the screen's `-narrow` class), one line, utilisation beside the figures:
    0   ▲ ███████████████████████│█████████··········· 64.4/46.1 GB  93% OVER
A reading the GPU does not give is left out of the row (the detail view says "n/a"); a pane
too narrow for every figure keeps the free memory, the peak and the readings first, each whole.
Every row on cards of one size has a bar of the same width, so the budget's mark lines up.
Colours come from the theme through the GPU panel's component classes (`ROW_STYLES`) and the
terms' theme variables, resolved once by the panel and handed down in `RowData.styles` (a
component class declared on every row cost each row a stylesheet pass per class); the status
is also written out. `row_text` draws
a row as text, for a `GpuRow` and for the cluster view's compact rows alike.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from rich.style import Style
from rich.text import Text
from textual.reactive import reactive
from textual.widget import Widget

from memtui.telemetry import DeviceSnapshot
from memtui.telemetry.readings import power, temperature
from memtui.text import shown
from memtui.ui.gpu_state import HISTORY, RowStatus
from memtui.ui.units import num
from memtui.ui.widgets.bar import render_bar, sparkline

if TYPE_CHECKING:  # the report's model: loaded with the first estimate, after the first frame
    from memtui.estimator import Budget

_SHORT = {
    RowStatus.UNDER: "ok",
    RowStatus.UNBUDGETED: "ok",
    RowStatus.OVER: "OVER",
    RowStatus.BUDGET_OVER_CARD: ">CARD",
    RowStatus.NEAR_CAPACITY: "NEAR",
    RowStatus.OVER_AND_NEAR: "OVER+NEAR",
    RowStatus.LOST: "LOST",
    RowStatus.UNKNOWN: "n/a",
}
_STATUS_CLASS = {
    RowStatus.UNDER: "ok",
    RowStatus.UNBUDGETED: "dim",  # no verdict to colour: nobody planned this GPU's job
    RowStatus.OVER: "alert",
    RowStatus.BUDGET_OVER_CARD: "alert",
    RowStatus.NEAR_CAPACITY: "near",  # $warning: close to the card, not past the plan
    RowStatus.OVER_AND_NEAR: "alert",
    RowStatus.LOST: "lost",
    RowStatus.UNKNOWN: "dim",
}


_PLAIN = Style()

#: The row's style names beside the terms'; the panel declares them as `gpu-row--NAME`
#: component classes.
ROW_STYLES = (
    "over",
    "track",
    "mark",
    "ok",
    "alert",
    "near",
    "lost",
    "dim",
    "label",
    "used",
)

#: History values a row draws (all that is kept; an unchanged GPU is not redrawn).
SPARK_WIDTH = HISTORY


@dataclass(frozen=True)
class RowData:
    """Everything one row shows; replaced whole so a row refreshes once per poll."""

    budget: Budget | None
    """The plan's budget on the plan's own row; the job's budget on a GPU's row (None: no
    job's budget covers the GPU, the bar shows its capacity only)."""
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
    compact rows too). `label` replaces the device's own ("gpu07/3" across hosts).

    Every row on a card of the same size gets a bar of the same width, whatever its numbers
    and status say, so the budget's mark sits in the same column on the plan's row and on
    every GPU's: the figures beside the bar are padded to the widest they can be, and a one-
    line row pads its status word to the longest word."""
    styles = data.styles

    def style(name: str) -> Style:
        return styles.get(name, _PLAIN)

    device, budget, unit = data.device, data.budget, data.unit
    scale = _scale(data)
    terms = budget.terms if budget is not None else None
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
    tail = Text(_figures(data, used, scale, unit))
    if narrow:
        util = device.utilization_gpu if device is not None and not device.lost else None
        tail.append(" " + (f"{util}%" if util is not None else "").rjust(4))
        # used/budget, the status word padded to the longest, then a device's error (cropped)
        tail.append(" ")
        tail.append_text(_word(data, style))
        room = width - len(head) - len(tail) - 1
        bar = render_bar(max(4, room), scale, terms, used, style)
        line = Text.assemble(head, bar, " ", tail, no_wrap=True, overflow="crop")
        if device is not None and device.error:
            line.append(f" {shown(device.error)}", style("lost" if device.lost else "near"))
        line.truncate(width)
        return line
    bar = render_bar(max(4, width - len(head) - len(tail) - 1), scale, terms, used, style)
    indent = " " * len(head)
    numbers = _numbers(data, unit, style, width - len(indent))
    return Text.assemble(head, bar, " ", tail, "\n", indent, numbers, no_wrap=True)


#: A one-line row's status word is padded to the longest, so every bar is as wide.
_WORD_WIDTH = max(len(word) for word in (*_SHORT.values(), "FITS", "DOES NOT FIT"))


def _scale(data: RowData) -> int:
    """The bytes a row's bar spans: the GPU's card, else the plan's (0: unknown)."""
    card = data.device.memory_total if data.device is not None else None
    return card or (data.budget.capacity if data.budget is not None else 0)


def _figures(data: RowData, used: int | None, scale: int, unit: str) -> str:
    """The figures beside a bar, right-aligned to the widest they can be on this card:
    used/budget for a GPU (used/capacity where no job's budget covers it), budget/capacity
    for the plan."""
    planned = data.budget.total if data.budget is not None else scale
    budget = num(planned, unit)
    width = len(num(scale, unit)) + 1 + len(budget) + 1 + len(unit)
    if data.device is None:
        return f"{budget}/{num(scale, unit)} {unit}".rjust(width)
    return f"{num(used, unit)}/{budget} {unit}".rjust(width)


def _word(data: RowData, style: Callable[[str], Style]) -> Text:
    """A one-line row's verdict (the plan's fits or not; a GPU's status), padded."""
    if data.device is None:
        fits = data.budget is not None and data.budget.fits
        word, name = ("FITS", "ok") if fits else ("DOES NOT FIT", "alert")
    else:
        status = data.status or RowStatus.UNKNOWN
        word, name = _SHORT[status], _STATUS_CLASS[status]
    text = Text(word, style(name))
    text.append(" " * (_WORD_WIDTH - len(word)))  # the padding unstyled (LOST is reversed)
    return text


#: The order a two-line row's figures are kept in when the pane cannot show them all (the
#: free memory first); they are drawn in `_FIGURE_ORDER`, each whole or not at all.
_FIGURE_PRIORITY = ("head", "peak", "util", "temp", "power", "cap", "spark")
_FIGURE_ORDER = ("cap", "head", "peak", "util", "temp", "power", "spark")


def _numbers(data: RowData, unit: str, style: Callable[[str], Style], room: int) -> Text:
    """A two-line row's second line, `room` cells at most: the verdict first (a narrow pane
    crops the end of the line, never the verdict), then the figures that fit, each whole."""
    budget, device, status = data.budget, data.device, data.status
    text = Text(no_wrap=True)
    if device is None:  # the plan's own row
        assert budget is not None  # the plan's row always has its plan's budget
        verdict = "FITS" if budget.fits else "DOES NOT FIT"
        text.append(verdict, style("ok" if budget.fits else "alert"))
        text.append(
            f"  budget {num(budget.total, unit)} / cap {num(budget.capacity, unit)} {unit}"
            f"  headroom {num(budget.headroom, unit)}"
        )
        return text
    if device.lost:  # the verdict first: a long error must not push it off the pane
        text.append("GPU LOST", style("lost"))
        text.append(f"  {shown(device.error or 'lost')}", style("dim"))
        return text
    assert status is not None
    text.append(status.value, style(_STATUS_CLASS[status]))
    if device.error:  # said before the numbers, so a narrow pane still shows it
        text.append(f"  ! {shown(device.error)}", style("near"))
    scale = _scale(data)
    figures = {
        "cap": f"cap {num(device.memory_total, unit)}",
        "head": f"head {num(device.memory_free, unit)}",
        "peak": f"peak {num(data.peak, unit)} {unit}",
        **_readings(device),
        "spark": sparkline(data.history, scale, SPARK_WIDTH),
    }
    left = room - len(text)
    kept = set()
    for name in _FIGURE_PRIORITY:
        if name in figures and len(figures[name]) + 2 <= left:
            kept.add(name)
            left -= len(figures[name]) + 2
    for name in _FIGURE_ORDER:
        if name in kept:
            text.append("  ")
            text.append(figures[name], style("dim") if name == "spark" else _PLAIN)
    return text


def _readings(device: DeviceSnapshot) -> dict[str, str]:
    """Utilisation, temperature and power as a row shows them ("util 93%", "67°C",
    "412/700 W"), each left out when the GPU does not give it."""
    util = None if device.utilization_gpu is None else f"util {device.utilization_gpu}%"
    parts = {"util": util, "temp": temperature(device), "power": power(device)}
    return {name: text for name, text in parts.items() if text is not None}


def readings_text(device: DeviceSnapshot) -> str:
    """The readings of `_readings` as one phrase ("util 93% 67°C 412/700 W")."""
    return " ".join(_readings(device).values())
