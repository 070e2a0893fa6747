"""The Prometheus source against a real Prometheus server on loopback, scraping dcgm-exporter
and nvitop-exporter endpoints that the tests serve (tests/prom_harness.py); and its failure
handling against a stand-in API. `.ci/run` installs Prometheus: in CI these tests never skip."""

from __future__ import annotations

import json
import os
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from cli_helpers import watch
from prom_harness import (
    LOOPBACK,
    Exporter,
    Gpu,
    MiB,
    Prometheus,
    dcgm_text,
    nvitop_text,
    prometheus_binary,
)
from ui_helpers import llama_plan, screen_of, text_of, wait_for

from memtui.telemetry import ClusterSnapshot, SourceState, open_source
from memtui.telemetry.prometheus import PrometheusSource, authorization, expand_hostlist
from memtui.ui import make_app

if prometheus_binary() is None and os.environ.get("CI"):
    pytest.fail("CI must run the Prometheus tests: `prometheus` is not installed", pytrace=False)
needs_prometheus = pytest.mark.skipif(
    prometheus_binary() is None,
    reason="needs the prometheus server (apt-get install prometheus; .ci/run installs it)",
)


def _gpus(host: int, n: int = 2, base: int = 60_000) -> list[Gpu]:
    return [Gpu(base + 100 * i + host, f"GPU-{host:02d}{i:02d}-fake") for i in range(n)]


#: gpu01's GPU 0 reports every gauge of dcgm-exporter's default counters beyond memory (the
#: exporter writes floats: "412.5"); its GPU 1 reports none (n/a, as a board without them).
_READINGS = {
    "DCGM_FI_DEV_GPU_UTIL": 93,
    "DCGM_FI_DEV_MEM_COPY_UTIL": 38,
    "DCGM_FI_DEV_GPU_TEMP": 67,
    "DCGM_FI_DEV_POWER_USAGE": 412.5,
    "DCGM_FI_DEV_SM_CLOCK": 1980,
    "DCGM_FI_DEV_MEM_CLOCK": 2619,
}


class Cluster:
    """Four hosts: dcgm-exporter with `Hostname` (MIG and Kubernetes labels, Slurm job 1234),
    dcgm-exporter with the older `hostname` (relabelled: exported_pod), nvitop-exporter
    twice (with processes, gpu04 holding the rank-0 surplus)."""

    def __init__(self, work: Path) -> None:
        mig = [
            Gpu(9_000, "GPU-0100-fake", mig=("3g.40gb", 1)),
            Gpu(12_000, "GPU-0100-fake", mig=("3g.40gb", 2)),
        ]
        self.exporters = {
            "gpu01": Exporter(
                dcgm_text(
                    "gpu01",
                    [Gpu(60_001, "GPU-0100-fake", readings=dict(_READINGS)), *_gpus(1)[1:], *mig],
                    k8s=("ml", "train-0", "trainer"),
                    job="1234",
                )
            ),
            "gpu02": Exporter(
                dcgm_text(
                    "gpu02",
                    _gpus(2),
                    host_label="hostname",
                    k8s=("ml", "train-1", "trainer"),
                    job="1234",
                )
            ),
            "gpu03": Exporter(
                nvitop_text(
                    "gpu03",
                    [
                        Gpu(61_000, "GPU-0300", procs=[(4242, "alice", 60_500)]),
                        Gpu(61_100, "GPU-0301", procs=[(4243, "alice", 60_600)]),
                    ],
                )
            ),
            "gpu04": Exporter(
                nvitop_text("gpu04", [Gpu(75_000, "GPU-0400"), Gpu(61_000, "GPU-0401")])
            ),
        }
        gpu02 = self.exporters["gpu02"].target
        self.server = Prometheus(
            work,
            [e.target for e in self.exporters.values()],
            # a target label named like the exporter's: Prometheus renames its to exported_pod
            labelled={gpu02: {"pod": "dcgm-exporter-x"}},
        )

    def wait_for_hosts(self, n: int = 4, timeout: float = 60.0) -> ClusterSnapshot:
        source = PrometheusSource(self.server.url)
        deadline = time.monotonic() + timeout
        while True:
            snap = source.poll()
            if sum(node.ok for node in snap.nodes) == n or time.monotonic() > deadline:
                return snap
            time.sleep(0.3)

    def close(self) -> None:
        self.server.stop()
        for exporter in self.exporters.values():
            exporter.stop()


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    if prometheus_binary() is None:
        pytest.skip("needs the prometheus server (apt-get install prometheus)")
    c = Cluster(tmp_path_factory.mktemp("prometheus"))
    try:
        snap = c.wait_for_hosts()
        assert len(snap.nodes) == 4, snap
        yield c
    finally:
        c.close()


