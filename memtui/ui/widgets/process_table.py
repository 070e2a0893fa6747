"""Processes per GPU: PID, user, GPU memory and the program, from the latest snapshot.

Across hosts (a cluster source) a GPU is named host/index, the exporter's workload labels
(Kubernetes pod, Slurm job) stand in for a GPU without a process list, and the table keeps
the largest `MAX_ROWS` processes. User names and command lines come from other users: they
are drawn as text, never as markup, with control characters escaped; the command column is
the script or module a process runs, not its interpreter (`memtui.ui.process_names`).

The table sorts by a column (`cycle_sort`, `reverse_sort`), keeps the rows whose text holds a
typed filter (`filter_text`), and draws at most `VISIBLE_ROWS` rows under a header that never
scrolls away: the window follows the selected process (up and down while focused), and the
selection follows that process (its host, GPU and PID) from poll to poll wherever sorting
puts it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from enum import Enum
from typing import ClassVar, NamedTuple

from rich.cells import cell_len, chop_cells
from rich.console import Console, ConsoleOptions, RenderResult
from rich.text import Text
from textual.binding import Binding, BindingType
from textual.message import Message
from textual.reactive import reactive

from memtui.telemetry import ClusterSnapshot, DeviceKey, DeviceSnapshot
from memtui.text import shown
from memtui.ui.process_names import program_of
from memtui.ui.units import num
from memtui.ui.widgets.view_widget import ViewWidget
from memtui.ui.widgets.word_fit import cut_text

#: Most process rows shown across hosts (the largest first); a note says how many are left.
MAX_ROWS = 100
#: Process rows drawn under the header: the panel is at most a dozen lines tall with its
#: border and the line that says which rows are shown.
VISIBLE_ROWS = 8


@dataclass(frozen=True)
class ProcessView:
    devices: tuple[DeviceSnapshot, ...] | None
    """The snapshot's devices (not the snapshot: its time changes every poll, its
    processes rarely, and an equal view is not redrawn)."""
    unit: str
    hosts: tuple[str, ...] | None = None
    """Each device's host, for a source of many hosts; None for one node."""
    keys: tuple[DeviceKey, ...] = ()
    """Each device's key (host, UUID or label), for the selection and the detail view."""

    @classmethod
    def of(cls, snapshot: ClusterSnapshot | None, unit: str) -> ProcessView:
        """The view of a snapshot (None: plan-only)."""
        if snapshot is None:
            return cls(None, unit)
        rows = list(snapshot.rows())
        keys = tuple(k for k, _, _ in rows)
        if len(snapshot.nodes) <= 1:
            return cls(snapshot.devices, unit, keys=keys)
        return cls(tuple(d for _, _, d in rows), unit, tuple(k.host for k in keys), keys)


class SortColumn(str, Enum):
    """What the process table sorts by; `GPU` keeps the snapshot's order (GPU, then NVML's)."""

    GPU = "GPU"
    PID = "PID"
    USER = "user"
    MEMORY = "memory"
    COMMAND = "command"


class ProcessRow(NamedTuple):
    """One line of the table: where it is, what to sort on and the cells drawn."""

    device: DeviceKey
    pid: int | None
    """None for a workload line (a GPU without a process list) and for notes."""
    used: int
    cells: tuple[str, str, str, str, str]

    @property
    def ident(self) -> tuple[DeviceKey, int | None, str]:
        """What the selection follows across polls."""
        return (self.device, self.pid, self.cells[4] if self.pid is None else "")


def process_rows(view: ProcessView) -> tuple[list[ProcessRow], list[str]]:
    """The table's process rows in the snapshot's order, and its notes (escaped text): one
    a distinct note, naming every GPU it is about ("GPU 0, 1, 2: ..."), so a node whose GPUs
    all say the same is told once."""
    notes: dict[str, list[str]] = {}  # a note's text: the GPUs it is about, in order
    rows: list[ProcessRow] = []
    for i, device in enumerate(view.devices or ()):
        key = view.keys[i] if i < len(view.keys) else DeviceKey("", device.ident)
        name = device.label if view.hosts is None else f"{view.hosts[i]}/{device.label}"
        if device.processes is None:
            notes.setdefault(device.processes_note or "list unreadable", []).append(name)
            continue
        if not device.processes and device.workload:
            cells = (name, "", "", "", device.workload)
            rows.append(ProcessRow(key, None, device.memory_used or 0, _cells(cells)))
        for p in device.processes:
            program = program_of(p.command, p.name) or "(not visible here)"
            cells = (name, str(p.pid), p.user or "?", num(p.used_bytes, view.unit), program)
            rows.append(ProcessRow(key, p.pid, p.used_bytes or 0, _cells(cells)))
        if device.processes_note:
            notes.setdefault(device.processes_note, []).append(name)
    said = [f"note: GPU {', '.join(gpus)}: {note}" for note, gpus in notes.items()]
    return rows, [_cell(note) for note in said]


