"""Hostile files as the installed command meets them: every kind of file memtui reads, given
a FIFO nobody writes, an endless device, a 4 GB sparse file, a folder; files whose content
is built to hurt (an alias bomb, NaN and 300,000-deep JSON, escape sequences and bidi
overrides in a snapshot, sizes that cannot be); `--export-viz` aimed at a device, at its own
input, at an existing file. Each run is bounded in time (a timeout) and memory (RLIMIT_AS):
it exits 0, 1 or 2, says an error in one line, writes no escape or bidi character, and
replaces nothing it was not asked to."""

from __future__ import annotations

import os
import pickle
import resource
import stat
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from snapshot_files import FakeAllocator, GiB, MiB, frame, snapshot_of, write

from memtui.telemetry import Recorder, read_trace
from memtui.telemetry.models import ClusterSnapshot

ROOT = Path(__file__).resolve().parents[1]

# What must never reach a terminal from a file: ESC and CSI (C0/C1 controls start every
# escape sequence), the bidi embeddings, overrides and isolates, the zero-width characters.
FORBIDDEN = (
    "\x1b",
    "\x9b",
    "\x07",
    *map(chr, range(0x202A, 0x202F)),
    *map(chr, range(0x2066, 0x206A)),
    *map(chr, range(0x200B, 0x2010)),
    "\u2060",
    "\ufeff",
)


def _limited() -> None:  # the child may not grow past 2 GiB of address space
    resource.setrlimit(resource.RLIMIT_AS, (2 * GiB, 2 * GiB))


def memtui(*args: str, cwd: Path, stdin: Path | None = None) -> subprocess.CompletedProcess[str]:
    """`python -m memtui ARGS` (the installed entry point's code path), bounded."""
    env = {k: v for k, v in os.environ.items() if k not in ("FORCE_COLOR", "TTY_COMPATIBLE")}
    env["PYTHONPATH"] = str(ROOT)
    env["XDG_CONFIG_HOME"] = str(cwd / "config")
    with open(stdin or os.devnull, "rb") as source:
        out = subprocess.run(
            [sys.executable, "-m", "memtui", *args],
            capture_output=True, stdin=source, cwd=cwd, env=env, timeout=120,
            preexec_fn=_limited,
        )  # fmt: skip
    text = subprocess.CompletedProcess(
        out.args,
        out.returncode,
        out.stdout.decode("utf-8", errors="replace"),
        out.stderr.decode("utf-8", errors="replace"),
    )
    for stream in (text.stdout, text.stderr):
        found = sorted({f"U+{ord(c):04X}" for c in stream if c in FORBIDDEN})
        assert not found, (found, stream[-2000:])
    assert "Traceback" not in text.stderr, text.stderr
    return text


def one_line_error(out: subprocess.CompletedProcess[str], code: int = 2) -> str:
    assert out.returncode == code, (out.returncode, out.stdout[-500:], out.stderr)
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1, out.stderr
    return lines[0]


# -- every kind of file, given something that is not one -----------------------------------

# (kind, file name, the command reading it: {} is the file)
READERS = {
    "job config": ("job.yaml", ("estimate", "--from", "{}")),
    "model config.json": ("config.json", ("estimate", "--model", "{}")),
    "plan": ("plan.toml", ("export", "--plan", "{}", "--format", "accelerate")),
    "snapshot": ("oom.pickle", ("snapshot", "{}")),
    "memory_stats": ("stats.json", ("snapshot", "{}")),
    "trace": ("run.jsonl", ("watch", "--replay", "{}", "--once")),
    "token file": (
        "token",
        ("watch", "--prometheus", "http://127.0.0.1:9", "--bearer-token-file", "{}", "--once"),
    ),
}


def _fifo(path: Path) -> None:
    os.mkfifo(path)  # nobody writes: a plain open() waits forever


def _sparse(path: Path) -> None:
    with path.open("wb") as f:  # 4 GB that take no disk: the size without the bytes
        f.truncate(4 * 10**9)


def _folder(path: Path) -> None:
    path.mkdir()


FAMILIES = {
    "fifo": _fifo,
    "/dev/zero": lambda path: path.symlink_to("/dev/zero"),
    "/dev/urandom": lambda path: path.symlink_to("/dev/urandom"),
    "sparse 4 GB": _sparse,
    "folder": _folder,
}


@pytest.mark.parametrize("family", FAMILIES)
@pytest.mark.parametrize("kind", READERS)
def test_a_file_that_is_not_one_is_one_line(tmp_path: Path, kind: str, family: str) -> None:
    name, command = READERS[kind]
    path = tmp_path / name
    FAMILIES[family](path)
    out = memtui(*(str(path) if a == "{}" else a for a in command), cwd=tmp_path)
    assert out.returncode in (1, 2), (out.returncode, out.stderr)
    assert len(out.stderr.strip().splitlines()) == 1, out.stderr


