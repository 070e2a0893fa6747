"""The monitor on the real dashboard (Pilot): the process table's sort, filter, selection and
fixed header, the per-GPU detail view, the alert log and the nearest-to-OOM line, driven by
keys over a recorded trace (one line a poll, `r` polls the next) and the demo node."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from textual.binding import Binding
from ui_helpers import FROZEN_NOW, llama_plan, screen_of, text_of, wait_for, write_trace

from memtui.telemetry import DeviceSnapshot, NodeSnapshot, ProcessSnapshot, ReplaySource
from memtui.ui import make_app
from memtui.ui.alert_log import AlertLogScreen
from memtui.ui.gpu_detail import GpuDetailScreen
from memtui.ui.widgets.process_table import VISIBLE_ROWS, ProcessTable, SortColumn

GB = 10**9
TOTAL = 80 * GB


def _gpu(index: int, used: int, pids: range, *, temp: int = 60) -> DeviceSnapshot:
    share = used // len(pids)
    return DeviceSnapshot(
        index=index,
        uuid=f"GPU-{index:04d}",
        name="NVIDIA H100 80GB HBM3",
        memory_total=TOTAL,
        memory_used=used,
        memory_free=TOTAL - used,
        utilization_gpu=90,
        utilization_memory=40,
        temperature_c=temp,
        power_mw=450_000,
        power_limit_mw=700_000,
        clock_sm_mhz=1980,
        clock_memory_mhz=2619,
        processes=tuple(
            ProcessSnapshot(
                pid=pid,
                used_bytes=share + pid,  # every process a different size
                name="python3",
                user=f"user{pid % 3}",
                command=f"/usr/bin/python3 -u train_{pid}.py --rank {pid}",
            )
            for pid in pids
        ),
    )


def _poll(t: float, used: list[int]) -> NodeSnapshot:
    return NodeSnapshot(
        time=FROZEN_NOW + t,
        hostname="node7",
        source="nvml",
        devices=tuple(_gpu(i, u, range(100 * i + 1, 100 * i + 7)) for i, u in enumerate(used)),
    )


def _trace(tmp_path: Path, polls: list[list[int]]) -> Path:
    return write_trace(tmp_path / "run.jsonl", [_poll(t, u) for t, u in enumerate(polls)])


async def _start(app, pilot) -> None:  # type: ignore[no-untyped-def]
    screen = screen_of(app)
    await wait_for(pilot, lambda: screen.snapshot is not None and screen.report is not None)
    await pilot.pause()


def _table_lines(app) -> list[str]:  # type: ignore[no-untyped-def]
    region = app.screen.query_one(ProcessTable).region
    lines = text_of(app).split("\n")[region.y : region.bottom]
    return [line[region.x : region.right].rstrip() for line in lines]


async def test_sort_reverse_filter_and_the_header_that_stays(tmp_path: Path) -> None:
    # 2 GPUs x 6 processes: more rows than the table draws
    app = make_app(llama_plan(), ReplaySource(_trace(tmp_path, [[40 * GB, 30 * GB]]), speed=None),
                   interval=3600)  # fmt: skip
    async with app.run_test(size=(160, 50)) as pilot:
        await _start(app, pilot)
        table = app.screen.query_one(ProcessTable)
        lines = _table_lines(app)
        assert lines[0].split()[:5] == ["GPU", "PID", "User", "GB", "Command"]
        assert "train_1.py --rank 1" in lines[1] and "python3" not in lines[1]
        assert f"rows 1-{VISIBLE_ROWS} of 12" in "\n".join(lines)
        for _ in range(3):  # GPU -> PID -> user -> memory
            await pilot.press("full_stop")
        assert table.sort is SortColumn.MEMORY
        lines = _table_lines(app)
        assert "GB↓" in lines[0] and " 6 " in f" {lines[1].split()[1]} "  # the largest: pid 6
        await pilot.press("I")
        lines = _table_lines(app)
        assert "GB↑" in lines[0] and lines[1].split()[1] == "101"  # the smallest
        await pilot.press("comma")
        assert table.sort is SortColumn.USER
        await pilot.press("backslash")
        await pilot.press(*"TRAIN_105", "enter")
        await wait_for(pilot, lambda: table.filter_text == "TRAIN_105")
        lines = _table_lines(app)
        rows = [line for line in lines[1:] if "train_" in line]
        assert len(rows) == 1 and "105" in rows[0] and "filter 'TRAIN_105'" in "\n".join(lines)
        await pilot.press("backslash", "ctrl+u", "enter")  # an empty filter: every process
        await wait_for(pilot, lambda: table.filter_text == "")
        await pilot.press("backslash", *"zzz", "escape")  # Escape keeps the filter as it was
        await pilot.pause()
        assert table.filter_text == ""


async def test_the_selection_follows_its_process_and_the_window_follows_the_selection(
    tmp_path: Path,
) -> None:
    trace = _trace(tmp_path, [[40 * GB, 30 * GB], [40 * GB, 78 * GB]])
    app = make_app(llama_plan(), ReplaySource(trace, speed=None), interval=3600)
    async with app.run_test(size=(160, 50)) as pilot:
        await _start(app, pilot)
        table = app.screen.query_one(ProcessTable)
        await pilot.press("tab")  # from the settings, by keyboard
        assert app.focused is table
        for _ in range(10):  # past the window: it scrolls, the header stays
            await pilot.press("down")
        assert table.selected is not None and table.selected[1] == 104
        lines = _table_lines(app)
        assert lines[0].split()[0] == "GPU" and any(" 104 " in f" {line} " for line in lines)
        assert "rows 3-10 of 12" in "\n".join(lines)
        for _ in range(3):
            await pilot.press("full_stop")  # sort by memory: 104 moves
        await pilot.press("r")  # the next poll: GPU 1's processes grow past GPU 0's
        await wait_for(pilot, lambda: screen_of(app).polls >= 2)
        await pilot.pause()
        assert table.selected is not None and table.selected[1] == 104
        assert any(" 104 " in f" {line} " for line in _table_lines(app))
        await pilot.press("enter")  # its GPU in full
        await wait_for(pilot, lambda: isinstance(app.screen, GpuDetailScreen))
        assert "GPU 1  NVIDIA H100 80GB HBM3" in text_of(app)


async def test_the_detail_view_graphs_with_axes_windows_and_other_gpus(tmp_path: Path) -> None:
    polls = [[40 * GB + t * 200_000_000, 30 * GB] for t in range(8)]
    app = make_app(llama_plan(), ReplaySource(_trace(tmp_path, polls), speed=None),
                   interval=3600)  # fmt: skip
    async with app.run_test(size=(120, 40)) as pilot:
        await _start(app, pilot)
        for n in range(2, 9):
            await pilot.press("r")
            await wait_for(pilot, lambda n=n: screen_of(app).polls >= n)  # type: ignore[misc]
        await pilot.press("d")  # nothing selected: the GPU nearest to OOM, GPU 0
        await wait_for(pilot, lambda: isinstance(app.screen, GpuDetailScreen))
        await pilot.pause()
        shown = text_of(app)
        assert "GPU 0  NVIDIA H100 80GB HBM3  GPU-0000" in shown
        assert "util 90%" in shown and "memory controller 40%" in shown and "60°C" in shown
        assert "power 450 W of 700 W" in shown and "SM 1980 MHz" in shown
        assert "used grows 200 MB/s (last 7 s): full in ~3 min" in shown
        for title in ("Memory used (GB)", "GPU utilisation (%)", "Power draw (W)"):
            assert title in shown
        assert "80.0 │" in shown and "100 │" in shown and "700 │" in shown  # y axes
        assert "└──" in shown and "-5 min" in shown and "now" in shown  # x axis
        await pilot.press("1")
        await pilot.pause()
        assert "-60 s" in text_of(app) and "window ~60 s" in text_of(app)
        await pilot.press("right")
        await pilot.pause()
        assert "GPU 1  NVIDIA H100 80GB HBM3  GPU-0001" in text_of(app)
        await pilot.press("escape")
        await wait_for(pilot, lambda: not isinstance(app.screen, GpuDetailScreen))
        assert screen_of(app).snapshot is not None


async def test_the_alert_log_keeps_every_alert_with_its_time(tmp_path: Path) -> None:
    """NEAR CAPACITY (95 % of the card, whatever the plan) comes, goes and comes back: the
    log keeps all three, with each poll's time, after the usage dropped."""
    polls = [[40 * GB, 30 * GB], [77 * GB, 30 * GB], [40 * GB, 30 * GB], [40 * GB, 78 * GB]]
    app = make_app(llama_plan(), ReplaySource(_trace(tmp_path, polls), speed=None),
                   interval=3600)  # fmt: skip
    async with app.run_test(size=(240, 60)) as pilot:  # the line's long form has room
        await _start(app, pilot)
        for n in range(2, 5):
            await pilot.press("r")
            await wait_for(pilot, lambda n=n: screen_of(app).polls >= n)  # type: ignore[misc]
        await pilot.pause()
        assert "Nearest to OOM: GPU 1, 78.0/80.0 GB used, 2.0 GB free" in text_of(app)
        await pilot.press("l")
        await wait_for(pilot, lambda: isinstance(app.screen, AlertLogScreen))
        await pilot.pause()
        lines = [line for line in text_of(app).split("\n") if "  GPU " in line]
        # with a job budget under 76 GB the status also says OVER BUDGET: the card decides here
        near = [line.split("  GPU ")[1] for line in lines if "NEAR CAPACITY:" in line]
        assert len(near) == 2, lines
        assert near[0].startswith("1  ") and "NEAR CAPACITY: 78.0 GB used" in near[0]  # newest
        assert near[1].startswith("0  ") and "NEAR CAPACITY: 77.0 GB used" in near[1]
        again = [line for line in lines if "again (was" in line]
        assert len(again) == 1 and "NEAR CAPACITY)" in again[0] and "GPU 0" in again[0]
        times = [line.split("  GPU ")[0].strip() for line in lines]
        assert len(times[0]) == len("2025-06-15 15:06:43") and times == sorted(times, reverse=True)
        await pilot.press("escape")
        await wait_for(pilot, lambda: not isinstance(app.screen, AlertLogScreen))


