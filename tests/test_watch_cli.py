"""`memtui watch` as a user runs it: a subprocess, pynvml loading the fake library through
LD_LIBRARY_PATH (set before the process starts, as docs/architecture.md, "Testing without a GPU"
says)."""

from __future__ import annotations

import ctypes.util
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from cli_helpers import ROOT, watch
from fake_nvml.harness import FakeNvml, GiB, MiB, gpu, mig_instance, node


def test_once_prints_gpus_and_processes_in_explicit_units(fake_nvml: FakeNvml) -> None:
    scenario = node(2, 1, used=30 * GiB)
    scenario["gpus"][1]["procs"] = [(os.getpid(), 29 * GiB), (10_000_001, None)]
    fake_nvml.write(scenario)
    out = watch("--once", "--unit", "gib", env=fake_nvml.env())
    assert out.returncode == 0, out.stderr
    text = out.stdout
    assert "NVIDIA H100 80GB HBM3" in text and "driver 550.54.15" in text and "CUDA 12.4" in text
    assert "30.0 GiB" in text and "79.6 GiB" in text and "512 MiB" in text
    assert str(os.getpid()) in text and "29.0 GiB" in text, text
    assert "10000001" in text and "n/a" in text  # process memory unavailable
    assert "another PID namespace" in text  # GPU 0's processes are all invisible


def test_once_prints_temperature_and_power_or_na(fake_nvml: FakeNvml) -> None:
    # GPU 0 reads its sensors; GPU 1 answers NOT_SUPPORTED to each (the fake's default)
    fake_nvml.write({"gpus": [gpu(0, used=20 * GiB, util=(93, 38), temp=67, power=412_000,
                                  power_limit=700_000, clocks=(1980, 2619)),
                              gpu(1, used=10 * GiB)]})  # fmt: skip
    out = watch("--once", env=fake_nvml.env())
    assert out.returncode == 0, out.stderr
    header, first, second = out.stdout.splitlines()[1:4]
    assert "Temp" in header and "Power" in header
    assert "67°C" in first and "412/700 W" in first and "93%" in first
    assert second.split().count("n/a") >= 2, second


def test_json_is_the_snapshot_in_bytes(fake_nvml: FakeNvml) -> None:
    fake_nvml.write(node(3, 2, used=12 * GiB))
    out = watch("--once", "--json", env=fake_nvml.env())
    assert out.returncode == 0, out.stderr
    data = json.loads(out.stdout)
    assert data["state"] == "ok" and data["driver_version"] == "550.54.15"
    assert [d["memory_used"] for d in data["devices"]] == [12 * GiB] * 3
    assert [len(d["processes"]) for d in data["devices"]] == [2, 2, 2]


@pytest.mark.skipif(
    ctypes.util.find_library("nvidia-ml") is not None, reason="a real NVML is installed here"
)
def test_library_missing_exits_0_with_one_line(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("FAKE_NVML")}
    env["LD_LIBRARY_PATH"] = str(tmp_path)  # an empty directory: no libnvidia-ml.so.1
    out = watch("--once", env=env)
    assert out.returncode == 0
    lines = out.stdout.strip().splitlines()
    assert len(lines) == 1
    assert "NVML not found" in lines[0] and "install the NVIDIA driver" in lines[0]
    js = watch("--once", "--json", env=env)
    assert js.returncode == 0 and json.loads(js.stdout)["state"] == "no_library"


@pytest.mark.parametrize(
    ("code", "line"),
    [
        (9, "NVIDIA driver not loaded: load it"),
        (18, "driver and library versions differ (NVML/kernel module mismatch): reboot"),
        (4, "no permission to use NVML"),
    ],
)
def test_source_failures_exit_1_with_reason_and_remedy(
    fake_nvml: FakeNvml, code: int, line: str
) -> None:
    fake_nvml.write({**node(2), "errors": {"nvmlInitWithFlags": code}})
    out = watch("--once", env=fake_nvml.env())
    assert out.returncode == 1
    assert line in out.stderr and len(out.stderr.strip().splitlines()) == 1
    assert out.stdout == ""


def test_lost_gpu_shows_lost_while_others_show_memory(fake_nvml: FakeNvml) -> None:
    fake_nvml.write({**node(4, 1), "errors": {"nvmlDeviceGetMemoryInfo_v2@2": 15}})
    out = watch("--once", "--unit", "gib", env=fake_nvml.env())
    assert out.returncode == 0
    gpu_table = out.stdout.split("\n\n")[0]  # the process table follows a blank line
    rows = {line.split()[0]: line for line in gpu_table.splitlines() if line[:1].isdigit()}
    assert sorted(rows) == ["0", "1", "2", "3"]
    assert "LOST" in rows["2"] and "20.0 GiB" in rows["1"] and "20.0 GiB" in rows["3"]
    assert "GPU 2: GPU is lost" in out.stdout


