"""The snapshot view: one device of a read snapshot, drawn with the same Rich renderables as
`memtui snapshot` (memtui/ui/snapshot_render.py), so the CLI and the dashboard say the same."""

from __future__ import annotations

from dataclasses import dataclass

from textual.reactive import reactive

from memtui.forensics.compare import PlanComparison
from memtui.forensics.model import FileSummary
from memtui.ui.widgets.view_widget import ViewWidget


@dataclass(frozen=True)
class SnapshotViewData:
    summary: FileSummary
    device: int
    """Index into summary.devices."""
    unit: str
    comparison: PlanComparison | None


class SnapshotView(ViewWidget):
    """Sizes, findings, attribution against the plan, timeline: pushed down by the screen."""

    DEFAULT_CSS = "SnapshotView { height: auto; padding: 0 1; }"

    view: reactive[SnapshotViewData | None] = reactive(None)
    """Set by SnapshotScreen after a read, a device change or a unit change."""

    def watch_view(self, view: SnapshotViewData | None) -> None:
        if view is None:
            return
        from memtui.ui.snapshot_render import device_view

        d = view.summary.devices[view.device]
        width = self.size.width or 100
        self.show(device_view(view.summary, d, view.unit, view.comparison, width), -1)
        self.refresh(layout=True)

    def on_resize(self) -> None:
        self.redraw()  # the timeline is drawn to the width
