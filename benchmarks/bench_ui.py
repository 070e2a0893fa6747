"""The dashboard's performance figures (docs/architecture.md, "Measuring and checking"), beside a
bare Textual app and nvitop.

    python benchmarks/bench_ui.py                   # the full run: a minute of watching
    python benchmarks/bench_ui.py --duration 15     # shorter watch
    python benchmarks/bench_ui.py --runs 3          # fewer start-up samples
    python benchmarks/bench_ui.py --start-only --runs 9   # section 1 alone
    python benchmarks/bench_ui.py --soak-only 180 --soak-interval 0.1   # the soak alone

Prints:
1. Start to first frame, as a terminal sees it: each program runs in its own pseudo-terminal
   (120x40) and the clock stops when its first full frame reaches the terminal (memtui: the
   last GPU row, "GPU 7", so the rows are drawn; a bare Textual app: its one label; nvitop:
   its header). Beside them the floor: the bare app that first imports pydantic, defines one
   model and loads pynvml and psutil (what memtui's libraries cost before it does anything).
   memtui runs live against the fake libnvidia-ml, 8 GPUs, 64 processes; median of --runs,
   [fastest..slowest], and memtui - bare Textual in each round. With no job's budget its
   first frame is the monitor's and the what-if plan is estimated right after it: when that
   plan's verdict ("FITS"/"DOES NOT FIT") is drawn is printed too.
2. Key press to updated budget: Pilot presses `s` (next strategy) in a headless app; the clock
   stops when the app is idle again (plan replaced, estimate run, widgets updated, repainted).
3. Watching 8 GPUs x 8 processes at 1 Hz for --duration seconds: memtui and `nvitop -m full
   --interval 1` side by side, each in its own pseudo-terminal against the same fake NVML;
   CPU time (user+sys, all threads, after a 5 s warm-up) and resident memory from /proc.
   Beside them, idle, the floors: a bare Textual app, and one that also defines a pydantic
   model and loads pynvml and psutil (what memtui cannot go under with its libraries).
4. With --soak SECONDS: memtui alone for that long at --soak-interval, its GPUs' memory
   swinging across the budget and up to the card's limit every poll (alerts firing) and a
   refused key pressed every second; resident memory sampled every --soak-every seconds.
   "Flat" is the growth between the first and the last third of the samples.

memtui's bytecode is compiled first, as `pip install` does (a checkout run under
PYTHONDONTWRITEBYTECODE=1 would otherwise compile every memtui module on every start).
Figures, not assertions: the machines here are shared and noisy; compare the ratios.
"""

from __future__ import annotations

import argparse
import asyncio
import fcntl
import os
import re
import shutil
import signal
import statistics
import struct
import subprocess
import sys
import tempfile
import termios
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "tests")]

from fake_nvml.harness import FakeNvml, GiB, build_fake_nvml, gpu  # noqa: E402

COLS, ROWS = 120, 40
GPUS, PER_GPU = 8, 8
_ANSI = re.compile(rb"\x1b\[[0-9;?<>=]*[ -/]*[@-~]|\x1b[()][0-9A-Za-z]|\x1b[=>]|\x1b\][^\x07]*\x07")
BARE_APP = (
    "from textual.app import App\n"
    "from textual.widgets import Label\n"
    "class Bare(App):\n"
    "    def compose(self):\n"
    "        yield Label('bare first frame')\n"
    "Bare().run()\n"
)


FLOOR_APP = (
    "import pynvml, psutil\n"
    "from pydantic import BaseModel\n"
    "class One(BaseModel):\n"
    "    x: int\n"
    "One(x=1)\n"
) + BARE_APP


