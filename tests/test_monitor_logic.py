"""The monitor's pure parts: the program a command line runs (hostile command lines
included), trends and projections, the GPU nearest to OOM, graphs with axes, the alert log,
the process table's sorting and filtering, and the readings a row shows."""

from __future__ import annotations

import pytest

from memtui.telemetry import ClusterSnapshot, DeviceSnapshot, NodeSnapshot, ProcessSnapshot
from memtui.text import LIMIT, shown
from memtui.ui.alerts import AlertTracker
from memtui.ui.gpu_state import RowStatus
from memtui.ui.process_names import MAX_SCANNED, program_of
from memtui.ui.trends import Sample, Trends, nearest_to_oom, projection
from memtui.ui.widgets.gpu_detail import graph, readings_line
from memtui.ui.widgets.gpu_row import readings_text
from memtui.ui.widgets.oom_line import OomView
from memtui.ui.widgets.process_table import ProcessView, SortColumn, arranged, process_rows

GB = 10**9


@pytest.mark.parametrize(
    ("command", "program"),
    [
        ("/usr/bin/python3 -u train.py --lr 1e-4", "train.py --lr 1e-4"),
        ("python -m trl.cli sft --model x", "trl.cli sft --model x"),
        ("python3 -mfoo.bar 1", "foo.bar 1"),
        ("python -W ignore -X dev /home/a/run.py", "run.py"),
        ("python -c print(1)", "python -c print(1)"),
        ("torchrun --nproc_per_node 8 --master-port=29500 train.py --cfg a.yaml",
         "train.py --cfg a.yaml"),
        ("torchrun --standalone -m mypkg.train --z", "mypkg.train --z"),
        ("/opt/conda/bin/accelerate launch --config_file fsdp.yaml sft.py", "sft.py"),
        ("deepspeed --num_gpus 8 finetune.py --deepspeed ds.json",
         "finetune.py --deepspeed ds.json"),
        ("python -m torch.distributed.run --nproc-per-node=8 t.py --x", "t.py --x"),
        ("env CUDA_VISIBLE_DEVICES=0 NCCL_DEBUG=INFO python3.11 train.py", "train.py"),
        ("OMP_NUM_THREADS=4 python train.py", "train.py"),
        ("/usr/local/bin/vllm serve org/model", "vllm serve org/model"),
        ("python", "python"),
    ],
)  # fmt: skip
def test_the_script_or_module_not_the_interpreter(command: str, program: str) -> None:
    assert program_of(command) == program


def test_no_command_line_falls_back_to_the_process_name() -> None:
    assert program_of(None, "python") == "python"
    assert program_of("", "python") == "python"
    assert program_of(None, None) is None


@pytest.mark.parametrize(
    "command",
    [
        "python /tmp/\x1b]0;pwned\x07.py",  # retitles the terminal
        "python train\u202e.py",  # a bidi override shows the name backwards
        "python " + "A" * 100_000 + ".py",  # a huge word
        "torchrun " + "--x " * 50_000 + "t.py",  # a huge command line
        "python -m \x9b31m",  # a C1 control sequence introducer
    ],
)
def test_hostile_command_lines_are_bounded_and_escaped(command: str) -> None:
    """The program is split from at most MAX_SCANNED characters, and what the table draws
    (`shown`) is printable and at most LIMIT characters."""
    program = program_of(command)
    assert program is not None and len(program) <= MAX_SCANNED + 1
    drawn = shown(program)
    assert drawn.isprintable() and len(drawn) <= LIMIT
    assert "\x1b" not in drawn and "\u202e" not in drawn and "\x9b" not in drawn


def _samples(rate: float, n: int = 11, start: int = 10 * GB) -> tuple[Sample, ...]:
    return tuple(Sample(1000.0 + t, int(start + rate * t), 90, 400_000) for t in range(n))


def test_projection_is_per_second_and_says_when_the_card_is_full() -> None:
    trend = projection(_samples(120e6), room=4_800_000_000)
    assert trend is not None
    assert trend.rate == pytest.approx(120e6)
    assert trend.window_s == 10
    assert trend.seconds_to_full == pytest.approx(40.0)


