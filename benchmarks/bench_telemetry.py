"""Cost of one NVML poll of 8 GPUs running 64 processes (DESIGN.md section 6).

    python benchmarks/bench_telemetry.py [--polls 300]

Runs the real NvmlSource (real pynvml) against the fake libnvidia-ml the tests build, and
prints time per poll (median and p90 wall, CPU per poll), NVML C calls per GPU per poll
(counted by the fake), and the fake's own cost per call, which is included in the poll time
(it re-reads its scenario file and appends to its call log on every call) and which a real
driver replaces with its own. Figures, not assertions: machines here are shared and noisy.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "tests")]

from fake_nvml.harness import FakeNvml, GiB, build_fake_nvml, gpu  # noqa: E402

from memtui.telemetry import NvmlSource  # noqa: E402

GPUS, PROCS = 8, 64


def scenario(pids: list[int]) -> dict[str, object]:
    """8 H100s, 8 processes each, every PID from `pids`."""
    per = PROCS // GPUS
    return {
        "gpus": [
            gpu(
                i,
                used=60 * GiB,
                util=(90, 40),
                procs=[(pids[i * per + j], 7 * GiB) for j in range(per)],
            )
            for i in range(GPUS)
        ]
    }


def measure(fake: FakeNvml, polls: int, process_info: bool) -> dict[str, float]:
    """Poll `polls` times after one warm-up (init) poll; return the figures."""
    src = NvmlSource(process_info=process_info)
    first = src.poll()
    assert first.ok and len(first.devices) == GPUS, first.message
    assert sum(len(d.processes or ()) for d in first.devices) == PROCS
    fake.reset_calls()
    walls = []
    cpu0 = time.process_time()
    for _ in range(polls):
        t0 = time.perf_counter()
        src.poll()
        walls.append(time.perf_counter() - t0)
    cpu = (time.process_time() - cpu0) / polls
    calls = sum(fake.calls().values()) / polls
    src.close()
    walls.sort()
    return {
        "median_ms": statistics.median(walls) * 1e3,
        "p90_ms": walls[int(0.9 * (len(walls) - 1))] * 1e3,
        "cpu_ms": cpu * 1e3,
        "calls_per_gpu": calls / GPUS,
    }


def fake_call_cost(fake: FakeNvml, n: int = 2000) -> float:
    """Microseconds one fake C call costs through pynvml (scenario re-read + log append)."""
    import pynvml

    pynvml.nvmlInit()
    handle = pynvml.nvmlDeviceGetHandleByIndex(0)
    t0 = time.perf_counter()
    for _ in range(n):
        pynvml.nvmlDeviceGetUtilizationRates(handle)
    cost = (time.perf_counter() - t0) / n * 1e6
    pynvml.nvmlShutdown()
    return cost


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--polls", type=int, default=300)
    args = parser.parse_args()
    import psutil

    work = Path(tempfile.mkdtemp(prefix="memtui-bench-"))
    fake = FakeNvml(build_fake_nvml(), work)
    fake.activate_in_process()
    invisible = [10_000_000 + i for i in range(PROCS)]  # host PIDs not visible here
    visible = (psutil.pids() * PROCS)[:PROCS]  # real PIDs: psutil looks each one up
    print(f"one NVML poll, {GPUS} GPUs, {PROCS} processes, {args.polls} polls (fake NVML)")
    print(f"{'case':<44}{'median':>10}{'p90':>10}{'CPU':>10}{'calls/GPU':>11}")
    for label, pids, info in (
        ("processes invisible (container)", invisible, True),
        ("processes visible, psutil name/user/cmdline", visible, True),
        ("processes visible, process_info=False", visible, False),
    ):
        fake.write(scenario(pids))
        r = measure(fake, args.polls, info)
        print(
            f"{label:<44}{r['median_ms']:>8.2f}ms{r['p90_ms']:>8.2f}ms"
            f"{r['cpu_ms']:>8.2f}ms{r['calls_per_gpu']:>11.1f}"
        )
    cost = fake_call_cost(fake)
    print(f"fake library cost per NVML call (included above): {cost:.1f} us")
    print(f"  -> about {cost * 4 * GPUS / 1e3:.2f} ms of each poll is the fake itself")
    os.environ.pop("FAKE_NVML_CALLS", None)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
