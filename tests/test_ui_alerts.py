"""Alerts: a notification and a mark on the row when a GPU passes its budget or 95 percent of
its capacity, from a replayed trace and from the fake libnvidia-ml; and polls that block."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from fake_nvml.harness import H100_TOTAL, gpu
from ui_helpers import (
    BlockingSource,
    budget_total,
    by_label,
    demo_source,
    llama_plan,
    lost_gpu_snapshot,
    screen_of,
    text_of,
    wait_for,
    write_trace,
)

from memtui.estimator import Strategy
from memtui.telemetry import BoundedSource, NvmlSource, ReplaySource, SourceState
from memtui.ui import make_app
from memtui.ui.gpu_state import RowStatus
from memtui.ui.widgets.gpu_row import GpuRow


def _record_notifications(app: Any) -> list[str]:
    seen: list[str] = []
    original = app.notify

    def notify(message: str, *args: Any, **kwargs: Any) -> None:
        seen.append(message)
        original(message, *args, **kwargs)

    app.notify = notify
    return seen


def _alert_rows(app: Any) -> list[GpuRow]:
    return [
        row for row in app.screen.query(".device-row").results(GpuRow) if row.has_class("-alert")
    ]


async def test_replay_over_budget_alerts_once_and_marks_the_row(tmp_path: Path) -> None:
    plan = llama_plan()
    under = demo_source(plan, 1.0).poll()  # 93-97 % of the plan's budget
    over = demo_source(plan, 1.2).poll()  # 112-116 %: every GPU over budget
    trace = write_trace(tmp_path / "over.jsonl", [under, over, over])
    app = make_app(plan, ReplaySource(trace, speed=None), interval=3600)
    seen = _record_notifications(app)
    async with app.run_test(size=(120, 40)) as pilot:
        screen = screen_of(app)
        await wait_for(pilot, lambda: screen.polls >= 1 and screen.report is not None)
        assert not _alert_rows(app)
        assert set(screen.statuses.values()) == {RowStatus.UNDER}
        for polls in (2, 3):  # `r` polls now: the replay steps one line per poll
            await pilot.press("r")
            await wait_for(pilot, lambda: screen.polls >= polls)  # noqa: B023
        await pilot.pause()
        assert set(screen.statuses.values()) == {RowStatus.OVER}
        assert len(_alert_rows(app)) == 8
        alerts = [m for m in seen if "OVER BUDGET" in m]
        assert len(alerts) == 1  # one per crossing naming every GPU, not one per poll
        assert alerts[0].startswith("GPUs 0, 1, 2, 3, 4, 5, 6, 7: OVER BUDGET")
        assert "OVER BUDGET" in text_of(app)  # the word, not only the colour


async def test_a_plan_change_can_clear_the_alert(tmp_path: Path) -> None:
    """Once promoted to the job's budget (b): editing the what-if plan alone never moves the
    bars' budget (tests/test_ui_budgets.py)."""
    plan = llama_plan()
    trace = write_trace(tmp_path / "over.jsonl", [demo_source(plan, 1.2).poll()])
    app = make_app(plan, ReplaySource(trace, speed=None), interval=3600)
    async with app.run_test(size=(120, 40)) as pilot:
        screen = screen_of(app)
        await wait_for(pilot, lambda: screen.polls >= 1 and screen.report is not None)
        assert len(_alert_rows(app)) == 8
        await pilot.press("s")  # fsdp -> shard-grad-op: a larger budget, the job is inside it
        await pilot.pause()
        assert screen.plan.strategy is Strategy.fsdp_shard_grad_op
        assert budget_total(screen.plan) > budget_total(plan)
        assert len(_alert_rows(app)) == 8  # a what-if: the job's budget is still the plan's
        await pilot.press("b")  # the what-if plan becomes the job's budget
        await pilot.pause()
        assert not _alert_rows(app)


async def test_fake_nvml_near_capacity_alert(fake_nvml_in_process: Any) -> None:
    used_near = int(H100_TOTAL * 0.97)
    fake_nvml_in_process.write(
        {"gpus": [gpu(0, used=20 * 2**30, procs=[(4242, 20 * 2**30)]), gpu(1, used=used_near)]}
    )
    plan = llama_plan().model_copy(update={"strategy": Strategy.ddp})  # budget > the card
    app = make_app(plan, NvmlSource(), interval=3600)
    seen = _record_notifications(app)
    async with app.run_test(size=(80, 24)) as pilot:
        screen = screen_of(app)
        await wait_for(pilot, lambda: screen.polls >= 1 and screen.report is not None)
        await pilot.pause()
        # a budget past the card is never "under budget", however little GPU 0 uses yet
        assert by_label(screen.statuses, app) == {
            "0": RowStatus.BUDGET_OVER_CARD,
            "1": RowStatus.NEAR_CAPACITY,
        }
        rows = [row for row in _alert_rows(app) if row.has_class("-near")]
        assert len(rows) == 1 and rows[0].data and rows[0].data.device.label == "1"
        assert "NEAR" in text_of(app)
    assert any("GPU 1: NEAR CAPACITY" in m for m in seen)


async def test_lost_gpu_is_said_and_others_keep_updating(tmp_path: Path) -> None:
    plan = llama_plan()
    trace = write_trace(tmp_path / "lost.jsonl", [lost_gpu_snapshot(plan)])
    app = make_app(plan, ReplaySource(trace, speed=None), interval=3600)
    seen = _record_notifications(app)
    async with app.run_test(size=(120, 40)) as pilot:
        screen = screen_of(app)
        await wait_for(pilot, lambda: screen.polls >= 1 and screen.report is not None)
        await pilot.pause()
        assert by_label(screen.statuses, app)["3"] is RowStatus.LOST
        assert sum(s is RowStatus.UNDER for s in screen.statuses.values()) == 7
        assert "GPU LOST" in text_of(app)
    assert any("GPU 3 lost" in m for m in seen)