def test_projection_needs_five_samples_over_five_seconds_and_ignores_noise() -> None:
    assert projection(_samples(1e8, n=4), room=GB) is None
    steady = projection(_samples(100.0), room=GB)
    assert steady is not None and steady.seconds_to_full is None
    shrinking = projection(_samples(-5e7), room=GB)
    assert shrinking is not None and shrinking.seconds_to_full is None and shrinking.rate < 0


def _device(index: int, used: int, total: int = 80 * GB, **extra: object) -> DeviceSnapshot:
    return DeviceSnapshot(
        index=index,
        uuid=f"GPU-{index}",
        memory_total=total,
        memory_used=used,
        memory_free=total - used,
        **extra,  # type: ignore[arg-type]
    )


def _cluster(*devices: DeviceSnapshot, time: float = 1000.0) -> ClusterSnapshot:
    return ClusterSnapshot.of_node(NodeSnapshot(time=time, hostname="n", devices=devices))


def test_nearest_to_oom_is_the_fewest_bytes_free_and_skips_lost_gpus() -> None:
    snap = _cluster(
        _device(0, 70 * GB),
        _device(1, 30 * GB, total=40 * GB),  # 10 GB free, as GPU 0
        _device(2, 79 * GB, lost=True),
        _device(3, 75 * GB),
    )
    found = nearest_to_oom(snap)
    assert found is not None and found[1].index == 3
    view = OomView.of(snap, Trends(), "GB")
    assert view.text is not None and view.text.startswith("Nearest to OOM: GPU 3, 75.0/80.0 GB")
    assert "too few samples" in view.text


def test_the_oom_line_projects_from_the_trends() -> None:
    trends = Trends()
    for t in range(11):
        trends.record(_cluster(_device(0, 60 * GB + 120_000_000 * t), time=1000.0 + t))
    view = OomView.of(_cluster(_device(0, 61_200_000_000), time=1010.0), trends, "GB")
    assert view.text is not None
    # 18.8 GB free at 120 MB/s: 157 s
    assert "used grows 120 MB/s (last 10 s): full in ~3 min" in view.text and view.warn


def test_trends_keep_a_bounded_window_per_gpu() -> None:
    trends = Trends(budget=200)
    for t in range(300):
        trends.record(_cluster(_device(0, GB), _device(1, GB), time=float(t)))
    key = next(iter(_cluster(_device(0, GB)).rows()))[0]
    assert len(trends.samples(key)) == 100  # 200 samples shared by 2 GPUs
    assert [s.time for s in trends.samples(key, since=295.0)] == [295.0, 296.0, 297.0, 298.0,
                                                                  299.0]  # fmt: skip


def test_a_graph_has_a_y_axis_an_x_axis_and_a_column_per_slice() -> None:
    points = [(float(t), float(t)) for t in range(61)]
    rows = graph(points, 0.0, 60.0, width=38, height=4, top=60.0, label=lambda v: f"{v:.0f}")
    assert rows[0].startswith("    60 │") and rows[3].startswith("     0 │")
    assert rows[4] == " " * 7 + "└" + "─" * 30
    assert rows[5].lstrip().startswith("-60 s") and rows[5].endswith("now")
    assert "-30 s" in rows[5]
    assert rows[0][-1] == "█" and rows[3][8] in "▁▂▃▄▅▆▇█"  # the last slice is the highest
    gap = graph([(0.0, 1.0), (60.0, 1.0)], 0.0, 60.0, 38, 2, 1.0, str)
    assert gap[1][9:-1].strip() == ""  # no samples between: blank, not interpolated


def test_readings_are_na_when_the_gpu_does_not_give_them() -> None:
    full = _device(0, GB, utilization_gpu=93, utilization_memory=38, temperature_c=67,
                   power_mw=412_345, power_limit_mw=700_000, clock_sm_mhz=1980,
                   clock_memory_mhz=2619)  # fmt: skip
    assert readings_text(full) == "util 93% 67°C 412/700 W"
    bare = _device(0, GB)
    assert readings_text(bare) == ""
    line = readings_line(bare, "GB")
    assert "util n/a" in line and "n/a°C" not in line and "power n/a of n/a" in line
    assert "SM n/a" in line and "memory clock n/a" in line
    assert "SM 1980 MHz" in readings_line(full, "GB") and "67°C" in readings_line(full, "GB")


