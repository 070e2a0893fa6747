"""`memtui watch` and the dashboard's flags under hostile input (issue 13): every run ends,
with exit code 0, 1 or 2, and an error is exactly one line on stderr, never a traceback.

The dashboard's flags are checked before Textual starts, so a bad value ends the process
without a terminal; the values that pass are covered by the UI tests."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from fake_nvml.harness import FakeNvml, GiB, gpu
from test_watch_cli import ROOT, watch

#: (flags, what the one line must name): each a usage error, exit 2.
BAD_WATCH_FLAGS = [
    (("--demo", "--interval", "inf", "--count", "2"), "--interval"),
    (("--demo", "--interval", "nan", "--count", "2"), "--interval"),
    (("--demo", "--interval", "1e-9", "--count", "2"), "--interval"),
    (("--demo", "--interval", "1e300", "--count", "2"), "--interval"),
    (("--demo", "--timeout", "nan", "--once"), "--timeout"),
    (("--demo", "--timeout", "inf", "--once"), "--timeout"),
    (("--demo", "--timeout", "-1", "--once"), "--timeout"),
    (("--demo", "--demo-gpus", "100000", "--once"), "--demo"),
    (("--demo", "--demo-gpus", "0", "--once"), "--demo"),
    (("--demo", "--demo-total-bytes", "1", "--once"), "--demo"),
    (("--demo", "--demo-budget-bytes", "9" * 40, "--once"), "--demo"),
    (("--replay", "x.jsonl", "--speed", "nan"), "--speed"),
    (("--replay", "x.jsonl", "--speed", "inf"), "--speed"),
    (("--prometheus", "http://127.0.0.1:9", "--stale-after", "nan", "--once"), "--stale-after"),
]


def _one_error_line(out: subprocess.CompletedProcess[str]) -> str:
    assert "Traceback" not in out.stderr, out.stderr
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1, out.stderr
    return lines[0]


@pytest.mark.parametrize(
    ("flags", "names"), BAD_WATCH_FLAGS, ids=[" ".join(flags) for flags, _ in BAD_WATCH_FLAGS]
)
def test_bad_watch_flags_are_one_line_exit_2(flags: tuple[str, ...], names: str) -> None:
    out = watch(*flags, timeout=30)
    assert out.returncode == 2, (out.returncode, out.stdout[-500:], out.stderr)
    assert names in _one_error_line(out)


@pytest.mark.parametrize(
    "flags",
    [
        ("--demo", "--interval", "inf"),
        ("--demo", "--interval", "nan"),
        ("--demo", "--interval", "1e-9"),
        ("--demo", "--timeout", "nan"),
        ("--demo", "--timeout", "inf"),
    ],
    ids=lambda v: " ".join(v),
)
def test_bad_dashboard_flags_are_one_line_exit_2(flags: tuple[str, ...]) -> None:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    out = subprocess.run(
        [sys.executable, "-m", "memtui", *flags],
        capture_output=True,
        text=True,
        env=env,
        cwd=ROOT,
        timeout=30,
        stdin=subprocess.DEVNULL,
    )
    assert out.returncode == 2, (out.returncode, out.stderr)
    assert flags[1] in _one_error_line(out)


def _trace(tmp_path: Path, time_text: str) -> Path:
    line = {
        "format": 1,
        "hostname": "node7",
        "source": "nvml",
        "state": "ok",
        "devices": [{"index": 0, "uuid": "GPU-0", "memory_total": 80, "memory_used": 40}],
    }
    text = json.dumps(line)[:-1] + f', "time": {time_text}}}\n'
    path = tmp_path / "trace.jsonl"
    path.write_text(text)
    return path


@pytest.mark.parametrize("time_text", ["NaN", "Infinity", "-Infinity", "1e20", "-1e20"])
@pytest.mark.parametrize("json_out", [False, True], ids=["table", "json"])
def test_replay_of_a_trace_with_an_impossible_time(
    tmp_path: Path, time_text: str, json_out: bool
) -> None:
    """A time that is not a number is not a snapshot (the line is skipped: exit 1, one line);
    a finite time past what the clock can show still shows its GPUs (exit 0)."""
    trace = _trace(tmp_path, time_text)
    out = watch("--replay", str(trace), "--once", *(("--json",) if json_out else ()), timeout=30)
    assert "Traceback" not in out.stderr, out.stderr
    if "e20" in time_text:
        assert out.returncode == 0, out.stderr
        assert out.stderr == ""
        if json_out:
            assert json.loads(out.stdout)["time"] == float(time_text)
        else:
            assert "node7" in out.stdout and "GPU" in out.stdout
    else:
        assert out.returncode == 1
        assert "holds no memtui snapshots" in _one_error_line(out)
        if json_out:  # the document says so too, with a real time (not the line's null)
            document = json.loads(out.stdout)
            assert document["state"] == "error" and isinstance(document["time"], float)
        else:
            assert out.stdout == ""


def test_replay_goes_past_a_recorded_failure_and_does_not_prescribe_its_remedy(
    tmp_path: Path,
) -> None:
    """A trace records a driver that was not loaded for one poll on another machine: the
    replay shows it as recorded, without that machine's remedy, and plays on to the end."""
    device = {"index": 0, "uuid": "GPU-0", "memory_total": 80, "memory_used": 40}
    ok = {"format": 1, "hostname": "node7", "source": "nvml", "state": "ok", "devices": [device]}
    failed = {"format": 1, "hostname": "node7", "source": "nvml",
              "state": "driver_not_loaded", "reason": "NVIDIA driver not loaded",
              "remedy": "load it (`sudo modprobe nvidia`) and check `nvidia-smi`"}  # fmt: skip
    lines = [{**ok, "time": 1.0}, {**failed, "time": 2.0}, {**ok, "time": 3.0}]
    trace = tmp_path / "run.jsonl"
    trace.write_text("".join(json.dumps(line) + "\n" for line in lines))
    out = watch("--replay", str(trace), "--speed", "0", "--json", timeout=30)
    assert out.returncode == 0, out.stderr
    times = [json.loads(line)["time"] for line in out.stdout.splitlines()]
    assert times[:3] == [1.0, 2.0, 3.0], out.stdout  # then the end of the replay
    table = watch("--replay", str(trace), "--speed", "0", timeout=30)
    assert table.returncode == 0, table.stderr
    assert "recorded" in table.stdout and "NVIDIA driver not loaded" in table.stdout
    assert "modprobe" not in table.stdout + table.stderr


