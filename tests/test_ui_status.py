"""The first poll started by the CLI, the status line's reasons (plan-only at 80x24, a replay
that holds nothing), and a live timer that keeps polling after a TIMEOUT."""

from __future__ import annotations

import asyncio
import threading
from pathlib import Path
from typing import Any

import pytest
from ui_helpers import (
    FROZEN_NOW,
    BlockingSource,
    demo_source,
    llama_plan,
    region_text,
    screen_of,
    text_of,
    wait_for,
    write_trace,
)

from memtui.telemetry import FirstPoll, NodeSnapshot, ReplaySource, SourceState, SyntheticSource
from memtui.telemetry.models import failed_snapshot
from memtui.telemetry.nvml import NVML_INFO
from memtui.ui import make_app
from memtui.ui.widgets.gpu_row import GpuRow
from memtui.ui.widgets.status_line import StatusLine

NO_DRIVER = "NVML not found (no libnvidia-ml.so.1): no NVIDIA driver on this machine"


def _flat(text: str) -> str:
    """Lines of a region joined as one line of words (a reason may wrap)."""
    return " ".join(text.split())


def _device_rows(app: Any) -> list[GpuRow]:
    return list(app.screen.query(".device-row").results(GpuRow))


# -- the first poll -------------------------------------------------------------------


async def test_a_first_poll_that_answered_is_the_first_frame(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The CLI's poll answered before the screen composed: the rows are composed with the
    screen, the plan is fitted to the trace's GPUs, and the estimator runs once for it (the
    plan given is the job's budget here: the first frame has it)."""
    import memtui.estimator as estimator_module  # the screen calls its `estimate`

    a100 = SyntheticSource(4, card="NVIDIA A100-SXM4-40GB", total_bytes=42_949_672_960, seed=0)
    trace = write_trace(tmp_path / "a100.jsonl", [a100.poll()])
    source = ReplaySource(trace, speed=None)
    first = FirstPoll(source)
    await asyncio.to_thread(first.wait)
    plans: list[Any] = []
    real_estimate = estimator_module.estimate

    def counting(plan: Any) -> Any:
        plans.append(plan)
        return real_estimate(plan)

    monkeypatch.setattr(estimator_module, "estimate", counting)
    app = make_app(
        llama_plan(),
        source,
        interval=3600,
        fit_to_devices=frozenset({"gpus", "memory"}),
        first_poll=first,
    )
    async with app.run_test(size=(120, 40)) as pilot:
        screen = screen_of(app)
        # no pause: composing and mounting the screen was enough
        assert screen.polls == 1 and screen.snapshot is not None
        assert len(_device_rows(app)) == 4
        assert screen.plan.hardware.gpus_per_node == 4
        assert [p.hardware.gpus_per_node for p in plans] == [4]  # one estimate, fitted
        await pilot.pause()
        assert "GPU 3" in text_of(app) and "DOES NOT FIT" in text_of(app)
        assert len(plans) == 1  # and no second estimate when the worker's poll came back


#: Run in a fresh interpreter (nothing of the estimate's half loaded yet, as in `memtui`): the
#: screen as it is when the first frame has been drawn, then once the estimate came.
FIRST_FRAME = r"""
import asyncio, json, sys
from memtui.estimator import Plan
from memtui.estimator.model_source import load_model
from memtui.telemetry import FirstPoll, SyntheticSource
from memtui.ui import make_app
from memtui.ui.screen import ESTIMATE_MODULE, DashboardScreen

seen = {}
load = DashboardScreen._load_estimator

def text(app):
    strips = app.screen._compositor.render_strips()
    return "\n".join("".join(seg.text for seg in strip) for strip in strips)

def after_first_frame(self):
    seen["first"] = {"loaded": ESTIMATE_MODULE in sys.modules, "estimated": self.report is not None,
                     "text": text(self.app)}
    load(self)

DashboardScreen._load_estimator = after_first_frame

async def main():
    source = SyntheticSource(8, seed=0)
    first = FirstPoll(source)
    await asyncio.to_thread(first.wait)
    plan = Plan(model=load_model("meta-llama/Llama-2-7b-hf"))
    # no job's budget (plain `memtui`): the rows do not wait for an estimate
    app = make_app(plan, source, interval=3600, first_poll=first, budget_from=None)
    async with app.run_test(size=(120, 40)) as pilot:
        for _ in range(400):
            await pilot.pause(0.01)
            if app.screen.report is not None:
                break
        await pilot.pause()
        seen["then"] = {"estimated": app.screen.report is not None, "text": text(app)}
    print(json.dumps(seen))

asyncio.run(main())
"""


def test_the_first_frame_is_the_monitors_and_the_estimate_follows() -> None:
    """With no job's budget, the first frame has every GPU row and says the what-if plan is
    being estimated: the estimate's half of the estimator was not imported for it. It is
    imported in a thread right after, then the plan is estimated and drawn."""
    import json
    import os
    import subprocess
    import sys

    out = subprocess.run(
        [sys.executable, "-c", FIRST_FRAME], capture_output=True, text=True, timeout=120,
        env={**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[1])},
    )  # fmt: skip
    assert out.returncode == 0, out.stderr
    seen = json.loads(out.stdout.strip().splitlines()[-1])
    first, then = seen["first"], seen["then"]
    assert not first["loaded"] and not first["estimated"]
    assert "GPU 7" in first["text"] and "What-if plan: estimating its budget" in first["text"]
    assert "Settings: estimating the what-if plan" in first["text"]
    assert then["estimated"] and "estimating" not in then["text"]
    assert "FITS" in then["text"] and "GPU 7" in then["text"]