async def test_keys_keep_working_while_a_poll_blocks() -> None:
    """The poll runs in a thread worker: while it hangs, keys change the plan and the budget,
    the timer keeps firing, and no second poll starts (polls never overlap)."""
    plan = llama_plan()
    source = BlockingSource(demo_source(plan).poll())
    app = make_app(plan, source, interval=0.02)
    async with app.run_test(size=(80, 24)) as pilot:
        screen = screen_of(app)
        assert await asyncio.to_thread(source.entered.wait, 30)
        for key in ("s", "m", "plus", "right_square_bracket", "f", "c", "o", "p"):
            before = screen.plan
            await pilot.press(key)
            assert screen.plan != before, key
        await pilot.pause(1.5)  # let the 20 ms timer fire many times against the hung poll
        assert screen.polling and screen.snapshot is None
        assert source.calls == 1 and source.max_inside == 1
        source.release.set()
        await wait_for(pilot, lambda: screen.polls >= 1 and screen.report is not None)
        assert screen.snapshot is not None
    assert source.max_inside == 1


async def test_a_hung_driver_behind_the_timeout_guard_is_said_and_keys_still_work() -> None:
    """The live stack: BoundedSource gives up on a hung poll and says so; the screen shows
    the reason, keeps its keys, and never starts a second poll of the hung source."""
    plan = llama_plan()
    inner = BlockingSource(demo_source(plan).poll())
    app = make_app(plan, BoundedSource(inner, timeout_s=0.5), interval=0.05)
    async with app.run_test(size=(120, 40)) as pilot:
        screen = screen_of(app)
        await wait_for(pilot, lambda: screen.snapshot is not None and screen.report is not None)
        assert screen.snapshot is not None and screen.snapshot.state is SourceState.TIMEOUT
        await pilot.press("s")
        assert screen.plan.strategy is Strategy.fsdp_shard_grad_op
        await wait_for(pilot, lambda: screen.polls >= 3)  # later polls answer TIMEOUT at once
        assert inner.calls == 1 and inner.max_inside == 1
        assert "NVML is not answering" in text_of(app)
        inner.release.set()
        await wait_for(pilot, lambda: screen.snapshot is not None and screen.snapshot.ok)
        assert len(screen.snapshot.devices) == 8


async def test_near_capacity_uses_warning_and_a_device_error_is_said(tmp_path: Path) -> None:
    """Near capacity is $warning (over budget keeps $error); a GPU that answers but reports a
    problem (not lost) shows it on its row."""
    from rich.color import Color
    from ui_helpers import segments_of

    plan = llama_plan().model_copy(update={"strategy": Strategy.ddp})  # budget > the card
    snap = demo_source(llama_plan()).poll()
    devices = list(snap.devices)
    total = devices[1].memory_total or 0
    near = int(total * 0.97)
    devices[1] = devices[1].model_copy(update={"memory_used": near, "memory_free": total - near})
    devices[2] = devices[2].model_copy(update={"error": "MIG devices could not be listed"})
    trace = write_trace(
        tmp_path / "near.jsonl", [snap.model_copy(update={"devices": tuple(devices)})]
    )
    app = make_app(plan, ReplaySource(trace, speed=None), interval=3600)
    async with app.run_test(size=(120, 40)) as pilot:
        screen = screen_of(app)
        await wait_for(pilot, lambda: screen.polls >= 1 and screen.report is not None)
        await pilot.pause()
        assert by_label(screen.statuses, app)["1"] is RowStatus.NEAR_CAPACITY
        assert "MIG devices could not be listed" in text_of(app)
        warning = Color.parse(app.get_css_variables()["warning"])
        error = Color.parse(app.get_css_variables()["error"])
        words = [style for text, style in segments_of(app) if "NEAR CAPACITY" in text]
        assert words and all(s.color is not None for s in words)
        assert {s.color.triplet for s in words} == {warning.triplet}
        assert warning.triplet != error.triplet


class _Hovering:
    """A node whose GPUs swing across the budget on every poll (a job hovering at it)."""

    name = "demo"

    def __init__(self, plan: Any) -> None:
        self.under = demo_source(plan, 0.9).poll()
        self.over = demo_source(plan, 1.2).poll()
        self.info = demo_source(plan).info
        self.polls = 0

    def poll(self) -> Any:
        self.polls += 1
        return self.over if self.polls % 2 else self.under

    def close(self) -> None:
        pass


async def test_alerts_and_refused_keys_do_not_pile_up_notifications() -> None:
    """Forty polls of GPUs swinging across the budget and twenty refused keys (micro-batch
    already 1): one alert for the crossing, and one toast for the refused key while the last
    is on screen (TOAST_S), not one each time (toasts piled up 21 -> 86 in 30 s, memory with
    them)."""
    import time

    from memtui.ui.alerts import TOAST_S

    plan = llama_plan()
    source = _Hovering(plan)
    app = make_app(plan, source, interval=0.05)
    seen = _record_notifications(app)
    async with app.run_test(size=(120, 40), notifications=True) as pilot:
        screen = screen_of(app)
        await wait_for(pilot, lambda: screen.polls >= 40, steps=2000)
        started = time.monotonic()
        for _ in range(20):
            await pilot.press("minus")
        pressing = time.monotonic() - started
        assert screen.plan.micro_batch == 1
        alerts = [m for m in seen if "OVER BUDGET" in m]
        refused = [m for m in seen if "micro" in m.lower()]
        assert len(alerts) == 1, seen
        assert 1 <= len(refused) <= 1 + pressing / TOAST_S, (len(refused), pressing)
