"""After the OOM, in the dashboard: a PyTorch memory snapshot (or memory_stats dump) read in a
worker thread, summarised per device beside the plan on the dashboard.

Opened by `memtui --snapshot FILE` or the `F` key (which asks for the path). Files of hundreds of MB
take seconds to read: the read runs in a thread worker (docs/architecture.md, "Workers off the event
loop") and the screen says what it is reading; any problem is one line, never a crash. Keys: `d`
next device, `u` GB/GiB, `o` open another file, escape back to the dashboard.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import ClassVar

from textual import on, work
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import VerticalScroll
from textual.screen import Screen
from textual.widgets import Footer, Input, Static

from memtui.estimator import Plan
from memtui.forensics.compare import PlanComparison
from memtui.forensics.model import FileSummary
from memtui.ui.widgets.snapshot_view import SnapshotView, SnapshotViewData

UNITS = ("GiB", "GB")


class SnapshotScreen(Screen[None]):
    """One snapshot file, one device at a time."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape", "back", "Back", id="snapshot.back"),
        Binding("d", "next_device", "Device", id="snapshot.device"),
        Binding("u", "toggle_unit", "Unit", id="snapshot.unit", tooltip="GiB or GB"),
        Binding("o", "ask_path", "Open", id="snapshot.open", tooltip="read another file"),
        Binding("q", "app.quit", "Quit", id="snapshot.quit"),
    ]
    AUTO_FOCUS = "#snapshot-body"  # not the path field, hidden until asked for
    DEFAULT_CSS = """
    SnapshotScreen #snapshot-status { padding: 0 1; background: $panel; height: auto; }
    SnapshotScreen #snapshot-path { display: none; }
    SnapshotScreen.-asking #snapshot-path { display: block; }
    """

    def __init__(self, path: Path | None = None, plan: Plan | None = None) -> None:
        super().__init__()
        self.path = path
        self.plan = plan
        self.summary: FileSummary | None = None
        self.comparisons: tuple[PlanComparison | None, ...] = ()
        self.device = 0
        self.unit = UNITS[0]
        self.error: str | None = None

    def compose(self) -> ComposeResult:
        yield Static("", id="snapshot-status")
        yield Input(placeholder="snapshot pickle or memory_stats JSON", id="snapshot-path")
        with VerticalScroll(id="snapshot-body"):
            yield SnapshotView(id="snapshot-view")
        yield Footer(compact=True)

    def on_mount(self) -> None:
        if self.path is None:
            self.action_ask_path()
        else:
            self.read(self.path)

    # -- reading -------------------------------------------------------------------

    def read(self, path: Path) -> None:
        """Read `path` off the event loop; the status line says so meanwhile."""
        self.path = path
        self._status(f"reading {path} ...")
        self._read(path, self.plan)

    @work(thread=True, exclusive=True, group="snapshot-read")
    def _read(self, path: Path, plan: Plan | None) -> None:
        from memtui.errors import one_line

        started = time.perf_counter()
        try:
            from memtui.forensics import read_summary
            from memtui.forensics.compare import compare_plan

            summary = read_summary(path)
            comparisons: tuple[PlanComparison | None, ...] = ()
            if plan is not None:
                from memtui.estimator import estimate

                report = estimate(plan)
                comparisons = tuple(compare_plan(d, plan, report) for d in summary.devices)
        except Exception as err:  # a bad file, or a bug: one line on screen, never a crash
            self.app.call_from_thread(self._failed, path, one_line(err))
            return
        seconds = time.perf_counter() - started
        self.app.call_from_thread(self._loaded, summary, comparisons, seconds)

    def _loaded(
        self,
        summary: FileSummary,
        comparisons: tuple[PlanComparison | None, ...],
        seconds: float,
    ) -> None:
        self.summary, self.comparisons, self.device, self.error = summary, comparisons, 0, None
        from memtui.ui.snapshot_render import header

        self._status(header(summary, seconds).plain)
        self._push()

    def _failed(self, path: Path, message: str) -> None:
        self.error = message
        self._status(f"cannot read {path}: {message}")
        self.notify(message, title="Snapshot", severity="error")

    # -- drawing -------------------------------------------------------------------

    def _status(self, text: str) -> None:
        plan = f"\nplan: {self.plan.model.name}" if self.plan is not None else ""
        self.query_one("#snapshot-status", Static).update(text + plan)

    def _push(self) -> None:
        if self.summary is None or not self.summary.devices:
            return
        comparison = self.comparisons[self.device] if self.comparisons else None
        self.query_one(SnapshotView).view = SnapshotViewData(
            self.summary, self.device, self.unit, comparison
        )

    # -- keys ----------------------------------------------------------------------

    def action_back(self) -> None:
        if self.has_class("-asking") and self.summary is not None:
            self.remove_class("-asking")
            self.query_one("#snapshot-body").focus()
            return
        self.app.pop_screen()

    def action_next_device(self) -> None:
        if self.summary is not None and self.summary.devices:
            self.device = (self.device + 1) % len(self.summary.devices)
            self._push()

    def action_toggle_unit(self) -> None:
        self.unit = UNITS[(UNITS.index(self.unit) + 1) % len(UNITS)]
        self._push()

    def action_ask_path(self) -> None:
        self.add_class("-asking")
        field = self.query_one("#snapshot-path", Input)
        if self.path is not None:
            field.value = str(self.path)
        field.focus()

    @on(Input.Submitted, "#snapshot-path")
    def _submitted(self, event: Input.Submitted) -> None:
        text = event.value.strip()
        if not text:
            return
        self.remove_class("-asking")
        self.query_one("#snapshot-body").focus()
        self.read(Path(text).expanduser())
