"""The GPU panel: a legend of the budget's terms, the plan's own bar, and one row per GPU.

The legend and the plan's bar are the what-if plan's (the one the settings edit); each GPU's
row is judged against the job's budget (memtui/ui/budgets.py), or shows the card's capacity
only where no job's budget covers it. The screen sets `view` (both budgets, latest snapshot,
statuses, history, unit); the panel mounts
or removes rows when the GPU count changes and hands each row its `RowData`. A snapshot of
many hosts (a cluster source) is drawn by `ClusterRows` instead: compact rows grouped by
host, or a summary row per host when the screen cannot show every GPU.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, ClassVar

from rich.style import Style
from rich.text import Text
from textual.app import ComposeResult
from textual.containers import Vertical
from textual.reactive import reactive

from memtui.estimator import TermKind
from memtui.estimator.objectives import OBJECTIVE_TERMS
from memtui.telemetry import ClusterSnapshot, DeviceKey
from memtui.ui.budgets import JobBudget
from memtui.ui.gpu_state import GpuHistory, RowStatus
from memtui.ui.themes import term_styles
from memtui.ui.units import num
from memtui.ui.widgets.gpu_row import ROW_STYLES, SPARK_WIDTH, GpuRow, RowData
from memtui.ui.widgets.legend import Legend
from memtui.ui.widgets.view_widget import redraw_on_theme_change

if TYPE_CHECKING:
    from memtui.estimator import Budget
    from memtui.ui.widgets.cluster_rows import ClusterRows


#: The legend until the what-if plan's first estimate, which follows the first frame.
ESTIMATING = "What-if plan: estimating its budget..."


def _without_background(style: Style) -> Style:
    return Style(
        color=style.color,
        bold=style.bold,
        dim=style.dim,
        italic=style.italic,
        underline=style.underline,
        reverse=style.reverse,
        strike=style.strike,
    )


@dataclass(frozen=True)
class PanelView:
    """What the panel shows; replaced whole by the screen."""

    budget: Budget | None
    """The what-if plan's: the legend and the plan's own bar (None: not estimated yet, in
    the first frame; the GPU rows do not wait for it)."""
    unit: str
    snapshot: ClusterSnapshot | None = None
    job: JobBudget | None = None
    """The job's budget, the GPU rows' (None: capacity only)."""
    statuses: dict[DeviceKey, RowStatus] = field(default_factory=dict)
    history: GpuHistory | None = None
    expand_hosts: bool = False
    """Across hosts: every GPU, even when the screen has no room for them all."""


class GpuPanel(Vertical):
    """Legend, plan bar, GPU rows."""

    # the rows' classes too: declared once here rather than on every row (see gpu_row)
    COMPONENT_CLASSES: ClassVar[set[str]] = {f"gpu-row--{name}" for name in ROW_STYLES}
    DEFAULT_CSS = """
    GpuPanel { height: auto; }
    GpuPanel > #legend { height: auto; }
    GpuPanel > #cluster { display: none; }
    GpuPanel.-cluster > #cluster { display: block; }
    """

    # repaint=False: the panel itself draws only its border; its legend and rows repaint
    # when _draw hands them new data (a repaint here redrew the whole bordered panel)
    view: reactive[PanelView | None] = reactive(None, always_update=True, repaint=False)
    """Set by the screen after every plan change and every poll."""
    narrow: reactive[bool] = reactive(False)
    """Compact rows and legend."""

    def __init__(self, *, rows: int = 0, id: str | None = None) -> None:
        """`rows`: GPU rows to compose up front (the GPUs of a poll that answered before the
        screen composed), so the first frame has them without a second layout."""
        super().__init__(id=id)
        self._initial_rows = rows
        self._row_styles: tuple[str, dict[str, Style]] | None = None
        self._legend_styles: tuple[str, dict[TermKind, Style]] | None = None

    def row_styles(self) -> dict[str, Style]:
        """The rows' styles under the current theme (resolved once per theme)."""
        theme = self.app.theme
        if self._row_styles is None or self._row_styles[0] != theme:
            # resolved against the panel (colours with alpha blended), then without their
            # background, so an alert row keeps its own tint under the text
            styles = {
                n: _without_background(self.get_component_rich_style(f"gpu-row--{n}"))
                for n in ROW_STYLES
            }
            styles.update({k: _without_background(s) for k, s in term_styles(self).items()})
            self._row_styles = (theme, styles)
        return self._row_styles[1]

    def legend_styles(self) -> dict[TermKind, Style]:
        """The legend's style for each term key under the current theme (resolved once per
        theme, like `row_styles`: every plan change redraws the legend)."""
        theme = self.app.theme
        if self._legend_styles is None or self._legend_styles[0] != theme:
            self._legend_styles = (theme, term_styles(self))
        return self._legend_styles[1]

    def compose(self) -> ComposeResult:
        yield Legend(id="legend")
        yield GpuRow(id="plan-row")
        for _ in range(self._initial_rows):
            yield GpuRow(classes="device-row")

    def on_mount(self) -> None:
        redraw_on_theme_change(self, self._draw)  # the legend's colours are resolved ahead

    def watch_narrow(self, narrow: bool) -> None:
        for row in self.query(GpuRow):
            row.narrow = narrow
        self._draw()

    def watch_view(self, view: PanelView | None) -> None:
        self._draw()

    def _draw(self) -> None:
        view = self.view
        if view is None or not self.children:
            return
        self.query_one(Legend).show(self._legend(view))
        width = max(1, self.query_one(Legend).size.width)
        styles = self.row_styles()
        if view.budget is not None:
            self.query_one("#plan-row", GpuRow).data = RowData(
                budget=view.budget, unit=view.unit, styles=styles
            )
        snapshot = view.snapshot
        many = snapshot is not None and len(snapshot.nodes) > 1
        self.set_class(many, "-cluster")
        if many and snapshot is not None:
            from memtui.ui.widgets.cluster_rows import ClusterView

            self._cluster_rows().show_view(
                ClusterView(
                    budget=view.job.budget if view.job is not None else None,
                    unit=view.unit,
                    snapshot=snapshot,
                    statuses=view.statuses,
                    history=view.history or GpuHistory(),
                    styles=styles,
                    width=width,
                    # what is left of the screen under the legend, the plan row, the status
                    # line and the footer (and the settings summary on a narrow screen)
                    room=self.screen.size.height - (16 if self.narrow else 10),
                    expanded=view.expand_hosts,
                )
            )
        devices = () if many or snapshot is None else snapshot.devices
        rows = list(self.query(".device-row").results(GpuRow))
        if len(rows) != len(devices):
            for row in rows[len(devices) :]:
                row.remove()
            new = [GpuRow(classes="device-row") for _ in range(len(rows), len(devices))]
            for row in new:
                row.narrow = self.narrow
            if new:
                self.mount_all(new)
            rows = (rows + new)[: len(devices)]
        history = view.history or GpuHistory()
        keyed = snapshot.rows() if snapshot is not None and not many else ()
        for row, (key, _, device) in zip(rows, keyed, strict=False):
            track = history.get(key)
            judged = view.job is not None and view.job.judges(device)
            row.data = RowData(
                budget=view.job.budget if judged and view.job is not None else None,
                unit=view.unit,
                device=device,
                status=view.statuses.get(key, RowStatus.UNKNOWN),
                peak=track.peak if track.history else None,
                history=tuple(track.history)[-SPARK_WIDTH:],
                styles=styles,
            )

    def _cluster_rows(self) -> ClusterRows:
        """The rows of a source of many hosts, mounted (under the plan's row) when the first
        such snapshot comes: a single node never needs them, nor their module."""
        from memtui.ui.widgets.cluster_rows import ClusterRows

        found = self.query(ClusterRows)
        if found:
            return found.first()
        rows = ClusterRows(id="cluster")
        self.mount(rows, after="#plan-row")
        return rows

    def _legend(self, view: PanelView) -> list[list[Text]]:
        """The legend's variants, as words: long labels, short labels, and short labels
        without "rows: used/..." (the legend draws the first that fits two lines)."""
        unit = view.unit
        if view.budget is None:
            return [[Text(w) for w in ESTIMATING.split()]]
        scale = "10^9" if unit == "GB" else "2^30"
        styles = self.legend_styles()
        total = Text(f"Budget per GPU {num(view.budget.total, unit)} {unit}", "bold")
        # the GPU rows' second figure: the job's budget, or the card where nobody planned it
        rows = "; rows: used/job's budget" if view.job is not None else "; rows: used/card"
        variants = []
        for short, explain in ((False, rows), (True, rows), (True, "")):
            head = [total, *(Text(w) for w in f"({unit} = {scale} B{explain}):".split())]
            terms = [
                Text.assemble(
                    ("■", styles[term.key]),
                    f"{term.key.short if short else term.label.lower()} {num(term.bytes, unit)}",
                )
                for term in view.budget.terms
                if term.bytes or term.key.value not in OBJECTIVE_TERMS  # unused models: off
            ]
            variants.append([*head, *terms])
        return variants
