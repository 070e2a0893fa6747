"""How long and how much memory `memtui snapshot` needs for a 500 MB snapshot.

    python benchmarks/bench_snapshot.py            # generates the file once (a minute or so)
    python benchmarks/bench_snapshot.py --mb 100   # a smaller one
    python benchmarks/bench_snapshot.py --file my_snapshot.pickle   # a real one

The generated file has PyTorch's structure (tests/snapshot_files.py writes the same fields):
a long `device_traces` history in which every entry has its own frame list of shared frame
dicts (torch/csrc/cuda/Module.cpp symbolizes each traceback into its own list), allocations
and frees cycling through segments, and segments with blocks. Each reader runs in its own
process; time is wall-clock, memory the process's peak RSS (ru_maxrss). Beside memtui:
- the floor: a bare `pickle.load` of the file, what any Python reader pays at least;
- the peer: `python -m torch.cuda._memory_viz stats FILE` (PyTorch's own text summary), when
  torch is installed.
The machines are shared and noisy: the figures are one run's, the ratios are what to read.
"""

from __future__ import annotations

import argparse
import os
import pickle
import random
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT), str(ROOT / "tests")]

from snapshot_files import STACKS, cpp, frame, settings  # noqa: E402

MiB = 2**20


def _stacks(rng: random.Random) -> list[list[dict[str, object]]]:
    """200 distinct stacks, ~40 frames deep (C++ allocator frames, Python model frames)."""
    inner = [cpp(f"c10::cuda::CUDACachingAllocator::Native::frame{i}(...)") for i in range(12)]
    outer = [frame(f"mylib/loop{i}.py", 10 + i, f"step{i}") for i in range(30)]
    kinds = list(STACKS.values())
    out = []
    for i in range(200):
        middle = kinds[i % len(kinds)]
        out.append(inner[: 8 + i % 4] + middle + outer[: 20 + i % 10])
    return out


def generate(path: Path, target_mb: int) -> float:
    """Write a snapshot of about `target_mb` MB; returns the seconds it took."""
    started = time.perf_counter()
    rng = random.Random(0)
    stacks = _stacks(rng)
    per_entry = 130  # bytes a trace entry with its ~40-frame list pickles to (measured)
    entries = target_mb * 10**6 // per_entry
    base = 0x7F0000000000
    trace: list[dict[str, object]] = []
    live: list[tuple[int, int, list[dict[str, object]]]] = []
    t = 1_000_000
    for seg in range(64):
        trace.append({"action": "segment_alloc", "addr": base + seg * 1024 * MiB,
                      "size": 1024 * MiB, "stream": 0, "time_us": t, "frames": []})  # fmt: skip
    slot = 0
    while len(trace) < entries:
        t += 7
        if len(live) > 400 and rng.random() < 0.5:
            addr, size, frames = live.pop(rng.randrange(len(live)))
            for action in ("free_requested", "free_completed"):
                trace.append({"action": action, "addr": addr, "size": size, "stream": 0,
                              "time_us": t, "frames": list(frames)})  # fmt: skip
        else:
            size = rng.choice((512, 4096, 2 * MiB, 8 * MiB, 64 * MiB + 512))
            addr = base + (slot % 60_000) * 1_048_576
            slot += 1
            frames = stacks[rng.randrange(len(stacks))]
            live.append((addr, size, frames))
            trace.append({"action": "alloc", "addr": addr, "size": size, "stream": 0,
                          "time_us": t, "frames": list(frames)})  # fmt: skip
    segments = []
    for seg in range(64):
        blocks = []
        addr = base + seg * 1024 * MiB
        for b in range(32):
            state = "active_allocated" if b % 3 else "inactive"
            stack = stacks[(seg + b) % len(stacks)]
            blocks.append({"address": addr, "size": 32 * MiB, "requested_size": 32 * MiB - 100,
                           "state": state, "frames": list(stack) if b % 3 else []})  # fmt: skip
            addr += 32 * MiB
        segments.append({"device": 0, "address": base + seg * 1024 * MiB,
                         "total_size": 1024 * MiB, "allocated_size": 0, "active_size": 0,
                         "requested_size": 0, "stream": 0, "segment_type": "large",
                         "segment_pool_id": (0, 0), "is_expandable": False, "frames": [],
                         "blocks": blocks})  # fmt: skip
    data = {"segments": segments, "device_traces": [trace], "allocator_settings": settings()}
    tmp = path.with_suffix(".tmp")
    with tmp.open("wb") as f:
        pickle.dump(data, f, protocol=4)
    tmp.replace(path)
    return time.perf_counter() - started


