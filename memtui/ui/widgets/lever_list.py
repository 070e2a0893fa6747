"""The lever list: what each lever would save for this plan, how much longer a step takes with
it, what it costs, and its state: pending, on (applied) or n/a (not applicable, the cost column
says why).

Levers come from the estimator by saving, the largest first, then those on, then those not
applicable (docs/architecture.md, "Where each formula lives").
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from rich.table import Table
from textual.reactive import reactive

from memtui.estimator import Lever
from memtui.estimator.report import LeverState
from memtui.ui.units import num
from memtui.ui.widgets.view_widget import ViewWidget

_SAID = {LeverState.applied: "on", LeverState.not_applicable: "n/a"}
"""A lever's state where a pending one shows its saving."""


@dataclass(frozen=True)
class LeverView:
    levers: tuple[Lever, ...]
    unit: str
    narrow: bool = False
    """Leave out the cost column (it folds badly under 100 columns)."""


class LeverList(ViewWidget):
    """Levers, the largest saving first; those on, then those not applicable, after."""

    COMPONENT_CLASSES: ClassVar[set[str]] = {"lever-list--on", "lever-list--pending"}
    DEFAULT_CSS = "LeverList { height: auto; }"

    view: reactive[LeverView | None] = reactive(None)
    """Set by the screen after every plan change."""

    def watch_view(self, view: LeverView | None) -> None:
        if view is None:
            return
        table = Table(box=None, pad_edge=False, expand=True, header_style="bold")
        table.add_column("Lever (the largest saving first)", no_wrap=True, overflow="ellipsis")
        table.add_column(f"Saves {view.unit}", justify="right", no_wrap=True)
        table.add_column("Time", justify="right", no_wrap=True)
        if not view.narrow:
            table.add_column("Cost", overflow="ellipsis", no_wrap=True, ratio=1)
        on = self.get_component_rich_style("lever-list--on")
        pending = self.get_component_rich_style("lever-list--pending")
        for lever in view.levers:
            # the state in place of the saving: a lever on or not applicable saves nothing
            is_pending = lever.state is LeverState.pending
            saves = num(lever.saves_bytes, view.unit) if is_pending else _SAID[lever.state]
            # the step-time change in percent: the seconds are in `estimate`'s table
            time = "" if lever.percent_change is None else f"{lever.percent_change:+.0f}%"
            cells = [lever.name, saves, time]
            if not view.narrow:
                cells.append(f"{lever.why} (not applicable)" if lever.why else lever.cost)
            table.add_row(*cells, style=pending if is_pending else on)
        self.show(table, table.row_count + 1)
