"""The dashboard's decisions without a screen: fitting the plan to the GPUs seen, the alert
tracker (crossings, rate limits, merged toasts) and the outliers of a job on many hosts."""

from __future__ import annotations

import pytest
from ui_helpers import llama_plan

from memtui.telemetry import ClusterSnapshot, DeviceKey, DeviceSnapshot, NodeSnapshot, SourceState
from memtui.ui.alerts import AlertTracker
from memtui.ui.fit import fit_plan
from memtui.ui.gpu_state import RowStatus
from memtui.ui.outliers import find_outliers

GiB = 1024**3
TOTAL = 80 * GiB
BUDGET = 60 * GiB


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def _gpu(i: int, used: int | None, total: int | None = TOTAL, **kw: object) -> DeviceSnapshot:
    return DeviceSnapshot(
        index=i,
        uuid=f"GPU-{i}",
        memory_total=total,
        memory_used=used,
        **kw,  # type: ignore[arg-type]
    )


def _one_node(*devices: DeviceSnapshot) -> ClusterSnapshot:
    return ClusterSnapshot.of_node(NodeSnapshot(time=1.0, hostname="n", devices=devices))


def _hosts(used: dict[str, list[int]], lost: tuple[str, ...] = ()) -> ClusterSnapshot:
    nodes = tuple(
        NodeSnapshot(
            time=1.0,
            hostname=host,
            state=SourceState.LOST if host in lost else SourceState.OK,
            devices=tuple(
                DeviceSnapshot(
                    index=i,
                    uuid=f"GPU-{host}-{i}",
                    memory_total=TOTAL,
                    memory_used=None if host in lost else u,
                    lost=host in lost,
                    error="host stopped reporting" if host in lost else None,
                )
                for i, u in enumerate(values)
            ),
        )
        for host, values in used.items()
    )
    return ClusterSnapshot(time=1.0, source="prometheus:x", nodes=nodes)


# -- fit_plan ---------------------------------------------------------------------------


def test_fit_plan_sizes_gpus_nodes_and_memory_from_what_was_seen() -> None:
    snap = _hosts({"a": [GiB] * 4, "b": [GiB] * 8, "c": [GiB] * 8})
    fitted = fit_plan(llama_plan(), snap, {"gpus", "nodes", "memory"})
    assert fitted is not None
    hw = fitted.hardware
    assert (hw.gpus_per_node, hw.nodes, hw.gpu_memory) == (8, 3, TOTAL)
    only_gpus = fit_plan(llama_plan(), snap, {"gpus"})
    assert only_gpus is not None and only_gpus.hardware.nodes == 1


def test_fit_plan_has_nothing_to_fit_without_sized_whole_gpus() -> None:
    assert fit_plan(llama_plan(), _one_node(_gpu(0, GiB)), set()) is None
    assert fit_plan(llama_plan(), _one_node(_gpu(0, None, total=None)), {"gpus"}) is None
    mig = DeviceSnapshot(index=0, mig_index=1, memory_total=TOTAL, memory_used=GiB)
    assert fit_plan(llama_plan(), _one_node(mig), {"gpus"}) is None


def test_fit_plan_counts_a_gpu_lost_at_start_and_sizes_to_real_gpu_memory() -> None:
    """A GPU lost at start-up is still one of the node's GPUs; a GPU whose memory NVML cannot
    read (host-memory fallback: the host's RAM, not a card) does not size the plan, unless
    every GPU is one (a unified-memory part, where the host's memory is the GPU's)."""
    lost = _gpu(3, None, total=None, lost=True, error="GPU is lost")
    host_ram = _gpu(4, GiB, total=25 * GiB, host_memory_fallback=True, name="GB10")
    gpus = [_gpu(i, GiB, name="NVIDIA H100 80GB HBM3") for i in range(3)]
    fitted = fit_plan(llama_plan(), _one_node(*gpus, lost, host_ram), {"gpus", "memory"})
    assert fitted is not None
    hw = fitted.hardware
    assert (hw.gpus_per_node, hw.gpu_memory, hw.gpu_name) == (5, TOTAL, "NVIDIA H100 80GB HBM3")
    unified = _one_node(host_ram, host_ram.model_copy(update={"index": 5}))
    fitted = fit_plan(llama_plan(), unified, {"gpus", "memory"})
    assert fitted is not None
    assert (fitted.hardware.gpus_per_node, fitted.hardware.gpu_memory) == (2, 25 * GiB)


