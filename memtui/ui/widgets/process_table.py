"""Processes per GPU: PID, user, GPU memory and command line, from the latest snapshot.

Across hosts (a cluster source) a GPU is named host/index, the exporter's workload labels
(Kubernetes pod, Slurm job) stand in for a GPU without a process list, and the table keeps
the largest `MAX_ROWS` processes. User names and command lines come from other users: they
are drawn as text, never as markup, with control characters escaped.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from rich.cells import cell_len, set_cell_size
from rich.console import Console, ConsoleOptions, RenderResult
from rich.text import Text
from textual.reactive import reactive

from memtui.telemetry import ClusterSnapshot, DeviceSnapshot
from memtui.text import shown
from memtui.ui.units import num
from memtui.ui.widgets.view_widget import ViewWidget

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


class Columns:
    """Rows of text cells in columns, laid out at the width they are drawn at: what a rich
    Table of no_wrap columns draws (columns two cells apart, the last one taking what is
    left, cut with an ellipsis), without measuring every cell of every row twice. For 64
    processes the Table took 22 ms to draw, most of the first frame's rendering, though
    only its top rows are on screen. Cells are plain text (never markup)."""

    def __init__(
        self,
        header: Sequence[str],
        rows: Sequence[Sequence[str]],
        *,
        right: frozenset[int] = frozenset(),
        max_widths: dict[int, int] | None = None,
    ) -> None:
        self.header = tuple(header)
        self.rows = [tuple(row) for row in rows]
        self.right = right
        self.max_widths = max_widths or {}
        self.height = len(self.rows) + 1
        """Lines drawn: the header and one a row."""

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        table = [self.header, *self.rows]
        last = len(self.header) - 1
        widths = [max(cell_len(row[i]) for row in table) for i in range(last + 1)]
        for column, most in self.max_widths.items():
            widths[column] = min(widths[column], most)
        room = options.max_width - sum(widths[:last]) - 2 * last
        widths[last] = max(1, room)
        lines = ["  ".join(_fit(row[i], widths[i], i in self.right) for i in range(last + 1))
                 for row in table]  # fmt: skip
        text = Text("\n".join(lines), no_wrap=True, overflow="crop", end="")
        text.stylize("bold", 0, len(lines[0]))
        yield text


def _fit(cell: str, width: int, right: bool) -> str:
    """`cell` exactly `width` cells wide: padded, or cut with an ellipsis."""
    size = cell_len(cell)
    if size > width:
        return set_cell_size(cell, width - 1) + "…" if width > 1 else "…"[:width]
    return " " * (width - size) + cell if right else cell + " " * (width - size)


class ProcessTable(ViewWidget):
    """Compute processes of every GPU (notes say why a list is empty or partial)."""

    DEFAULT_CSS = "ProcessTable { height: auto; }"

    view: reactive[ProcessView | None] = reactive(None)
    """Set by the screen after every poll."""

    def watch_view(self, view: ProcessView | None) -> None:
        if view is None or not view.devices:
            self.show("Processes: no telemetry (plan-only)", 1)
            return
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
        lines = [tuple(_cell(c) for c in cells) for _, cells in rows]
        if not lines:
            lines.append(("", "", "", "", "no compute processes"))
        if left:
            notes.append(f"{left} smaller processes not shown")
        lines.extend(("", "", "", "", _cell(f"note: {note}")) for note in notes)
        header = ("GPU", "PID", "User", view.unit, "Command")
        table = Columns(header, lines, right=frozenset({1, 3}), max_widths={2: 10})
        self.show(table, table.height)  # exact: one line a row (see ViewWidget.show)


def _cell(text: str) -> str:
    # a command line or a note with a newline would make its row two lines tall; any other
    # control character is escaped (Columns draws cells as text, never as markup)
    return shown(" ".join(text.splitlines()))
