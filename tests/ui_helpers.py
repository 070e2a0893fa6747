"""Helpers shared by the UI tests (a module, not a test file, so pytest collects nothing here):
frozen plans, sources and traces, and waiting on the app by condition, never by wall-clock
time."""

from __future__ import annotations

import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

from textual.widget import Widget

from memtui.estimator import Plan, estimate
from memtui.estimator.model_source import load_model
from memtui.telemetry import DeviceKey, NodeSnapshot, SyntheticSource
from memtui.telemetry.nvml import NVML_INFO
from memtui.ui.app import MemtuiApp
from memtui.ui.screen import DashboardScreen

FROZEN_NOW = 1_750_000_000.0  # a fixed clock: snapshots of the screen never depend on time
_PLAN: Plan | None = None


def llama_plan() -> Plan:
    """Llama-2-7B, full fine-tune, FSDP on 8 x H100 80GB (the defaults), read once."""
    global _PLAN
    if _PLAN is None:
        _PLAN = Plan(model=load_model("meta-llama/Llama-2-7b-hf"))
    return _PLAN


def budget_total(plan: Plan) -> int:
    return estimate(plan).budget.total


def demo_source(plan: Plan, factor: float = 1.0, **kwargs: object) -> SyntheticSource:
    """The synthetic node, settled (75 s into the job), frozen in time, budgeted at
    `factor` x the plan's prediction (factor > 1.05: the job runs over the plan's budget)."""
    return SyntheticSource(
        8,
        seed=0,
        clock=lambda: FROZEN_NOW,
        start=FROZEN_NOW - 75.0,
        budget_bytes=int(budget_total(plan) * factor),
        **kwargs,  # type: ignore[arg-type]
    )


def write_trace(path: Path, snapshots: list[NodeSnapshot]) -> Path:
    path.write_text("".join(s.model_dump_json() + "\n" for s in snapshots))
    return path


def lost_gpu_snapshot(plan: Plan, lost: int = 3) -> NodeSnapshot:
    """The demo node with GPU `lost` answering GPU_IS_LOST."""
    snap = demo_source(plan).poll()
    devices = list(snap.devices)
    devices[lost] = devices[lost].model_copy(
        update={
            "lost": True,
            "error": "NVML: GPU is lost (code 15)",
            "memory_used": None,
            "memory_free": None,
            "memory_total": None,
            "memory_reserved": None,
            "utilization_gpu": None,
            "utilization_memory": None,
            "processes": None,
        }
    )
    return snap.model_copy(update={"devices": tuple(devices)})


def by_label(statuses: dict[DeviceKey, Any], app: MemtuiApp) -> dict[str, Any]:
    """Row statuses of a one-node snapshot by row label ("0", "0:1"), as a person reads
    them (the screen keys them by host and UUID)."""
    snapshot = screen_of(app).snapshot
    assert snapshot is not None
    labels = {key: device.label for key, _, device in snapshot.rows()}
    return {labels[key]: status for key, status in statuses.items()}


def screen_of(app: MemtuiApp) -> DashboardScreen:
    screen = app.screen
    assert isinstance(screen, DashboardScreen), screen
    return screen


async def wait_for(pilot: object, condition: Callable[[], bool], steps: int = 400) -> None:
    """Let the app run until `condition` holds (fails after `steps` event-loop turns)."""
    for _ in range(steps):
        if condition():
            return
        await pilot.pause(0.01)  # type: ignore[attr-defined]
    raise AssertionError("condition never held")


def text_of(app: MemtuiApp) -> str:
    """The screen as plain text, as the terminal would show it."""
    strips = app.screen._compositor.render_strips()
    return "\n".join("".join(seg.text for seg in strip) for strip in strips)


def segments_of(app: MemtuiApp) -> list[tuple[str, Any]]:
    """The screen's segments as (text, rich Style or None), after the app's line filters."""
    strips = app.screen._compositor.render_strips()
    return [(seg.text, seg.style) for strip in strips for seg in strip]


def colours_in(app: MemtuiApp, widget: Widget) -> set[str]:
    """Foreground colours (#rrggbb) of the cells the terminal shows inside `widget`."""
    region = widget.region
    found: set[str] = set()
    for y, strip in enumerate(app.screen._compositor.render_strips()):
        if not region.y <= y < region.bottom:
            continue
        x = 0
        for seg in strip:
            end = x + len(seg.text)
            style = seg.style
            visible = seg.text.strip() and x < region.right and end > region.x
            if visible and style is not None and style.color is not None:
                found.add(style.color.get_truecolor().hex)
            x = end
    return found


def region_text(app: MemtuiApp, widget: Widget) -> str:
    """The text the terminal shows inside `widget`'s region."""
    region = widget.region
    lines = text_of(app).split("\n")[region.y : region.bottom]
    return "\n".join(line[region.x : region.right] for line in lines)


class BlockingSource:
    """A source whose poll blocks until `release` is set: a hung driver, on demand."""

    name = "blocking"
    info = NVML_INFO  # it stands for NVML: what its silence means is NVML's

    def __init__(self, snapshot: NodeSnapshot) -> None:
        self.snapshot = snapshot
        self.entered = threading.Event()
        self.release = threading.Event()
        self.calls = 0
        self.inside = 0
        self.max_inside = 0
        self._lock = threading.Lock()

    def poll(self) -> NodeSnapshot:
        with self._lock:
            self.calls += 1
            self.inside += 1
            self.max_inside = max(self.max_inside, self.inside)
        self.entered.set()
        self.release.wait(60)  # bounded, so a broken test cannot hang the suite forever
        with self._lock:
            self.inside -= 1
        return self.snapshot

    def close(self) -> None:
        self.release.set()


def budget_on_screen(app: Any) -> str:
    """The budget as the GPU panel's legend shows it: "Budget per GPU 46.1 GB"."""
    for line in text_of(app).splitlines():
        if "Budget per GPU" in line:
            return line.split("Budget per GPU ", 1)[1].split(" (", 1)[0]
    raise AssertionError("no budget on screen")


def budget_of(plan: Any) -> str:
    """What the legend should say for `plan`: the estimator's total, in GB."""
    from memtui.ui.units import num

    return f"{num(budget_total(plan), 'GB')} GB"
