"""Snapshots of many hosts: the cluster record, its trace lines (old traces still replay),
device keys across hosts, terminal states, source info and the registry."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import pytest

from memtui.telemetry import (
    BoundedSource,
    ClusterSnapshot,
    DeviceKey,
    DeviceSnapshot,
    NodeSnapshot,
    Recorder,
    ReplaySource,
    SourceKind,
    SourceState,
    SyntheticSource,
    as_cluster,
    open_source,
    read_trace,
)
from memtui.text import shown
from memtui.ui.gpu_state import GpuHistory

GiB = 1024**3


def _node(host: str, used: int, state: SourceState = SourceState.OK) -> NodeSnapshot:
    devices = tuple(
        DeviceSnapshot(index=i, uuid=f"GPU-{host}-{i}", memory_total=80 * GiB, memory_used=used)
        for i in range(2)
    )
    return NodeSnapshot(time=10.0, hostname=host, source="x", state=state, devices=devices)


def _cluster(*nodes: NodeSnapshot) -> ClusterSnapshot:
    return ClusterSnapshot(time=10.0, source="prometheus:http://127.0.0.1:9", nodes=nodes)


def test_terminal_states_are_the_ones_polling_cannot_change() -> None:
    terminal = {s for s in SourceState if s.terminal}
    assert terminal == {SourceState.NO_LIBRARY, SourceState.ENDED}


def test_a_source_gives_up_on_terminal_states_and_a_file_on_any_failure(tmp_path: Path) -> None:
    live = SyntheticSource(1).info
    replay = ReplaySource(tmp_path / "t.jsonl").info
    assert live.kind is SourceKind.SYNTHETIC and replay.kind is SourceKind.RECORDED

    def poll(state: SourceState, recorded: bool = False) -> ClusterSnapshot:
        return ClusterSnapshot(time=1.0, state=state, reason="why", recorded=recorded)

    assert not live.gives_up(poll(SourceState.TIMEOUT)) and live.gives_up(poll(SourceState.ENDED))
    assert replay.gives_up(poll(SourceState.ERROR)) and not replay.gives_up(poll(SourceState.OK))
    # a failure the trace recorded is the recording machine's, not the replay's
    assert not replay.gives_up(poll(SourceState.NO_LIBRARY, recorded=True))
    assert poll(SourceState.ERROR, recorded=True).message == "recorded: why"


def test_device_keys_tell_hosts_apart_and_history_keeps_them_apart() -> None:
    snap = _cluster(_node("a", 10 * GiB), _node("b", 30 * GiB))
    keys = [key for key, _, _ in snap.rows()]
    assert keys[0] == DeviceKey("a", "GPU-a-0") and len(set(keys)) == 4
    assert [d.label for d in snap.devices] == ["0", "1", "0", "1"]  # labels collide
    history = GpuHistory()
    history.record(snap)
    assert history.get(DeviceKey("a", "GPU-a-0")).peak == 10 * GiB
    assert history.get(DeviceKey("b", "GPU-b-0")).peak == 30 * GiB


def test_a_peak_the_source_knows_counts_in_the_history() -> None:
    node = _node("a", 10 * GiB)
    device = node.devices[0].model_copy(update={"memory_peak": 70 * GiB})
    snap = as_cluster(node.model_copy(update={"devices": (device,)}))
    history = GpuHistory()
    history.record(snap)
    assert history.get(DeviceKey("a", "GPU-a-0")).peak == 70 * GiB


def test_single_node_lines_stay_format_1_and_clusters_are_format_2(tmp_path: Path) -> None:
    trace = tmp_path / "run.jsonl"
    node = SyntheticSource(2, clock=lambda: 5.0, start=0.0).poll()
    cluster = _cluster(_node("a", GiB), _node("b", 2 * GiB, SourceState.LOST))
    with Recorder(trace) as rec:
        rec.write(node)  # a node source's answer, as recorded before clusters existed
        rec.write(as_cluster(node))
        rec.write(cluster)
    lines = [json.loads(line) for line in trace.read_text().splitlines()]
    assert [line["format"] for line in lines] == [1, 1, 2]
    assert lines[0] == lines[1] and "nodes" not in lines[0] and "single_node" not in lines[2]
    back = list(read_trace(trace))
    assert back[0].as_node() == node and back[2] == cluster
    assert back[2].nodes[1].state is SourceState.LOST


def test_an_old_trace_line_replays(tmp_path: Path) -> None:
    """A line written by memtui before clusters existed (format 1, no newer keys)."""
    old = (
        '{"format":1,"time":1796029821.77,"hostname":"node7","source":"nvml","state":"ok",'
        '"reason":null,"remedy":null,"driver_version":"550.54.15","cuda_version":"12.4",'
        '"devices":[{"index":0,"mig_index":null,"parent_uuid":null,"mig_enabled":false,'
        '"uuid":"GPU-5f3a","name":"NVIDIA H100 80GB HBM3","memory_total":85520809984,'
        '"memory_used":21474836480,"memory_free":63509102592,"memory_reserved":536870912,'
        '"utilization_gpu":50,"utilization_memory":20,"host_memory_fallback":false,'
        '"lost":false,"error":null,"processes":[],"processes_note":null}],'
        '"poll_seconds":0.0009}\n'
    )
    trace = tmp_path / "old.jsonl"
    trace.write_text(old)
    snap = ReplaySource(trace, speed=None).poll()
    assert snap.ok and snap.nodes[0].hostname == "node7"
    assert snap.devices[0].memory_used == 21474836480
    assert json.loads(snap.dump_json())["hostname"] == "node7"  # still node-shaped out


def test_a_hostname_spelled_nodes_is_still_a_node_line(tmp_path: Path) -> None:
    trace = tmp_path / "t.jsonl"
    with Recorder(trace) as rec:
        rec.write(_node("nodes", GiB))
    (snap,) = read_trace(trace)
    assert snap.nodes[0].hostname == "nodes" and len(snap.devices) == 2


def test_bounded_source_says_what_silence_means_for_its_source() -> None:
    class Hung(SyntheticSource):
        def poll(self) -> NodeSnapshot:
            import time

            time.sleep(0.5)
            return super().poll()

    snap = BoundedSource(Hung(1), timeout_s=0.05).poll()
    assert snap.state is SourceState.TIMEOUT
    assert (snap.reason or "").startswith("the demo node is not answering")


def test_the_registry_opens_each_source_from_flags(tmp_path: Path) -> None:
    trace = tmp_path / "t.jsonl"
    trace.touch()
    opts = argparse.Namespace
    assert open_source(opts(replay=str(trace))).info.kind is SourceKind.RECORDED
    demo = open_source(opts(demo=True, demo_gpus=3))
    assert demo.info.kind is SourceKind.SYNTHETIC and len(as_cluster(demo.poll()).devices) == 3
    nvml = open_source(opts())
    assert isinstance(nvml, BoundedSource) and nvml.info.kind is SourceKind.LOCAL
    nvml.close()
    with pytest.raises(ValueError, match="--demo"):
        open_source(opts(demo=True, demo_total_bytes=1))


def test_printable_escapes_control_characters() -> None:
    assert shown("gpu01") == "gpu01"
    assert shown("evil\x1b[2Jhost\r\n\x9b") == "evil\\x1b[2Jhost\\r\\n\\x9b"