async def test_every_monitor_key_is_in_the_help_panel_and_shadows_no_other(
    tmp_path: Path,
) -> None:
    from test_ui_keys import help_text

    from memtui.ui.monitor_screen import MonitorScreen
    from memtui.ui.screen import DashboardScreen

    app = make_app(llama_plan(), ReplaySource(_trace(tmp_path, [[GB, GB]]), speed=None),
                   interval=3600)  # fmt: skip
    async with app.run_test(size=(120, 40)) as pilot:
        await _start(app, pilot)
        await pilot.press("question_mark")
        await pilot.pause()
        keys = help_text(app)
        others = {
            key
            for binding in [*DashboardScreen.BINDINGS, *app.BINDINGS]
            if isinstance(binding, Binding)
            for key in binding.key.split(",")
        }
        for binding in MonitorScreen.BINDINGS:
            assert isinstance(binding, Binding)
            assert binding.description in keys, binding
            assert not others & set(binding.key.split(",")), binding


async def test_strings_from_outside_are_escaped_in_the_detail_view_and_the_log(
    tmp_path: Path,
) -> None:
    """A GPU name with an OSC title sequence, an error with a clear-screen sequence and a
    5,000-character command line: escaped and bounded on every monitor surface."""
    title, escaped = "\x1b]0;pwned\x07", "\\x1b]0;pwned\\x07"
    first = _poll(0, [40 * GB, 30 * GB])
    hostile = first.devices[0].model_copy(
        update={
            "name": f"H100{title}",
            "processes": (
                ProcessSnapshot(pid=7, used_bytes=GB, user=f"u{title}",
                                command=f"python /tmp/{title}{'A' * 5000}.py"),
            ),
        }
    )  # fmt: skip
    lost = first.devices[1].model_copy(
        update={"lost": True, "error": "x\x1b[2J[b]y", "memory_used": None, "processes": None}
    )
    trace = write_trace(
        tmp_path / "hostile.jsonl",
        [first, first.model_copy(update={"time": FROZEN_NOW + 1, "devices": (hostile, lost)})],
    )
    app = make_app(llama_plan(), ReplaySource(trace, speed=None), interval=3600)
    async with app.run_test(size=(160, 50)) as pilot:
        await _start(app, pilot)
        await pilot.press("r")
        await wait_for(pilot, lambda: screen_of(app).polls >= 2)
        await pilot.pause()
        table = "\n".join(_table_lines(app))
        assert escaped in table and "\x1b" not in table and "A" * 300 not in table
        await pilot.press("d")
        await wait_for(pilot, lambda: isinstance(app.screen, GpuDetailScreen))
        await pilot.pause()
        shown = text_of(app)
        assert f"H100{escaped}" in shown and "\x1b" not in shown and "\x07" not in shown
        await pilot.press("escape", "l")
        await wait_for(pilot, lambda: isinstance(app.screen, AlertLogScreen))
        await pilot.pause()
        shown = text_of(app)
        assert "GPU 1  lost: x\\x1b[2J[b]y" in shown and "\x1b" not in shown