def arranged(
    rows: list[ProcessRow], column: SortColumn, reverse: bool, text: str
) -> list[ProcessRow]:
    """`rows` holding `text` (any cell, case-insensitive), sorted by `column` (stable: ties
    keep the snapshot's order); memory sorts largest first unless reversed."""
    if text:
        needle = text.casefold()
        rows = [r for r in rows if any(needle in cell.casefold() for cell in r.cells)]
    if column is SortColumn.GPU:
        return rows[::-1] if reverse else rows
    keys = {
        SortColumn.PID: lambda r: (r.pid is None, r.pid or 0),
        SortColumn.USER: lambda r: r.cells[2].casefold(),
        SortColumn.MEMORY: lambda r: -r.used,
        SortColumn.COMMAND: lambda r: r.cells[4].casefold(),
    }
    return sorted(rows, key=keys[column], reverse=reverse)


class Columns:
    """Rows of text cells in columns, laid out at the width they are drawn at: what a rich
    Table of no_wrap columns draws (columns two cells apart, the last one taking what is
    left, cut with an ellipsis), without measuring every cell of every row twice. For 64
    processes the Table took 22 ms to draw, most of the first frame's rendering, though
    only its top rows are on screen. Under the rows, `notes` across the whole width, wrapped
    at words (a note is never cut). Cells and notes are plain text (never markup)."""

    def __init__(
        self,
        header: Sequence[str],
        rows: Sequence[Sequence[str]],
        *,
        right: frozenset[int] = frozenset(),
        max_widths: dict[int, int] | None = None,
        highlight: int | None = None,
        notes: Sequence[str] = (),
        width: int = 0,
    ) -> None:
        self.header = tuple(header)
        self.highlight = highlight
        """The line drawn reversed (the selection; 0 is the header)."""
        self.rows = [tuple(row) for row in rows]
        self.right = right
        self.max_widths = max_widths or {}
        self.notes = tuple(notes)
        self.height = len(self.rows) + 1 + sum(len(_wrapped(n, width)) for n in self.notes)
        """Lines drawn at `width` (the width it is laid out at): the header, one a row, and
        the notes' lines."""

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
        lines += [line for note in self.notes for line in _wrapped(note, options.max_width)]
        text = Text("\n".join(lines), no_wrap=True, overflow="crop", end="")
        text.stylize("bold", 0, len(lines[0]))
        if self.highlight is not None and 0 < self.highlight < len(lines):
            start = sum(len(line) + 1 for line in lines[: self.highlight])
            text.stylize("reverse", start, start + len(lines[self.highlight]))
        yield text


def _wrapped(note: str, width: int) -> list[str]:
    """`note` in lines of at most `width` cells, broken at spaces (a word longer than a line
    is folded); one line when the width is not known yet (0)."""
    if width <= 0:
        return [note]
    lines: list[str] = []
    line = ""
    for word in note.split(" "):
        if cell_len(word) > width:  # a word longer than a line: folded (rich.cells, rich 15)
            if line:
                lines.append(line)
            *full, word = chop_cells(word, width)
            lines += full
            line = ""
        if line and cell_len(line) + 1 + cell_len(word) > width:
            lines.append(line)
            line = word
        else:
            line = f"{line} {word}" if line else word
    return [*lines, line] if line or not lines else lines


def _fit(cell: str, width: int, right: bool) -> str:
    """`cell` exactly `width` cells wide: padded, or cut after its last whole word that fits
    with an ellipsis (word_fit.cut_text)."""
    if cell_len(cell) > width:
        cell = cut_text(cell, width) if width > 0 else ""
    size = cell_len(cell)
    return " " * (width - size) + cell if right else cell + " " * (width - size)


class OpenDetail(Message):
    """Enter on a process: open the detail view of its GPU."""

    def __init__(self, device: DeviceKey) -> None:
        super().__init__()
        self.device = device


