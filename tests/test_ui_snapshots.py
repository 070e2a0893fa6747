"""Snapshots of the main states at the four layout sizes, 80x24 (narrow), 100x30, 120x40 and
160x50 (two panels side by side), time and data frozen: plan-only, demo under budget, over
budget, a GPU lost; and the help screen at 80x24. Regenerate after a deliberate change
with `pytest tests/test_ui_snapshots.py --snapshot-update` and review the SVGs."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from ui_helpers import (
    demo_source,
    llama_plan,
    lost_gpu_snapshot,
    screen_of,
    wait_for,
    write_trace,
)

from memtui.telemetry import ReplaySource
from memtui.ui import make_app

SIZES = [(80, 24), (100, 30), (120, 40), (160, 50)]
IDS = ["80x24", "100x30", "120x40", "160x50"]
NO_DRIVER = "NVML not found (no libnvidia-ml.so.1): no NVIDIA driver on this machine"


def _first_poll(app: Any) -> Any:
    async def run_before(pilot: Any) -> None:
        screen = screen_of(app)
        if screen.source is not None:
            await wait_for(pilot, lambda: screen.polls >= 1 and screen.report is not None)
        await pilot.pause()

    return run_before


@pytest.mark.parametrize("size", SIZES, ids=IDS)
def test_plan_only(snap_compare: Any, size: tuple[int, int]) -> None:
    app = make_app(llama_plan(), None, plan_only_reason=NO_DRIVER)
    assert snap_compare(app, terminal_size=size, run_before=_first_poll(app))


@pytest.mark.parametrize("size", SIZES, ids=IDS)
def test_demo_under_budget(snap_compare: Any, size: tuple[int, int]) -> None:
    plan = llama_plan()
    app = make_app(plan, demo_source(plan), interval=3600)
    assert snap_compare(app, terminal_size=size, run_before=_first_poll(app))


@pytest.mark.parametrize("size", SIZES, ids=IDS)
def test_over_budget(snap_compare: Any, size: tuple[int, int]) -> None:
    plan = llama_plan()
    app = make_app(plan, demo_source(plan, 1.2), interval=3600)
    assert snap_compare(app, terminal_size=size, run_before=_first_poll(app))


@pytest.mark.parametrize("size", SIZES, ids=IDS)
def test_gpu_lost(snap_compare: Any, size: tuple[int, int], tmp_path: Path) -> None:
    plan = llama_plan()
    trace = write_trace(tmp_path / "lost.jsonl", [lost_gpu_snapshot(plan)])
    app = make_app(plan, ReplaySource(trace, speed=None), interval=3600)
    assert snap_compare(app, terminal_size=size, run_before=_first_poll(app))


def test_help_screen(snap_compare: Any) -> None:
    app = make_app(llama_plan(), None, plan_only_reason=NO_DRIVER)
    assert snap_compare(app, press=["question_mark"], terminal_size=(80, 24))