async def test_a_first_poll_still_running_is_waited_for_off_the_event_loop() -> None:
    """A first poll that hangs (a slow driver): the screen starts anyway, keys work, the
    timer never starts a second poll while it runs, and its answer becomes the rows."""
    plan = llama_plan()
    source = BlockingSource(demo_source(plan).poll())
    first = FirstPoll(source)
    app = make_app(plan, source, interval=0.02, first_poll=first)
    async with app.run_test(size=(80, 24)) as pilot:
        screen = screen_of(app)
        assert await asyncio.to_thread(source.entered.wait, 30)
        assert "waiting for the first poll" in text_of(app)
        before = screen.plan
        await pilot.press("s")
        assert screen.plan != before
        await pilot.pause(0.5)  # many timer ticks against the hung first poll
        assert screen.polling and screen.snapshot is None
        assert source.calls == 1 and source.max_inside == 1
        source.release.set()
        await wait_for(pilot, lambda: screen.snapshot is not None and screen.report is not None)
        await pilot.pause()
        assert len(_device_rows(app)) == 8
    assert source.max_inside == 1


def test_first_poll_turns_a_failing_source_into_an_error_snapshot() -> None:
    class Broken:
        name = "broken"

        def poll(self) -> NodeSnapshot:
            raise RuntimeError("boom")

        def close(self) -> None:
            pass

    snap = FirstPoll(Broken()).wait()
    # the exception's kind and where it was raised, never its text (it can quote a header)
    reason = snap.reason or ""
    assert snap.state is SourceState.ERROR and "RuntimeError at test_ui_status.py" in reason
    assert "boom" not in reason


# -- status line reasons ----------------------------------------------------------------


async def test_plan_only_reason_is_readable_at_80x24() -> None:
    """At 80 columns the plan-only line wraps onto a second line instead of cutting the
    reason; the way forward (`memtui --demo`) is still on the first line."""
    app = make_app(llama_plan(), None, plan_only_reason=NO_DRIVER)
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.pause()
        status = app.screen.query_one(StatusLine)
        shown = region_text(app, status)
        assert status.region.height == 2
        assert "memtui --demo" in shown.split("\n")[0]
        assert NO_DRIVER in _flat(shown)
        assert "…" not in shown
    # wide enough: one line
    app = make_app(llama_plan(), None, plan_only_reason=NO_DRIVER)
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.pause()
        status = app.screen.query_one(StatusLine)
        assert status.region.height == 1 and NO_DRIVER in region_text(app, status)