class ProcessTable(ViewWidget):
    """Compute processes of every GPU (notes say why a list is empty or partial): sorted,
    filtered, with a selection that follows its process."""

    DEFAULT_CSS = """
    ProcessTable { height: auto; }
    ProcessTable:focus { background: $boost; }
    """
    can_focus = True
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("up", "move(-1)", "Up", show=False),
        Binding("down", "move(1)", "Down", show=False),
        Binding("home", "move(-1000000)", "First", show=False),
        Binding("end", "move(1000000)", "Last", show=False),
        Binding("enter", "open", "GPU detail", show=False),
    ]

    view: reactive[ProcessView | None] = reactive(None)
    """Set by the screen after every poll."""
    sort: reactive[SortColumn] = reactive(SortColumn.GPU, init=False)
    reverse: reactive[bool] = reactive(False, init=False)
    filter_text: reactive[str] = reactive("", init=False)
    """Rows shown hold this text (case-insensitive); "" shows every row."""

    def __init__(self, *, id: str | None = None, classes: str | None = None) -> None:
        super().__init__(id=id, classes=classes)
        self.selected: tuple[DeviceKey, int | None, str] | None = None
        """The selected row (its GPU's key, its PID; a workload line's text), followed across
        polls and sorts; when the process ends nothing is selected until the next move."""
        self._offset = 0
        self._rows: list[ProcessRow] = []

    def cycle_sort(self, direction: int = 1) -> None:
        """Sort by the next (or, with -1, the previous) column."""
        columns = list(SortColumn)
        self.sort = columns[(columns.index(self.sort) + direction) % len(columns)]

    def reverse_sort(self) -> None:
        """Invert the order (memory: smallest first)."""
        self.reverse = not self.reverse

    def selected_device(self) -> DeviceKey | None:
        """The GPU of the selected process, if a row is selected."""
        return self.selected[0] if self.selected is not None else None

    def watch_sort(self) -> None:
        self.redraw()

    def watch_reverse(self) -> None:
        self.redraw()

    def watch_filter_text(self) -> None:
        self._offset = 0
        self.redraw()

    def action_move(self, by: int) -> None:
        if not self._rows:
            return
        at = self._index()
        at = 0 if at is None and by > 0 else (len(self._rows) - 1 if at is None else at + by)
        self.selected = self._rows[max(0, min(len(self._rows) - 1, at))].ident
        self.redraw()

    def action_open(self) -> None:
        device = self.selected_device()
        if device is not None:
            self.post_message(OpenDetail(device))

    def _index(self) -> int | None:
        return next((i for i, r in enumerate(self._rows) if r.ident == self.selected), None)

    def watch_view(self, view: ProcessView | None) -> None:
        if view is None or not view.devices:
            self._rows = []
            self.show("Processes: no telemetry (plan-only)", 1)
            return
        rows, notes = process_rows(view)
        left = 0
        if view.hosts is not None and len(rows) > MAX_ROWS:
            rows = sorted(rows, key=lambda row: -row.used)
            rows, left = rows[:MAX_ROWS], len(rows) - MAX_ROWS
        if left:
            notes.append(_cell(f"note: {left} smaller processes not shown"))
        rows = self._rows = arranged(rows, self.sort, self.reverse, self.filter_text)
        at = self._index()
        if at is not None:  # keep the selection in the window
            self._offset = min(self._offset, at)
            self._offset = max(self._offset, at - VISIBLE_ROWS + 1)
        self._offset = max(0, min(self._offset, len(rows) - VISIBLE_ROWS))
        window = rows[self._offset : self._offset + VISIBLE_ROWS]
        lines = [r.cells for r in window]
        highlight = None if at is None else at - self._offset + 1  # +1: the header
        if not lines:
            empty = "no process matches the filter" if self.filter_text else "no compute processes"
            lines.append(("", "", "", "", empty))
        summary = self._summary(len(rows))
        if summary:
            lines.append(("", "", "", "", summary))
        mark = "↓" if self.reverse != (self.sort is SortColumn.MEMORY) else "↑"
        header = ["GPU", "PID", "User", view.unit, "Command"]
        column = {SortColumn.GPU: 0, SortColumn.PID: 1, SortColumn.USER: 2,
                  SortColumn.MEMORY: 3, SortColumn.COMMAND: 4}[self.sort]  # fmt: skip
        if self.sort is not SortColumn.GPU or self.reverse:
            header[column] += mark
        # the notes wrap at the width the table is drawn at (the screen's before the first
        # layout; a resize draws it again)
        width = self.content_size.width or self.app.size.width
        table = Columns(header, lines, right=frozenset({1, 3}), max_widths={2: 10},
                        highlight=highlight, notes=notes, width=width)  # fmt: skip
        self.show(table, table.height)  # exact at `width` (see ViewWidget.show)

    def on_resize(self) -> None:
        self.redraw()  # the notes' lines at the new width

    def _summary(self, count: int) -> str:
        """Which rows are shown, and the filter, when not every row is or one is set."""
        parts = []
        if count > VISIBLE_ROWS:
            end = min(count, self._offset + VISIBLE_ROWS)
            parts.append(f"rows {self._offset + 1}-{end} of {count}")
        if self.filter_text:
            parts.append(f"filter {shown(self.filter_text, 40)!r}")
        return _cell(" · ".join(parts)) if parts else ""


def _cells(cells: tuple[str, str, str, str, str]) -> tuple[str, str, str, str, str]:
    a, b, c, d, e = (_cell(x) for x in cells)
    return (a, b, c, d, e)


def _cell(text: str) -> str:
    # a command line or a note with a newline would make its row two lines tall; any other
    # control character is escaped (Columns draws cells as text, never as markup)
    return shown(" ".join(text.splitlines()))