#: Runs `-m module args` or `-c code args` and reports its own peak RSS on stderr at exit.
_WRAP = """
import atexit, resource, runpy, sys
atexit.register(lambda: sys.stderr.write(
    "\\nMAXRSS %d\\n" % resource.getrusage(resource.RUSAGE_SELF).ru_maxrss))
how, what, *rest = sys.argv[1:]
sys.argv = [what, *rest]
if how == "-m":
    runpy.run_module(what, run_name="__main__", alter_sys=True)
else:
    exec(compile(what, "<bench>", "exec"), {"__name__": "__main__"})
"""


def measure(argv: list[str]) -> tuple[float, int]:
    """(seconds, peak RSS bytes) of one child process (`-m module ...` or `-c code ...`)."""
    started = time.perf_counter()
    out = subprocess.run(
        [sys.executable, "-c", _WRAP, *argv],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    seconds = time.perf_counter() - started
    rss = 0
    for line in out.stderr.splitlines():
        if line.startswith("MAXRSS "):
            rss = int(line.split()[1]) * 1024  # kilobytes on Linux
    if out.returncode:
        print(f"  ! exit {out.returncode}: {out.stderr.strip()[-300:]}")
    return seconds, rss


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--mb", type=int, default=500, help="size of the generated file (500)")
    p.add_argument("--file", type=Path, help="measure this snapshot instead of generating one")
    p.add_argument("--cache", type=Path, default=Path("/tmp"), help="where the file is kept")
    args = p.parse_args()
    path = args.file or args.cache / f"memtui-bench-snapshot-{args.mb}MB.pickle"
    if not path.exists():
        print(f"generating {path} ...", flush=True)
        print(f"  generated in {generate(path, args.mb):.1f} s", flush=True)
    size = path.stat().st_size
    print(f"snapshot: {path} ({size / 1e6:,.0f} MB)")
    floor_code = "import pickle,sys; f=open(sys.argv[1],'rb'); pickle.load(f)"
    rows = [("pickle.load (floor)", ["-c", floor_code, str(path)])]
    try:
        import torch  # noqa: F401

        rows.append(
            ("torch _memory_viz stats (peer)", ["-m", "torch.cuda._memory_viz", "stats", str(path)])
        )
    except ImportError:
        print("  (torch not installed: no peer row)")
    rows.append(("memtui snapshot --json", ["-m", "memtui", "snapshot", str(path), "--json"]))
    rows.append(("memtui snapshot (text)", ["-m", "memtui", "snapshot", str(path)]))
    results = {}
    env_note = f"{os.cpu_count()} CPUs"
    print(f"{'reader':<32} {'seconds':>8} {'peak RSS MB':>12} {'RSS / file':>10}   ({env_note})")
    for name, argv in rows:
        seconds, rss = measure(argv)
        results[name] = (seconds, rss)
        print(f"{name:<32} {seconds:>8.1f} {rss / 1e6:>12,.0f} {rss / size:>10.2f}", flush=True)
    floor_s = results["pickle.load (floor)"][0]
    ours = results["memtui snapshot --json"][0]
    print(f"memtui --json / pickle.load time: {ours / floor_s:.2f}x")
    peer = results.get("torch _memory_viz stats (peer)")
    if peer:
        print(f"memtui --json / torch _memory_viz stats time: {ours / peer[0]:.2f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
