"""A real Prometheus server on loopback scraping exporters that the tests serve themselves.

Exporters speak the text exposition of dcgm-exporter (label set of its README's sample
output: gpu, UUID, pci_bus_id, device, modelName, Hostname or the older hostname, MIG
GPU_I_PROFILE/GPU_I_ID, Kubernetes container/namespace/pod, Slurm hpc_job) and of
nvitop-exporter (prometheus_client gauges: hostname, index, devicename, uuid; processes add
pid and username). Everything listens on 127.0.0.1 only. Used by tests/test_prometheus.py and
benchmarks/bench_telemetry.py.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import threading
import time
import urllib.request
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

MiB = 1024**2
H100_MIB = 81559
LOOPBACK = "127.0.0.1"


def free_port() -> int:
    with socket.socket() as s:
        s.bind((LOOPBACK, 0))
        return int(s.getsockname()[1])


@dataclass
class Gpu:
    used_mib: int
    uuid: str
    name: str = "NVIDIA H100 80GB HBM3"
    total_mib: int = H100_MIB
    reserved_mib: int = 512
    mig: tuple[str, int] | None = None  # (profile, GPU instance id)
    procs: list[tuple[int, str, int]] = field(default_factory=list)  # pid, user, MiB
    readings: dict[str, float | str] = field(default_factory=dict)
    """dcgm-exporter gauges beyond memory, by field name (DCGM_FI_DEV_GPU_TEMP: 67)."""


#: The help text of each dcgm-exporter gauge beyond memory, as etc/default-counters.csv
#: (NVIDIA/dcgm-exporter, commit 00d6d344ea4a39112b211b9ff5af3d97e0bb51c2) writes it.
DCGM_READINGS = {
    "DCGM_FI_DEV_SM_CLOCK": "SM clock frequency (in MHz).",
    "DCGM_FI_DEV_MEM_CLOCK": "Memory clock frequency (in MHz).",
    "DCGM_FI_DEV_GPU_TEMP": "GPU temperature (in C).",
    "DCGM_FI_DEV_POWER_USAGE": "Power draw (in W).",
    "DCGM_FI_DEV_GPU_UTIL": "GPU utilization (in %).",
    "DCGM_FI_DEV_MEM_COPY_UTIL": "Memory utilization (in %).",
}


def _labels(pairs: list[tuple[str, str]]) -> str:
    return "{" + ",".join(f'{k}="{v}"' for k, v in pairs) + "}"


def dcgm_text(
    host: str,
    gpus: list[Gpu],
    *,
    host_label: str = "Hostname",
    k8s: tuple[str, str, str] | None = None,
    job: str | None = None,
) -> str:
    """What dcgm-exporter serves on /metrics for these GPUs: memory, and each GPU's
    `readings` (a gauge a GPU lacks is left out for it, as the exporter does)."""
    lines = []
    readings = [
        (metric, help_text, lambda g, m=metric: g.readings.get(m))
        for metric, help_text in DCGM_READINGS.items()
        if any(metric in g.readings for g in gpus)
    ]
    for metric, help_text, value in (
        ("DCGM_FI_DEV_FB_FREE", "Framebuffer memory free (in MiB).",
         lambda g: g.total_mib - g.used_mib - g.reserved_mib),
        ("DCGM_FI_DEV_FB_USED", "Framebuffer memory used (in MiB).", lambda g: g.used_mib),
        ("DCGM_FI_DEV_FB_RESERVED", "Framebuffer memory reserved (in MiB).",
         lambda g: g.reserved_mib),
        *readings,
    ):  # fmt: skip
        lines += [f"# HELP {metric} {help_text}", f"# TYPE {metric} gauge"]
        for i, g in enumerate(gpus):
            if value(g) is None:
                continue
            index = 0 if g.mig else i
            pairs = [
                ("gpu", str(index)),
                ("UUID", g.uuid),
                ("pci_bus_id", f"00000000:{0x18 + index:02X}:00.0"),
                ("device", f"nvidia{index}"),
                ("modelName", g.name),
            ]
            if g.mig:
                pairs += [("GPU_I_PROFILE", g.mig[0]), ("GPU_I_ID", str(g.mig[1]))]
            pairs += [(host_label, host), ("DCGM_FI_DRIVER_VERSION", "550.54.15")]
            if k8s:
                pairs += [("container", k8s[2]), ("namespace", k8s[0]), ("pod", k8s[1])]
            if job:
                pairs.append(("hpc_job", job))
            lines.append(f"{metric}{_labels(pairs)} {value(g)}")
    return "\n".join(lines) + "\n"


def nvitop_text(host: str, gpus: list[Gpu]) -> str:
    """What nvitop-exporter serves (prometheus_client 0.0.4 text; memory gauges only)."""
    lines = []
    for metric, help_text, value in (
        ("gpu_memory_total_MiB", "GPU memory total (MiB).", lambda g: g.total_mib),
        ("gpu_memory_used_MiB", "GPU memory used (MiB).", lambda g: g.used_mib),
    ):
        lines += [f"# HELP {metric} {help_text}", f"# TYPE {metric} gauge"]
        for i, g in enumerate(gpus):
            pairs = [("hostname", host), ("index", str(i)), ("devicename", g.name),
                     ("uuid", g.uuid)]  # fmt: skip
            lines.append(f"{metric}{_labels(pairs)} {float(value(g))}")
    lines += ["# HELP process_gpu_memory_MiB Process GPU memory (MiB).",
              "# TYPE process_gpu_memory_MiB gauge"]  # fmt: skip
    for i, g in enumerate(gpus):
        for pid, user, mib in g.procs:
            pairs = [("hostname", host), ("index", str(i)), ("devicename", g.name),
                     ("uuid", g.uuid), ("pid", str(pid)), ("username", user)]  # fmt: skip
            lines.append(f"process_gpu_memory_MiB{_labels(pairs)} {float(mib)}")
    return "\n".join(lines) + "\n"


class Exporter:
    """/metrics on 127.0.0.1:port serving `text` (changeable); stop() and start() again on
    the same port, as an exporter that dies and comes back."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.port = free_port()
        self._server: ThreadingHTTPServer | None = None
        self.start()

    @property
    def target(self) -> str:
        return f"{LOOPBACK}:{self.port}"

    def start(self) -> None:
        exporter = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                body = exporter.text.encode()
                self.send_response(200)
                self.send_header("Content-Type", "text/plain; version=0.0.4")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args: object) -> None:
                pass

        ThreadingHTTPServer.allow_reuse_address = True
        self._server = ThreadingHTTPServer((LOOPBACK, self.port), Handler)
        threading.Thread(target=self._server.serve_forever, daemon=True).start()

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None


