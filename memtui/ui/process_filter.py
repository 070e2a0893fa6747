"""The process filter prompt (`\\`): one line of text; the process table keeps the rows that
hold it (any column, case-insensitive). Enter applies, an empty line clears, Escape keeps
the filter as it was."""

from __future__ import annotations

from typing import ClassVar

from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Vertical
from textual.screen import ModalScreen
from textual.widgets import Input, Label

#: Characters a filter may have: a name, a PID or a word of a command line.
MAX_FILTER = 200


class FilterPrompt(ModalScreen[str | None]):
    """Answers the text typed (Enter) or None (Escape)."""

    DEFAULT_CSS = """
    FilterPrompt { align: center bottom; }
    FilterPrompt > Vertical { height: auto; width: 100%; background: $panel; padding: 0 1; }
    """
    BINDINGS: ClassVar[list[BindingType]] = [Binding("escape", "cancel", "Cancel")]

    def __init__(self, current: str) -> None:
        super().__init__()
        self.current = current

    def compose(self) -> ComposeResult:
        with Vertical():
            yield Label("Filter processes (GPU, PID, user or command; empty: every process)")
            yield Input(self.current, max_length=MAX_FILTER, id="filter-input")

    def on_input_submitted(self, event: Input.Submitted) -> None:
        self.dismiss(event.value.strip())

    def action_cancel(self) -> None:
        self.dismiss(None)
