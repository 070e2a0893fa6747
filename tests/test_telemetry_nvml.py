"""The NVML source against the fake libnvidia-ml, in-process, through the real pynvml.

One test per fault a user meets on a real node (the error codes in docs/architecture.md,
"Testing without a GPU"), each asserting what the user would see in the snapshot
(state, reason, remedy, lost flags, "n/a" fields, notes), plus the NVML call budget.
"""

from __future__ import annotations

import os
import socket
import time
from collections.abc import Callable, Iterator

import psutil
import pytest
from fake_nvml.harness import FakeNvml, GiB, MiB, gpu, mig_instance, node

from memtui.telemetry import (
    REDISCOVER_EVERY,
    STEADY_CALLS_PER_GPU,
    BoundedSource,
    NvmlSource,
    SourceState,
)
from memtui.telemetry.processes import OTHER_NAMESPACE_NOTE

ME = os.getpid()  # a PID that psutil can see: the test process itself


def idle(bounded: BoundedSource, timeout_s: float) -> bool:
    """Wait until an abandoned poll has ended; True when none is running."""
    deadline = time.monotonic() + timeout_s
    while bounded.busy() and time.monotonic() < deadline:
        time.sleep(0.01)
    return not bounded.busy()


@pytest.fixture
def source(fake_nvml_in_process: FakeNvml) -> Iterator[NvmlSource]:
    src = NvmlSource()
    yield src
    src.close()


def test_healthy_node_reports_versions_memory_and_processes(
    fake_nvml_in_process: FakeNvml, source: NvmlSource
) -> None:
    fake_nvml_in_process.write(
        {
            "driver": "555.42.06",
            "cuda": 12050,
            "gpus": [
                gpu(0, used=30 * GiB, reserved=512 * MiB, util=(97, 41), procs=[(ME, 29 * GiB)])
            ],
        }
    )
    snap = source.poll()
    assert snap.state is SourceState.OK and snap.reason is None
    assert (snap.driver_version, snap.cuda_version) == ("555.42.06", "12.5")
    (d,) = snap.devices
    assert d.name == "NVIDIA H100 80GB HBM3"
    assert d.uuid and d.uuid.startswith("GPU-")
    assert d.memory_total == 81559 * MiB
    assert d.memory_used == 30 * GiB  # v2: used excludes reserved
    assert d.memory_reserved == 512 * MiB
    assert d.memory_free == 81559 * MiB - 30 * GiB - 512 * MiB
    assert (d.utilization_gpu, d.utilization_memory) == (97, 41)
    (p,) = d.processes or ()
    assert (p.pid, p.used_bytes) == (ME, 29 * GiB)
    assert p.name == psutil.Process(ME).name()
    assert p.user == psutil.Process(ME).username()
    assert p.command == " ".join(psutil.Process(ME).cmdline())
    assert d.processes_note is None and not d.lost and not d.host_memory_fallback


def test_library_missing_is_a_state_with_remedy(
    monkeypatch: pytest.MonkeyPatch, fake_nvml_in_process: FakeNvml
) -> None:
    """No libnvidia-ml.so.1 at all (this machine's real state): pynvml's CDLL fails."""
    import pynvml
    from fake_nvml.harness import reset_pynvml

    reset_pynvml(None)

    def no_library(name: str) -> None:
        raise OSError(f"{name}: cannot open shared object file")

    monkeypatch.setattr(pynvml, "CDLL", no_library)
    src = NvmlSource()
    snap = src.poll()
    assert snap.state is SourceState.NO_LIBRARY
    assert snap.devices == ()
    assert "libnvidia-ml.so.1" in (snap.reason or "")
    assert "driver" in (snap.remedy or "")
    assert src.poll().state is SourceState.NO_LIBRARY  # polls again without raising
    src.close()