def test_fit_plan_refuses_an_invalid_plan() -> None:
    many = _one_node(*(_gpu(i, GiB) for i in range(1025)))  # a "node" past Hardware's limit
    with pytest.raises(ValueError):
        fit_plan(llama_plan(), many, {"gpus"})


# -- the alert tracker -----------------------------------------------------------------


def test_one_notice_per_crossing_naming_every_gpu() -> None:
    tracker = AlertTracker(clock=Clock())
    assert tracker.update(_one_node(_gpu(0, GiB), _gpu(1, GiB)), BUDGET, "GB") == []
    over = _one_node(_gpu(0, 65 * GiB), _gpu(1, 66 * GiB))
    (notice,) = tracker.update(over, BUDGET, "GB")
    assert notice.message.startswith("GPUs 0, 1: OVER BUDGET: up to 70.9 GB used")
    assert notice.severity == "error" and notice.title == "Memory alert"
    assert tracker.update(over, BUDGET, "GB") == []  # still over: no new crossing
    assert set(tracker.statuses.values()) == {RowStatus.OVER}


def test_a_gpu_hovering_at_its_budget_is_not_notified_on_every_crossing() -> None:
    clock = Clock()
    tracker = AlertTracker(quiet_s=60.0, clock=clock)
    under, over = _one_node(_gpu(0, 59 * GiB)), _one_node(_gpu(0, 61 * GiB))
    raised = []
    for second in range(30):  # crosses the budget every second for half a minute
        clock.now = float(second)
        raised += tracker.update(over if second % 2 else under, BUDGET, "GB")
    assert len(raised) == 1
    clock.now = 61.0
    tracker.update(under, BUDGET, "GB")
    clock.now = 62.0
    assert len(tracker.update(over, BUDGET, "GB")) == 1  # a minute later: said again
    assert tracker.statuses[DeviceKey("n", "GPU-0")] is RowStatus.OVER


def test_near_capacity_is_a_warning_and_lost_gpus_of_a_host_are_one_notice() -> None:
    tracker = AlertTracker(clock=Clock())
    near = _one_node(_gpu(0, int(TOTAL * 0.97)))
    (notice,) = tracker.update(near, 100 * GiB, "GB")
    assert "GPU 0: NEAR CAPACITY" in notice.message and notice.severity == "warning"
    snap = _hosts({"a": [GiB, GiB], "b": [GiB, GiB]}, lost=("b",))
    (lost,) = tracker.update(snap, BUDGET, "GB")
    assert lost.message == "GPUs b/0, b/1 lost: host stopped reporting"


def test_refused_keys_show_one_toast_while_it_is_on_screen() -> None:
    clock = Clock()
    tracker = AlertTracker(toast_s=5.0, clock=clock)
    first = tracker.refused("micro-batch is at its maximum")
    assert first is not None and first.title == "Not changed"
    clock.now = 1.0
    assert tracker.refused("micro-batch is at its maximum") is None
    assert tracker.refused("sequence is at its minimum") is not None  # another key: shown
    clock.now = 6.0
    assert tracker.refused("micro-batch is at its maximum") is not None


# -- outliers ---------------------------------------------------------------------------


def test_outliers_name_the_fullest_gpu_the_rank_0_surplus_and_silent_hosts() -> None:
    used = {f"h{n}": [50 * GiB] * 4 for n in range(4)}
    used["h0"][0] = 62 * GiB  # rank 0 holds 12 GiB more than the others
    used["h2"][3] = 77 * GiB  # 96 percent of its card
    found = find_outliers(_hosts(used, lost=("h3",)))
    assert found.nearest is not None and found.nearest[0] == DeviceKey("h2", "GPU-h2-3")
    assert found.median == 50 * GiB
    assert [k for k, _ in found.above] == [
        DeviceKey("h2", "GPU-h2-3"),
        DeviceKey("h0", "GPU-h0-0"),
    ]
    assert found.silent_hosts == ("h3",)


def test_no_outliers_in_an_even_job() -> None:
    found = find_outliers(_hosts({"a": [50 * GiB] * 8, "b": [50 * GiB + 10**8] * 8}))
    assert found.above == () and found.silent_hosts == ()