def test_each_kind_says_its_bound(tmp_path: Path) -> None:
    """A sparse file past each kind's bound: refused at once, the bound in the message."""
    for kind, bound in (("job config", "8 MiB"), ("snapshot", "2 GiB"), ("plan", "1 MiB")):
        name, command = READERS[kind]
        path = tmp_path / name
        path.unlink(missing_ok=True)
        _sparse(path)
        line = one_line_error(
            memtui(*(str(path) if a == "{}" else a for a in command), cwd=tmp_path)
        )
        assert f"over {bound}" in line, line


def test_standard_input_is_read_bounded_too(tmp_path: Path) -> None:
    line = one_line_error(memtui("snapshot", "-", cwd=tmp_path, stdin=Path("/dev/zero")))
    assert line.startswith("memtui snapshot: error: -: neither a PyTorch memory snapshot")


def test_a_fifo_among_the_themes_does_not_block_the_start(tmp_path: Path) -> None:
    themes = tmp_path / "themes"
    themes.mkdir()
    _fifo(themes / "fifo.toml")
    (themes / "zero.toml").symlink_to("/dev/zero")
    (themes / "good.toml").write_text('name = "good"\nprimary = "#ff0000"\n')
    code = (
        "import sys; from pathlib import Path; from memtui.ui.themes import load_themes\n"
        "r = load_themes([Path(sys.argv[1])])\n"
        "print([t.name for t in r.themes]); print(*r.errors, sep='\\n')\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code, str(themes)],
        capture_output=True, text=True, timeout=60, env={**os.environ, "PYTHONPATH": str(ROOT)},
    )  # fmt: skip
    assert out.returncode == 0, out.stderr
    first, *errors = out.stdout.strip().splitlines()
    assert first == "['good']"
    assert len(errors) == 2 and all("not a regular file" in e for e in errors), errors


# -- files built to hurt ---------------------------------------------------------------------


def _bomb() -> str:
    lines = ['a0: &a0 ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]']
    lines += [f"a{i}: &a{i} [{', '.join([f'*a{i - 1}'] * 9)}]" for i in range(1, 10)]
    return "\n".join([*lines, "base_model: *a9", ""])


@pytest.mark.parametrize(
    ("name", "content", "command", "said"),
    [
        ("bomb.yaml", _bomb(), ("estimate", "--from"), "aliases expand"),
        ("nan.json", '{"allocated_bytes.all.current": NaN}', ("snapshot",), "NaN is not"),
        ("inf.json", '{"reserved_bytes.all.peak": Infinity}', ("snapshot",), "Infinity is not"),
        ("huge.json", '{"reserved_bytes.all.peak": 1e400}', ("snapshot",), "inf, not a count"),
        ("neg.json", '{"allocated_bytes.all.current": -5}', ("snapshot",), "-5, not a count"),
        ("deep.json", "[" * 300_000 + "]" * 300_000, ("snapshot",), "nested too deeply"),
        (
            "deep-object.json",
            '{"allocated_bytes":' * 300_000 + "1" + "}" * 300_000,
            ("snapshot",),
            "nested too deeply",
        ),
        ("bad.toml", "[model\nref = 1", ("export", "--format", "accelerate", "--plan"), "TOML"),
    ],
    ids=lambda value: value if isinstance(value, str) and len(value) < 20 else "",
)
def test_hostile_content_is_one_line(
    tmp_path: Path, name: str, content: str, command: tuple[str, ...], said: str
) -> None:
    path = tmp_path / name
    path.write_text(content)
    line = one_line_error(memtui(*command, str(path), cwd=tmp_path))
    assert said in line, line
    assert "lol" not in line


HOSTILE = "\x1b]0;pwned\x07\x1b[2J\x9b31m\u202eevil\u2066\u200bname"


def _hostile_snapshot(path: Path) -> Path:
    """A snapshot PyTorch could have written, but for the strings: terminal escapes, bidi
    overrides and zero-width characters in the allocator settings and in a frame's file and
    function names, and a 5,000-character function name."""
    a = FakeAllocator(8 * GiB)
    a.malloc(300 * MiB, [frame(f"evil{HOSTILE}.py", 1, f"fn{HOSTILE}"), frame("x.py", 2, "m")])
    a.malloc(200 * MiB, [frame("long.py", 3, "f" * 5000)])
    data = snapshot_of(a)
    data["allocator_settings"]["PYTORCH_CUDA_ALLOC_CONF"] = f"expandable_segments:True{HOSTILE}"
    data["allocator_settings"][f"key{HOSTILE}"] = HOSTILE
    return write(path, data)


