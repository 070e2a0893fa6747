"""The per-GPU detail screen (`d`, or Enter on a process): every reading of one GPU and its
history graphs over a chosen window (`memtui/ui/widgets/gpu_detail.py` draws them).

The dashboard keeps the data (its `memtui.ui.trends.Trends`) and hands this screen the latest
snapshot after every poll through `take`; the screen only chooses which GPU and which window.
"""

from __future__ import annotations

from typing import ClassVar

from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import VerticalScroll
from textual.screen import Screen
from textual.widgets import Footer

from memtui.telemetry import ClusterSnapshot, DeviceKey
from memtui.ui.alerts import row_name
from memtui.ui.trends import Trends, free_bytes, projection
from memtui.ui.widgets.gpu_detail import DetailView, GpuDetail

#: The windows keys 1 to 4 choose, seconds.
WINDOWS_S = (60.0, 300.0, 900.0, 3600.0)


class GpuDetailScreen(Screen[None]):
    """One GPU in full; left and right move to the previous and next GPU."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape,d,q", "close", "Back"),
        Binding("left", "other(-1)", "Prev GPU"),
        Binding("right", "other(1)", "Next GPU"),
        Binding("1", "window(0)", "1 min"),
        Binding("2", "window(1)", "5 min"),
        Binding("3", "window(2)", "15 min"),
        Binding("4", "window(3)", "60 min"),
    ]

    def __init__(self, key: DeviceKey) -> None:
        super().__init__()
        self.device_key = key
        """The GPU shown."""
        self.window_s = WINDOWS_S[1]
        self._latest: tuple[ClusterSnapshot, Trends, str] | None = None

    def compose(self) -> ComposeResult:
        with VerticalScroll(id="detail-scroll"):
            yield GpuDetail(id="detail")
        yield Footer()

    def take(self, snapshot: ClusterSnapshot, trends: Trends, unit: str) -> None:
        """The latest poll (the dashboard calls this after every poll while it is open)."""
        self._latest = (snapshot, trends, unit)
        if self.is_attached:
            self._draw()

    def on_mount(self) -> None:
        self._draw()

    def on_resize(self) -> None:
        self._draw()

    def action_close(self) -> None:
        self.dismiss()

    def action_window(self, choice: int) -> None:
        self.window_s = WINDOWS_S[choice]
        self._draw()

    def action_other(self, step: int) -> None:
        if self._latest is None:
            return
        keys = [key for key, _, _ in self._latest[0].rows()]
        if not keys:
            return
        at = keys.index(self.device_key) if self.device_key in keys else -step
        self.device_key = keys[(at + step) % len(keys)]
        self._draw()

    def _draw(self) -> None:
        detail = self.query_one(GpuDetail)
        if self._latest is None:
            detail.view = None
            return
        snapshot, trends, unit = self._latest
        many = len(snapshot.nodes) > 1
        found = next(((k, d) for k, _, d in snapshot.rows() if k == self.device_key), None)
        if found is None:
            detail.view = None
            return
        key, device = found
        samples = trends.samples(key, since=snapshot.time - self.window_s)
        # three graphs (a title and two axis lines each) under five lines of text and the footer
        rows = max(3, (self.size.height - 15) // 3)
        detail.view = DetailView(
            name=row_name(key, device, many),
            device=device,
            samples=samples,
            window_s=self.window_s,
            now=snapshot.time,
            unit=unit,
            trend=projection(trends.samples(key), free_bytes(device)),
            graph_height=rows,
            width=max(30, self.size.width - 4),
        )
