"""The restricted reader: plain data in, every class refused, one line for any bad file."""

from __future__ import annotations

import json
import os
import pickle
import subprocess
import sys
from pathlib import Path

import pytest

from memtui.forensics import load, read_summary
from memtui.forensics.reader import SnapshotError


class _RunsCode:
    """Unpickling this would call os.system (the classic pickle exploit)."""

    def __init__(self, command: str) -> None:
        self.command = command

    def __reduce__(self) -> tuple[object, tuple[str]]:
        return (os.system, (self.command,))


def _memtui(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "memtui", *args], capture_output=True, text=True, timeout=120
    )


def test_a_pickle_naming_os_system_is_refused_and_nothing_runs(tmp_path: Path) -> None:
    witness = tmp_path / "ran"
    evil = tmp_path / "evil.pickle"
    evil.write_bytes(pickle.dumps({"segments": [], "x": _RunsCode(f"touch {witness}")}, protocol=4))
    assert b"system" in evil.read_bytes()  # the payload really names os.system
    with pytest.raises(SnapshotError) as err:
        load(evil)
    assert "refuses every class" in str(err.value)
    assert "system" in str(err.value)
    assert not witness.exists()
    # the installed command: one line, exit 2, and still nothing ran
    out = _memtui("snapshot", str(evil))
    assert out.returncode == 2
    assert len(out.stderr.strip().splitlines()) == 1, out.stderr
    assert "Traceback" not in out.stderr
    assert not witness.exists()


@pytest.mark.parametrize("protocol", [2, 3, 4, 5])
def test_every_class_lookup_is_refused_at_any_protocol(tmp_path: Path, protocol: int) -> None:
    f = tmp_path / "cls.pickle"
    f.write_bytes(pickle.dumps({"segments": [], "when": Path("/etc")}, protocol=protocol))
    with pytest.raises(SnapshotError, match="refuses every class"):
        load(f)


def test_persistent_ids_are_refused(tmp_path: Path) -> None:
    class P(pickle.Pickler):
        def persistent_id(self, obj: object) -> str | None:
            return "storage" if obj == "tensor" else None

    f = tmp_path / "p.pickle"
    with f.open("wb") as out:
        P(out, protocol=2).dump({"segments": ["tensor"]})
    with pytest.raises(SnapshotError, match="persistent"):
        load(f)


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (b"", "empty"),
        (b"hello world", "neither a PyTorch memory snapshot"),
        (pickle.dumps({"segments": []})[:-5], "truncated"),
        (pickle.dumps([1, 2, 3]), "not a PyTorch memory snapshot"),
        (pickle.dumps({"segments": "no"}), "not a list"),
        (b'{"a": 1}', "not torch.cuda.memory_stats"),
        (b"{not json", "not valid JSON"),
        (b"\x80\x04\x95\xff\xff\xff\xff\xff\xff\xff\x7f", "pickle"),
    ],
)
def test_bad_files_are_one_line(tmp_path: Path, content: bytes, message: str) -> None:
    f = tmp_path / "bad"
    f.write_bytes(content)
    with pytest.raises(SnapshotError) as err:
        read_summary(f)
    text = str(err.value)
    assert message in text
    assert "\n" not in text and str(f) in text


def test_missing_file_and_folder(tmp_path: Path) -> None:
    with pytest.raises(SnapshotError, match="no such file"):
        load(tmp_path / "nope.pickle")
    with pytest.raises(SnapshotError, match="folder"):
        load(tmp_path)


def test_a_repeated_object_cannot_make_the_work_explode(tmp_path: Path) -> None:
    # one block referenced a million times through the pickle memo: a 2 MB file that names
    # 10^6 blocks in each of 10^6 segments would be 10^12 visits
    block = {"size": 512, "requested_size": 512, "state": "active_allocated", "frames": []}
    blocks = [block] * 1_000_000
    seg = {"device": 0, "address": 0, "total_size": 512 * 10**6, "blocks": blocks}
    f = tmp_path / "bomb.pickle"
    f.write_bytes(pickle.dumps({"segments": [seg] * 1000, "device_traces": []}, protocol=4))
    assert f.stat().st_size < 3_000_000
    with pytest.raises(SnapshotError, match="repeated"):
        read_summary(f)


def test_memory_stats_json_in_every_shape(tmp_path: Path) -> None:
    flat = {
        "allocated_bytes.all.current": 10 * 2**30,
        "allocated_bytes.all.peak": 12 * 2**30,
        "reserved_bytes.all.current": 14 * 2**30,
        "reserved_bytes.all.peak": 15 * 2**30,
        "requested_bytes.all.current": 10 * 2**30 - 2**20,
        "active_bytes.all.current": 10 * 2**30 + 2**20,
        "inactive_split_bytes.all.current": 3 * 2**30,
        "num_alloc_retries": 4,
        "num_ooms": 1,
    }
    nested: dict[str, object] = {}
    for key, value in flat.items():
        node = nested
        *parents, leaf = key.split(".")
        for p in parents:
            node = node.setdefault(p, {})  # type: ignore[assignment]
        node[leaf] = value
    one = tmp_path / "one.json"
    one.write_text(json.dumps(flat))
    per_device = tmp_path / "devices.json"
    per_device.write_text(json.dumps([flat, nested]))
    lines = tmp_path / "log.jsonl"
    lines.write_text("\n".join(json.dumps({**flat, "allocated_bytes.all.current": n * 2**30})
                               for n in (1, 5, 3)) + "\n")  # fmt: skip
    for path, devices in ((one, 1), (per_device, 2)):
        s = read_summary(path)
        assert len(s.devices) == devices
        for d in s.devices:
            assert d.source == "memory_stats"
            assert d.allocated == 10 * 2**30 and d.reserved == 14 * 2**30
            assert d.free_internal == 2**20  # allocated - requested
            assert d.free_external == 14 * 2**30 - (10 * 2**30 + 2**20)  # reserved - active
            assert d.peak_allocated == 12 * 2**30 and d.peak_reserved == 15 * 2**30
            assert d.counters["num_alloc_retries"] == 4 and d.ooms == 1
            assert d.largest_free_block is None and d.oom is None and d.at_snapshot is None
            assert any("num_alloc_retries = 4" in f.text for f in d.findings)
            assert any("expandable_segments:True" in f.text for f in d.findings)
    s = read_summary(lines)
    tl = s.devices[0].timeline
    assert tl is not None and tl.allocated == (2**30, 5 * 2**30, 3 * 2**30)
    assert tl.peak_index == 1 and s.devices[0].allocated == 3 * 2**30


def test_the_json_path_imports_neither_torch_textual_nor_rich(tmp_path: Path) -> None:
    f = tmp_path / "s.pickle"
    f.write_bytes(pickle.dumps({"segments": [], "device_traces": []}))
    code = (
        "import sys, io, contextlib; from memtui.cli import main\n"
        "with contextlib.redirect_stdout(io.StringIO()):\n"
        f"    assert main(['snapshot', {str(f)!r}, '--json']) == 0\n"
        "print(sorted(m for m in ('torch', 'textual', 'rich', 'rich.table') if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[]"
