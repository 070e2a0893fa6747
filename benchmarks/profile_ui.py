"""Where the dashboard's start-up milliseconds and resident bytes go (the start-up profile).

    python benchmarks/profile_ui.py            # every section
    python benchmarks/profile_ui.py --runs 5   # more start-up samples

Prints, for memtui live on the fake libnvidia-ml (8 GPUs x 8 processes, 120x40 terminal):
1. Import time (`python -X importtime`) of the modules the dashboard loads before its first
   frame, summed by package (self time), and memtui's own modules by cumulative time.
2. Start-up phases up to the first full frame, in a pseudo-terminal: when the imports of
   telemetry, the estimator, Textual and the UI begin, the app built and mounted, its first
   and second refresh; the garbage collector's share (collections and their time) and the
   widgets registered on the way (a widget composed twice counts twice).
3. Resident memory added by each import in the order the dashboard makes them, beside the
   floor a Textual app cannot go under once it defines one pydantic model and loads pynvml
   and psutil (what the NVML source needs).
4. Python allocations still live after 8 s of watching (tracemalloc), by package: what the
   running screen holds beyond its imports.

Figures, not assertions: the machines here are shared and noisy. Bytecode is compiled first
(as `pip install` does), so no sample pays for compiling memtui's sources.
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "tests"), str(ROOT / "benchmarks")]

from bench_ui import Terminal, fake_node  # noqa: E402

#: Run in a child: the dashboard's start, phases marked without importing anything early
#: (an import hook notes when each import begins), the result written as JSON.
PHASES = r"""
import gc, importlib.abc, json, os, sys, time
t0 = time.perf_counter()
marks, gc_time, gc_runs, registered = {}, [0.0], [0, 0], [0]
def mark(what):
    marks.setdefault(what, round((time.perf_counter() - t0) * 1000))
WATCHED = {"memtui.telemetry": "telemetry", "memtui.estimator.plan": "the estimator",
           "textual.app": "Textual", "memtui.ui.app": "the UI"}
