"""The alert log's lines: every alert the dashboard raised, newest first, with its time.

Entries come from `memtui.ui.alerts.AlertTracker.log`; a GPU's name and a lost GPU's error
come from outside and are drawn as text through `memtui.text.shown`.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

from rich.text import Text
from textual.reactive import reactive

from memtui.text import shown
from memtui.ui.alerts import LOG_MAX, LogEntry
from memtui.ui.widgets.view_widget import ViewWidget

_STYLE = {"error": "bold red", "warning": "bold yellow", "information": "green"}


@dataclass(frozen=True)
class AlertLogView:
    entries: tuple[LogEntry, ...]
    """Oldest first, as the tracker keeps them."""


def log_lines(entries: tuple[LogEntry, ...]) -> Text:
    """One line an entry, newest first: "14:02:31  GPU 3  NEAR CAPACITY: 78.1 GB used ..."."""
    text = Text(no_wrap=True, overflow="ellipsis", end="")
    if not entries:
        text.append("no alert yet: every GPU has stayed under its budget and capacity")
    for i, entry in enumerate(reversed(entries)):
        when = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(entry.time))
        text.append(f"{when}  GPU {shown(entry.gpu, 60)}  ")
        text.append(shown(entry.message, 400), style=_STYLE[entry.severity])
        if i < len(entries) - 1:
            text.append("\n")
    if len(entries) == LOG_MAX:
        text.append(f"\n(the oldest entries are dropped past {LOG_MAX})")
    return text


class AlertLog(ViewWidget):
    """The log's lines; its screen sets `view` after every poll."""

    DEFAULT_CSS = "AlertLog { height: auto; padding: 0 1; }"

    view: reactive[AlertLogView | None] = reactive(None)

    def watch_view(self, view: AlertLogView | None) -> None:
        entries = view.entries if view is not None else ()
        self.show(log_lines(entries), max(1, len(entries) + (len(entries) == LOG_MAX)))
