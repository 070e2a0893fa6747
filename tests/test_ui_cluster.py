"""A job on many hosts on the dashboard: 64 GPUs on 8 hosts, replayed from a cluster trace
(format 2), readable at 120x40 (a summary row per host, the outliers named) and usable at
80x24; every GPU with `x`."""

from __future__ import annotations

from pathlib import Path

import pytest
from ui_helpers import llama_plan, screen_of, text_of, wait_for

from memtui.telemetry import (
    ClusterSnapshot,
    DeviceSnapshot,
    NodeSnapshot,
    Recorder,
    ReplaySource,
    SourceState,
)
from memtui.ui import make_app

MiB = 1024**2
TOTAL = 81559 * MiB


def _cluster() -> ClusterSnapshot:
    nodes = []
    for h in range(8):
        host = f"gpu{h + 1:02d}"
        lost = h == 6
        devices = tuple(
            DeviceSnapshot(
                index=i,
                uuid=f"GPU-{h:02d}{i:02d}",
                name="NVIDIA H100 80GB HBM3",
                memory_total=TOTAL,
                memory_used=None if lost else (40_000 + 300 * i + 50 * h) * MiB,
                lost=lost,
                error="host stopped reporting" if lost else None,
            )
            for i in range(8)
        )
        if h == 0:  # rank 0 holds 9 GB more than the others
            devices = (devices[0].model_copy(update={"memory_used": 50_000 * MiB}), *devices[1:])
        if h == 3:  # one GPU near its card
            devices = (
                *devices[:5],
                devices[5].model_copy(update={"memory_used": 79_000 * MiB}),
                *devices[6:],
            )
        nodes.append(
            NodeSnapshot(
                time=1.0,
                hostname=host,
                source="prometheus:x",
                devices=devices,
                state=SourceState.LOST if lost else SourceState.OK,
                reason=f"host {host} stopped reporting" if lost else None,
            )
        )
    return ClusterSnapshot(time=1.0, source="prometheus:x", nodes=tuple(nodes))


@pytest.fixture
def trace(tmp_path: Path) -> Path:
    path = tmp_path / "cluster.jsonl"
    with Recorder(path) as rec:
        rec.write(_cluster())
    return path


async def test_64_gpus_on_8_hosts_read_at_120x40(trace: Path) -> None:
    app = make_app(llama_plan(), ReplaySource(trace, speed=None), interval=3600)
    async with app.run_test(size=(120, 40)) as pilot:
        screen = screen_of(app)
        await wait_for(pilot, lambda: screen.snapshot is not None and screen.report is not None)
        await pilot.pause()
        shown = text_of(app)
        for h in range(1, 9):  # one summary row per host, all on screen
            assert f"gpu{h:02d}" in shown, h
        assert "nearest capacity: gpu04/5" in shown
        assert "above the median" in shown and "gpu01/0" in shown  # the rank-0 surplus
        assert "not reporting: gpu07" in shown
        assert "8 hosts, 64 GPUs" in shown and "1 host lost" in shown
        await pilot.press("x")  # every GPU, grouped by host; the panel scrolls
        await pilot.pause()
        assert screen.expand_hosts
        assert "  7 " in text_of(app)  # compact rows by index under their host


async def test_64_gpus_on_8_hosts_usable_at_80x24(trace: Path) -> None:
    app = make_app(llama_plan(), ReplaySource(trace, speed=None), interval=3600)
    async with app.run_test(size=(80, 24)) as pilot:
        screen = screen_of(app)
        await wait_for(pilot, lambda: screen.snapshot is not None and screen.report is not None)
        await pilot.pause()
        seen = text_of(app)
        for _ in range(4):  # whatever is below the fold is a page away
            await pilot.press("pagedown")
            await pilot.pause()
            seen += text_of(app)
        for h in range(1, 9):
            assert f"gpu{h:02d}" in seen, h
        assert "nearest capacity: gpu04/5" in seen
