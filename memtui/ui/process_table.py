"""Processes per GPU: PID, user, GPU memory and command line, from the latest snapshot.

Across hosts (a cluster source) a GPU is named host/index, the exporter's workload labels
(Kubernetes pod, Slurm job) stand in for a GPU without a process list, and the table keeps
the largest `MAX_ROWS` processes. User names and command lines come from other users: they
are drawn as text, never as markup, with control characters escaped.
"""

from __future__ import annotations

from dataclasses import dataclass

from rich.table import Table
from rich.text import Text
from textual.reactive import reactive

from memtui.telemetry import ClusterSnapshot, DeviceSnapshot
from memtui.telemetry.text import printable
from memtui.ui.units import num
from memtui.ui.view_widget import ViewWidget

#: Most process rows shown across hosts (the largest first); a note says how many are left.
MAX_ROWS = 100


@dataclass(frozen=True)
class ProcessView:
    devices: tuple[DeviceSnapshot, ...] | None
    """The snapshot's devices (not the snapshot: its time changes every poll, its
    processes rarely, and an equal view is not redrawn)."""
    unit: str
    hosts: tuple[str, ...] | None = None
    """Each device's host, for a source of many hosts; None for one node."""

    @classmethod
    def of(cls, snapshot: ClusterSnapshot | None, unit: str) -> ProcessView:
        """The view of a snapshot (None: plan-only)."""
        if snapshot is None:
            return cls(None, unit)
        if len(snapshot.nodes) <= 1:
            return cls(snapshot.devices, unit)
        rows = list(snapshot.rows())
        return cls(tuple(d for _, _, d in rows), unit, tuple(k.host for k, _, _ in rows))


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
        rows: list[tuple[int, tuple[str, str, str, str, str]]] = []
        for i, device in enumerate(view.devices):
            name = device.label if view.hosts is None else f"{view.hosts[i]}/{device.label}"
            if device.processes is None:
                notes.append(f"GPU {name}: {device.processes_note or 'list unreadable'}")
                continue
            if not device.processes and device.workload:
                rows.append((device.memory_used or 0, (name, "", "", "", device.workload)))
            for p in device.processes:
                cells = (
                    name,
                    str(p.pid),
                    p.user or "?",
                    num(p.used_bytes, view.unit),
                    p.command or p.name or "(not visible here)",
                )
                rows.append((p.used_bytes or 0, cells))
            if device.processes_note:
                notes.append(f"GPU {name}: {device.processes_note}")
        left = 0
        if view.hosts is not None and len(rows) > MAX_ROWS:
            rows.sort(key=lambda row: -row[0])
            rows, left = rows[:MAX_ROWS], len(rows) - MAX_ROWS
        for _, cells in rows:
            table.add_row(*(_cell(c) for c in cells))
        if not table.row_count:
            table.add_row("", "", "", "", "no compute processes")
        if left:
            notes.append(f"{left} smaller processes not shown")
        for note in notes:
            table.add_row("", "", "", "", _cell(f"note: {note}"))
        self.show(table, table.row_count + 1)  # exact: one line a row (see ViewWidget.show)


def _cell(text: str) -> Text:
    # a command line or a note with a newline would make its row two lines tall; any other
    # control character is escaped, and the text is never read as markup
    return Text(printable(" ".join(text.splitlines())))
