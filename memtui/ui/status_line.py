"""The status line: where the data comes from and its health, in words.

    ● live NVML on gpu-node-3, driver 550.54.15, CUDA 12.4, 8 GPUs, poll 3 ms
    ● demo: synthetic node demo-node, 8 GPUs (run on a GPU node for live data)
    ● replay: run.jsonl, 8 GPUs  |  replay ended
    ○ plan-only (try `memtui --demo`): NVML not found (...): no NVIDIA driver on this machine
No wall-clock time appears here, so snapshots of the screen stay deterministic. A line that
says why there is no live data (plan-only, or a source in trouble) or where the plan was saved
wraps onto a second line when the terminal is too narrow for it, rather than cutting it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from rich.text import Text
from textual.reactive import reactive
from textual.widgets import Static

from memtui.telemetry import NodeSnapshot, SourceState
from memtui.ui.view_widget import redraw_on_theme_change


@dataclass(frozen=True)
class StatusView:
    """The source's name, the latest snapshot (None before the first poll), and the mode."""

    source: str | None
    """"nvml", "demo", "replay:FILE"; None for plan-only."""
    snapshot: NodeSnapshot | None
    plan_only_reason: str | None = None
    note: str | None = None
    """A transient line (e.g. "plan saved to plan.toml")."""


class StatusLine(Static):
    """Source and health, one line."""

    COMPONENT_CLASSES: ClassVar[set[str]] = {
        "status-line--ok",
        "status-line--bad",
        "status-line--dim",
    }
    DEFAULT_CSS = "StatusLine { height: auto; max-height: 2; }"

    view: reactive[StatusView | None] = reactive(None)
    """Set by the screen after every poll and mode change."""

    def on_mount(self) -> None:
        redraw_on_theme_change(self, lambda: self.watch_view(self.view))

    def watch_view(self, view: StatusView | None) -> None:
        if view is None:
            return
        ok = self.get_component_rich_style("status-line--ok")
        bad = self.get_component_rich_style("status-line--bad")
        dim = self.get_component_rich_style("status-line--dim")
        snap = view.snapshot
        # a reason (plan-only, or a source in trouble) or a note (where the plan was saved)
        # may take two lines; all else one
        wraps = (
            view.plan_only_reason is not None
            or view.note is not None
            or (snap is not None and snap.state is not SourceState.OK)
        )
        text = Text(no_wrap=not wraps, overflow="ellipsis")
        if view.plan_only_reason is not None:
            # the way forward first: on 80 columns the reason may be cut, the hint never
            text.append("○ plan-only", bad)
            text.append(" (try `memtui --demo`):", dim)
            text.append(" ")
            text.append(view.plan_only_reason)
        elif snap is None:
            text.append(f"… {self._mode(view.source)}: waiting for the first poll", dim)
        else:
            healthy = snap.state is SourceState.OK
            text.append("● " if healthy else "▲ ", ok if healthy else bad)
            text.append(self._mode(view.source))
            if snap.hostname:
                text.append(f" on {snap.hostname}")
            if snap.driver_version:
                text.append(f", driver {snap.driver_version}")
            if snap.cuda_version:
                text.append(f", CUDA {snap.cuda_version}")
            text.append(f", {len(snap.devices)} GPU{'s' if len(snap.devices) != 1 else ''}")
            lost = sum(d.lost for d in snap.devices)
            if lost:
                text.append(f", {lost} lost", bad)
            if (view.source or "") == "nvml" and snap.poll_seconds is not None:
                text.append(f", poll {snap.poll_seconds * 1000:.0f} ms", dim)
            if not healthy and snap.message:
                text.append(f" | {snap.message}", bad)
        if view.note:
            text.append(f" | {view.note}", dim)
        self.update(text)

    @staticmethod
    def _mode(source: str | None) -> str:
        if source is None:
            return "plan-only"
        if source == "nvml":
            return "live NVML"
        if source == "demo":
            return "demo (synthetic node)"
        return source.replace("replay:", "replay ", 1)