# -- against the real server ------------------------------------------------------------


@needs_prometheus
def test_watch_once_json_reads_every_host(cluster: Cluster) -> None:
    out = watch("--once", "--json", "--prometheus", cluster.server.url)
    assert out.returncode == 0, out.stderr
    data = json.loads(out.stdout)
    assert data["format"] == 2 and data["state"] == "ok"
    hosts = {n["hostname"]: n for n in data["nodes"]}
    assert sorted(hosts) == ["gpu01", "gpu02", "gpu03", "gpu04"]
    gpu01 = hosts["gpu01"]["devices"]
    assert [d["mig_index"] for d in gpu01] == [None, 1, 2, None]  # MIG GPU_I_ID, under GPU 0
    assert gpu01[0]["memory_used"] == 60_001 * MiB  # MiB as strings -> bytes
    assert gpu01[0]["memory_total"] == 81559 * MiB  # used + free + reserved
    assert gpu01[0]["memory_peak"] >= 60_001 * MiB
    assert gpu01[1]["parent_uuid"] == "GPU-0100-fake" and "3g.40gb" in gpu01[1]["name"]
    assert gpu01[0]["workload"] == "ml/train-0/trainer"
    assert hosts["gpu02"]["devices"][0]["workload"] == "ml/train-1/trainer"  # exported_pod
    gpu03 = hosts["gpu03"]["devices"][0]
    assert gpu03["processes"][0]["pid"] == 4242 and gpu03["processes"][0]["user"] == "alice"
    assert gpu03["memory_total"] == 81559 * MiB and gpu03["uuid"] == "GPU-0300"
    table = watch("--once", "--prometheus", cluster.server.url)
    assert table.returncode == 0 and "gpu04" in table.stdout and "4 hosts" in table.stdout


@needs_prometheus
def test_dcgm_utilisation_temperature_power_and_clocks(cluster: Cluster) -> None:
    """The six gauges through a real Prometheus: percent, degrees, watts read as milliwatts,
    MHz; a GPU without them n/a; the power limit (not a default counter) n/a."""
    snap = cluster.wait_for_hosts()
    gpu01 = next(n for n in snap.nodes if n.hostname == "gpu01").devices
    first, second = gpu01[0], gpu01[-1]
    assert (first.utilization_gpu, first.utilization_memory) == (93, 38)
    assert first.temperature_c == 67 and first.power_mw == 412_500
    assert (first.clock_sm_mhz, first.clock_memory_mhz) == (1980, 2619)
    assert first.power_limit_mw is None and first.error is None
    assert (second.index, second.temperature_c, second.power_mw) == (1, None, None)
    assert second.utilization_gpu is None and second.error is None


@needs_prometheus
def test_selection_by_hosts_job_and_selector(cluster: Cluster, tmp_path: Path) -> None:
    url = cluster.server.url
    hosts = json.loads(
        watch("--once", "--json", "--prometheus", url, "--hosts", "gpu[02-03]").stdout
    )
    assert [n["hostname"] for n in hosts["nodes"]] == ["gpu02", "gpu03"]
    job = json.loads(watch("--once", "--json", "--prometheus", url, "--job", "1234").stdout)
    assert [n["hostname"] for n in job["nodes"]] == ["gpu01", "gpu02"]
    sel = json.loads(
        watch("--once", "--json", "--prometheus", url, "--selector", 'hostname="gpu04"').stdout
    )
    assert [n["hostname"] for n in sel["nodes"]] == ["gpu04"]
    # a job no series carries: its nodes come from Slurm (a stand-in squeue on PATH)
    squeue = tmp_path / "squeue"
    squeue.write_text("#!/bin/sh\necho 'gpu[03-04]|2030-01-01T00:00:00'\n")
    squeue.chmod(0o755)
    env = {**os.environ, "PATH": f"{tmp_path}{os.pathsep}{os.environ['PATH']}"}
    slurm = json.loads(
        watch("--once", "--json", "--prometheus", url, "--job", "999", env=env).stdout
    )
    assert [n["hostname"] for n in slurm["nodes"]] == ["gpu03", "gpu04"]


