"""Build the fake libnvidia-ml.so.1 with gcc and script it through a scenario file.

Used by tests/conftest.py (fixtures), by the CLI tests (as subprocesses with LD_LIBRARY_PATH)
and by benchmarks/bench_telemetry.py. The library re-reads the scenario on every call, so a
test changes the node by calling `FakeNvml.write(...)` again.

A scenario is a dict:
    {"driver": "550.54.15", "cuda": 12040,
     "gpus": [gpu(0, used=..., procs=[(pid, used_bytes_or_None), ...]), ...],
     "errors": {"nvmlDeviceGetMemoryInfo_v2@1": 3, "nvmlInitWithFlags": 9},
     "hang": ["nvmlInitWithFlags"]}
An error key is a C function name, optionally `@KEY` for one device ("1", or "0.2" for MIG
device 2 of GPU 0).
"""

from __future__ import annotations

import collections
import ctypes
import hashlib
import os
import shutil
import subprocess
import tempfile
from collections.abc import Iterable
from pathlib import Path
from typing import Any

SOURCE = Path(__file__).with_name("fake_nvml.c")
GiB = 1024**3
MiB = 1024**2
# What NVML reports as total memory for an H100 80GB HBM3 (81559 MiB).
H100_TOTAL = 81559 * MiB

#: Variants of the library: the default, and an old driver without the v2 memory call.
VARIANTS: dict[str, tuple[str, ...]] = {"default": (), "no_v2": ("-DFAKE_NO_MEMORY_V2",)}


def build_fake_nvml(variant: str = "default", cache_dir: Path | None = None) -> Path:
    """Compile the fake (once per source version and variant); return the directory holding
    `libnvidia-ml.so.1`, ready for LD_LIBRARY_PATH or ctypes.CDLL."""
    flags = VARIANTS[variant]
    digest = hashlib.sha256(SOURCE.read_bytes() + repr(flags).encode()).hexdigest()[:16]
    root = cache_dir or Path(tempfile.gettempdir()) / f"memtui-fake-nvml-{os.getuid()}"
    lib_dir = root / f"{variant}-{digest}"
    lib = lib_dir / "libnvidia-ml.so.1"
    if lib.exists():
        return lib_dir
    cc = shutil.which("gcc") or shutil.which("cc")
    if cc is None:
        raise RuntimeError("no C compiler (gcc/cc) on PATH: cannot build the fake NVML")
    lib_dir.mkdir(parents=True, exist_ok=True)
    # Build to a private name then rename, so parallel test runs never load a half-written file.
    tmp = lib_dir / f".build-{os.getpid()}.so"
    subprocess.run(
        [cc, "-O2", "-shared", "-fPIC", "-pthread", "-Wl,-soname,libnvidia-ml.so.1", *flags,
         "-o", str(tmp), str(SOURCE)],
        check=True,
    )  # fmt: skip
    tmp.replace(lib)
    return lib_dir


def gpu(
    index: int,
    *,
    name: str = "NVIDIA H100 80GB HBM3",
    total: int = H100_TOTAL,
    used: int = 0,
    reserved: int = 512 * MiB,
    util: tuple[int, int] = (0, 0),
    procs: Iterable[tuple[int, int | None]] = (),
    mig: list[dict[str, Any]] | None = None,
    uuid: str | None = None,
    temp: int | None = None,
    power: int | None = None,
    power_limit: int | None = None,
    clocks: tuple[int, int] | None = None,
) -> dict[str, Any]:
    """One GPU of a scenario. `procs` are (host PID, used bytes or None for "n/a"); `temp`
    (degrees C), `power` and `power_limit` (milliwatts) and `clocks` (SM and memory MHz) are
    left out by default: the fake then answers NOT_SUPPORTED for them."""
    return {
        "name": name,
        "uuid": uuid or f"GPU-{index:08x}-fake-4000-8000-{index:012x}",
        "total": total,
        "used": used,
        "reserved": reserved,
        "util": util,
        "procs": list(procs),
        "mig": mig,
        "temp": temp,
        "power": power,
        "powerlimit": power_limit,
        "clocks": clocks,
    }


def mig_instance(
    gi: int,
    *,
    name: str = "NVIDIA A100-SXM4-80GB MIG 3g.40gb",
    total: int = 40 * GiB,
    used: int = 0,
    procs: Iterable[tuple[int, int | None]] = (),
    uuid: str | None = None,
) -> dict[str, Any]:
    """One MIG device (GPU instance `gi`) inside a GPU of a scenario."""
    return {
        "name": name,
        "uuid": uuid or f"MIG-fake-{gi:04d}-4000-8000-000000000000",
        "gi": gi,
        "total": total,
        "used": used,
        "procs": list(procs),
    }