@pytest.mark.parametrize(
    "content", ["", '{"unrelated": true}\nnot json at all\n'], ids=["empty", "unrelated"]
)
async def test_a_replay_holding_no_snapshots_says_why_on_the_status_line(
    tmp_path: Path, content: str
) -> None:
    trace = tmp_path / "other.jsonl"
    trace.write_text(content)
    app = make_app(llama_plan(), ReplaySource(trace, speed=None), interval=3600)
    async with app.run_test(size=(120, 40)) as pilot:
        screen = screen_of(app)
        await wait_for(pilot, lambda: screen.snapshot is not None and screen.report is not None)
        await pilot.pause()
        assert screen.snapshot is not None and screen.snapshot.state is SourceState.ERROR
        shown = _flat(region_text(app, app.screen.query_one(StatusLine)))
        assert "replay other.jsonl" in shown
        assert "trace other.jsonl holds no memtui snapshots" in shown
        assert not _device_rows(app)


async def test_a_replayed_failure_is_said_as_recorded_and_the_replay_goes_on(
    tmp_path: Path,
) -> None:
    """A trace that recorded "no NVIDIA driver" on the machine that made it: the dashboard
    says so as recorded, without that machine's remedy, stays live (not plan-only) and plays
    the next line."""
    plan = llama_plan()
    good = demo_source(plan).poll()
    gone = failed_snapshot(
        SourceState.NO_LIBRARY,
        NO_DRIVER,
        "install the NVIDIA driver or run on a GPU node",
        time=FROZEN_NOW + 1,
        source="nvml",
    )
    trace = write_trace(tmp_path / "run.jsonl", [good, gone, good])
    source = ReplaySource(trace, speed=None)
    app = make_app(plan, source, interval=3600)
    async with app.run_test(size=(120, 40)) as pilot:
        screen = screen_of(app)
        await wait_for(pilot, lambda: screen.polls >= 1 and screen.report is not None)
        await pilot.press("r")  # the next line: the recorded failure
        await wait_for(pilot, lambda: screen.polls >= 2)
        await pilot.pause()
        shown = _flat(region_text(app, app.screen.query_one(StatusLine)))
        assert f"recorded: {NO_DRIVER}" in shown and "install the NVIDIA driver" not in shown
        assert screen.source is source and screen.plan_only_reason is None
        await pilot.press("r")  # and the replay plays on
        await wait_for(pilot, lambda: screen.polls >= 3)
        assert screen.snapshot is not None and screen.snapshot.ok


# -- the live timer after a TIMEOUT -----------------------------------------------------


class _TimeoutUntilAnswered:
    """A source that answers TIMEOUT (as BoundedSource does while the driver hangs) until
    `answer` is set, then the demo node."""

    name = "nvml"
    info = NVML_INFO

    def __init__(self, good: NodeSnapshot) -> None:
        self.good = good
        self.answer = threading.Event()
        self.calls = 0

    def poll(self) -> NodeSnapshot:
        self.calls += 1  # polls never overlap: no lock needed
        if self.answer.is_set():
            return self.good
        return failed_snapshot(
            SourceState.TIMEOUT,
            "NVML is not answering (poll did not finish within 5 s)",
            "check `nvidia-smi`",
            time=FROZEN_NOW,
            source=self.name,
        )

    def close(self) -> None:
        pass


async def test_the_live_timer_keeps_polling_after_a_timeout() -> None:
    """A TIMEOUT snapshot is said on the status line and does not stop the timer: polls go
    on, and the first one that answers fills the rows and clears the message."""
    plan = llama_plan()
    source = _TimeoutUntilAnswered(demo_source(plan).poll())
    app = make_app(plan, source, interval=0.05)
    async with app.run_test(size=(120, 40)) as pilot:
        screen = screen_of(app)
        await wait_for(pilot, lambda: screen.polls >= 3)  # the timer kept firing
        assert screen.snapshot is not None and screen.snapshot.state is SourceState.TIMEOUT
        assert "NVML is not answering" in text_of(app)
        assert not _device_rows(app)
        source.answer.set()
        await wait_for(pilot, lambda: screen.snapshot is not None and screen.snapshot.ok)
        await pilot.pause()
        assert len(_device_rows(app)) == 8
        assert all(row.data is not None and row.data.device for row in _device_rows(app))
        assert "NVML is not answering" not in text_of(app)
        assert "GPU 7" in text_of(app)