def prometheus_binary() -> str | None:
    return shutil.which("prometheus")


class Prometheus:
    """A real Prometheus on 127.0.0.1 scraping `targets` every second (TSDB in `work`)."""

    def __init__(
        self,
        work: Path,
        targets: list[str],
        labelled: dict[str, dict[str, str]] | None = None,
        interval: str = "1s",
    ) -> None:
        self.work = work
        self.port = free_port()
        self.url = f"http://{LOOPBACK}:{self.port}"
        config = ["global:", f"  scrape_interval: {interval}", f"  scrape_timeout: {interval}",
                  "scrape_configs:", "  - job_name: gpu", "    static_configs:"]  # fmt: skip
        for target in targets:
            config.append(f"      - targets: ['{target}']")
            for key, value in (labelled or {}).get(target, {}).items():
                config.append(f"        labels: {{{key}: '{value}'}}")
        (work / "prometheus.yml").write_text("\n".join(config) + "\n")
        self.proc: subprocess.Popen[bytes] | None = None
        self.start()

    def start(self, timeout: float = 60.0) -> None:
        binary = prometheus_binary()
        assert binary is not None
        self.proc = subprocess.Popen(
            [binary, f"--config.file={self.work / 'prometheus.yml'}",
             f"--storage.tsdb.path={self.work / 'data'}",
             f"--web.listen-address={LOOPBACK}:{self.port}", "--log.level=error"],
            stdout=subprocess.DEVNULL,
            stderr=(self.work / "prometheus.log").open("ab"),
            env={**os.environ, "GOMAXPROCS": "2"},
        )  # fmt: skip
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                with urllib.request.urlopen(f"{self.url}/-/ready", timeout=1) as answer:
                    if answer.status == 200:
                        return
            except OSError:
                time.sleep(0.1)
        raise RuntimeError(
            f"Prometheus did not start: {(self.work / 'prometheus.log').read_text()}"
        )

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.proc = None