@pytest.mark.parametrize(
    ("code", "state", "reason_part", "remedy_part"),
    [
        (9, SourceState.DRIVER_NOT_LOADED, "driver not loaded", "modprobe nvidia"),
        (18, SourceState.VERSION_MISMATCH, "driver and library versions differ", "reboot"),
        (4, SourceState.NO_PERMISSION, "no permission", "/dev/nvidia"),
        (999, SourceState.ERROR, "Unknown Error", "nvidia-smi"),
    ],
)
def test_init_failures_become_states(
    fake_nvml_in_process: FakeNvml,
    source: NvmlSource,
    code: int,
    state: SourceState,
    reason_part: str,
    remedy_part: str,
) -> None:
    fake_nvml_in_process.write({**node(2), "errors": {"nvmlInitWithFlags": code}})
    snap = source.poll()
    assert snap.state is state
    assert reason_part in (snap.reason or "")
    assert remedy_part in (snap.remedy or "")
    assert "\n" not in (snap.message or "")
    assert snap.devices == ()
    # the fault clears (driver loaded, module reloaded): the next poll recovers by itself
    fake_nvml_in_process.write(node(2))
    recovered = source.poll()
    assert recovered.state is SourceState.OK and len(recovered.devices) == 2


def test_gpu_lost_mid_run_marks_only_that_gpu(
    fake_nvml_in_process: FakeNvml, source: NvmlSource
) -> None:
    fake_nvml_in_process.write(node(4, 1))
    assert [d.lost for d in source.poll().devices] == [False] * 4
    scenario = node(4, 1, used=40 * GiB)
    scenario["errors"] = {"nvmlDeviceGetMemoryInfo_v2@2": 15}
    fake_nvml_in_process.write(scenario)
    snap = source.poll()
    assert snap.state is SourceState.OK
    assert [d.lost for d in snap.devices] == [False, False, True, False]
    lost = snap.devices[2]
    assert lost.memory_used is None and lost.processes is None
    assert lost.uuid and lost.name  # still identifiable on screen
    assert "GPU is lost" in (lost.error or "") and "reboot" in (lost.error or "")
    # the other three kept updating
    assert [snap.devices[i].memory_used for i in (0, 1, 3)] == [40 * GiB] * 3


def test_device_error_other_than_lost_also_marks_it(
    fake_nvml_in_process: FakeNvml, source: NvmlSource
) -> None:
    fake_nvml_in_process.write({**node(2), "errors": {"nvmlDeviceGetUtilizationRates@1": 999}})
    snap = source.poll()
    assert [d.lost for d in snap.devices] == [False, True]
    assert "Unknown Error" in (snap.devices[1].error or "")


def test_driver_unloaded_mid_run_becomes_source_state(
    fake_nvml_in_process: FakeNvml, source: NvmlSource
) -> None:
    fake_nvml_in_process.write(node(2))
    assert source.poll().ok
    fake_nvml_in_process.write({**node(2), "errors": {"nvmlDeviceGetMemoryInfo_v2": 9}})
    assert source.poll().state is SourceState.DRIVER_NOT_LOADED
    fake_nvml_in_process.write(node(2))
    assert source.poll().ok


def test_memory_not_supported_falls_back_to_host_memory(
    fake_nvml_in_process: FakeNvml, source: NvmlSource
) -> None:
    """Unified-memory parts (GB10, GH200-class) answer NOT_SUPPORTED to both memory calls."""
    fake_nvml_in_process.write(
        {
            **node(2),
            "errors": {"nvmlDeviceGetMemoryInfo_v2@0": 3, "nvmlDeviceGetMemoryInfo@0": 3},
        }
    )
    snap = source.poll()
    unified, normal = snap.devices
    assert unified.host_memory_fallback and not unified.lost
    assert unified.memory_total == psutil.virtual_memory().total
    assert unified.memory_reserved is None
    assert not normal.host_memory_fallback and normal.memory_total == 81559 * MiB
    # the fallback is remembered: no more NVML memory calls for that GPU
    fake_nvml_in_process.reset_calls()
    source.poll()
    calls = fake_nvml_in_process.calls()
    assert calls["nvmlDeviceGetMemoryInfo_v2"] == 1 and calls["nvmlDeviceGetMemoryInfo"] == 0


def test_utilization_not_supported_is_na_and_not_asked_again(
    fake_nvml_in_process: FakeNvml, source: NvmlSource
) -> None:
    fake_nvml_in_process.write({**node(1), "errors": {"nvmlDeviceGetUtilizationRates": 3}})
    d = source.poll().devices[0]
    assert d.utilization_gpu is None and d.utilization_memory is None and not d.lost
    fake_nvml_in_process.reset_calls()
    source.poll()
    assert fake_nvml_in_process.calls()["nvmlDeviceGetUtilizationRates"] == 0


