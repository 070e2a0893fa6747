"""The screen's layout where a review found it wanting: at 120x40 the process list was
squeezed to its border and the legend took three lines; the budget's mark stood in another
column on the plan's row than on the GPUs' (and moved with each row's status word at 80x24);
"GPU LOST" was pushed off the pane by a long error."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from ui_helpers import demo_source, llama_plan, screen_of, text_of, wait_for, write_trace

from memtui.telemetry import ReplaySource
from memtui.ui import make_app
from memtui.ui.widgets.bar import MARK
from memtui.ui.widgets.gpu_panel import GpuPanel
from memtui.ui.widgets.process_table import ProcessTable

GiB = 1024**3


def _node(tmp_path: Path, *, lost_error: str | None = None) -> Path:
    """The demo node at 8 x 8 processes, its GPUs under, over and near their card's limit,
    GPU 5 lost with `lost_error` when given."""
    plan = llama_plan()
    snap = demo_source(plan).poll()
    devices = []
    for i, d in enumerate(snap.devices):
        total = d.memory_total or 0
        used = [int(total * 0.3), int(total * 0.7), int(total * 0.97)][i % 3]
        procs = tuple(
            d.processes[0].model_copy(update={"pid": 50_000 + 10 * i + p})  # type: ignore[index]
            for p in range(8)
        )
        devices.append(d.model_copy(update={"memory_used": used, "processes": procs}))
    if lost_error is not None:
        devices[5] = devices[5].model_copy(
            update={"lost": True, "error": lost_error, "memory_used": None, "processes": None}
        )
    return write_trace(
        tmp_path / "node.jsonl", [snap.model_copy(update={"devices": tuple(devices)})]
    )


def _panel_lines(app: Any, widget: Any) -> list[str]:
    region = widget.content_region
    lines = text_of(app).split("\n")[region.y : region.bottom]
    return [line[region.x : region.right] for line in lines]


async def _started(app: Any, pilot: Any) -> None:
    screen = screen_of(app)
    await wait_for(pilot, lambda: screen.snapshot is not None and screen.report is not None)
    await pilot.pause()


async def test_at_120x40_the_legend_takes_two_lines_and_processes_are_on_screen(
    tmp_path: Path,
) -> None:
    app = make_app(llama_plan(), ReplaySource(_node(tmp_path), speed=None), interval=3600)
    async with app.run_test(size=(120, 40)) as pilot:
        await _started(app, pilot)
        legend = app.screen.query_one(GpuPanel).query_one("#legend")
        assert legend.size.height == 2, "\n".join(_panel_lines(app, legend))
        shown = "\n".join(_panel_lines(app, legend))
        assert "ovh" in shown and "Budget per GPU" in shown
        table = app.screen.query_one(ProcessTable)
        rows = [line for line in _panel_lines(app, app.screen.query_one("#processes"))
                if "5000" in line or "5001" in line]  # fmt: skip
        assert table.region.height > 0 and len(rows) >= 5, rows


def _mark_columns(lines: list[str]) -> dict[str, int]:
    """The column of the budget's mark on the plan's row and each GPU's row (first lines)."""
    found = {}
    for line in lines:
        words = line.split()
        if not words or MARK not in line:
            continue
        if words[0] in ("Plan", "plan") or words[0] == "GPU" or words[0].isdigit():
            found[" ".join(words[:2]) if words[0] == "GPU" else words[0]] = line.index(MARK)
    return found


@pytest.mark.parametrize("size", [(120, 40), (80, 24)], ids=["120x40", "80x24"])
async def test_the_budget_mark_is_in_one_column_whatever_the_row_says(
    tmp_path: Path, size: tuple[int, int]
) -> None:
    app = make_app(llama_plan(), ReplaySource(_node(tmp_path), speed=None), interval=3600)
    async with app.run_test(size=size) as pilot:
        await _started(app, pilot)
        columns = _mark_columns(_panel_lines(app, app.screen.query_one(GpuPanel)))
        assert len(columns) == 9, columns  # the plan and 8 GPUs: ok, OVER, NEAR, OVER+NEAR
        assert len(set(columns.values())) == 1, columns


@pytest.mark.parametrize("size", [(120, 40), (100, 30), (80, 24)], ids=str)
async def test_gpu_lost_is_said_before_a_long_error(tmp_path: Path, size: tuple[int, int]) -> None:
    error = "NVML: GPU is lost (code 15); " + "the driver said more about it " * 6
    trace = _node(tmp_path, lost_error=error)
    app = make_app(llama_plan(), ReplaySource(trace, speed=None), interval=3600)
    async with app.run_test(size=size) as pilot:
        await _started(app, pilot)
        shown = "\n".join(_panel_lines(app, app.screen.query_one(GpuPanel)))
        assert ("GPU LOST" if size[0] >= 100 else "LOST") in shown, shown


async def test_tp_traffic_and_strategies_a_plan_cannot_run_are_said_on_screen() -> None:
    """TP's own collectives are part of the communication line (4.3 GB for
    Llama-2-7B at tp 2: 32 layers x 4 all-reduces of 4096 x 4096 x 2 B), and a strategy the
    plan cannot run reads n/a, not 0 and 'no'."""
    from memtui.estimator import Offload, Strategy
    from memtui.ui.widgets.communication import CommunicationLine
    from memtui.ui.widgets.strategy_table import StrategyTable

    plan = llama_plan().evolve(tp=2, strategy=Strategy.zero3, offload=Offload.params)
    app = make_app(plan)
    async with app.run_test(size=(160, 60)) as pilot:
        await wait_for(pilot, lambda: "parallel)" in _rendered(app, CommunicationLine))
        line = " ".join(_rendered(app, CommunicationLine).split())  # it wraps at 110 columns
        assert "(4.3 GB of it tensor parallel)" in line, line
        rows = _rendered(app, StrategyTable).splitlines()
        ddp = next(row for row in rows if row.split()[:1] == ["ddp"])
        assert ddp.split()[1:] == ["-", "-", "n/a", "-"], ddp


def _rendered(app: Any, kind: type) -> str:
    return "\n".join(_panel_lines(app, app.screen.query_one(kind)))
