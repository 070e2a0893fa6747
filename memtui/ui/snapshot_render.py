"""Rich renderables of a forensics summary, shared by `memtui snapshot` and the dashboard's
snapshot view (Rich only: no Textual here). Bytes are shown in GiB (the unit of PyTorch's own
OOM message) or GB, always said."""

from __future__ import annotations

from collections.abc import Sequence

from rich.console import Group, RenderableType
from rich.table import Table
from rich.text import Text

from memtui.estimator.units import format_bytes
from memtui.forensics.compare import LABELS, PlanComparison, TermRow
from memtui.forensics.model import (
    BUCKETS,
    UNATTRIBUTED,
    AllocatorSettings,
    Attribution,
    Bucket,
    DeviceSummary,
    FileSummary,
    Finding,
    Timeline,
)
from memtui.text import LINE, shown

SPARKS = " ▁▂▃▄▅▆▇█"
_KIND = {
    "snapshot": "PyTorch memory snapshot",
    "segments": "PyTorch segment list (torch.cuda.memory_snapshot)",
    "memory_stats": "torch.cuda.memory_stats() dump",
}


def _b(n: int | None, unit: str) -> str:
    return "n/a" if n is None else format_bytes(n, unit, 2).rsplit(" ", 1)[0]


def header(summary: FileSummary, seconds: float | None = None) -> Text:
    text = Text()
    text.append(shown(summary.path), style="bold")
    read = f", read in {seconds:.1f} s" if seconds is not None else ""
    events = f", {summary.trace_events:,} trace events" if summary.trace_events else ""
    text.append(
        f": {_KIND.get(summary.kind, summary.kind)}, {len(summary.devices)} device(s)"
        f"{events} ({summary.file_bytes / 1e6:,.1f} MB file{read})"
    )
    for note in summary.notes:
        text.append(f"\nnote: {shown(note, LINE)}", style="dim")
    return text


def settings_line(s: AllocatorSettings) -> Text:
    if not s.recorded:
        return Text("allocator settings: not recorded in this file", style="dim")

    def on(v: bool | None) -> str:
        return "unknown" if v is None else ("on" if v else "off")

    mss = "unlimited" if s.max_split_size is None else format_bytes(s.max_split_size, "MiB", 0)
    gc = s.garbage_collection_threshold
    conf = f'"{shown(s.conf)}"' if s.conf else "unset"  # from the file, as every string
    return Text(
        f"allocator settings: expandable_segments {on(s.expandable_segments)}, max_split_size "
        f"{mss}, garbage_collection_threshold {gc if gc else 'off'}, "
        f"PYTORCH_CUDA_ALLOC_CONF {conf}"
    )


def sizes_table(d: DeviceSummary, unit: str) -> Table:
    """Where the reserved memory is: the allocator's identities, row by row."""
    t = Table(title=f"GPU {d.device}: the allocator's memory", title_justify="left", box=None)
    t.add_column("", no_wrap=True)
    t.add_column(unit, justify="right", no_wrap=True)
    t.add_column("", no_wrap=True, style="dim")
    rows: list[tuple[str, int | None, str]] = [
        ("reserved", d.reserved, "segments from cudaMalloc"),
        ("  allocated", d.allocated, "live blocks (memory_allocated)"),
        ("    requested", d.requested, "what the program asked for"),
        ("    rounding", d.free_internal, "free inside live blocks"),
        ("  awaiting free", d.awaiting_free, "freed, waiting for other streams"),
        ("  inactive", d.free_external, f"free blocks: {d.inactive_blocks or 0} of them"),
        ("largest free block", d.largest_free_block, ""),
        ("peak allocated", d.peak_allocated, "trace's peak (requested)"
         if d.source == "snapshot" else "allocated_bytes.all.peak"),
        ("peak reserved", d.peak_reserved, ""),
    ]  # fmt: skip
    for name, value, note in rows:
        if value is None and name.strip() in ("largest free block", "peak reserved"):
            continue
        t.add_row(name, _b(value, unit), note)
    return t


def findings_text(items: Sequence[Finding], title: str = "") -> Text:
    text = Text()
    if title:
        text.append(title + "\n", style="bold")
    marks = {
        "advice": ("->", "bold"),
        "out_of_memory": ("!!", "bold red"),
        "fragmentation": ("~~", "yellow"),
        "plan": ("<>", "cyan"),
        "note": ("..", "dim"),
    }
    for i, f in enumerate(items):
        mark, style = marks.get(f.kind, ("-", ""))
        text.append(f"{mark} ", style=style)
        text.append(shown(f.text, LINE) + ("\n" if i < len(items) - 1 else ""))
    return text