def test_process_memory_unavailable_is_none(
    fake_nvml_in_process: FakeNvml, source: NvmlSource
) -> None:
    fake_nvml_in_process.write({"gpus": [gpu(0, used=5 * GiB, procs=[(ME, None)])]})
    (p,) = source.poll().devices[0].processes or ()
    assert p.pid == ME and p.used_bytes is None and p.name is not None


def test_mig_instances_are_rows_with_their_processes(
    fake_nvml_in_process: FakeNvml, source: NvmlSource
) -> None:
    fake_nvml_in_process.write(
        {
            "gpus": [
                gpu(
                    0,
                    name="NVIDIA A100-SXM4-80GB",
                    used=13 * GiB,
                    mig=[
                        mig_instance(1, used=10 * GiB, procs=[(ME, 9 * GiB)], uuid="MIG-aaaa"),
                        mig_instance(2, used=3 * GiB, procs=[(10_000_007, None)], uuid="MIG-bbbb"),
                    ],
                ),
                gpu(1),
            ]
        }
    )
    snap = source.poll()
    assert [d.label for d in snap.devices] == ["0", "0:0", "0:1", "1"]
    parent, first, second, _ = snap.devices
    assert parent.mig_enabled and parent.processes == ()
    assert "MIG" in (parent.processes_note or "")
    assert first.parent_uuid == parent.uuid and first.uuid == "MIG-aaaa"
    assert first.memory_used == 10 * GiB and first.memory_total == 40 * GiB
    assert first.utilization_gpu is None  # NVML has no per-MIG utilisation
    assert [(p.pid, p.used_bytes, p.gpu_instance_id) for p in first.processes or ()] == [
        (ME, 9 * GiB, 1)
    ]
    assert [(p.pid, p.used_bytes) for p in second.processes or ()] == [(10_000_007, None)]
    assert second.processes_note == OTHER_NAMESPACE_NOTE


def test_no_permission_to_list_processes_is_a_note(
    fake_nvml_in_process: FakeNvml, source: NvmlSource
) -> None:
    fake_nvml_in_process.write(
        {**node(2, 1), "errors": {"nvmlDeviceGetComputeRunningProcesses_v3@1": 4}}
    )
    snap = source.poll()
    assert snap.ok and not snap.devices[1].lost
    assert snap.devices[1].processes is None
    assert "no permission" in (snap.devices[1].processes_note or "")
    assert snap.devices[1].memory_used == 20 * GiB


def test_hanging_init_is_bounded_and_polls_never_overlap(
    fake_nvml_in_process: FakeNvml,
) -> None:
    fake_nvml_in_process.write({**node(1), "hang": ["nvmlInitWithFlags"]})
    bounded = BoundedSource(NvmlSource(), timeout_s=0.2)
    first = bounded.poll()
    assert first.state is SourceState.TIMEOUT
    assert "not answering" in (first.reason or "") and first.remedy
    second = bounded.poll()  # the hung poll is still running: no second NVML call
    assert second.state is SourceState.TIMEOUT
    assert "still running" in (second.reason or "")
    assert fake_nvml_in_process.calls()["nvmlInitWithFlags"] == 1
    fake_nvml_in_process.write(node(1))  # the driver wakes up
    assert idle(bounded, 30)
    third = bounded.poll()
    assert third.state is SourceState.OK and len(third.devices) == 1
    bounded.close()


def test_old_driver_without_memory_v2_falls_back_to_v1(
    fake_nvml_factory: Callable[[str], FakeNvml],
) -> None:
    old = fake_nvml_factory("no_v2")
    old.write({"gpus": [gpu(0, used=30 * GiB, reserved=512 * MiB)]})
    old.activate_in_process()
    src = NvmlSource()
    try:
        d = src.poll().devices[0]
        assert not d.lost
        assert d.memory_reserved is None  # v1 cannot tell reserved apart
        assert d.memory_used == 30 * GiB + 512 * MiB  # v1 "used" includes it
        old.reset_calls()
        src.poll()
        calls = old.calls()
        assert calls["nvmlDeviceGetMemoryInfo"] == 1 and "nvmlDeviceGetMemoryInfo_v2" not in calls
    finally:
        src.close()


