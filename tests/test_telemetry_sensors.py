"""Temperature, power, power limit and clocks from NVML: the real pynvml against the fake
libnvidia-ml, in-process. Each reading is a `DeviceSnapshot` field; a board that answers
NOT_SUPPORTED (nvml.h NVML_ERROR_NOT_SUPPORTED, 3) gives None ("n/a") and is never asked
again; nothing a sensor answers takes the memory reading down with it."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from fake_nvml.harness import FakeNvml, GiB, gpu, mig_instance

from memtui.telemetry import REDISCOVER_EVERY, NvmlSource


@pytest.fixture
def source(fake_nvml_in_process: FakeNvml) -> Iterator[NvmlSource]:
    src = NvmlSource(process_info=False)
    yield src
    src.close()


def _sensed(index: int = 0, **extra: object) -> dict[str, object]:
    fields: dict[str, object] = {
        "used": 40 * GiB,
        "util": (93, 38),
        "temp": 67,
        "power": 412_345,
        "power_limit": 700_000,
        "clocks": (1980, 2619),
    }
    return gpu(index, **{**fields, **extra})  # type: ignore[arg-type]


def test_every_reading_as_nvidia_smi_names_it(
    fake_nvml_in_process: FakeNvml, source: NvmlSource
) -> None:
    fake_nvml_in_process.write({"gpus": [_sensed()]})
    d = source.poll().devices[0]
    assert (d.utilization_gpu, d.utilization_memory) == (93, 38)
    assert d.temperature_c == 67
    assert (d.power_mw, d.power_limit_mw) == (412_345, 700_000)
    assert (d.clock_sm_mhz, d.clock_memory_mhz) == (1980, 2619)
    assert d.memory_used == 40 * GiB and not d.lost and d.error is None


@pytest.mark.parametrize(
    ("function", "fields"),
    [
        ("nvmlDeviceGetTemperature", ("temperature_c",)),
        ("nvmlDeviceGetPowerUsage", ("power_mw",)),
        ("nvmlDeviceGetEnforcedPowerLimit", ("power_limit_mw",)),
        ("nvmlDeviceGetClockInfo", ("clock_sm_mhz", "clock_memory_mhz")),
    ],
)
def test_not_supported_is_na_and_never_asked_again(
    fake_nvml_in_process: FakeNvml, source: NvmlSource, function: str, fields: tuple[str, ...]
) -> None:
    fake_nvml_in_process.write({"gpus": [_sensed(), _sensed(1)], "errors": {f"{function}@1": 3}})
    healthy, unsupported = source.poll().devices
    for name in fields:
        assert getattr(healthy, name) is not None
        assert getattr(unsupported, name) is None
    assert unsupported.memory_used == 40 * GiB and not unsupported.lost
    assert unsupported.error is None  # not supported is not an error
    fake_nvml_in_process.reset_calls()
    for _ in range(REDISCOVER_EVERY + 1):  # across a power-limit refresh too
        source.poll()
    polls = REDISCOVER_EVERY + 1
    # GPU 0's calls alone: GPU 1 is not asked again (the limit is read once in those polls)
    expected = {
        "nvmlDeviceGetTemperature": polls,
        "nvmlDeviceGetPowerUsage": polls,
        "nvmlDeviceGetEnforcedPowerLimit": 1,
        "nvmlDeviceGetClockInfo": 2 * polls,
    }
    assert fake_nvml_in_process.calls()[function] == expected[function]


def test_a_field_left_out_of_the_scenario_reads_not_supported(
    fake_nvml_in_process: FakeNvml, source: NvmlSource
) -> None:
    """gpu() without sensors: the fake answers NOT_SUPPORTED, as a board without them."""
    fake_nvml_in_process.write({"gpus": [gpu(0, used=GiB)]})
    d = source.poll().devices[0]
    assert (d.temperature_c, d.power_mw, d.power_limit_mw) == (None, None, None)
    assert (d.clock_sm_mhz, d.clock_memory_mhz) == (None, None)
    assert d.memory_used == GiB


def test_a_transient_sensor_error_is_na_for_that_poll_only(
    fake_nvml_in_process: FakeNvml, source: NvmlSource
) -> None:
    """UNKNOWN (999) from the thermometer: n/a now, the memory still read, asked again."""
    fake_nvml_in_process.write({"gpus": [_sensed()], "errors": {"nvmlDeviceGetTemperature": 999}})
    d = source.poll().devices[0]
    assert d.temperature_c is None and d.memory_used == 40 * GiB and not d.lost
    fake_nvml_in_process.write({"gpus": [_sensed()]})
    assert source.poll().devices[0].temperature_c == 67


def test_a_gpu_lost_on_a_sensor_is_lost(fake_nvml_in_process: FakeNvml, source: NvmlSource) -> None:
    fake_nvml_in_process.write({"gpus": [_sensed()], "errors": {"nvmlDeviceGetPowerUsage": 15}})
    d = source.poll().devices[0]
    assert d.lost and "lost" in (d.error or "")


def test_the_not_available_sentinel_reads_na(
    fake_nvml_in_process: FakeNvml, source: NvmlSource
) -> None:
    """0xFFFFFFFF, NVML's 32-bit "not available", is never 4294967295 degrees or MHz."""
    fake_nvml_in_process.write(
        {"gpus": [gpu(0, temp=0xFFFFFFFF, power=0xFFFFFFFF, clocks=(0xFFFFFFFF, 1593))]}
    )
    d = source.poll().devices[0]
    assert (d.temperature_c, d.power_mw, d.clock_sm_mhz, d.clock_memory_mhz) == (
        None,
        None,
        None,
        1593,
    )


def test_power_limit_is_read_again_every_rediscover_polls(
    fake_nvml_in_process: FakeNvml, source: NvmlSource
) -> None:
    """`nvidia-smi -pl 500` while memtui runs: the new limit shows within REDISCOVER_EVERY
    polls, and the limit costs one call per GPU per REDISCOVER_EVERY polls."""
    fake_nvml_in_process.write({"gpus": [_sensed()]})
    assert source.poll().devices[0].power_limit_mw == 700_000
    fake_nvml_in_process.write({"gpus": [_sensed(power_limit=500_000)]})
    fake_nvml_in_process.reset_calls()
    seen = [source.poll().devices[0].power_limit_mw for _ in range(REDISCOVER_EVERY)]
    assert seen[0] == 700_000 and seen[-1] == 500_000
    assert fake_nvml_in_process.calls()["nvmlDeviceGetEnforcedPowerLimit"] == 1


def test_mig_devices_ask_no_sensor(fake_nvml_in_process: FakeNvml, source: NvmlSource) -> None:
    """Temperature, power and clocks are the parent GPU's: its MIG devices spend no call."""
    parent = _sensed(mig=[mig_instance(1, used=GiB), mig_instance(2)])
    fake_nvml_in_process.write({"gpus": [parent]})
    devices = source.poll().devices
    assert [d.label for d in devices] == ["0", "0:0", "0:1"]
    assert devices[0].temperature_c == 67
    assert all(d.temperature_c is None and d.power_mw is None for d in devices[1:])
    fake_nvml_in_process.reset_calls()
    source.poll()
    assert fake_nvml_in_process.calls()["nvmlDeviceGetTemperature"] == 1
