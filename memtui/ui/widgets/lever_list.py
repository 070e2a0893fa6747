"""The lever list: what each lever would save for this plan, how much longer a step takes with
it, what it costs, on or pending.

Levers come from the estimator in the order to pull them (docs/architecture.md, "Where each formula
lives").
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from rich.table import Table
from textual.reactive import reactive

from memtui.estimator import Lever
from memtui.ui.units import num
from memtui.ui.widgets.view_widget import ViewWidget


@dataclass(frozen=True)
class LeverView:
    levers: tuple[Lever, ...]
    unit: str
    narrow: bool = False
    """Leave out the cost column (it folds badly under 100 columns)."""


class LeverList(ViewWidget):
    """Levers in the order to pull them."""

    COMPONENT_CLASSES: ClassVar[set[str]] = {"lever-list--on", "lever-list--pending"}
    DEFAULT_CSS = "LeverList { height: auto; }"

    view: reactive[LeverView | None] = reactive(None)
    """Set by the screen after every plan change."""

    def watch_view(self, view: LeverView | None) -> None:
        if view is None:
            return
        table = Table(box=None, pad_edge=False, expand=True, header_style="bold")
        table.add_column("Lever (in the order to pull)", no_wrap=True, overflow="ellipsis")
        table.add_column(f"Saves {view.unit}", justify="right", no_wrap=True)
        table.add_column("Step time", justify="right", no_wrap=True)
        if not view.narrow:
            table.add_column("Cost", overflow="ellipsis", no_wrap=True, ratio=1)
        on = self.get_component_rich_style("lever-list--on")
        pending = self.get_component_rich_style("lever-list--pending")
        for lever in view.levers:
            # "on" in place of the saving: a lever already pulled saves nothing more
            cells = [
                lever.name,
                "on" if lever.applied else num(lever.saves_bytes, view.unit),
                lever.time_text,
            ]
            if not view.narrow:
                cells.append(lever.cost)
            table.add_row(*cells, style=on if lever.applied else pending)
        self.show(table, table.row_count + 1)