def test_memory_v2_version_mismatch_falls_back_to_v1(
    fake_nvml_in_process: FakeNvml, source: NvmlSource
) -> None:
    fake_nvml_in_process.write(
        {"gpus": [gpu(0, used=GiB)], "errors": {"nvmlDeviceGetMemoryInfo_v2": 25}}
    )
    d = source.poll().devices[0]
    assert not d.lost and d.memory_reserved is None and d.memory_used == GiB + 512 * MiB


def test_invisible_processes_say_other_pid_namespace(
    fake_nvml_in_process: FakeNvml, source: NvmlSource
) -> None:
    scenario = node(2, 2)  # host PIDs above pid_max: not visible from here
    scenario["gpus"][1]["procs"] = []  # a container may even get an empty list
    fake_nvml_in_process.write(scenario)
    with_pids, empty = source.poll().devices
    assert [p.name for p in with_pids.processes or ()] == [None, None]
    assert with_pids.processes_note == OTHER_NAMESPACE_NOTE
    assert empty.processes == ()
    assert "another PID namespace" in (empty.processes_note or "")
    assert "--pid=host" in (empty.processes_note or "")


def test_idle_gpu_has_no_namespace_note(fake_nvml_in_process: FakeNvml, source: NvmlSource) -> None:
    fake_nvml_in_process.write({"gpus": [gpu(0, used=4 * MiB)]})
    d = source.poll().devices[0]
    assert d.processes == () and d.processes_note is None


def test_memory_changes_between_polls(fake_nvml_in_process: FakeNvml, source: NvmlSource) -> None:
    fake_nvml_in_process.write({"gpus": [gpu(0, used=10 * GiB, procs=[(ME, 10 * GiB)])]})
    assert source.poll().devices[0].memory_used == 10 * GiB
    fake_nvml_in_process.write(
        {"gpus": [gpu(0, used=70 * GiB, procs=[(ME, 60 * GiB), (10_000_001, 10 * GiB)])]}
    )
    d = source.poll().devices[0]
    assert d.memory_used == 70 * GiB
    assert [p.used_bytes for p in d.processes or ()] == [60 * GiB, 10 * GiB]


@pytest.mark.parametrize(("procs", "per_gpu"), [(2, STEADY_CALLS_PER_GPU), (0, 7)])
def test_nvml_calls_per_gpu_per_poll(
    fake_nvml_in_process: FakeNvml, source: NvmlSource, procs: int, per_gpu: int
) -> None:
    """A steady poll of GPUs with every sensor costs 8 C calls per GPU with processes, 7
    without; nothing node-level; the power limit is not read again before REDISCOVER_EVERY."""
    scenario = node(4, procs)
    for g in scenario["gpus"]:
        g.update(temp=61, power=350_000, powerlimit=700_000, clocks=(1980, 2619))
    fake_nvml_in_process.write(scenario)
    source.poll()  # init: versions, count, handles, names, UUIDs, MIG mode (once)
    fake_nvml_in_process.reset_calls()
    source.poll()
    calls = fake_nvml_in_process.calls()
    assert sum(calls.values()) == 4 * per_gpu
    expected = {
        "nvmlDeviceGetMemoryInfo_v2": 4,
        "nvmlDeviceGetUtilizationRates": 4,
        "nvmlDeviceGetTemperature": 4,
        "nvmlDeviceGetPowerUsage": 4,
        "nvmlDeviceGetClockInfo": 8,
        "nvmlDeviceGetComputeRunningProcesses_v3": 4 * (per_gpu - 6),
    }
    assert dict(calls) == expected


def test_unsupported_sensors_cost_no_call_after_the_first_poll(
    fake_nvml_in_process: FakeNvml, source: NvmlSource
) -> None:
    """A board without temperature, power or clock readings (the fake answers NOT_SUPPORTED
    for a field its scenario leaves out) costs what it did before those readings existed:
    memory, utilisation and the process list."""
    fake_nvml_in_process.write(node(4, 2))
    source.poll()
    fake_nvml_in_process.reset_calls()
    source.poll()
    assert dict(fake_nvml_in_process.calls()) == {
        "nvmlDeviceGetMemoryInfo_v2": 4,
        "nvmlDeviceGetUtilizationRates": 4,
        "nvmlDeviceGetComputeRunningProcesses_v3": 8,
    }


