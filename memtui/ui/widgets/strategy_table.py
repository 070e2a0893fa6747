"""The strategy table: per-GPU static and total bytes, fits, largest micro-batch, every strategy.

All figures are the estimator's `Report.strategies`; the plan's own strategy is marked.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, ClassVar

from rich.table import Table
from textual.reactive import reactive

from memtui.ui.units import num
from memtui.ui.widgets.view_widget import ViewWidget

if TYPE_CHECKING:  # the report's model: loaded with the first estimate, after the first frame
    from memtui.estimator import Report, Strategy


@dataclass(frozen=True)
class StrategyView:
    report: Report
    current: Strategy
    unit: str


class StrategyTable(ViewWidget):
    """Every strategy side by side, as the estimator computed them."""

    COMPONENT_CLASSES: ClassVar[set[str]] = {
        "strategy-table--yes",
        "strategy-table--no",
        "strategy-table--current",
    }
    DEFAULT_CSS = "StrategyTable { height: auto; }"

    view: reactive[StrategyView | None] = reactive(None)
    """Set by the screen after every plan change."""

    def watch_view(self, view: StrategyView | None) -> None:
        if view is None:
            return
        unit = view.unit
        table = Table(
            box=None, pad_edge=False, expand=False, header_style="bold", padding=(0, 0, 0, 1)
        )
        table.add_column("Strategy", no_wrap=True)
        table.add_column("Static", justify="right", no_wrap=True)
        table.add_column(f"Total {unit}", justify="right", no_wrap=True)
        table.add_column("Fits", no_wrap=True)
        table.add_column("mb", justify="right", no_wrap=True)
        yes = self.get_component_rich_style("strategy-table--yes")
        no = self.get_component_rich_style("strategy-table--no")
        current = self.get_component_rich_style("strategy-table--current")
        for row in view.report.strategies:
            mine = row.strategy is view.current
            name = ("▶ " if mine else "  ") + row.strategy.value
            if not row.applicable:  # the plan's stack cannot run it (row.note says why)
                table.add_row(name, "-", "-", "n/a", "-", style=current if mine else no)
                continue
            fits = "yes" if row.fits else ("static" if row.fits_static else "no")
            table.add_row(
                name,
                num(row.per_gpu_static, unit),
                num(row.per_gpu_total, unit),
                fits,
                str(row.max_micro_batch),
                style=current if mine else (yes if row.fits else no),
            )
        self.show(table, table.row_count + 1)
