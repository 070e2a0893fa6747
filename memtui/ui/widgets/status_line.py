"""The status line: where the data comes from and its health, in words.

    ● live NVML on gpu-node-3, driver 550.54.15, CUDA 12.4, 8 GPUs, poll 3 ms
    ● demo (synthetic node) on demo-node, 8 GPUs
    ▲ replay run.jsonl on gpu-node-3, 8 GPUs | end of replay
    ● Prometheus http://prom:9090, 8 hosts, 64 GPUs, 1 host lost, poll 12 ms
    ○ plan-only (try `memtui --demo`): NVML not found (...): no NVIDIA driver on this machine
The source is named by its `SourceInfo` (never recognised by its label); hostnames and
reasons from other machines are drawn as text with control characters escaped.
No wall-clock time appears here, so snapshots of the screen stay deterministic. A line that
says why there is no live data (plan-only, or a source in trouble) or carries a note (where the
plan was saved, the jobs on the GPUs) wraps onto a second line when the terminal is too narrow
for it; what two lines cannot hold ends after a whole word with "…" (memtui/ui/widgets/word_fit.py).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from rich.text import Text
from textual.reactive import reactive
from textual.widgets import Static

from memtui.telemetry import ClusterSnapshot, SourceInfo, SourceState
from memtui.text import LINE, shown
from memtui.ui.widgets.view_widget import redraw_on_theme_change
from memtui.ui.widgets.word_fit import WordFit


@dataclass(frozen=True)
class StatusView:
    """The source's name, the latest snapshot (None before the first poll), and the mode."""

    source: SourceInfo | None
    """What the source is; None for plan-only."""
    snapshot: ClusterSnapshot | None
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
        text = Text()
        if view.plan_only_reason is not None:
            # the way forward first: on 80 columns the reason may be cut, the hint never
            text.append("○ plan-only", bad)
            text.append(" (try `memtui --demo`):", dim)
            text.append(" ")
            text.append(shown(view.plan_only_reason, LINE))
        elif snap is None or view.source is None:
            text.append(f"… {self._mode(view.source)}: waiting for the first poll", dim)
        else:
            healthy = snap.state is SourceState.OK
            text.append("● " if healthy else "▲ ", ok if healthy else bad)
            text.append(shown(view.source.mode))
            node = snap.as_node()
            if node is not None:
                if node.hostname:
                    text.append(f" on {shown(node.hostname)}")
                if node.driver_version:
                    text.append(f", driver {shown(node.driver_version)}")
                if node.cuda_version:
                    text.append(f", CUDA {shown(node.cuda_version)}")
            else:
                hosts = len(snap.nodes)
                text.append(f", {hosts} host{'s' if hosts != 1 else ''}")
            text.append(f", {len(snap.devices)} GPU{'s' if len(snap.devices) != 1 else ''}")
            silent = sum(not n.ok for n in snap.nodes) if node is None else 0
            if silent:
                text.append(f", {silent} host{'s' if silent != 1 else ''} lost", bad)
            lost = sum(d.lost for d in snap.devices)
            if lost:
                text.append(f", {lost} lost", bad)
            if view.source.live and snap.poll_seconds is not None:
                text.append(f", poll {snap.poll_seconds * 1000:.0f} ms", dim)
            if not healthy and snap.message:
                text.append(f" | {shown(snap.message, LINE)}", bad)
        if view.note:
            text.append(f" | {shown(view.note, LINE)}", dim)
        self.update(WordFit(text, 2 if wraps else 1))

    @staticmethod
    def _mode(source: SourceInfo | None) -> str:
        return "plan-only" if source is None else shown(source.mode)