def test_only_selects_by_index_and_uuid_and_skips_the_rest(
    fake_nvml_in_process: FakeNvml,
) -> None:
    scenario = node(4, 1)
    uuid3 = scenario["gpus"][3]["uuid"]
    fake_nvml_in_process.write(scenario)
    src = NvmlSource(only=("1", uuid3[:12]))
    try:
        assert [d.index for d in src.poll().devices] == [1, 3]
        fake_nvml_in_process.reset_calls()
        src.poll()
        # node() gives no temperature, power or clocks: 4 calls fewer a GPU
        assert sum(fake_nvml_in_process.calls().values()) == 2 * (STEADY_CALLS_PER_GPU - 4)
    finally:
        src.close()
    nothing = NvmlSource(only=("7",))
    snap = nothing.poll()
    assert snap.state is SourceState.ERROR and "no GPU matches --only 7" in (snap.reason or "")
    assert "0, 1, 2, 3" in (snap.reason or "")
    nothing.close()


def test_shutdown_once_at_close(fake_nvml_in_process: FakeNvml) -> None:
    fake_nvml_in_process.write(node(1))
    src = NvmlSource()
    src.poll()
    src.close()
    src.close()
    assert fake_nvml_in_process.calls()["nvmlShutdown"] == 1


def test_process_lookups_are_cached_while_listed_and_dropped_after(
    fake_nvml_in_process: FakeNvml, source: NvmlSource, monkeypatch: pytest.MonkeyPatch
) -> None:
    from memtui.telemetry.processes import ProcessInfoCache

    looked_up: list[int] = []
    real = ProcessInfoCache._read

    def counting(self: ProcessInfoCache, pid: int) -> tuple[str | None, ...]:
        looked_up.append(pid)
        return real(self, pid)

    monkeypatch.setattr(ProcessInfoCache, "_read", counting)
    fake_nvml_in_process.write({"gpus": [gpu(0, used=GiB, procs=[(ME, GiB)])]})
    source.poll()
    source.poll()
    assert looked_up == [ME]  # once per process lifetime, not once per poll
    fake_nvml_in_process.write({"gpus": [gpu(0)]})  # the process ended
    source.poll()
    fake_nvml_in_process.write({"gpus": [gpu(0, used=GiB, procs=[(ME, GiB)])]})  # PID reused
    assert (source.poll().devices[0].processes or ())[0].name is not None
    assert looked_up == [ME, ME]


def test_close_never_waits_on_a_hung_shutdown(fake_nvml_in_process: FakeNvml) -> None:
    """nvmlShutdown that hangs: close() gives it `timeout_s`, then returns (exit stays quick)."""
    fake_nvml_in_process.write(node(1))
    bounded = BoundedSource(NvmlSource(), timeout_s=0.3)
    assert bounded.poll().ok
    fake_nvml_in_process.write({**node(1), "hang": ["nvmlShutdown"]})
    started = time.monotonic()
    bounded.close()
    assert time.monotonic() - started < 5
    fake_nvml_in_process.write(node(1))  # let the abandoned shutdown finish
    bounded.close()  # twice is fine


def test_close_skips_shutdown_while_a_poll_is_stuck(fake_nvml_in_process: FakeNvml) -> None:
    fake_nvml_in_process.write({**node(1), "hang": ["nvmlDeviceGetUtilizationRates"]})
    bounded = BoundedSource(NvmlSource(), timeout_s=0.3)
    assert bounded.poll().state is SourceState.TIMEOUT
    bounded.close()
    assert fake_nvml_in_process.calls()["nvmlShutdown"] == 0
    fake_nvml_in_process.write(node(1))
    assert idle(bounded, 30)


