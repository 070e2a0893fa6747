"""The GPU rows of a job on many hosts: compact rows grouped by host, or one summary row per
host when the screen cannot show every GPU, under the outliers worth a look.

    ▲ nearest capacity: gpu03/5 76.1/79.6 GB (96%)
    ▲ above the median 61.0 GB: gpu01/0 +8.2 (1 rank)
    ✕ not reporting: gpu07
    gpu01 ▲ ██████████████░░│······ 71.2/66.0 GB OVER  8 GPUs, 1 alert
    gpu07 ✕ ░░░░░░░░░░│········ host stopped reporting  LOST  8 GPUs
Every bar is against the same per-GPU budget, the job's (none: the cards' capacity only). One
widget draws all the lines (a widget per GPU would be a thousand widgets on a large job); the
GPU panel scrolls with the screen.
Hostnames come from the cluster's labels: drawn as text, control characters escaped.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from rich.style import Style
from rich.text import Text
from textual.geometry import Size

from memtui.estimator import Budget
from memtui.telemetry import ClusterSnapshot, DeviceKey, DeviceSnapshot, NodeSnapshot
from memtui.text import shown
from memtui.ui.gpu_state import GpuHistory, RowStatus
from memtui.ui.outliers import find_outliers
from memtui.ui.units import num
from memtui.ui.widgets.gpu_row import RowData, row_text
from memtui.ui.widgets.view_widget import ViewWidget

#: A host's worst status, most urgent first: its summary row shows that one.
_URGENCY = (
    RowStatus.OVER_AND_NEAR,
    RowStatus.OVER,
    RowStatus.BUDGET_OVER_CARD,
    RowStatus.NEAR_CAPACITY,
    RowStatus.LOST,
    RowStatus.UNKNOWN,
    RowStatus.UNDER,
    RowStatus.UNBUDGETED,
)
#: Host names are padded to the longest, up to this many cells.
_HOST_WIDTH = 18


@dataclass(frozen=True)
class ClusterView:
    """What the cluster rows show; built by the GPU panel from its own view."""

    budget: Budget | None
    """The job's budget (None: no job's budget, the cards' capacity only)."""
    unit: str
    snapshot: ClusterSnapshot
    statuses: Mapping[DeviceKey, RowStatus]
    history: GpuHistory
    styles: Mapping[str, Style] = field(default_factory=dict)
    width: int = 80
    room: int = 30
    """Lines the screen has for the rows: more GPUs than this and hosts are summarised."""
    expanded: bool = False
    """Every GPU, whatever the room (the screen scrolls)."""


def cluster_text(view: ClusterView) -> Text:
    """Every line of the cluster rows, as one text."""
    lines = _outlier_lines(view)
    nodes = view.snapshot.nodes
    hosts = [shown(n.hostname or "?") for n in nodes]
    pad = min(_HOST_WIDTH, max((len(h) for h in hosts), default=4))
    needed = len(lines) + len(nodes) + len(view.snapshot.devices)
    summary = needed > view.room and not view.expanded
    for node, host in zip(nodes, hosts, strict=True):
        rows = [(DeviceKey(node.hostname or "", d.ident), d) for d in node.devices]
        if summary:
            lines.append(_summary(view, node, host.ljust(pad), rows))
            continue
        lines.append(_header(view, node, host, rows))
        for key, device in rows:
            lines.append(row_text(_data(view, key, device), view.width, True, f"  {device.label}"))
    return Text("\n", no_wrap=True).join(lines)


def _data(view: ClusterView, key: DeviceKey, device: DeviceSnapshot) -> RowData:
    track = view.history.get(key)
    return RowData(
        budget=view.budget,
        unit=view.unit,
        device=device,
        status=view.statuses.get(key, RowStatus.UNKNOWN),
        peak=track.peak if track.history else None,
        styles=view.styles,
    )


def _style(view: ClusterView, name: str) -> Style:
    return view.styles.get(name, Style())