def test_escapes_in_a_snapshot_never_reach_the_terminal(tmp_path: Path) -> None:
    snap = _hostile_snapshot(tmp_path / "evil.pickle")
    out = memtui("snapshot", str(snap), cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    # shown, escaped: the reader sees what was there
    assert "\\x1b]0;pwned\\x07\\x1b[2J\\x9b31m\\u202eevil\\u2066\\u200bname" in out.stdout
    assert "f" * 5000 not in out.stdout  # a long value is cut
    out = memtui("snapshot", str(snap), "--json", cwd=tmp_path)
    assert out.returncode == 0, out.stderr  # JSON escapes them itself (\u001b)


def _blocks(**changes: Any) -> dict[str, Any]:
    a = FakeAllocator(8 * GiB)
    a.malloc(300 * MiB, [frame("x.py", 1, "f")])
    data = snapshot_of(a)
    segment, block = data["segments"][0], data["segments"][0]["blocks"][0]
    for key, value in changes.items():
        where, field = key.split("__")
        (segment if where == "segment" else block)[field] = value
    return data


@pytest.mark.parametrize(
    ("changes", "said"),
    [
        ({"block__size": 10**15}, "more than the segment's total_size"),
        ({"segment__total_size": -(2**40)}, "a negative size"),
        ({"block__size": -512}, "a negative size"),
        ({"block__requested_size": 10**12}, "more than the block's size"),
        ({"segment__device": -1}, "device -1 is not a GPU index"),
        ({"segment__device": 7}, "the file traces devices 0 to 0 only"),
        ({"segment__device": "0"}, "is not a GPU index"),
    ],
)
def test_a_snapshot_that_cannot_be_is_one_line(
    tmp_path: Path, changes: dict[str, Any], said: str
) -> None:
    path = write(tmp_path / "odd.pickle", _blocks(**changes))
    line = one_line_error(memtui("snapshot", str(path), cwd=tmp_path))
    assert said in line, line


# -- --export-viz replaces only what it was asked to ----------------------------------------


def test_export_viz_onto_a_device_the_input_or_an_existing_file(tmp_path: Path) -> None:
    snap = write(tmp_path / "oom.pickle", _blocks())
    before = snap.read_bytes()
    line = one_line_error(memtui("snapshot", str(snap), "--export-viz", "/dev/full", cwd=tmp_path))
    assert "not a regular file" in line
    assert stat.S_ISCHR(os.stat("/dev/full").st_mode)
    for force in ((), ("--force",)):
        line = one_line_error(
            memtui("snapshot", str(snap), "--export-viz", str(snap), *force, cwd=tmp_path)
        )
        assert "is the input file" in line
    assert snap.read_bytes() == before
    existing = tmp_path / "viz.html"
    existing.write_text("mine")
    line = one_line_error(
        memtui("snapshot", str(snap), "--export-viz", str(existing), cwd=tmp_path)
    )
    assert "already exists; give --force" in line and existing.read_text() == "mine"
    out = memtui("snapshot", str(snap), "--export-viz", str(existing), "--force", cwd=tmp_path)
    assert out.returncode == 0 and existing.read_text().startswith("<!DOCTYPE html>")
    assert [p.name for p in tmp_path.iterdir() if p.name.endswith(".tmp")] == []


def test_export_viz_names_its_output_safely(tmp_path: Path) -> None:
    snap = write(tmp_path / "oom.pickle", _blocks())
    out = memtui("snapshot", str(snap), "--export-viz", f"out{HOSTILE}.pickle", cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    shown = out.stdout.replace("\n", "")  # wrapped at 80 columns
    assert f"wrote {tmp_path.resolve()}/out\\x1b]0;pwned\\x07" in shown
    assert pickle.loads((tmp_path / f"out{HOSTILE}.pickle").read_bytes())["segments"]


# -- the recorder after a cut line ------------------------------------------------------------


def test_recording_after_a_cut_line_loses_nothing_and_the_reader_says_so(tmp_path: Path) -> None:
    trace = tmp_path / "run.jsonl"
    first = ClusterSnapshot(time=1.0, source="test", nodes=())
    with Recorder(trace) as rec:
        rec.write(first)
    with trace.open("ab") as f:
        f.write(b'{"time": 2.0, "source": "te')  # killed mid-write
    with Recorder(trace) as rec:  # the next session
        rec.write(first.model_copy(update={"time": 3.0}))
    skipped: list[int] = []
    assert [s.time for s in read_trace(trace, skipped)] == [1.0, 3.0]
    assert skipped == [2]
    out = memtui("watch", "--replay", str(trace), "--speed", "0", "--count", "3", cwd=tmp_path)
    assert "1 unreadable line(s) skipped" in out.stdout + out.stderr, out.stdout


def test_record_never_into_the_trace_replayed(tmp_path: Path) -> None:
    trace = tmp_path / "run.jsonl"
    with Recorder(trace) as rec:
        rec.write(ClusterSnapshot(time=1.0, source="test", nodes=()))
    before = trace.read_bytes()
    line = one_line_error(
        memtui("watch", "--replay", str(trace), "--record", str(trace), "--once", cwd=tmp_path)
    )
    assert "is the trace being replayed" in line and trace.read_bytes() == before