def compile_bytecode() -> None:
    """Compile memtui's modules to bytecode (into its __pycache__, which git ignores), as an
    installed memtui has them."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    subprocess.run(
        [sys.executable, "-m", "compileall", "-q", str(ROOT / "memtui")], env=env, check=True
    )


def fake_node(prefix: str) -> tuple[FakeNvml, dict[str, str]]:
    """memtui's bytecode compiled, and the fake libnvidia-ml serving `scenario()`: the fake
    and the environment a program needs to load it (no call log: over a minute it grows
    without bound; no user themes or nvitop settings in the way)."""
    compile_bytecode()
    work = Path(tempfile.mkdtemp(prefix=prefix))
    fake = FakeNvml(build_fake_nvml("default", work / "build"), work)
    fake.write(scenario())
    env = fake.env()
    env.pop("FAKE_NVML_CALLS", None)
    env["XDG_CONFIG_HOME"] = str(work)
    return fake, env


def scenario(used: int = 60 * GiB) -> dict[str, object]:
    """8 H100s at `used` bytes, 8 processes each (host PIDs invisible here, as in a
    container)."""
    return {
        "gpus": [
            gpu(
                i,
                used=used,
                util=(90, 40),
                # every sensor a monitor reads (the fake answers NOT_SUPPORTED without them)
                temp=65,
                power=450_000,
                power_limit=700_000,
                clocks=(1980, 2619),
                procs=[(10_000_000 + 100 * i + p, 7 * GiB) for p in range(PER_GPU)],
            )
            for i in range(GPUS)
        ]
    }


class Terminal:
    """A program in a pseudo-terminal; a thread drains its output and watches for a marker
    (and for a second one, `then`, after it)."""

    def __init__(
        self,
        argv: list[str],
        env: dict[str, str],
        marker: bytes | None = None,
        then: bytes | None = None,
    ) -> None:
        master, slave = os.openpty()
        fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", ROWS, COLS, 0, 0))
        env = {**env, "TERM": "xterm-256color", "COLUMNS": str(COLS), "LINES": str(ROWS)}
        self.started = time.perf_counter()
        self.proc = subprocess.Popen(
            argv, stdin=slave, stdout=slave, stderr=slave, env=env, start_new_session=True
        )
        os.close(slave)
        self.master = master
        self.marker = marker
        self.seen_at: float | None = None
        self.found = threading.Event()
        self.then = then
        self.then_at: float | None = None
        self.then_found = threading.Event()
        self._text = b""
        threading.Thread(target=self._drain, daemon=True).start()

    def _drain(self) -> None:
        while True:
            try:
                chunk = os.read(self.master, 65536)
            except OSError:
                break
            if not chunk:
                break
            waiting = self.marker is not None and self.seen_at is None
            if waiting or (self.then is not None and self.then_at is None):
                self._text = (self._text + _ANSI.sub(b"", chunk))[-200_000:]
                self._look(time.perf_counter())

    def _look(self, now: float) -> None:
        if self.marker is not None and self.seen_at is None and self.marker in self._text:
            self.seen_at = now
            self.found.set()
        if self.seen_at is not None and self.then is not None and self.then in self._text:
            self.then_at = now
            self.then_found.set()

    def first_frame(self, timeout: float = 60.0) -> float | None:
        """Seconds from spawn to the marker on screen (None if it never came)."""
        self.found.wait(timeout)
        return None if self.seen_at is None else self.seen_at - self.started

    def then_seen(self, timeout: float = 60.0) -> float | None:
        """Seconds from spawn to the second marker on screen (None if it never came)."""
        self.then_found.wait(timeout)
        return None if self.then_at is None else self.then_at - self.started

    def cpu_seconds(self) -> float:
        """User + system CPU of the process (all threads) so far, from /proc/PID/stat."""
        fields = Path(f"/proc/{self.proc.pid}/stat").read_text().rsplit(")", 1)[1].split()
        ticks = os.sysconf("SC_CLK_TCK")
        return (int(fields[11]) + int(fields[12])) / ticks

    def memory(self) -> tuple[int, int]:
        """(VmRSS, VmHWM) in bytes: resident now and its peak."""
        values = {}
        for line in Path(f"/proc/{self.proc.pid}/status").read_text().splitlines():
            key, _, rest = line.partition(":")
            if key in ("VmRSS", "VmHWM"):
                values[key] = int(rest.split()[0]) * 1024
        return values["VmRSS"], values["VmHWM"]

    def close(self) -> None:
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(5)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait()
        os.close(self.master)


def memtui_argv() -> list[str]:
    return [sys.executable, "-m", "memtui", "--interval", "1"]


def nvitop_argv() -> list[str] | None:
    exe = shutil.which("nvitop")
    return [exe, "-m", "full", "--interval", "1"] if exe else None


#: memtui's what-if plan drawn: its row's verdict ("FITS" or "DOES NOT FIT"), which follows the
#: first frame when no job's budget is given (memtui/ui/screen.py `_load_estimator`).
PLAN_DRAWN = "memtui: what-if plan drawn"


def start_figures(env: dict[str, str], runs: int) -> dict[str, list[float]]:
    programs: dict[str, tuple[list[str], bytes, bytes | None]] = {
        "bare Textual app": ([sys.executable, "-c", BARE_APP], b"bare first frame", None),
        "floor: + pydantic, pynvml...": (
            [sys.executable, "-c", FLOOR_APP],
            b"bare first frame",
            None,
        ),
        "memtui (live, fake NVML)": (memtui_argv(), b"GPU 7", b"FIT"),
    }
    nvitop = nvitop_argv()
    if nvitop:
        programs["nvitop -m full"] = (nvitop, b"NVITOP", None)
    results: dict[str, list[float]] = {name: [] for name in programs}
    results[PLAN_DRAWN] = []
    for _ in range(runs):
        for name, (argv, marker, then) in programs.items():
            term = Terminal(argv, env, marker, then)
            seconds = term.first_frame()
            drawn = term.then_seen() if then is not None and seconds is not None else None
            term.close()
            if seconds is not None:
                results[name].append(seconds)
            if drawn is not None:
                results[PLAN_DRAWN].append(drawn)
    return results


async def key_latency(presses: int) -> tuple[list[float], list[float]]:
    """Seconds from a key press to the app being idle with the new budget drawn, and the same
    for a key bound to nothing (Pilot's own cost: posting the key, waiting for idle)."""
    from memtui.estimator import Plan, estimate
    from memtui.estimator.model_source import load_model
    from memtui.telemetry import SyntheticSource
    from memtui.ui import make_app
    from memtui.ui.widgets.gpu_panel import GpuPanel

    plan = Plan(model=load_model("meta-llama/Llama-2-7b-hf"))
    app = make_app(plan, SyntheticSource(8, seed=0), interval=1.0)
    samples: list[float] = []
    baseline: list[float] = []
    async with app.run_test(size=(COLS, ROWS)) as pilot:
        await pilot.pause(0.2)
        for _ in range(presses):
            t0 = time.perf_counter()
            await pilot.press("z")  # bound to nothing
            baseline.append(time.perf_counter() - t0)
        for _ in range(presses):
            t0 = time.perf_counter()
            await pilot.press("s")
            view = app.screen.query_one(GpuPanel).view
            samples.append(time.perf_counter() - t0)
            assert view is not None
            assert view.budget == estimate(app.screen.plan).budget  # type: ignore[attr-defined]
    return samples, baseline


def watch_figures(env: dict[str, str], duration: float) -> dict[str, dict[str, float] | str]:
    out: dict[str, dict[str, float] | str] = {}
    # the bare Textual app idles beside them: the floor any Textual program starts from
    terms = {
        "memtui": Terminal(memtui_argv(), env),
        "bare Textual (idle, for scale)": Terminal([sys.executable, "-c", BARE_APP], env),
        "floor: + pydantic, pynvml, psutil": Terminal([sys.executable, "-c", FLOOR_APP], env),
    }
    nvitop = nvitop_argv()
    if nvitop:
        terms["nvitop"] = Terminal(nvitop, env)
    else:
        out["nvitop"] = "not run: nvitop is not installed"
    try:
        time.sleep(5.0)  # both past start-up (imports, NVML init) before the window opens
        cpu0 = {name: t.cpu_seconds() for name, t in terms.items()}
        time.sleep(duration)
        for name, term in terms.items():
            if term.proc.poll() is not None:
                out[name] = f"exited early with code {term.proc.returncode}"
                continue
            rss, hwm = term.memory()
            cpu = term.cpu_seconds() - cpu0[name]
            out[name] = {
                "cpu_s": cpu,
                "cpu_s_per_min": cpu * 60.0 / duration,
                "rss_mib": rss / 2**20,
                "peak_rss_mib": hwm / 2**20,
            }
    finally:
        for term in terms.values():
            term.close()
    return out


def soak_figures(
    fake: FakeNvml, env: dict[str, str], duration: float, interval: float, every: float
) -> list[tuple[float, float]]:
    """(seconds, RSS MiB) of memtui watching for `duration` s at `interval`, its GPUs
    swinging across the budget (46 GB) and to 97% of the card, a refused key ("-" at
    micro-batch 1) pressed every second."""
    swings = [40 * GiB, 60 * GiB, 78 * GiB]
    term = Terminal([*memtui_argv()[:-1], f"{interval:g}"], env)
    samples: list[tuple[float, float]] = []
    started = time.monotonic()
    next_sample = started + 5.0  # past start-up
    step = 0
    try:
        while (now := time.monotonic()) < started + 5.0 + duration:
            if term.proc.poll() is not None:
                break
            fake.write(scenario(swings[step % len(swings)]))
            if step % max(1, round(1 / interval)) == 0:
                os.write(term.master, b"-")
            step += 1
            if now >= next_sample:
                samples.append((now - started, term.memory()[0] / 2**20))
                next_sample += every
            time.sleep(interval)
    finally:
        term.close()
    return samples


def _median_ms(values: list[float]) -> str:
    if not values:
        return "n/a (no frame seen)"
    return f"{statistics.median(values) * 1000:7.0f} ms (median of {len(values)})"


def soak(fake: FakeNvml, env: dict[str, str], seconds: float, interval: float, every: float) -> int:
    """Print section 4: RSS over a run with alerts firing; "flat" is the last third's median
    against the first third's."""
    print(f"\n4. soak: {seconds:g} s at {1 / interval:g} Hz, alerts firing, "
          "a refused key every second")  # fmt: skip
    samples = soak_figures(fake, env, seconds, interval, every)
    if len(samples) < 3:
        print("   too few samples (memtui exited?)")
        return 1
    third = max(1, len(samples) // 3)
    first = statistics.median(rss for _, rss in samples[:third])
    last = statistics.median(rss for _, rss in samples[-third:])
    span_min = (samples[-1][0] - samples[0][0]) / 60
    print("   RSS MiB: " + " ".join(f"{rss:.0f}" for _, rss in samples))
    print(f"   first third {first:.1f} MiB, last third {last:.1f} MiB: "
          f"{last - first:+.1f} MiB over {span_min:.1f} min, "
          f"max {max(rss for _, rss in samples):.1f} MiB")  # fmt: skip
    return 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--duration", type=float, default=60.0, help="seconds of watching (60)")
    parser.add_argument("--runs", type=int, default=5, help="start-up samples per program (5)")
    parser.add_argument("--presses", type=int, default=40, help="key presses timed (40)")
    parser.add_argument("--soak", type=float, metavar="S", help="also: S seconds with alerts")
    parser.add_argument("--soak-interval", type=float, default=1.0, help="soak poll interval")
    parser.add_argument("--soak-every", type=float, default=10.0, help="soak RSS sample period")
    parser.add_argument(
        "--soak-only", type=float, metavar="S", help="only the soak (4.), S seconds: 1-3 skipped"
    )
    parser.add_argument("--start-only", action="store_true", help="only start-up (1.)")
    args = parser.parse_args()
    fake, env = fake_node("memtui-bench-ui-")
    if args.soak_only:
        return soak(fake, env, args.soak_only, args.soak_interval, args.soak_every)
    print(f"memtui UI benchmark: {GPUS} GPUs x {PER_GPU} processes on the fake libnvidia-ml, "
          f"terminal {COLS}x{ROWS}, {os.cpu_count()} CPUs")  # fmt: skip

    print("\n1. start to first frame (pseudo-terminal)")
    starts = start_figures(env, args.runs)
    for name, values in starts.items():
        spread = f"  [{min(values) * 1000:.0f}..{max(values) * 1000:.0f}]" if values else ""
        print(f"   {name:<28} {_median_ms(values)}{spread}")
    bare = starts.get("bare Textual app") or []
    mine = starts.get("memtui (live, fake NVML)") or []
    if bare and mine:
        extra = statistics.median(mine) - statistics.median(bare)
        # each round runs the programs one after the other: its difference is the fairest
        paired = sorted((m - b) * 1000 for m, b in zip(mine, bare, strict=False))
        print(f"   memtui - bare Textual: {extra * 1000:+.0f} ms (target <= +250 ms); "
              f"per round {', '.join(f'{d:+.0f}' for d in paired)} ms")  # fmt: skip
    floor = starts.get("floor: + pydantic, pynvml...") or []
    if floor and mine:
        extra = statistics.median(mine) - statistics.median(floor)
        print(f"   memtui - floor (Textual, pydantic, pynvml, psutil): {extra * 1000:+.0f} ms")
    if args.start_only:
        return 0

    print("\n2. key press (s: next strategy) to updated budget, headless Pilot")
    samples, baseline = asyncio.run(key_latency(args.presses))
    samples.sort()
    p90 = samples[int(len(samples) * 0.9) - 1]
    base = statistics.median(baseline)
    print(
        f"   press to idle: median {statistics.median(samples) * 1000:.1f} ms, "
        f"p90 {p90 * 1000:.1f} ms, max {samples[-1] * 1000:.1f} ms ({len(samples)} presses)"
    )
    print(f"   an unbound key (Pilot's own cost): median {base * 1000:.1f} ms")
    print(f"   memtui's part: {(statistics.median(samples) - base) * 1000:.1f} ms "
          "(target < 50 ms)")  # fmt: skip

    print(f"\n3. watching {GPUS} GPUs at 1 Hz for {args.duration:g} s (after a 5 s warm-up)")
    watch = watch_figures(env, args.duration)
    for name, figures in watch.items():
        if isinstance(figures, str):
            print(f"   {name:<31} {figures}")
            continue
        print(f"   {name:<31} CPU {figures['cpu_s']:.2f} s "
              f"({figures['cpu_s_per_min']:.2f} s/min), RSS {figures['rss_mib']:.0f} MiB "
              f"(peak {figures['peak_rss_mib']:.0f} MiB)")  # fmt: skip
    m, n = watch.get("memtui"), watch.get("nvitop")
    if isinstance(m, dict) and isinstance(n, dict) and n["cpu_s"] > 0 and n["rss_mib"] > 0:
        print(f"   memtui / nvitop: CPU {m['cpu_s'] / n['cpu_s']:.2f}x (target <= 1), "
              f"RSS {m['rss_mib'] / n['rss_mib']:.2f}x (target <= 1.5)")  # fmt: skip
    idle_floor = watch.get("floor: + pydantic, pynvml, psutil")
    if isinstance(m, dict) and isinstance(idle_floor, dict):
        print(f"   memtui - floor: RSS {m['rss_mib'] - idle_floor['rss_mib']:+.0f} MiB")

    if args.soak:
        return soak(fake, env, args.soak, args.soak_interval, args.soak_every)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