def _summary(
    view: ClusterView,
    node: NodeSnapshot,
    host: str,
    rows: list[tuple[DeviceKey, DeviceSnapshot]],
) -> Text:
    """One line for a host: its fullest GPU's bar, its worst status, how many GPUs."""
    count = f"  {len(rows)} GPU{'s' * (len(rows) != 1)}"
    alerts = sum(view.statuses.get(k, RowStatus.UNKNOWN).alert for k, _ in rows)
    if alerts:
        count += f", {alerts} alert{'s' * (alerts != 1)}"
    if not rows:
        text = Text(f"{host} ✕ {shown(node.message or 'no GPUs reported')}", no_wrap=True)
        text.stylize(_style(view, "lost"), len(host) + 1, len(host) + 2)
        return text
    statuses = [view.statuses.get(k, RowStatus.UNKNOWN) for k, _ in rows]
    worst = min(statuses, key=_URGENCY.index)
    fullest = max(rows, key=lambda kd: kd[1].memory_used or 0)
    data = _data(view, *fullest)
    data = RowData(
        budget=data.budget,
        unit=data.unit,
        device=fullest[1],
        status=worst if worst is not RowStatus.LOST or fullest[1].lost else data.status,
        peak=data.peak,
        styles=data.styles,
    )
    line = row_text(data, max(20, view.width - len(count)), True, host)
    line.append(count, _style(view, "dim"))
    return line


def _header(
    view: ClusterView,
    node: NodeSnapshot,
    host: str,
    rows: list[tuple[DeviceKey, DeviceSnapshot]],
) -> Text:
    """A host's heading above its GPUs: name, GPUs, its fullest GPU, or why it is lost."""
    text = Text(host, _style(view, "label"), no_wrap=True, overflow="ellipsis")
    text.append(f"  {len(rows)} GPU{'s' * (len(rows) != 1)}")
    used = [d.memory_used for _, d in rows if d.memory_used is not None and not d.lost]
    if used:
        text.append(f"  max {num(max(used), view.unit)}")
        if view.budget is not None:
            text.append(f"/{num(view.budget.total, view.unit)}")
        text.append(f" {view.unit}")
    if not node.ok:
        text.append(f"  ✕ {shown(node.message or node.state.value)}", _style(view, "lost"))
    return text


def _outlier_lines(view: ClusterView) -> list[Text]:
    found = find_outliers(view.snapshot)
    unit = view.unit
    lines: list[Text] = []
    alert, lost = _style(view, "near"), _style(view, "lost")
    if found.nearest is not None:
        key, d = found.nearest
        share = d.used_fraction or 0.0
        line = Text("▲ " if share >= 0.95 else "  ", alert, no_wrap=True)
        line.append(
            f"nearest capacity: {shown(key.host)}/{d.label} "
            f"{num(d.memory_used, unit)}/{num(d.memory_total, unit)} {unit} ({share:.0%})"
        )
        lines.append(line)
    if found.above and found.median is not None:
        names = ", ".join(
            f"{shown(k.host)}/{d.label} +{num((d.memory_used or 0) - found.median, unit)}"
            for k, d in found.above
        )
        ranks = f"{found.above_count} rank{'s' * (found.above_count != 1)}"
        line = Text("▲ ", alert, no_wrap=True)
        line.append(f"above the median {num(found.median, unit)} {unit}: {names} ({ranks})")
        lines.append(line)
    if found.silent_hosts:
        line = Text("✕ ", lost, no_wrap=True)
        line.append("not reporting: " + ", ".join(shown(h) for h in found.silent_hosts))
        lines.append(line)
    return lines


class ClusterRows(ViewWidget):
    """The rows of a job on many hosts (see the module docstring)."""

    def show_view(self, view: ClusterView) -> None:
        """Draw `view` (one line per row)."""
        text = cluster_text(view)
        self.show(text, len(text.plain.split("\n")) if text.plain else 0)

    def get_content_height(self, container: Size, viewport: Size, width: int) -> int:
        # every line is one row (no_wrap): the count is exact, no need to render to measure
        return max(self._lines, 0)
