"""Snapshots of the main states at 80x24 (narrow layout) and 120x40, time and data frozen:
plan-only, demo under budget, over budget, a GPU lost. Regenerate after a deliberate change
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

SIZES = [(80, 24), (120, 40)]
NO_DRIVER = "NVML not found (no libnvidia-ml.so.1): no NVIDIA driver on this machine"


def _first_poll(app: Any) -> Any:
    async def run_before(pilot: Any) -> None:
        screen = screen_of(app)
        if screen.source is not None:
            await wait_for(pilot, lambda: screen.polls >= 1)
        await pilot.pause()

    return run_before


@pytest.mark.parametrize("size", SIZES, ids=["80x24", "120x40"])
def test_plan_only(snap_compare: Any, size: tuple[int, int]) -> None:
    app = make_app(llama_plan(), None, plan_only_reason=NO_DRIVER)
    assert snap_compare(app, terminal_size=size, run_before=_first_poll(app))


@pytest.mark.parametrize("size", SIZES, ids=["80x24", "120x40"])
def test_demo_under_budget(snap_compare: Any, size: tuple[int, int]) -> None:
    plan = llama_plan()
    app = make_app(plan, demo_source(plan), interval=3600)
    assert snap_compare(app, terminal_size=size, run_before=_first_poll(app))


@pytest.mark.parametrize("size", SIZES, ids=["80x24", "120x40"])
def test_over_budget(snap_compare: Any, size: tuple[int, int]) -> None:
    plan = llama_plan()
    app = make_app(plan, demo_source(plan, 1.2), interval=3600)
    assert snap_compare(app, terminal_size=size, run_before=_first_poll(app))


@pytest.mark.parametrize("size", SIZES, ids=["80x24", "120x40"])
def test_gpu_lost(snap_compare: Any, size: tuple[int, int], tmp_path: Path) -> None:
    plan = llama_plan()
    trace = write_trace(tmp_path / "lost.jsonl", [lost_gpu_snapshot(plan)])
    app = make_app(plan, ReplaySource(trace, speed=None), interval=3600)
    assert snap_compare(app, terminal_size=size, run_before=_first_poll(app))
