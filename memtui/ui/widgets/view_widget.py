"""A widget that shows one prepared renderable and repaints without a relayout when it can.

`Static.update` always asks for a new layout, which reflows the whole screen; a table whose row
count did not change only needs a repaint. Keeping key-to-budget latency low (docs/architecture.md,
"Measuring and checking": under 50 ms) is why the tables and lines below derive from this class.
"""

from __future__ import annotations

from collections.abc import Callable

from rich.console import RenderableType
from rich.table import Table
from textual.dom import DOMNode
from textual.geometry import Size
from textual.widget import Widget


def redraw_on_theme_change(node: DOMNode, redraw: Callable[[], None]) -> None:
    """Call `redraw` after every theme switch: widgets that build a renderable ahead of time
    (with styles resolved from the theme) must build it again, or keep the old colours."""
    node.app.theme_changed_signal.subscribe(node, lambda _theme: redraw())


class ViewWidget(Widget):
    """Base of the table and line widgets: `show(renderable, lines)` then draw it."""

    DEFAULT_CSS = "ViewWidget { height: auto; }"

    def __init__(self, *, id: str | None = None, classes: str | None = None) -> None:
        super().__init__(id=id, classes=classes)
        self._renderable: RenderableType = ""
        self._lines = -1

    def show(self, renderable: RenderableType, lines: int) -> None:
        """Draw `renderable`, `lines` tall; relayout only when the height changes.

        For a rich Table, `lines` must be exact (header plus one line a row: every column
        no_wrap, no newline in a cell): the layout takes it as the table's height instead of
        rendering the whole table once more just to count its lines. The same holds for any
        renderable with a `height` (the process table's `Columns`)."""
        self._renderable = renderable
        relayout = lines != self._lines
        self._lines = lines
        self.refresh(layout=relayout)

    def on_mount(self) -> None:
        redraw_on_theme_change(self, self.redraw)

    def redraw(self) -> None:
        """Build the renderable again from the current view (subclasses with a `view`)."""
        watch = getattr(self, "watch_view", None)
        if watch is not None:
            watch(getattr(self, "view", None))

    def get_content_height(self, container: Size, viewport: Size, width: int) -> int:
        # Textual measures a height by rendering the renderable; for the process table (64
        # rows on a full node) that cost a third of the start-up layout. Text still measures.
        exact = isinstance(self._renderable, Table) or hasattr(self._renderable, "height")
        if exact and self._lines >= 0:
            return self._lines
        return super().get_content_height(container, viewport, width)

    def render(self) -> RenderableType:
        return self._renderable