def test_unified_memory_is_labelled_host_memory(fake_nvml: FakeNvml) -> None:
    fake_nvml.write(
        {
            "gpus": [gpu(0, name="NVIDIA GB10")],
            "errors": {"nvmlDeviceGetMemoryInfo_v2": 3, "nvmlDeviceGetMemoryInfo": 3},
        }
    )
    out = watch("--once", env=fake_nvml.env())
    assert out.returncode == 0, out.stderr
    assert "NVIDIA GB10 (host memory)" in out.stdout
    assert "unified memory, figures are the host's RAM" in out.stdout


def test_mig_rows_and_processes(fake_nvml: FakeNvml) -> None:
    fake_nvml.write(
        {
            "gpus": [
                gpu(
                    0,
                    name="NVIDIA A100-SXM4-80GB",
                    mig=[mig_instance(1, used=9 * GiB, procs=[(os.getpid(), 8 * GiB)])],
                )
            ]
        }
    )
    out = watch("--once", "--unit", "gib", env=fake_nvml.env())
    assert out.returncode == 0, out.stderr
    assert "[MIG on]" in out.stdout
    proc_rows = [line for line in out.stdout.splitlines() if str(os.getpid()) in line]
    assert proc_rows and proc_rows[0].split()[0] == "0:0" and "8.0 GiB" in proc_rows[0]


def test_only_by_uuid_and_no_match(fake_nvml: FakeNvml) -> None:
    scenario = node(4)
    fake_nvml.write(scenario)
    uuid = scenario["gpus"][2]["uuid"]
    out = watch("--once", "--json", "--only", uuid, env=fake_nvml.env())
    assert out.returncode == 0, out.stderr
    assert [d["index"] for d in json.loads(out.stdout)["devices"]] == [2]
    miss = watch("--once", "--only", "9", env=fake_nvml.env())
    assert miss.returncode == 2 and "no GPU matches --only 9" in miss.stderr


def test_record_then_replay(fake_nvml: FakeNvml, tmp_path: Path) -> None:
    trace = tmp_path / "run.jsonl"
    fake_nvml.write(node(2, used=10 * GiB))
    out = watch(
        "--count", "2", "--interval", "0.05", "--json", "--record", str(trace), env=fake_nvml.env()
    )
    assert out.returncode == 0, out.stderr
    recorded = [json.loads(line) for line in trace.read_text().splitlines()]
    assert len(recorded) == 2 and len(out.stdout.strip().splitlines()) == 2
    replay = watch("--replay", str(trace), "--speed", "0", "--json")
    assert replay.returncode == 0, replay.stderr
    played = [json.loads(line) for line in replay.stdout.strip().splitlines()]
    assert [p["time"] for p in played[:2]] == [r["time"] for r in recorded]
    assert played[0]["source"] == "replay:run.jsonl" and played[-1]["state"] == "ended"
    assert played[0]["devices"][0]["memory_used"] == 10 * GiB


def test_demo_once(tmp_path: Path) -> None:
    out = watch(
        "--demo",
        "--once",
        "--json",
        "--demo-gpus",
        "4",
        "--demo-total-bytes",
        str(48 * GiB),
        "--demo-budget-bytes",
        str(40 * GiB),
    )
    assert out.returncode == 0, out.stderr
    data = json.loads(out.stdout)
    assert data["source"] == "demo" and len(data["devices"]) == 4
    assert all(d["memory_total"] == 48 * GiB for d in data["devices"])
    bad = watch("--demo", "--once", "--demo-total-bytes", str(100 * MiB))
    assert bad.returncode == 2 and "too small" in bad.stderr


def test_watch_module_import_is_light() -> None:
    code = (
        "import sys, memtui.commands.watch\n"
        "print([m for m in ('pynvml', 'psutil', 'rich', 'textual', 'memtui.telemetry')"
        " if m in sys.modules])\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, check=True
    )
    assert out.stdout.strip() == "[]"


