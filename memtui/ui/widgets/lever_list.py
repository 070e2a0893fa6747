"""The lever list: what each lever would save for this plan, what it costs, on or pending.

Levers come from the estimator in the order to pull them (docs/architecture.md, "Where each formula
lives").
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from rich.table import Table
from rich.text import Text
from textual.reactive import reactive

from memtui.estimator import Lever
from memtui.ui.units import num
from memtui.ui.widgets.view_widget import ViewWidget


@dataclass(frozen=True)
class LeverView:
    levers: tuple[Lever, ...]
    unit: str
    narrow: bool = False
    """Under 100 columns: the cost on its own line under the lever, where it has the width."""


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
        if not view.narrow:
            # the cost wraps at words (Rich's default for a cell), never cut mid-word
            table.add_column("Cost", ratio=1)
        on = self.get_component_rich_style("lever-list--on")
        pending = self.get_component_rich_style("lever-list--pending")
        for lever in view.levers:
            # "on" in place of the saving: a lever already pulled saves nothing more
            cells = [lever.name, "on" if lever.applied else num(lever.saves_bytes, view.unit)]
            style = on if lever.applied else pending
            if view.narrow:
                table.add_row(*cells, style=style)
                table.add_row(Text(f"  {lever.cost}", overflow="fold"), "", style=style)
            else:
                table.add_row(*cells, lever.cost, style=style)
        # a wrapped cost makes a row taller: the lines Rich lays the table out in at the width
        # it is drawn at (a dozen rows, cheap); before the first layout, one a row
        width = self.content_size.width
        lines = table.row_count + 1
        if width > 0:
            console = self.app.console
            lines = len(console.render_lines(table, console.options.update_width(width)))
        self.show(table, lines)

    def on_resize(self) -> None:
        self.redraw()  # the costs wrap again at the new width
