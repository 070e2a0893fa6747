"""The lever list: what each lever would save for this plan, how much longer a step takes with
it, what it costs, and its state: pending, on (applied) or n/a (not applicable, the cost column
says why).

Levers come from the estimator by saving, the largest first, then those on, then those not
applicable (docs/architecture.md, "Where each formula lives").
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, ClassVar

from rich.padding import Padding
from rich.table import Table
from rich.text import Text
from textual.reactive import reactive

from memtui.ui.units import num
from memtui.ui.widgets.view_widget import ViewWidget
from memtui.ui.widgets.word_fit import WordFit

if TYPE_CHECKING:  # the report's models: loaded with the first estimate, after the first frame
    from memtui.estimator import Lever

#: The list's width from which the cost is a column beside the saving (the 160-column layout).
SIDE_BY_SIDE_FROM = 100


def _name_and_saving(name: str, saving: str) -> Table:
    """A lever's name at the left and its saving at the right of one line."""
    line = Table.grid(expand=True)
    line.add_column(ratio=1, no_wrap=True)
    line.add_column(justify="right", no_wrap=True, min_width=10)
    line.add_row(WordFit(Text(name)), saving)  # cut after a whole word, never inside one
    return line


@dataclass(frozen=True)
class LeverView:
    levers: tuple[Lever, ...]
    unit: str
    narrow: bool = False
    """Under 100 columns: each cost on its own line under its lever (also whenever the list
    is narrower than `SIDE_BY_SIDE_FROM`, once it is laid out)."""


class LeverList(ViewWidget):
    """Levers, the largest saving first; those on, then those not applicable, after."""

    COMPONENT_CLASSES: ClassVar[set[str]] = {"lever-list--on", "lever-list--pending"}
    DEFAULT_CSS = "LeverList { height: auto; }"

    view: reactive[LeverView | None] = reactive(None)
    """Set by the screen after every plan change."""

    def watch_view(self, view: LeverView | None) -> None:
        if view is None:
            return
        from memtui.estimator.report import LeverState  # loaded: the view is a report's

        # a lever's state where a pending one shows its saving
        said = {LeverState.applied: "on", LeverState.not_applicable: "n/a"}
        on = self.get_component_rich_style("lever-list--on")
        pending = self.get_component_rich_style("lever-list--pending")
        saves = f"Saves {view.unit}, time"
        table = Table(box=None, pad_edge=False, expand=True, header_style="bold")
        width = self.content_size.width
        # a cost column narrower than its text wraps into a tall column of words: under
        # SIDE_BY_SIDE_FROM cells (or before the first layout, on a narrow screen) each cost
        # goes under its lever instead
        stacked = width < SIDE_BY_SIDE_FROM if width > 0 else view.narrow
        if stacked:
            # one column: each lever's name and saving on a line, its cost under it, wrapped
            # at words with the whole width (a third column would leave it a dozen cells)
            table.add_column(_name_and_saving("Lever (largest saving first)", saves))
        else:
            table.add_column("Lever (largest saving first)", no_wrap=True)
            table.add_column(saves, justify="right", no_wrap=True)
            # the cost wraps at words; only a word longer than the column folds
            table.add_column("Cost", ratio=1, overflow="fold")
        for lever in view.levers:
            # the state in place of the saving: a lever on or not applicable saves nothing
            is_pending = lever.state is LeverState.pending
            saving = num(lever.saves_bytes, view.unit) if is_pending else said[lever.state]
            # the step-time change in percent beside it (the seconds are in `estimate`'s table)
            if lever.percent_change is not None:
                saving = f"{saving} {lever.percent_change:+.0f}%"
            cost = f"{lever.why} (not applicable)" if lever.why else lever.cost
            style = pending if is_pending else on
            if stacked:
                table.add_row(_name_and_saving(lever.name, saving), style=style)
                table.add_row(Padding(Text(cost, overflow="fold"), (0, 0, 0, 2)),
                              style=style)  # fmt: skip
            else:
                table.add_row(WordFit(Text(lever.name)), saving, cost, style=style)
        # a wrapped cost makes a row taller: the lines Rich lays the table out in at the width
        # it is drawn at (a dozen rows, cheap); before the first layout, one a row
        lines = table.row_count + 1
        if width > 0:
            console = self.app.console
            lines = len(console.render_lines(table, console.options.update_width(width)))
        self.show(table, lines)

    def on_resize(self) -> None:
        # the costs wrap again at the new width; after this refresh, since a relayout asked
        # for while the resize is being laid out is not taken
        self.call_after_refresh(self.redraw)
