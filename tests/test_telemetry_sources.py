"""Replay, recorder, synthetic source, the timeout guard, `--only`, and the layer boundary."""

from __future__ import annotations

import ast
import json
import subprocess
import sys
from pathlib import Path

import pytest

from memtui.telemetry import (
    BoundedSource,
    DeviceSnapshot,
    NodeSnapshot,
    ProcessSnapshot,
    Recorder,
    ReplaySource,
    SourceState,
    SyntheticSource,
    TelemetrySource,
    parse_only,
    read_trace,
    select_devices,
)
from memtui.telemetry.nvml import NVML_INFO

GiB = 1024**3
ROOT = Path(__file__).resolve().parents[1]


class Clock:
    """A clock the test moves by hand."""

    def __init__(self, now: float = 1_000_000.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


def _snap(t: float, used: int) -> NodeSnapshot:
    devices = (DeviceSnapshot(index=0, uuid="GPU-a", memory_total=80 * GiB, memory_used=used),)
    return NodeSnapshot(time=t, devices=devices)


def test_sources_implement_the_protocol(tmp_path: Path) -> None:
    trace = tmp_path / "t.jsonl"
    trace.touch()
    for src in (SyntheticSource(1), ReplaySource(trace)):
        assert isinstance(src, TelemetrySource)


def test_recorder_appends_flushed_lines_and_replay_steps_through_them(tmp_path: Path) -> None:
    trace = tmp_path / "run.jsonl"
    with Recorder(trace) as rec:
        rec.write(_snap(100.0, 1 * GiB))
        # flushed at once: readable before close (what survives a SIGKILL)
        assert len(trace.read_text().splitlines()) == 1
        rec.write(_snap(101.0, 2 * GiB))
    with Recorder(trace) as rec:  # reopening appends, never truncates
        rec.write(_snap(102.0, 3 * GiB))
    with trace.open("a") as f:
        f.write('{"time": 103.0, "devices": [{"ind')  # a poll cut short by SIGKILL
    assert [s.devices[0].memory_used for s in read_trace(trace)] == [GiB, 2 * GiB, 3 * GiB]
    replay = ReplaySource(trace, speed=None)
    used = [replay.poll().devices[0].memory_used for _ in range(3)]
    assert used == [GiB, 2 * GiB, 3 * GiB]
    end = replay.poll()
    assert end.state is SourceState.ENDED and end.devices[0].memory_used == 3 * GiB
    assert end.source == "replay:run.jsonl" and replay.ended
    replay.close()


def test_replay_keeps_recorded_time_and_follows_speed(tmp_path: Path) -> None:
    trace = tmp_path / "run.jsonl"
    with Recorder(trace) as rec:
        for i in range(10):
            rec.write(_snap(500.0 + i, i * GiB))
    clock = Clock(0.0)
    replay = ReplaySource(trace, speed=4.0, clock=clock)
    assert replay.poll().time == 500.0
    clock.now = 0.5  # 2 s of recording at 4x
    assert replay.poll().time == 502.0
    clock.now = 1.0
    snap = replay.poll()
    assert snap.time == 504.0 and snap.devices[0].memory_used == 4 * GiB
    clock.now = 100.0
    assert replay.poll().state is SourceState.ENDED


def test_replay_loops_and_reports_missing_file(tmp_path: Path) -> None:
    trace = tmp_path / "run.jsonl"
    with Recorder(trace) as rec:
        rec.write(_snap(1.0, GiB))
        rec.write(_snap(2.0, 2 * GiB))
    looping = ReplaySource(trace, speed=None, loop=True)
    assert [looping.poll().time for _ in range(5)] == [1.0, 2.0, 1.0, 2.0, 1.0]
    missing = ReplaySource(tmp_path / "nope.jsonl").poll()
    assert missing.state is SourceState.ERROR and "cannot read trace" in (missing.reason or "")


def test_synthetic_is_deterministic_for_a_seed_and_clock() -> None:
    clock = Clock(0.0)
    a = SyntheticSource(4, seed=7, clock=clock, start=0.0)
    b = SyntheticSource(4, seed=7, clock=clock, start=0.0)
    for t in (0.0, 12.5, 45.0, 300.0):
        clock.now = t
        assert a.poll() == b.poll()
    clock.now = 45.0
    assert SyntheticSource(4, seed=8, clock=clock, start=0.0).poll() != a.poll()


def test_synthetic_ramps_to_budget_with_one_excursion_and_a_second_process() -> None:
    total, budget = 80 * GiB, 60 * GiB
    clock = Clock(0.0)
    src = SyntheticSource(
        4, total_bytes=total, budget_bytes=budget, seed=1, clock=clock, start=0.0, ramp_s=60.0
    )
    over: list[tuple[int, int]] = []
    for t in range(0, 400):
        clock.now = float(t)
        snap = src.poll()
        for d in snap.devices:
            assert d.memory_total == total
            assert d.memory_used is not None and d.memory_free is not None
            assert d.memory_used + d.memory_free + (d.memory_reserved or 0) == total
            if d.memory_used > budget:
                over.append((t, d.index))
    # exactly one excursion: contiguous seconds, one GPU (seed 1 -> GPU 1)
    assert over and {gpu for _, gpu in over} == {1}
    seconds = [t for t, _ in over]
    assert seconds == list(range(seconds[0], seconds[0] + len(seconds)))
    clock.now = 0.0
    start = src.poll().devices[1].memory_used or 0
    clock.now = 200.0
    settled = src.poll()
    assert start < 1 * GiB < 0.9 * budget < (settled.devices[1].memory_used or 0) <= budget
    gpu0 = settled.devices[0].processes or ()
    assert len(gpu0) == 2 and all(p.used_bytes for p in gpu0)
    assert "train.py" in (gpu0[0].command or "") and gpu0[1].command != gpu0[0].command


def test_synthetic_rejects_impossible_sizes() -> None:
    with pytest.raises(ValueError, match="budget_bytes"):
        SyntheticSource(2, total_bytes=80 * GiB, budget_bytes=90 * GiB)


def test_only_selection_on_snapshots() -> None:
    assert parse_only("0, 2,GPU-ab") == ("0", "2", "GPU-ab")
    assert parse_only(None) == ()
    snap = SyntheticSource(4, clock=Clock(0.0), start=0.0).poll()
    uuid = snap.devices[3].uuid or ""
    chosen = select_devices(snap, ("1", uuid[:14].lower()))
    assert [d.index for d in chosen.devices] == [1, 3]
    none = select_devices(snap, ("9",))
    assert none.state is SourceState.ERROR and "GPUs here: 0, 1, 2, 3" in (none.reason or "")


class _Broken:
    name = "broken"
    info = NVML_INFO

    def poll(self) -> NodeSnapshot:
        raise ZeroDivisionError("a bug, not an NVML problem")

    def close(self) -> None:
        pass


def test_bounded_source_does_not_hide_bugs() -> None:
    with pytest.raises(ZeroDivisionError):
        BoundedSource(_Broken(), timeout_s=5).poll()


def test_snapshots_are_frozen_and_round_trip_as_json() -> None:
    snap = SyntheticSource(2, clock=Clock(10.0), start=0.0).poll()
    with pytest.raises(ValueError):
        snap.devices[0].memory_used = 1  # type: ignore[misc]
    again = NodeSnapshot.model_validate_json(snap.model_dump_json())
    assert again == snap
    assert json.loads(snap.model_dump_json())["devices"][0]["memory_total"] == 81559 * 1024**2


def test_telemetry_imports_no_ui_no_estimator_and_loads_pynvml_lazily() -> None:
    code = (
        "import sys, memtui.telemetry\n"
        "bad = [m for m in ('textual', 'rich', 'memtui.estimator', 'pynvml') if m in sys.modules]\n"
        "print(bad)\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=ROOT
    )
    assert out.stdout.strip() == "[]"


def _imports(text: str, package: str) -> set[str]:
    """Every module a file's source imports, by AST, anywhere in it (so `from memtui import
    estimator` counts as memtui.estimator, and `from .. import ui` in memtui.telemetry as
    memtui.ui)."""
    names: set[str] = set()
    for node in ast.walk(ast.parse(text)):
        if isinstance(node, ast.Import):
            names.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = package.split(".")
                parts = parts[: len(parts) - node.level + 1]
                base = ".".join([*parts, base] if base else parts)
            names.add(base)
            names.update(f"{base}.{a.name}" for a in node.names)
    return names


def _hits(names: set[str], forbidden: tuple[str, ...]) -> set[str]:
    return {n for n in names for f in forbidden if n == f or n.startswith(f + ".")}


def test_layer_boundaries_by_ast() -> None:
    """telemetry imports neither UI (textual, rich, memtui.ui) nor the estimator, and pynvml
    only in telemetry/nvml.py; nothing outside telemetry imports pynvml."""
    offenders: dict[str, set[str]] = {}
    for path in (ROOT / "memtui").rglob("*.py"):
        rel = path.relative_to(ROOT).as_posix()
        package = ".".join(path.relative_to(ROOT).with_suffix("").parts[:-1])
        names = _imports(path.read_text(), package)
        if rel.startswith("memtui/telemetry/"):
            forbidden: tuple[str, ...] = ("textual", "rich", "memtui.estimator", "memtui.ui")
            if rel != "memtui/telemetry/nvml.py":
                forbidden += ("pynvml",)
        else:
            forbidden = ("pynvml",)
        if bad := _hits(names, forbidden):
            offenders[rel] = bad
    assert offenders == {}


def test_layer_check_sees_through_import_spellings() -> None:
    """The AST walk catches spellings a substring check misses."""
    text = (
        "from memtui import estimator\nfrom .. import ui\nimport rich.console as c\n"
        "def f():\n    import textual.app\n"
    )
    names = _imports(text, "memtui.telemetry")
    assert _hits(names, ("textual", "rich", "memtui.estimator", "memtui.ui")) == {
        "memtui.estimator",
        "memtui.ui",
        "rich.console",
        "textual.app",
    }


def _snap_with_command(t: float, command: str) -> NodeSnapshot:
    proc = ProcessSnapshot(pid=7, used_bytes=GiB, name="python", command=command)
    devices = (DeviceSnapshot(index=0, uuid="GPU-a", memory_used=GiB, processes=(proc,)),)
    return NodeSnapshot(time=t, devices=devices)


def test_trace_cut_inside_a_multibyte_character_is_read_up_to_the_cut(tmp_path: Path) -> None:
    """SIGKILL mid-write of a non-ASCII command line leaves half a UTF-8 character."""
    trace = tmp_path / "run.jsonl"
    command = "python train.py --name=模型-ü"
    with Recorder(trace) as rec:
        rec.write(_snap_with_command(1.0, command))
        rec.write(_snap_with_command(2.0, command))
    whole = (_snap_with_command(3.0, command).model_dump_json() + "\n").encode()
    cut = whole.index("模".encode()) + 1  # inside the 3-byte character
    with trace.open("ab") as f:
        f.write(whole[:cut])
    assert [s.time for s in read_trace(trace)] == [1.0, 2.0]
    replay = ReplaySource(trace, speed=None)
    first = replay.poll()
    assert (first.devices[0].processes or ())[0].command == command
    assert replay.poll().time == 2.0
    assert replay.poll().state is SourceState.ENDED
    replay.close()


def test_a_bad_line_in_the_middle_is_skipped(tmp_path: Path) -> None:
    trace = tmp_path / "run.jsonl"
    with Recorder(trace) as rec:
        rec.write(_snap(1.0, GiB))
    with trace.open("ab") as f:
        f.write(b"\xff\xfe\x00garbage\x80\n")
    with Recorder(trace) as rec:
        rec.write(_snap(2.0, GiB))
    assert [s.time for s in read_trace(trace)] == [1.0, 2.0]


@pytest.mark.parametrize(
    "content", [b"", b"\x7fELF\x02\x01\x01\x00\xff\xfe\x80\x81\n\x00\x00", b'{"a": 1}\nhello\n']
)
def test_empty_binary_or_unrelated_trace_is_an_error(tmp_path: Path, content: bytes) -> None:
    trace = tmp_path / "x.jsonl"
    trace.write_bytes(content)
    snap = ReplaySource(trace, speed=None).poll()
    assert snap.state is SourceState.ERROR
    assert "no memtui snapshots" in (snap.reason or "") and "\n" not in (snap.message or "")


def test_only_rejects_an_ambiguous_prefix_on_snapshots() -> None:
    snap = SyntheticSource(3, clock=Clock(0.0), start=0.0).poll()
    chosen = select_devices(snap, ("GPU-",))
    assert chosen.state is SourceState.ERROR and chosen.devices == ()
    assert "--only GPU- is ambiguous" in (chosen.reason or "")
    exact = snap.devices[1].uuid or ""
    assert [d.index for d in select_devices(snap, (exact,)).devices] == [1]