def test_hung_poll_and_hung_shutdown_do_not_hang_exit(fake_nvml: FakeNvml) -> None:
    """A poll stuck in NVML is abandoned, and nvmlShutdown (which would hang too) is skipped."""
    fake_nvml.write({**node(1), "hang": ["nvmlDeviceGetUtilizationRates", "nvmlShutdown"]})
    started = time.monotonic()
    out = watch("--once", "--timeout", "1", env=fake_nvml.env(), timeout=30)
    assert time.monotonic() - started < 30
    assert out.returncode == 1, out.stderr
    assert "NVML is not answering" in out.stderr
    assert "Traceback" not in out.stderr
    assert fake_nvml.calls()["nvmlShutdown"] == 0  # never entered while the poll was stuck


@pytest.mark.parametrize(
    ("content", "flags"),
    [
        (b"\x7fELF\x02\x01\x01\x00\xff\xfe\x80\x81\n\x00\xc3", ("--once",)),
        (b"", ("--once",)),
        (b'{"unrelated": true}\n', ("--speed", "0")),  # no --once: must still stop
    ],
)
def test_replay_of_binary_empty_or_unrelated_file_is_one_line_exit_1(
    tmp_path: Path, content: bytes, flags: tuple[str, ...]
) -> None:
    trace = tmp_path / "not-a-trace.bin"
    trace.write_bytes(content)
    out = watch("--replay", str(trace), *flags, timeout=30)
    assert out.returncode == 1, out.stderr
    assert "Traceback" not in out.stderr
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1 and "holds no memtui snapshots" in lines[0], out.stderr
    assert out.stdout == ""


def test_only_ambiguous_prefix_is_a_usage_error_and_mig_uuid_selects(fake_nvml: FakeNvml) -> None:
    fake_nvml.write(
        {
            "gpus": [
                gpu(0, mig=[mig_instance(1, uuid="MIG-aaaa"), mig_instance(2, uuid="MIG-bbbb")]),
                gpu(1),
            ]
        }
    )
    out = watch("--once", "--only", "GPU-", env=fake_nvml.env())
    assert out.returncode == 2 and "--only GPU- is ambiguous" in out.stderr, out.stderr
    mig = watch("--once", "--json", "--only", "MIG-bbbb", env=fake_nvml.env())
    assert mig.returncode == 0, mig.stderr
    assert [d["uuid"] for d in json.loads(mig.stdout)["devices"]] == ["MIG-bbbb"]


def test_mig_discovery_error_on_one_gpu_leaves_the_others(fake_nvml: FakeNvml) -> None:
    fake_nvml.write(
        {
            "gpus": [gpu(0, mig=[mig_instance(1)]), gpu(1, used=20 * GiB)],
            "errors": {"nvmlDeviceGetMaxMigDeviceCount@0": 999},
        }
    )
    out = watch("--once", "--unit", "gib", env=fake_nvml.env())
    assert out.returncode == 0, out.stderr
    assert "GPU 0: MIG devices could not be listed" in out.stdout
    rows = [line for line in out.stdout.splitlines() if line.startswith("1 ")]
    assert rows and "20.0 GiB" in rows[0] and "LOST" not in out.stdout


def test_record_into_a_missing_directory_is_one_line_exit_2(
    fake_nvml: FakeNvml, tmp_path: Path
) -> None:
    fake_nvml.write(node(1))
    out = watch("--once", "--record", str(tmp_path / "no" / "dir" / "x.jsonl"), env=fake_nvml.env())
    assert out.returncode == 2, out.stderr
    assert "Traceback" not in out.stderr
    assert out.stderr.strip().count("\n") == 0 and "--record" in out.stderr
    assert "No such file or directory" in out.stderr


@pytest.mark.skipif(not Path("/dev/full").exists(), reason="needs /dev/full")
def _small_files() -> None:  # a write past 64 KiB fails (EFBIG; Python ignores SIGXFSZ)
    import resource

    resource.setrlimit(resource.RLIMIT_FSIZE, (64 * 1024, 64 * 1024))


def test_record_write_error_says_so_once_and_stops(tmp_path: Path) -> None:
    """The disk refusing a write while watching (here the file-size limit: a full disk
    answers the same way with ENOSPC): one line, exit 1, no traceback."""
    trace = tmp_path / "run.jsonl"
    out = subprocess.run(
        [sys.executable, "-m", "memtui", "watch", "--demo", "--count", "200", "--interval",
         "0.01", "--json", "--record", str(trace)],
        capture_output=True, text=True, cwd=ROOT, timeout=120, preexec_fn=_small_files,
        env={**os.environ, "PYTHONPATH": str(ROOT), "PYTHONDONTWRITEBYTECODE": "1"},
    )  # fmt: skip
    assert out.returncode == 1, out.stderr
    assert "Traceback" not in out.stderr
    errors = out.stderr.strip().splitlines()
    assert len(errors) == 1 and "File too large" in errors[0], out.stderr
    assert "stopped" in errors[0]
    # recorded before shown: the snapshots shown are the whole lines on disk (the failed
    # write may have left part of a line)
    assert 0 < len(out.stdout.splitlines()) == trace.read_bytes().count(b"\n")


