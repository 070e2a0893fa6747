"""The fastest plan that fits, on the dashboard: the `v` key runs the search in a thread worker
(`find_fastest`, answered by `FastestFound`) and this screen shows the ranked plans; enter
adopts the fastest, escape keeps the plan.

The dashboard keeps nothing fixed: every searched choice may move (the CLI keeps the ones
given as flags), the optimizer moments stay in their dtype (their numerics are the user's
call: `memtui plan --fastest --search-state-dtype`).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, ClassVar

from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Vertical
from textual.message import Message
from textual.screen import ModalScreen
from textual.widgets import Static

from memtui.errors import MemtuiError
from memtui.estimator import Plan
from memtui.estimator.search import Search, search, strategy_words
from memtui.text import LINE, shown
from memtui.ui.messages import Work, WorkFailed
from memtui.ui.widgets.fastest_table import FastestTable, FastestView

SHOWN = 8
"""Plans the screen lists."""


class FastestFound(Message):
    """The search over the plan finished in the worker thread."""

    def __init__(self, found: Search[Any]) -> None:
        super().__init__()
        self.found = found


def find_fastest(post: Callable[[Message], object], plan: Plan) -> None:
    """The search over `plan`, as `FastestFound` (a thread worker: it takes some 0.1 s)."""
    from memtui.estimator.search import STEP_TIME

    try:
        found = search(plan, STEP_TIME, keep=SHOWN)
    except (MemtuiError, ValueError) as err:
        post(WorkFailed(Work.FASTEST, str(err)))
        return
    post(FastestFound(found))


class FastestScreen(ModalScreen["Plan | None"]):
    """The ranked plans; dismisses with the fastest (enter) or None (escape)."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("enter", "adopt", "Adopt the fastest", id="fastest.adopt"),
        Binding("escape", "close", "Keep the plan", id="fastest.close"),
    ]
    DEFAULT_CSS = """
    FastestScreen { align: center middle; }
    FastestScreen > Vertical {
        width: 95%; max-width: 120; height: auto; max-height: 90%;
        border: round $primary; background: $surface; padding: 0 1;
    }
    FastestScreen Static { height: auto; }
    """

    def __init__(self, found: Search[Any], unit: str) -> None:
        super().__init__()
        self.found = found
        self.unit = unit

    def compose(self) -> ComposeResult:
        with Vertical():
            yield Static(self._heading(), id="fastest-heading")
            yield FastestTable(id="fastest-table")
            yield Static("enter: adopt the fastest   escape: keep the plan", id="fastest-keys")

    def _heading(self) -> str:
        found = self.found
        counts = (
            f"{found.estimated} plans estimated, {found.fitting} fit with the top of the error "
            f"band; global batch {found.global_batch} kept; seconds per optimizer step"
        )
        if not found.ranked:
            return f"No plan fits with the top of the error band.\n{counts}"
        winner = found.ranked[0].plan
        return f"Fastest: {shown(strategy_words(winner), LINE)}\n{counts}"

    def on_mount(self) -> None:
        self.query_one(FastestTable).view = FastestView(self.found, self.unit)

    def action_adopt(self) -> None:
        self.dismiss(self.found.ranked[0].plan if self.found.ranked else None)

    def action_close(self) -> None:
        self.dismiss(None)
