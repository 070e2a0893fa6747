"""Cost of one NVML poll of 8 GPUs running 64 processes (docs/architecture.md, "Measuring and
checking"), and of one Prometheus poll of a 1,024-GPU job.

    python benchmarks/bench_telemetry.py [--polls 300] [--prometheus-gpus 1024]

Runs the real NvmlSource (real pynvml) against the fake libnvidia-ml the tests build, and
prints time per poll (median and p90 wall, CPU per poll), NVML C calls per GPU per poll
(counted by the fake), and the fake's own cost per call, which is included in the poll time
(it re-reads its scenario file and appends to its call log on every call) and which a real
driver replaces with its own. Figures, not assertions: machines here are shared and noisy.

The Prometheus figure runs a real Prometheus on loopback (skipped without the `prometheus`
binary) scraping 8 exporter endpoints that serve 128 hosts x 8 GPUs (dcgm-exporter and
nvitop-exporter series, half each) every second; it prints queries per poll, the poll's wall
time and the share of it spent parsing and assembling the answer.
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
                # every sensor a monitor reads (the fake answers NOT_SUPPORTED without them)
                temp=65,
                power=450_000,
                power_limit=700_000,
                clocks=(1980, 2619),
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


def prometheus_figures(gpus: int, polls: int) -> None:
    """Poll a Prometheus holding `gpus` GPUs' series (8 per host) and print the figures."""
    from prom_harness import Exporter, Gpu, Prometheus, dcgm_text, nvitop_text, prometheus_binary

    import memtui.telemetry.prometheus as prom

    if prometheus_binary() is None:
        print("prometheus: not run (no `prometheus` binary; apt-get install prometheus)")
        return
    hosts = gpus // 8
    texts = ["" for _ in range(8)]
    for h in range(hosts):
        cards = [Gpu(40_000 + 97 * i + h, f"GPU-{h:04d}-{i:02d}") for i in range(8)]
        name = f"node{h:04d}"
        text = dcgm_text(name, cards) if h % 2 else nvitop_text(name, cards)
        texts[h % 8] += text
    exporters = [Exporter(text) for text in texts]
    server = Prometheus(Path(tempfile.mkdtemp(prefix="memtui-bench-prom-")),
                        [e.target for e in exporters])  # fmt: skip
    try:
        source = prom.PrometheusSource(server.url, deadline_s=30.0)
        deadline = time.monotonic() + 90
        while len(source.poll().devices) < gpus and time.monotonic() < deadline:
            time.sleep(0.5)
        requests = 0
        real_request = source._request

        def counting(*a: object) -> object:
            nonlocal requests
            requests += 1
            return real_request(*a)  # type: ignore[arg-type]

        source._request = counting  # type: ignore[method-assign]
        walls, parse = [], []
        for _ in range(polls):
            t0 = time.perf_counter()
            snap = source.poll()
            walls.append(time.perf_counter() - t0)
            assert len(snap.devices) == gpus, snap.message
        # the parsing and assembling alone: the same answer, without the HTTP round trip
        result = real_request(source.query_text(time.time()), time.time(), time.monotonic() + 30)
        source._request = lambda *a: result  # type: ignore[method-assign,assignment]
        for _ in range(polls):
            t0 = time.perf_counter()
            source.poll()
            parse.append(time.perf_counter() - t0)
        walls.sort()
        print(f"prometheus: {gpus} GPUs on {hosts} hosts, {polls} polls (real Prometheus, "
              "loopback)")  # fmt: skip
        print(f"  queries per poll: {requests / polls:.0f}   series per answer: {len(result)}")
        print(f"  poll median {statistics.median(walls) * 1e3:.1f} ms, "
              f"p90 {walls[int(0.9 * (len(walls) - 1))] * 1e3:.1f} ms; parsing and "
              f"assembling median {statistics.median(parse) * 1e3:.1f} ms "
              "(poll interval 1000 ms)")  # fmt: skip
    finally:
        server.stop()
        for exporter in exporters:
            exporter.stop()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--polls", type=int, default=300)
    parser.add_argument("--prometheus-gpus", type=int, default=1024, metavar="N")
    parser.add_argument("--prometheus-polls", type=int, default=20, metavar="N")
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
    if args.prometheus_gpus:
        prometheus_figures(args.prometheus_gpus, args.prometheus_polls)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