async def test_the_detail_key_without_telemetry_says_so() -> None:
    app = make_app(llama_plan(), None, interval=3600)
    async with app.run_test(size=(120, 40), notifications=True) as pilot:
        await pilot.pause()
        await pilot.press("d")
        await pilot.pause()
        assert not isinstance(app.screen, GpuDetailScreen)
        assert "no GPU to show" in text_of(app)


async def test_readings_from_the_fake_nvml_and_na_for_a_board_without_sensors(
    fake_nvml_in_process: Any,
) -> None:
    """End to end through the real pynvml: GPU 0 answers every reading, GPU 1 (the fuller
    one, so `d` opens it) answers NOT_SUPPORTED to each: its row leaves them out and its
    detail view says n/a; GPU 0's row shows them."""
    from fake_nvml.harness import H100_TOTAL, gpu

    from memtui.telemetry import NvmlSource

    fake_nvml_in_process.write(
        {
            "gpus": [
                gpu(0, used=20 * 2**30, util=(93, 38), temp=67, power=412_000,
                    power_limit=700_000, clocks=(1980, 2619)),
                gpu(1, used=int(H100_TOTAL * 0.6)),
            ]
        }
    )  # fmt: skip
    app = make_app(llama_plan(), NvmlSource(), interval=3600)
    async with app.run_test(size=(240, 60)) as pilot:  # a row with room for every reading
        await _start(app, pilot)
        shown = text_of(app)
        assert "util 93%  67°C  412/700 W" in shown
        await pilot.press("d")
        await wait_for(pilot, lambda: isinstance(app.screen, GpuDetailScreen))
        await pilot.pause()
        shown = text_of(app)
        assert "GPU 1  NVIDIA H100 80GB HBM3" in shown
        assert "util 0%" in shown  # the fake's utilisation defaults to 0: supported
        assert "· n/a ·" in shown and "power n/a of n/a" in shown
        assert "SM n/a" in shown and "memory clock n/a" in shown
        assert "Power draw (W): n/a (no samples in this window)" in shown
        await pilot.press("left")
        await pilot.pause()
        shown = text_of(app)
        assert "GPU 0  NVIDIA H100" in shown and "67°C" in shown and "SM 1980 MHz" in shown