def test_record_onto_a_device_is_refused() -> None:
    """/dev/full as --record: not a regular file, left as it is (one line, exit 2)."""
    out = watch("--demo", "--count", "1", "--json", "--record", "/dev/full")
    assert out.returncode == 2, out.stderr
    errors = out.stderr.strip().splitlines()
    assert len(errors) == 1 and "not a regular file" in errors[0], out.stderr
    assert out.stdout == ""


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (("--replay", "x.jsonl", "--speed", "-3"), "--speed"),
        (("--demo", "--count", "0"), "--count"),
        (("--demo", "--demo-card", "NVIDIA Quux 9000"), "--demo-total-bytes"),
    ],
)
def test_bad_flag_values_are_usage_errors(flags: tuple[str, ...], message: str) -> None:
    out = watch(*flags)
    assert out.returncode == 2 and message in out.stderr, out.stderr
    assert "Traceback" not in out.stderr


def test_node_without_gpus_says_so(fake_nvml: FakeNvml) -> None:
    fake_nvml.write({"gpus": []})
    out = watch("--once", env=fake_nvml.env())
    assert out.returncode == 0, out.stderr
    assert "no GPUs found" in out.stdout


@pytest.mark.parametrize(
    ("card", "total"),
    [
        ("NVIDIA A100-SXM4-40GB", 40960 * MiB),
        ("NVIDIA H100 80GB HBM3", 81559 * MiB),
        ("NVIDIA GeForce RTX 4090", 24564 * MiB),
    ],
)
def test_demo_card_sets_the_memory_of_that_card(card: str, total: int) -> None:
    out = watch("--demo", "--once", "--json", "--demo-gpus", "2", "--demo-card", card)
    assert out.returncode == 0, out.stderr
    data = json.loads(out.stdout)
    assert {d["memory_total"] for d in data["devices"]} == {total}
    assert {d["name"] for d in data["devices"]} == {card}


def test_once_timeout_does_not_promise_a_retry(fake_nvml: FakeNvml) -> None:
    fake_nvml.write({**node(1), "hang": ["nvmlInitWithFlags"]})
    out = watch("--once", "--timeout", "0.5", env=fake_nvml.env(), timeout=60)
    assert out.returncode == 1
    assert "NVML is not answering" in out.stderr and "retrying" not in out.stderr
    js = watch("--once", "--json", "--timeout", "0.5", env=fake_nvml.env(), timeout=60)
    assert json.loads(js.stdout)["hostname"]  # a failed snapshot still says which node


def test_sigkill_while_recording_loses_at_most_the_poll_in_flight(
    fake_nvml: FakeNvml, tmp_path: Path
) -> None:
    """The durability promise, for real: kill -9 a recording watch, replay what it left."""
    from memtui.telemetry import ReplaySource, SourceState
    from memtui.telemetry.recorder import parse_line

    trace = tmp_path / "run.jsonl"
    fake_nvml.write(node(2, 1, used=10 * GiB))
    env = fake_nvml.env()
    env["PYTHONPATH"] = str(ROOT) + os.pathsep + env.get("PYTHONPATH", "")
    want = 5
    proc = subprocess.Popen(
        [sys.executable, "-m", "memtui", "watch", "--json", "--interval", "0.02",
         "--record", str(trace)],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        env=env,
        cwd=ROOT,
    )  # fmt: skip
    try:
        assert proc.stdout is not None
        shown = [proc.stdout.readline() for _ in range(want)]  # polls the user has seen
        assert all(shown), "watch stopped early"
        proc.send_signal(signal.SIGKILL)  # mid-run: no finally, no atexit, no flush
        proc.wait(30)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == -signal.SIGKILL
    data = trace.read_bytes()
    complete = data.split(b"\n")[:-1]  # whatever follows the last newline was in flight
    assert len(complete) >= want
    snapshots = [parse_line(line) for line in complete]
    assert all(s is not None and s.devices[0].memory_used == 10 * GiB for s in snapshots)
    replay = ReplaySource(trace, speed=None)
    played = [replay.poll() for _ in complete]
    assert [s.time for s in played] == [s.time for s in snapshots if s is not None]
    assert replay.poll().state is SourceState.ENDED
    replay.close()