def node(n_gpus: int, procs_per_gpu: int = 0, *, used: int = 20 * GiB) -> dict[str, Any]:
    """A plain node of H100s; each GPU runs `procs_per_gpu` processes whose host PIDs lie
    above Linux's pid_max, so they are invisible here, as from inside a container."""
    return {
        "gpus": [
            gpu(
                i,
                used=used,
                util=(50, 20),
                procs=[
                    (10_000_000 + 100 * i + p, used // max(procs_per_gpu, 1))
                    for p in range(procs_per_gpu)
                ],
            )
            for i in range(n_gpus)
        ]
    }


def render(scenario: dict[str, Any]) -> str:
    """The scenario dict as the text the C library parses (see fake_nvml.c)."""
    lines = [
        f"driver {scenario.get('driver', '550.54.15')}",
        f"cuda {scenario.get('cuda', 12040)}",
    ]
    gpus = scenario.get("gpus", [])
    lines.append(f"count {len(gpus)}")

    def device(key: str, d: dict[str, Any]) -> None:
        for fld in ("name", "uuid", "total", "used", "reserved", "gi", "temp", "power",
                    "powerlimit"):  # fmt: skip
            if d.get(fld) is not None:
                lines.append(f"dev {key} {fld} {d[fld]}")
        for pair in ("util", "clocks"):
            if d.get(pair) is not None:
                lines.append(f"dev {key} {pair} {d[pair][0]} {d[pair][1]}")
        gi = d.get("gi")
        for pid, used in d.get("procs", []):
            extra = f" {gi}" if gi is not None else ""
            lines.append(f"proc {key} {pid} {-1 if used is None else used}{extra}")

    for i, g in enumerate(gpus):
        device(str(i), g)
        if g.get("mig") is not None:
            lines.append(f"dev {i} mig 1")
            for j, m in enumerate(g["mig"]):
                device(f"{i}.{j}", m)
    for fn, code in scenario.get("errors", {}).items():
        name, _, key = fn.partition("@")
        lines.append(f"err {name} {code}" + (f" {key}" if key else ""))
    lines.extend(f"hang {fn}" for fn in scenario.get("hang", []))
    return "\n".join(lines) + "\n"


class FakeNvml:
    """A built fake library plus its scenario and call-log files.

    `write(scenario)` replaces the scenario (atomically), `calls()` counts the C calls made
    since the last `reset_calls()`, `env()` gives the variables a subprocess needs.
    """

    def __init__(self, lib_dir: Path, work_dir: Path) -> None:
        self.lib_dir = lib_dir
        self.lib_path = lib_dir / "libnvidia-ml.so.1"
        self.scenario_path = work_dir / "scenario.txt"
        self.calls_path = work_dir / "calls.log"
        self.write({"gpus": []})
        self.reset_calls()

    def write(self, scenario: dict[str, Any]) -> None:
        """Replace the scenario; the library sees it on its next call."""
        tmp = self.scenario_path.with_suffix(".tmp")
        tmp.write_text(render(scenario))
        tmp.replace(self.scenario_path)  # atomic: a concurrent reader sees old or new

    def reset_calls(self) -> None:
        """Forget the calls counted so far."""
        self.calls_path.write_text("")

    def calls(self) -> collections.Counter[str]:
        """How many times each NVML function was called since `reset_calls()`."""
        return collections.Counter(self.calls_path.read_text().split())

    def env(self, base: dict[str, str] | None = None) -> dict[str, str]:
        """Environment for a subprocess that should load this fake."""
        env = dict(os.environ if base is None else base)
        env["LD_LIBRARY_PATH"] = str(self.lib_dir)
        env["FAKE_NVML_SCENARIO"] = str(self.scenario_path)
        env["FAKE_NVML_CALLS"] = str(self.calls_path)
        return env

    def activate_in_process(self) -> ctypes.CDLL:
        """Point the real pynvml module at this library in the current process.

        pynvml keeps the loaded library in `pynvml.nvmlLib` and caches function pointers by
        name, so both are replaced/reset here (docs/architecture.md, "Testing without a GPU").
        """
        os.environ["FAKE_NVML_SCENARIO"] = str(self.scenario_path)
        os.environ["FAKE_NVML_CALLS"] = str(self.calls_path)
        lib = ctypes.CDLL(str(self.lib_path))
        reset_pynvml(lib)
        return lib


def reset_pynvml(lib: ctypes.CDLL | None) -> None:
    """Set pynvml's loaded library and forget its cached function pointers and refcount."""
    import pynvml

    pynvml.nvmlLib = lib
    pynvml._nvmlGetFunctionPointer_cache.clear()
    pynvml._nvmlLib_refcount = 0