@needs_prometheus
async def test_dashboard_follows_the_cluster_through_lost_hosts_and_a_server_restart(
    cluster: Cluster,
) -> None:
    import argparse

    source = open_source(argparse.Namespace(prometheus=cluster.server.url, timeout=2.0))
    app = make_app(
        llama_plan(), source, interval=0.3, fit_to_devices=frozenset({"gpus", "nodes", "memory"})
    )
    async with app.run_test(size=(120, 40)) as pilot:
        screen = screen_of(app)

        def hosts_ok(n: int) -> bool:
            snap = screen.snapshot
            return snap is not None and snap.ok and sum(x.ok for x in snap.nodes) == n

        await wait_for(pilot, lambda: hosts_ok(4), steps=2000)
        await pilot.pause()
        assert screen.plan.hardware.nodes == 4 and screen.plan.hardware.gpus_per_node == 2
        shown = text_of(app)
        assert "Prometheus" in shown and "4 hosts" in shown and "gpu04" in shown
        assert "nearest capacity: gpu04/0" in shown  # 75,000 of 81,559 MiB
        # one host's exporter stops: that host is lost, the others keep updating
        cluster.exporters["gpu03"].stop()
        try:
            await wait_for(pilot, lambda: hosts_ok(3), steps=2000)
            await pilot.pause()
            assert "not reporting: gpu03" in text_of(app)
            assert "1 host lost" in text_of(app)
        finally:
            cluster.exporters["gpu03"].start()
        # the server stops: the screen says so, every host lost; it recovers on restart
        cluster.server.stop()
        try:
            await wait_for(
                pilot, lambda: screen.snapshot is not None and not screen.snapshot.ok, steps=2000
            )
            await pilot.pause()
            assert "cannot reach Prometheus" in " ".join(text_of(app).split())
            assert all(n.state is SourceState.LOST for n in screen.snapshot.nodes)
        finally:
            cluster.server.start()
        await wait_for(pilot, lambda: hosts_ok(4), steps=4000)
        await pilot.pause()
        assert "cannot reach" not in text_of(app)


# -- failures against a stand-in API ----------------------------------------------------


class _Api:
    """A loopback HTTP server answering /api/v1/query with whatever a test sets."""

    def __init__(self) -> None:
        self.status, self.body = 200, b"{}"
        self.headers: list[dict[str, str]] = []
        api = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                api.headers.append(dict(self.headers))
                self.rfile.read(int(self.headers.get("Content-Length") or 0))
                self.send_response(api.status)
                self.send_header("Content-Length", str(len(api.body)))
                self.end_headers()
                self.wfile.write(api.body)

            def log_message(self, *args: object) -> None:
                pass

        self.server = ThreadingHTTPServer((LOOPBACK, 0), Handler)
        self.url = f"http://{LOOPBACK}:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def answer(self, result: list[dict[str, Any]]) -> None:
        self.status = 200
        self.body = json.dumps({"status": "success", "data": {"result": result}}).encode()


@pytest.fixture
def api() -> Iterator[_Api]:
    a = _Api()
    yield a
    a.server.shutdown()
    a.server.server_close()


def _used(host: str, mib: str, sample_time: float | None = None) -> list[dict[str, Any]]:
    labels = {"gpu": "0", "UUID": "GPU-x", "modelName": "NVIDIA H100", "Hostname": host}
    out = [
        {"metric": {"__name__": "DCGM_FI_DEV_FB_USED", **labels}, "value": [1, mib]},
        {"metric": {"__name__": "DCGM_FI_DEV_FB_FREE", **labels}, "value": [1, "1000"]},
    ]
    if sample_time is not None:
        out.append({"metric": {**labels, "memtui": "sample_time"}, "value": [1, str(sample_time)]})
    return out