def terms_table(d: DeviceSummary, unit: str, comparison: PlanComparison | None) -> Table:
    """Bytes per plan term at the snapshot, the peak and the OOM, and the plan beside them."""
    t = Table(
        title="Where it went, by plan term (heuristic: stack-frame rules)",
        title_justify="left",
        box=None,
    )
    t.add_column("Term", no_wrap=True)
    named = (("at snapshot", d.at_snapshot), ("at peak", d.at_peak), ("at OOM", d.at_oom))
    cols: list[tuple[str, Attribution]] = [(name, a) for name, a in named if a is not None]
    for name, _ in cols:
        t.add_column(f"{name} {unit}", justify="right", no_wrap=True)
    if comparison is not None:
        t.add_column(f"plan {unit}", justify="right", no_wrap=True)
        t.add_column("vs plan", no_wrap=True)
    planned: dict[Bucket, TermRow] = {r.key: r for r in comparison.rows} if comparison else {}
    for key in BUCKETS:
        cells = [LABELS[key]]
        cells += [_b(a.by_term.get(key, 0), unit) for _, a in cols]
        style = "dim" if key == UNATTRIBUTED else ""
        if comparison is not None:
            row = planned.get(key)
            if row is None:
                cells += ["", ""]
            else:
                verdict = f"over +{_b(row.delta, unit)}" if row.over else "within"
                cells += [_b(row.planned, unit), verdict]
                style = "bold red" if row.over else style
        t.add_row(*cells, style=style)
    t.add_row(
        "[bold]Total[/]",
        *[f"[bold]{_b(a.total, unit)}[/]" for _, a in cols],
        *([_b(comparison.planned_total, unit), ""] if comparison else []),
    )
    return t


def timeline_chart(tl: Timeline, width: int, unit: str, height: int = 6) -> Text:
    """Live bytes over the trace as bars (each column the maximum of its events), reserved as
    a shade above them, the peak marked ^ and OOMs x under the axis."""
    width = max(10, width - 12)
    alloc = _resample(tl.allocated, width)
    res = _resample(tl.reserved, width) if tl.reserved else [0] * len(alloc)
    top = max([*alloc, *res, 1])
    scale = top / height
    text = Text()
    for row in range(height - 1, -1, -1):
        label = _b(round(top), unit) if row == height - 1 else ("0" if row == 0 else "")
        text.append(f"{label:>10} |")
        for a, r in zip(alloc, res, strict=True):
            level_a = a / scale - row
            level_r = r / scale - row
            if level_a >= 1:
                text.append("█", style="cyan")
            elif level_a > 0:
                text.append(SPARKS[max(1, round(level_a * 8))], style="cyan")
            elif level_r > 0:
                text.append("░", style="dim")
            else:
                text.append(" ")
        text.append("\n")
    n = len(alloc)
    marks = [" "] * n
    if tl.events:
        peak_col = min(n - 1, max(tl.peak_index, 0) * n // tl.events)
        marks[peak_col] = "^"
        for i in tl.oom_indices:
            marks[min(n - 1, i * n // tl.events)] = "x"
    text.append(" " * 10 + " +" + "".join(marks) + "\n")
    span = ""
    if tl.start_time_us is not None and tl.end_time_us is not None:
        span = f" over {(tl.end_time_us - tl.start_time_us) / 1e6:,.1f} s"
    text.append(
        f"{tl.events:,} events{span}; peak {_b(tl.peak, unit)} {unit} live (^, event "
        f"{max(tl.peak_index, 0):,})"
        + (f"; x = OOM ({len(tl.oom_indices)})" if tl.oom_indices else "")
        + "; bars: live requested bytes, shade: reserved",
        style="dim",
    )
    return text


def _resample(values: Sequence[int], width: int) -> list[int]:
    if not values:
        return [0] * width
    if len(values) <= width:
        return list(values)
    n = len(values)
    return [
        max(values[k * n // width : max((k + 1) * n // width, k * n // width + 1)])
        for k in range(width)
    ]


def unattributed_text(d: DeviceSummary, unit: str) -> Text | None:
    a = d.at_peak or d.at_snapshot
    if a is None or not a.unattributed_sites:
        return None
    text = Text("Unattributed, by innermost frame:\n", style="bold")
    for i, (site, size) in enumerate(a.unattributed_sites):
        end = "\n" if i < len(a.unattributed_sites) - 1 else ""
        text.append(f"  {_b(size, unit):>10} {unit}  {shown(site)}{end}")
    return text


def device_view(
    summary: FileSummary,
    d: DeviceSummary,
    unit: str,
    comparison: PlanComparison | None,
    width: int,
) -> RenderableType:
    """Everything about one device, top to bottom."""
    parts: list[RenderableType] = [sizes_table(d, unit)]
    if d.findings:
        parts.append(findings_text(d.findings, "What happened"))
    if d.at_snapshot is not None:
        parts.append(terms_table(d, unit, comparison))
        extra = unattributed_text(d, unit)
        if extra is not None:
            parts.append(extra)
    if comparison is not None:
        parts.append(
            Text(f"plan: {shown(comparison.plan, LINE)}; compared {comparison.basis}", style="dim")
        )
        if comparison.findings:
            parts.append(findings_text(comparison.findings, "Against the plan"))
    if d.timeline is not None and d.timeline.events:
        parts.append(Text("Timeline", style="bold"))
        parts.append(timeline_chart(d.timeline, width, unit))
    return Group(*parts)
