"""Processes per GPU: PID, user, GPU memory and command line, from the latest snapshot."""

from __future__ import annotations

from dataclasses import dataclass

from rich.table import Table
from textual.reactive import reactive

from memtui.telemetry import DeviceSnapshot
from memtui.ui.units import num
from memtui.ui.view_widget import ViewWidget


@dataclass(frozen=True)
class ProcessView:
    devices: tuple[DeviceSnapshot, ...] | None
    """The snapshot's devices (not the snapshot: its time changes every poll, its
    processes rarely, and an equal view is not redrawn)."""
    unit: str


class ProcessTable(ViewWidget):
    """Compute processes of every GPU (notes say why a list is empty or partial)."""

    DEFAULT_CSS = "ProcessTable { height: auto; }"

    view: reactive[ProcessView | None] = reactive(None)
    """Set by the screen after every poll."""

    def watch_view(self, view: ProcessView | None) -> None:
        if view is None or not view.devices:
            self.show("Processes: no telemetry (plan-only)", 1)
            return
        table = Table(box=None, pad_edge=False, expand=True, header_style="bold")
        table.add_column("GPU", no_wrap=True)
        table.add_column("PID", justify="right", no_wrap=True)
        table.add_column("User", no_wrap=True, overflow="ellipsis", max_width=10)
        table.add_column(view.unit, justify="right", no_wrap=True)
        table.add_column("Command", no_wrap=True, overflow="ellipsis", ratio=1)
        notes: list[str] = []
        for device in view.devices:
            if device.processes is None:
                notes.append(f"GPU {device.label}: {device.processes_note or 'list unreadable'}")
                continue
            for p in device.processes:
                table.add_row(
                    device.label,
                    str(p.pid),
                    _one_line(p.user or "?"),
                    num(p.used_bytes, view.unit),
                    _one_line(p.command or p.name or "(not visible here)"),
                )
            if device.processes_note:
                notes.append(f"GPU {device.label}: {device.processes_note}")
        if not table.row_count:
            table.add_row("", "", "", "", "no compute processes")
        for note in notes:
            table.add_row("", "", "", "", _one_line(f"note: {note}"))
        self.show(table, table.row_count + 1)  # exact: one line a row (see ViewWidget.show)


def _one_line(text: str) -> str:
    # a command line or a note with a newline would make its row two lines tall
    return " ".join(text.splitlines())