@pytest.mark.parametrize(
    ("status", "body", "state", "words"),
    [
        (500, b"oops", SourceState.ERROR, "answered HTTP 500"),
        (401, b"{}", SourceState.NO_PERMISSION, "HTTP 401 (not authorised)"),
        (
            400,
            b'{"status":"error","errorType":"bad_data","error":"parse error at char 9"}',
            SourceState.ERROR,
            "refused the query (HTTP 400): parse error at char 9",
        ),
        (200, b"<html>not prometheus</html>", SourceState.ERROR, "not a Prometheus API answer"),
    ],
)
def test_http_and_query_errors_are_one_line_and_lost_hosts(
    api: _Api, status: int, body: bytes, state: SourceState, words: str
) -> None:
    source = PrometheusSource(api.url)
    api.answer(_used("gpu01", "100"))
    assert source.poll().ok
    api.status, api.body = status, body
    snap = source.poll()
    assert snap.state is state and words in (snap.reason or "") and "\n" not in snap.message
    assert [(n.hostname, n.state) for n in snap.nodes] == [("gpu01", SourceState.LOST)]
    assert snap.nodes[0].devices[0].lost


def test_an_unreadable_dcgm_gauge_is_named_and_the_gpu_kept(api: _Api) -> None:
    """A NaN temperature (the exporter could not read it) keeps the GPU, its memory and its
    other gauges, and names the series, as an unreadable memory series does."""
    labels = {"gpu": "0", "UUID": "GPU-x", "modelName": "NVIDIA H100", "Hostname": "gpu01"}
    api.answer(
        [
            *_used("gpu01", "100"),
            {"metric": {"__name__": "DCGM_FI_DEV_GPU_TEMP", **labels}, "value": [1, "NaN"]},
            {"metric": {"__name__": "DCGM_FI_DEV_POWER_USAGE", **labels}, "value": [1, "88.25"]},
        ]
    )
    device = PrometheusSource(api.url).poll().nodes[0].devices[0]
    assert device.memory_used == 100 * MiB and device.power_mw == 88_250
    assert device.temperature_c is None
    assert "DCGM_FI_DEV_GPU_TEMP is nan" in (device.error or "")


def test_unreachable_server_and_stale_samples(api: _Api) -> None:
    now = [1000.0]
    source = PrometheusSource(api.url, clock=lambda: now[0], stale_after_s=10)
    api.answer(_used("gpu01", "100", sample_time=999.0))
    assert source.poll().nodes[0].ok
    now[0] = 1020.0  # the server still answers, with the same old sample
    stale = source.poll().nodes[0]
    assert stale.state is SourceState.LOST and "samples are 21 s old (stale)" in (
        stale.reason or ""
    )
    dead = PrometheusSource(f"http://{LOOPBACK}:9").poll()  # nothing listens on port 9
    assert dead.state is SourceState.ERROR and "cannot reach Prometheus" in (dead.reason or "")


def test_credentials_come_from_files_or_the_environment(api: _Api, tmp_path: Path) -> None:
    token = tmp_path / "token"
    token.write_text("s3cret\n")
    api.answer([])
    PrometheusSource(api.url, authorization=authorization(str(token), None)).poll()
    assert api.headers[-1]["Authorization"] == "Bearer s3cret"
    basic = authorization(None, None, {"MEMTUI_PROMETHEUS_BASIC_AUTH": "bob:pw"})
    assert basic == "Basic Ym9iOnB3"
    assert authorization(None, None, {}) is None
    with pytest.raises(ValueError, match="bearer-token-file"):
        authorization(str(tmp_path / "missing"), None)
    with pytest.raises(ValueError, match="do not belong on the command line"):
        PrometheusSource("http://bob:pw@127.0.0.1:9090")
    out = watch("--once", "--prometheus", "http://u:p@127.0.0.1:9")
    assert out.returncode == 2 and "credentials" in out.stderr


def test_job_flags_need_prometheus_and_host_lists_expand() -> None:
    assert expand_hostlist("gpu[01-03,07],login1") == ["gpu01", "gpu02", "gpu03", "gpu07", "login1"]
    assert expand_hostlist("r[1-2]n[08-09]") == ["r1n08", "r1n09", "r2n08", "r2n09"]
    with pytest.raises(ValueError):
        expand_hostlist("gpu[01-")
    out = watch("--once", "--job", "12")
    assert out.returncode == 2 and "--job needs --prometheus" in out.stderr


def test_hostile_host_labels_are_shown_as_text(api: _Api) -> None:
    api.answer(_used("evil\x1b[2J[bold]host", "100"))
    snap = PrometheusSource(api.url).poll()
    assert snap.nodes[0].hostname == "evil\x1b[2J[bold]host"  # data stays as it came
    out = watch("--once", "--prometheus", api.url)
    assert "evil\\x1b[2J[bold]host" in out.stdout and "\x1b[2J" not in out.stdout
