"""The monitor's keys and state, under the dashboard screen: the per-GPU detail view (`d`, or
Enter on a process), the alert log (`l`), the process table's sort (`>` and `<`, or `.` and
`,`, choose the column, `I` inverts) and filter (`\\`), and the nearest-to-OOM line. The
table's keys are htop's (htop(1), "INTERACTIVE COMMANDS": `>`/`<` sort column, `I` invert
sort order, `\\` filter), which users of a process viewer already know.

`DashboardScreen` derives from `MonitorScreen` (Textual merges the BINDINGS of every screen
class in the MRO: textual/dom.py `DOMNode._merge_bindings`, 8.2.8) and calls `_push_monitor`
with every view it pushes; the trends are recorded with every poll it takes. The detail and
log screens are imported on their first key: the first frame needs neither.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING, ClassVar

from textual import on
from textual.binding import Binding, BindingType
from textual.screen import Screen

from memtui.telemetry import ClusterSnapshot
from memtui.ui.alerts import LogEntry
from memtui.ui.trends import Trends, nearest_to_oom
from memtui.ui.widgets.oom_line import OomLine, OomView
from memtui.ui.widgets.process_table import OpenDetail, ProcessTable

if TYPE_CHECKING:
    from memtui.telemetry import DeviceKey
    from memtui.ui.alert_log import AlertLogScreen
    from memtui.ui.gpu_detail import GpuDetailScreen


class MonitorScreen(Screen[None]):
    """The monitor's part of the dashboard (see the module docstring)."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("d", "gpu_detail", "Detail", id="detail", show=False,
                tooltip="the selected process's GPU, else the one nearest to OOM, in full"),
        Binding("l", "alert_log", "Alerts", id="alert-log", show=False,
                tooltip="every alert since start, with its time"),
        Binding("greater_than_sign,full_stop", "sort_processes(1)", "Sort", id="sort-next",
                show=False, tooltip="sort processes by the next column"),
        Binding("less_than_sign,comma", "sort_processes(-1)", "Sort back", id="sort-previous",
                show=False, tooltip="sort processes by the previous column"),
        Binding("I", "reverse_processes", "Invert", id="sort-invert", show=False,
                tooltip="invert the processes' order"),
        Binding("backslash", "filter_processes", "Filter", id="filter", show=False,
                tooltip="show the processes whose text holds a word"),
    ]  # fmt: skip

    def __init__(self) -> None:
        super().__init__()
        self.trends = Trends()
        """Each GPU's recent samples: the detail graphs and the projections."""
        self._monitored: tuple[ClusterSnapshot | None, str, tuple[LogEntry, ...]] = (None, "GB", ())
        self._detail_screen: GpuDetailScreen | None = None
        self._log_screen: AlertLogScreen | None = None

    def _push_monitor(
        self, snapshot: ClusterSnapshot | None, unit: str, log: Iterable[LogEntry]
    ) -> None:
        """The nearest-to-OOM line, and the detail or log screen when one is open."""
        entries = tuple(log)
        self._monitored = (snapshot, unit, entries)
        self.query_one(OomLine).view = OomView.of(snapshot, self.trends, unit)
        if self._detail_screen is not None and snapshot is not None:
            self._detail_screen.take(snapshot, self.trends, unit)
        if self._log_screen is not None:
            self._log_screen.take(entries)

    def action_gpu_detail(self, key: DeviceKey | None = None) -> None:
        """The detail view of `key`, else of the selected process's GPU, else of the GPU
        nearest to OOM; said when there is no GPU to show."""
        from memtui.ui.gpu_detail import GpuDetailScreen

        snapshot, unit, _ = self._monitored
        if key is None:
            key = self.query_one(ProcessTable).selected_device()
        if key is None and snapshot is not None:
            nearest = nearest_to_oom(snapshot)
            key = (
                nearest[0]
                if nearest is not None
                else next((k for k, _, _ in snapshot.rows()), None)
            )
        if snapshot is None or key is None:
            self.notify("no GPU to show: no telemetry", title="Detail", severity="warning")
            return
        detail = self._detail_screen = GpuDetailScreen(key)
        detail.take(snapshot, self.trends, unit)
        self.app.push_screen(detail, lambda _: self._monitor_closed())

    @on(OpenDetail)
    def _on_open_detail(self, message: OpenDetail) -> None:
        self.action_gpu_detail(message.device)

    def action_alert_log(self) -> None:
        from memtui.ui.alert_log import AlertLogScreen

        log = self._log_screen = AlertLogScreen(self._monitored[2])
        self.app.push_screen(log, lambda _: self._monitor_closed())

    def _monitor_closed(self) -> None:
        self._detail_screen = self._log_screen = None

    def action_sort_processes(self, direction: int) -> None:
        self.query_one(ProcessTable).cycle_sort(direction)

    def action_reverse_processes(self) -> None:
        self.query_one(ProcessTable).reverse_sort()

    def action_filter_processes(self) -> None:
        from memtui.ui.process_filter import FilterPrompt

        table = self.query_one(ProcessTable)

        def typed(text: str | None) -> None:
            if text is not None:
                table.filter_text = text

        self.app.push_screen(FilterPrompt(table.filter_text), typed)