def _mig_node() -> dict[str, object]:
    return {
        "gpus": [
            gpu(
                0,
                name="NVIDIA A100-SXM4-80GB",
                used=13 * GiB,
                mig=[
                    mig_instance(1, used=10 * GiB, procs=[(ME, 9 * GiB)], uuid="MIG-aaaa"),
                    mig_instance(2, used=3 * GiB, uuid="MIG-bbbb"),
                ],
            ),
            gpu(1, used=20 * GiB, procs=[(ME, 19 * GiB)]),
        ]
    }


def test_one_gpus_mig_discovery_error_marks_only_that_gpu(
    fake_nvml_in_process: FakeNvml, source: NvmlSource
) -> None:
    fake_nvml_in_process.write({**_mig_node(), "errors": {"nvmlDeviceGetMaxMigDeviceCount@0": 999}})
    snap = source.poll()
    assert snap.state is SourceState.OK
    assert [d.label for d in snap.devices] == ["0", "1"]
    broken, fine = snap.devices
    assert not broken.lost and broken.memory_used == 13 * GiB
    assert "MIG devices could not be listed" in (broken.error or "")
    assert not fine.lost and fine.memory_used == 20 * GiB and fine.error is None
    # the fault clears: the MIG devices appear by themselves within REDISCOVER_EVERY polls
    fake_nvml_in_process.write(_mig_node())
    for _ in range(REDISCOVER_EVERY):
        snap = source.poll()
    assert [d.label for d in snap.devices] == ["0", "0:0", "0:1", "1"]
    assert snap.devices[0].error is None


def test_gpus_and_mig_devices_that_appear_after_start_are_shown(
    fake_nvml_in_process: FakeNvml, source: NvmlSource
) -> None:
    """A GPU hot-added (or back after a reset that renumbered it) and a MIG instance made
    while memtui runs (`nvidia-smi mig -cgi`) appear within REDISCOVER_EVERY polls; the steady
    poll in between stays the same, and the check costs one count a poll round plus one MIG
    mode read per GPU."""
    scenario = _mig_node()
    scenario["gpus"][0]["mig"] = scenario["gpus"][0]["mig"][:1]  # one MIG instance so far
    fake_nvml_in_process.write(scenario)
    assert [d.label for d in source.poll().devices] == ["0", "0:0", "1"]
    grown = _mig_node()
    grown["gpus"].append(gpu(2, used=5 * GiB))
    fake_nvml_in_process.write(grown)
    fake_nvml_in_process.reset_calls()
    labels = [[d.label for d in source.poll().devices] for _ in range(REDISCOVER_EVERY)]
    assert labels[0] == ["0", "0:0", "1"]
    assert labels[-1] == ["0", "0:0", "0:1", "1", "2"]
    assert source.poll().devices[-1].memory_used == 5 * GiB
    calls = fake_nvml_in_process.calls()
    assert calls["nvmlDeviceGetCount_v2"] == 1 and calls["nvmlDeviceGetMigMode"] == 3


def test_gpu_whose_handle_failed_at_init_is_rediscovered(
    fake_nvml_in_process: FakeNvml, source: NvmlSource
) -> None:
    fake_nvml_in_process.write({**node(2), "errors": {"nvmlDeviceGetHandleByIndex_v2@1": 15}})
    assert [d.lost for d in source.poll().devices] == [False, True]
    fake_nvml_in_process.write(node(2))  # reset, back on the bus
    lost = [source.poll().devices[1].lost for _ in range(REDISCOVER_EVERY)]
    assert lost[-1] is False and lost[0] is True
    back = source.poll().devices[1]
    assert back.memory_used == 20 * GiB and back.uuid and back.name
    # healthy GPUs cost no rediscovery: the steady poll is unchanged
    fake_nvml_in_process.reset_calls()
    for _ in range(REDISCOVER_EVERY):
        source.poll()
    assert "nvmlDeviceGetHandleByIndex_v2" not in fake_nvml_in_process.calls()


def test_process_list_error_keeps_memory_and_says_why(
    fake_nvml_in_process: FakeNvml, source: NvmlSource
) -> None:
    fake_nvml_in_process.write(
        {**node(2, 1), "errors": {"nvmlDeviceGetComputeRunningProcesses_v3@1": 999}}
    )
    d = source.poll().devices[1]
    assert not d.lost and d.memory_used == 20 * GiB and d.utilization_gpu == 50
    assert d.processes is None
    assert "Unknown Error" in (d.processes_note or "") and "999" in (d.processes_note or "")