def test_watch_once_into_a_pipe_closed_early_exits_0(tmp_path: Path) -> None:
    """`memtui watch --once | head -2`: the reader leaves after two lines; memtui says
    nothing more and exits 0."""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    command = f"{sys.executable} -m memtui watch --demo --demo-gpus 64 --once | head -2"
    out = subprocess.run(
        ["bash", "-c", f"set -o pipefail; {command}"],
        capture_output=True,
        text=True,
        env=env,
        cwd=ROOT,
        timeout=60,
    )
    assert out.returncode == 0, out.stderr
    assert out.stderr == ""
    assert len(out.stdout.splitlines()) == 2


def test_only_matching_nothing_is_one_line_on_stderr() -> None:
    out = watch("--demo", "--once", "--only", "99", timeout=30)
    assert out.returncode == 2
    assert "no GPU matches --only 99" in _one_error_line(out)
    assert out.stdout == ""


def test_replay_that_cannot_be_read_is_one_line_on_stderr(tmp_path: Path) -> None:
    trace = tmp_path / "empty.jsonl"
    trace.write_text("")
    out = watch("--replay", str(trace), "--once", timeout=30)
    assert out.returncode == 1
    assert "holds no memtui snapshots" in _one_error_line(out)
    assert out.stdout == ""


def test_a_hostile_command_line_is_escaped_text_in_the_table(fake_nvml: FakeNvml) -> None:
    """Another user's process whose arguments hold a terminal title sequence and markup:
    `watch --once` shows them escaped and literal, and sends no control character."""
    argv = ["sh", "-c", "sleep 60; :", "\x1b]0;pwned\x07", "[bold]x"]
    victim = subprocess.Popen(argv)
    try:
        fake_nvml.write({"gpus": [gpu(0, used=10 * GiB, procs=[(victim.pid, 9 * GiB)])]})
        out = watch("--once", env=fake_nvml.env(), timeout=60)
    finally:
        victim.kill()
        victim.wait()
    assert out.returncode == 0, out.stderr
    assert "\x1b" not in out.stdout and "\x07" not in out.stdout
    assert "\\x1b]0;pwned\\x07 [bold]x" in out.stdout


def test_a_usage_error_escapes_what_the_user_passed(tmp_path: Path) -> None:
    """A path given on the command line (from a script, a file listing) is echoed in the
    error line escaped, never as a terminal sequence."""
    path = tmp_path / "no" / "\x1b]0;pwned\x07" / "t.jsonl"
    out = watch("--demo", "--once", "--record", str(path), timeout=30)
    assert out.returncode == 2
    line = _one_error_line(out)
    assert "\x1b" not in line and "\\x1b]0;pwned\\x07" in line
