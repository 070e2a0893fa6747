"""The alert log screen (`l`): every alert since memtui started, with its time, kept after the
toast has gone and after the GPU came back (NEAR CAPACITY stays in the log)."""

from __future__ import annotations

from collections.abc import Iterable
from typing import ClassVar

from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import VerticalScroll
from textual.screen import Screen
from textual.widgets import Footer, Static

from memtui.ui.alerts import LogEntry
from memtui.ui.widgets.alert_log import AlertLog, AlertLogView


class AlertLogScreen(Screen[None]):
    """The log, newest first; it scrolls (up, down, page keys)."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape,l,q", "close", "Back"),
        Binding("up", "scroll(-1)", "Up", show=False),
        Binding("down", "scroll(1)", "Down", show=False),
        Binding("pageup", "scroll(-10)", "Page up", show=False),
        Binding("pagedown", "scroll(10)", "Page down", show=False),
    ]

    def __init__(self, entries: Iterable[LogEntry]) -> None:
        super().__init__()
        self._entries = tuple(entries)

    def compose(self) -> ComposeResult:
        yield Static("Alert log (newest first; times are the polls' local time)", id="log-title")
        with VerticalScroll(id="log-scroll", can_focus=False):
            yield AlertLog(id="alert-log")
        yield Footer()

    def on_mount(self) -> None:
        self.take(self._entries)

    def take(self, entries: Iterable[LogEntry]) -> None:
        """The tracker's log (the dashboard calls this after every poll while it is open)."""
        self._entries = tuple(entries)
        if self.is_attached:
            self.query_one(AlertLog).view = AlertLogView(self._entries)

    def action_close(self) -> None:
        self.dismiss()

    def action_scroll(self, lines: int) -> None:
        self.query_one("#log-scroll", VerticalScroll).scroll_relative(y=lines, animate=False)