def test_gpu_lost_when_reading_mig_mode_is_marked_lost(
    fake_nvml_in_process: FakeNvml, source: NvmlSource
) -> None:
    fake_nvml_in_process.write({**node(2), "errors": {"nvmlDeviceGetMigMode@1": 15}})
    snap = source.poll()
    assert [d.lost for d in snap.devices] == [False, True]
    assert "GPU is lost" in (snap.devices[1].error or "")


def test_only_selects_a_mig_device_by_its_uuid(fake_nvml_in_process: FakeNvml) -> None:
    fake_nvml_in_process.write(_mig_node())
    src = NvmlSource(only=("MIG-bbbb",))
    try:
        (d,) = src.poll().devices
        assert (d.label, d.uuid, d.memory_used) == ("0:1", "MIG-bbbb", 3 * GiB)
    finally:
        src.close()


def test_only_rejects_an_ambiguous_uuid_prefix(fake_nvml_in_process: FakeNvml) -> None:
    fake_nvml_in_process.write(node(3))
    src = NvmlSource(only=("GPU-",))
    try:
        snap = src.poll()
        assert snap.state is SourceState.ERROR and snap.devices == ()
        assert "--only GPU- is ambiguous" in (snap.reason or "")
        assert "0, 1, 2" in (snap.reason or "") and "UUID" in (snap.remedy or "")
    finally:
        src.close()


def test_failed_snapshots_name_the_host(fake_nvml_in_process: FakeNvml) -> None:
    fake_nvml_in_process.write({**node(1), "errors": {"nvmlInitWithFlags": 9}})
    src = NvmlSource()
    assert src.poll().hostname == socket.gethostname()
    src.close()
    fake_nvml_in_process.write({**node(1), "hang": ["nvmlInitWithFlags"]})
    bounded = BoundedSource(NvmlSource(), timeout_s=0.2)
    assert bounded.poll().hostname == socket.gethostname()
    fake_nvml_in_process.write(node(1))
    assert idle(bounded, 30)
    bounded.close()


@pytest.mark.parametrize("where", ["nvmlInitWithFlags", "nvmlDeviceGetMemoryInfo_v2@1"])
def test_nvml_timeout_code_10(
    fake_nvml_in_process: FakeNvml, source: NvmlSource, where: str
) -> None:
    """NVML_ERROR_TIMEOUT (10): at init a TIMEOUT state, on one GPU that GPU only; both heal."""
    fake_nvml_in_process.write({**node(2), "errors": {where: 10}})
    snap = source.poll()
    if where == "nvmlInitWithFlags":
        assert snap.state is SourceState.TIMEOUT and snap.devices == ()
        assert "timed out" in (snap.reason or "") and "nvidia-smi" in (snap.remedy or "")
    else:
        assert snap.ok and [d.lost for d in snap.devices] == [False, True]
        assert "code 10" in (snap.devices[1].error or "")
    fake_nvml_in_process.write(node(2))
    healed = source.poll()
    assert healed.ok and [d.memory_used for d in healed.devices] == [20 * GiB] * 2


def test_nvml_calls_per_poll_with_mig_devices(
    fake_nvml_in_process: FakeNvml, source: NvmlSource
) -> None:
    """A GPU in MIG mode: memory and utilisation for it (its processes live under its MIG
    devices), memory and processes per MIG device (no utilisation: NVML has none per MIG
    device), and no MIG discovery in a steady poll."""
    fake_nvml_in_process.write(_mig_node())  # GPU 0: 0:0 with a process, 0:1 idle; GPU 1
    assert len(source.poll().devices) == 4
    fake_nvml_in_process.reset_calls()
    source.poll()
    assert dict(fake_nvml_in_process.calls()) == {
        "nvmlDeviceGetMemoryInfo_v2": 4,  # GPU 0, 0:0, 0:1, GPU 1
        "nvmlDeviceGetUtilizationRates": 2,  # GPU 0, GPU 1
        "nvmlDeviceGetComputeRunningProcesses_v3": 2 + 1 + 2,  # 0:0 (count, fill), 0:1, GPU 1
    }
