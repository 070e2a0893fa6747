"""The two plans side by side: the job's budget (what the GPU rows are judged against) and the
what-if plan the settings edit (memtui/ui/budgets.py).

Wide layout, under the settings:
    job's budget from --plan plan.toml
              job's budget        what-if plan
    per GPU   46.1/80.0 GB        38.2/80.0 GB
    headroom  33.9 GB             41.8 GB
Narrow layout (under 100 columns), one line (two where it does not fit):
    job's budget 46.1/80.0 GB (--plan plan.toml) · what-if 38.2/80.0 GB, headroom 41.8 GB
Where the job's budget came from is a path or a command line from outside: escaped by
`BudgetSource.__str__`, drawn as text, never as markup.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from rich.console import Group
from rich.table import Table
from rich.text import Text
from textual.reactive import reactive

from memtui.ui.budgets import JobBudget, comparison, source_line
from memtui.ui.widgets.view_widget import ViewWidget
from memtui.ui.widgets.word_fit import WordFit, fit_lines

#: Lines the job's budget's source may take (a long --plan path: what is past them ends in "…").
SOURCE_LINES = 3
#: Lines the narrow layout's line may take where the terminal is narrower than it.
NARROW_LINES = 2

if TYPE_CHECKING:  # the report's model: loaded with the first estimate, after the first frame
    from memtui.estimator import Budget


@dataclass(frozen=True)
class CompareView:
    """The job's budget (None: nobody planned the job), the what-if plan's, the unit."""

    job: JobBudget | None
    what_if: Budget
    unit: str
    narrow: bool = False


class BudgetCompare(ViewWidget):
    """The job's budget beside the what-if plan's; `b` makes the what-if the job's."""

    DEFAULT_CSS = "BudgetCompare { height: auto; border: round $panel; padding: 0 1; }"

    view: reactive[CompareView | None] = reactive(None)
    """Set by the screen after every plan change and every change of the job's budget."""

    def on_mount(self) -> None:
        super().on_mount()
        self.border_title = "b: what-if → job's budget"

    def watch_view(self, view: CompareView | None) -> None:
        if view is None:
            return
        budget, headroom = comparison(view.job, view.what_if, view.unit)
        if view.narrow:
            line = _line(view, budget.job, budget.what_if, headroom.what_if)
            self.show(WordFit(line, NARROW_LINES), self._lines_of(line, NARROW_LINES))
            return
        table = Table(box=None, show_edge=False, pad_edge=False, expand=True, padding=(0, 1))
        table.add_column("", no_wrap=True, style="bold", width=9)
        for header in ("job's budget", "what-if plan"):
            table.add_column(header, no_wrap=True, overflow="ellipsis", ratio=1)
        for row in (budget, headroom):
            table.add_row(row.label, Text(row.job), Text(row.what_if))
        # the source line wraps at words (at 120x40 the panel is 46 cells wide); the header
        # and two rows follow it
        source = Text(source_line(view.job))
        lines = self._lines_of(source, SOURCE_LINES) + 3
        self.show(Group(WordFit(source, SOURCE_LINES), table), lines)

    def _lines_of(self, text: Text, most: int) -> int:
        """How many lines `text` takes at the panel's width (1 before it is laid out: the
        first view relays it out anyway), so a view that takes more or fewer relays out."""
        width = self.content_size.width
        return len(fit_lines(self.app.console, text, width, most)) if width else 1


def _line(view: CompareView, job: str, what_if: str, headroom: str) -> Text:
    """The narrow layout's line: the job's budget and its source, then the what-if's."""
    text = Text()
    if view.job is None:
        text.append("job's budget: none, capacity only", "bold")
    else:
        text.append(f"job's budget {job}", "bold")
        text.append(f" ({view.job.source})")
    text.append(f" · what-if {what_if}, headroom {headroom}")
    return text