async def test_a_note_in_the_process_table_is_never_cut(fake_nvml_in_process: Any) -> None:
    """GPUs busy with no process NVML lists here (a container without --pid=host): at
    120x40 the note is said once for every GPU it is about, wrapped at words across the
    table, whole (no ellipsis), and wraps again to a narrower table."""
    from fake_nvml.harness import gpu

    from memtui.telemetry import NvmlSource
    from memtui.telemetry.processes import OTHER_NAMESPACE_NOTE

    fake_nvml_in_process.write({"gpus": [gpu(i, used=30 * 2**30) for i in range(4)]})
    app = make_app(llama_plan(), NvmlSource(), interval=3600)
    async with app.run_test(size=(120, 40)) as pilot:
        await _start(app, pilot)
        lines = [line for line in _table_lines(app) if line]
        start = next(i for i, line in enumerate(lines) if line.startswith("note: "))
        said = " ".join(lines[start:])
        assert said == (
            "note: GPU 0, 1, 2, 3: memory in use but no process listed: " + OTHER_NAMESPACE_NOTE
        )
        assert len(lines) - start > 1 and not any("…" in line for line in lines[start:])
        width = app.screen.query_one(ProcessTable).content_size.width
        assert all(len(line) <= width for line in lines)
        await pilot.resize_terminal(100, 40)
        await pilot.pause()
        table = app.screen.query_one(ProcessTable)
        narrow = table.content_size.width
        assert narrow < width
        drawn = app.console.render_lines(table.render(), app.console.options.update_width(narrow))
        narrower = ["".join(s.text for s in line).rstrip() for line in drawn]
        start = next(i for i, line in enumerate(narrower) if line.startswith("note: "))
        assert " ".join(narrower[start:]) == said
        assert all(len(line) <= narrow for line in narrower)
        assert table.virtual_size.height == len(narrower)  # laid out at its drawn height