def test_one_formatter_writes_the_sensor_readings_for_every_view() -> None:
    """memtui/telemetry/readings.py: the dashboard's rows and detail and `watch`'s table
    write a GPU's temperature and power the same way (NVML's milliwatts as whole watts)."""
    from memtui.commands.watch import _sensors
    from memtui.telemetry.readings import power, temperature, watts

    full = _device(0, GB, temperature_c=67, power_mw=412_345, power_limit_mw=700_000)
    no_limit = _device(0, GB, power_mw=99_600)
    bare = _device(0, GB)
    assert (temperature(full), power(full), watts(700_000)) == ("67°C", "412/700 W", "700 W")
    assert power(no_limit) == "100 W" and temperature(no_limit) is None
    assert power(bare) is None and temperature(bare) is None
    assert _sensors(full) == ("67°C", "412/700 W") and _sensors(bare) == ("n/a", "n/a")
    assert readings_text(full) == "67°C 412/700 W" and readings_text(no_limit) == "100 W"
    assert "67°C" in readings_line(full, "GB") and "power 412 W of 700 W" in readings_line(
        full, "GB"
    )


def test_the_alert_log_keeps_near_capacity_after_usage_drops() -> None:
    tracker = AlertTracker(clock=lambda: 0.0)
    budget = None  # no job's budget: the card is the limit
    tracker.update(_cluster(_device(0, 40 * GB), time=1000.0), budget, "GB")
    tracker.update(_cluster(_device(0, 77 * GB), time=1001.0), budget, "GB")
    tracker.update(_cluster(_device(0, 40 * GB), time=1002.0), budget, "GB")
    tracker.update(_cluster(_device(0, 78 * GB), time=1003.0), budget, "GB")  # quiet: no toast
    log = list(tracker.log)
    assert [(e.time, e.status) for e in log] == [
        (1001.0, RowStatus.NEAR_CAPACITY),
        (1002.0, RowStatus.UNBUDGETED),
        (1003.0, RowStatus.NEAR_CAPACITY),
    ]
    assert log[0].message.startswith("NEAR CAPACITY: 77.0 GB used") and log[0].gpu == "0"
    assert "again (was NEAR CAPACITY)" in log[1].message


def _view() -> ProcessView:
    def proc(pid: int, used: int, user: str, command: str) -> ProcessSnapshot:
        return ProcessSnapshot(pid=pid, used_bytes=used, name="python", user=user,
                               command=command)  # fmt: skip

    return ProcessView.of(
        _cluster(
            _device(0, 50 * GB, processes=(proc(300, 30 * GB, "bob", "python a.py"),
                                           proc(100, 20 * GB, "alice", "python -m b"))),
            _device(1, 10 * GB, processes=(proc(200, 10 * GB, "carol", "torchrun c.py"),)),
        ),
        "GB",
    )  # fmt: skip


def test_processes_sort_by_each_column_and_reverse() -> None:
    rows, _ = process_rows(_view())
    pids = {c: [r.pid for r in arranged(rows, c, False, "")] for c in SortColumn}
    assert pids[SortColumn.GPU] == [300, 100, 200]
    assert pids[SortColumn.PID] == [100, 200, 300]
    assert pids[SortColumn.USER] == [100, 300, 200]
    assert pids[SortColumn.MEMORY] == [300, 100, 200]
    assert pids[SortColumn.COMMAND] == [300, 100, 200]  # a.py, b, c.py
    assert [r.pid for r in arranged(rows, SortColumn.MEMORY, True, "")] == [200, 100, 300]
    assert [r.cells[4] for r in rows] == ["a.py", "b", "c.py"]


def test_processes_filter_on_any_column_ignoring_case() -> None:
    rows, _ = process_rows(_view())
    assert [r.pid for r in arranged(rows, SortColumn.GPU, False, "ALICE")] == [100]
    assert [r.pid for r in arranged(rows, SortColumn.GPU, False, "c.py")] == [200]
    assert [r.pid for r in arranged(rows, SortColumn.GPU, False, "nothing")] == []