class Marker(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name in WATCHED:
            mark(f"import {WATCHED[name]}")
        return None
sys.meta_path.insert(0, Marker())
started = [0.0]
def on_gc(phase, info):
    if phase == "start":
        started[0] = time.perf_counter()
    else:
        gc_time[0] += time.perf_counter() - started[0]
        gc_runs[0] += 1
        gc_runs[1] += info["generation"] == 2
gc.callbacks.append(on_gc)
from memtui import cli
import memtui.commands.dashboard as dashboard
mark("CLI imported")
build = dashboard.build
def timed_build(args, **kwargs):
    app = build(args, **kwargs)
    mark("app built")
    from textual.app import App
    register = App._register
    def counting(self, parent, *widgets, **kwargs):
        registered[0] += len(widgets)
        return register(self, parent, *widgets, **kwargs)
    App._register = counting
    on_mount = type(app).on_mount
    def timed_mount(self):
        mark("app mounted"); on_mount(self)
        def second():
            mark("second refresh"); self.exit()
        self.call_after_refresh(lambda: (mark("first refresh"), self.call_after_refresh(second)))
    type(app).on_mount = timed_mount
    return app
dashboard.build = timed_build
try:
    cli.main(["--interval", "1"])
finally:
    marks["gc ms"] = round(gc_time[0] * 1000)
    marks["gc runs"], marks["gc full runs"] = gc_runs
    marks["widgets registered"] = registered[0]
    with open(os.environ["PROFILE_OUT"], "w") as out:
        json.dump(marks, out)
"""

#: The resident memory each import adds, in the dashboard's order.
RSS_STEPS = r"""
import gc, importlib, sys
def rss():
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith("VmRSS"):
                return int(line.split()[1]) / 1024
steps = sys.argv[1:]
before = rss()
for step in steps:
    importlib.import_module(step)
    gc.collect()
    now = rss()
    print(f"   {step:<34} +{now - before:5.1f} MiB  ({now:5.1f} MiB)")
    before = now
"""

#: Live allocations after a while of watching, by package.
ALLOCATIONS = r"""
import collections, gc, os, sys, tracemalloc
tracemalloc.start(1)
from memtui import cli
import memtui.ui.app as app_module
on_mount = app_module.MemtuiApp.on_mount
def report():
    gc.collect()
    by_package = collections.Counter()
    for stat in tracemalloc.take_snapshot().statistics("filename"):
        name = stat.traceback[0].filename
        if "site-packages/" in name:
            key = name.split("site-packages/")[1].split("/")[0].removesuffix(".py")
        elif "/memtui/" in name:
            key = "memtui/" + name.split("/memtui/")[1].split("/")[0]
        elif name.startswith("<frozen importlib"):
            key = "code objects (imports)"
        else:
            key = "stdlib and other"
        by_package[key] += stat.size
    with open(os.environ["PROFILE_OUT"], "w") as out:
        for key, size in by_package.most_common(12):
            out.write(f"{size / 2**20:6.2f} MiB  {key}\n")
        out.write(f"{sum(by_package.values()) / 2**20:6.2f} MiB  in all\n")
def mounted(self):
    on_mount(self)
    self.set_timer(8.0, lambda: (report(), self.exit()))
app_module.MemtuiApp.on_mount = mounted
cli.main(["--interval", "1"])
"""

FLOOR = "import pynvml, psutil\nfrom pydantic import BaseModel\nclass One(BaseModel):\n    x: int\n"


def import_times(env: dict[str, str]) -> None:
    """Section 1: -X importtime of the start path, by package and by memtui module."""
    code = (
        "import memtui.cli, memtui.commands.dashboard, memtui.telemetry, memtui.estimator, "
        "memtui.estimator.model_source, memtui.ui.app"
    )
    err = subprocess.run(
        [sys.executable, "-X", "importtime", "-c", code],
        env=env,
        capture_output=True,
        text=True,
        check=True,
    ).stderr
    own: collections.Counter[str] = collections.Counter()
    cumulative: dict[str, int] = {}
    for line in err.splitlines():
        if not line.startswith("import time:") or "self [us]" in line:
            continue
        self_us, cum_us, name = line.removeprefix("import time:").split("|")
        module = name.strip()
        own[module.split(".")[0]] += int(self_us)
        cumulative[module] = int(cum_us)
    total = sum(own.values())
    print(f"\n1. import time before the first frame: {total / 1000:.0f} ms (self, by package)")
    for package, us in own.most_common(10):
        print(f"   {package:<28} {us / 1000:6.1f} ms")
    print("   memtui modules by cumulative time (what each pulls in):")
    mine = sorted(((us, m) for m, us in cumulative.items() if m.startswith("memtui")), reverse=True)
    for us, module in mine[:12]:
        print(f"   {module:<40} {us / 1000:6.1f} ms")


def phases(env: dict[str, str], runs: int) -> None:
    """Section 2: start-up phases to the first frame, the GC's share, widgets registered."""
    samples: list[dict[str, int]] = []
    for _ in range(runs):
        with tempfile.NamedTemporaryFile(suffix=".json") as out:
            term = Terminal(
                [sys.executable, "-c", PHASES], {**env, "PROFILE_OUT": out.name}, b"GPU 7"
            )
            term.proc.wait(60)
            term.close()
            text = Path(out.name).read_text()
            if text:
                samples.append(json.loads(text))
    if not samples:
        print("\n2. start-up phases: no sample (the dashboard did not draw its first frame)")
        return
    print(f"\n2. start-up phases, ms since the interpreter ran memtui (median of {len(samples)})")
    for key in samples[0]:
        values = [s[key] for s in samples if key in s]
        print(f"   {key:<22} {statistics.median(values):6.0f}")


def rss_steps(env: dict[str, str]) -> None:
    """Section 3: resident memory per import, and the floor of Textual + pydantic."""
    steps = [
        "textual.app",
        "pydantic",
        "memtui.telemetry.models",
        "pynvml",
        "psutil",
        "memtui.telemetry",
        "memtui.estimator",
        "memtui.estimator.model_source",
        "memtui.ui.app",
    ]
    print("\n3. resident memory each import adds (in the dashboard's order)")
    out = subprocess.run(
        [sys.executable, "-c", RSS_STEPS, *steps], env=env, capture_output=True, text=True
    )
    print(out.stdout.rstrip() or out.stderr.rstrip())
    bare = "from textual.app import App\nApp().run()\n"
    floors = {"a bare Textual app": bare, "+ one pydantic model, pynvml, psutil": FLOOR + bare}
    terms = {name: Terminal([sys.executable, "-c", code], env) for name, code in floors.items()}
    time.sleep(6.0)
    for name, term in terms.items():
        rss, _ = term.memory()
        print(f"   idle floor: {name:<38} {rss / 2**20:5.1f} MiB")
        term.close()


def allocations(env: dict[str, str]) -> None:
    """Section 4: Python allocations live after 8 s of watching, by package."""
    with tempfile.NamedTemporaryFile(suffix=".txt") as out:
        term = Terminal([sys.executable, "-c", ALLOCATIONS], {**env, "PROFILE_OUT": out.name})
        term.proc.wait(120)
        term.close()
        text = Path(out.name).read_text()
    print("\n4. Python allocations live after 8 s of watching (tracemalloc), by package")
    print("\n".join(f"   {line}" for line in text.splitlines()) or "   (no report)")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3, help="start-up samples (3)")
    parser.add_argument(
        "--sections", default="1234", help="which sections to print, e.g. 2 or 34 (1234)"
    )
    args = parser.parse_args()
    _, env = fake_node("memtui-profile-ui-")
    env["PYTHONPATH"] = str(ROOT)
    print(f"memtui start-up profile: {os.cpu_count()} CPUs, Python {sys.version.split()[0]}")
    sections = {"1": import_times, "3": rss_steps, "4": allocations}
    for section in args.sections:
        if section == "2":
            phases(env, args.runs)
        else:
            sections[section](env)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
