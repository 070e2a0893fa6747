"""The NVML source: the one module that calls pynvml (nvidia-ml-py).

It answers what `nvidia-smi --query-gpu=index,uuid,name,memory.total,memory.used,
memory.free,memory.reserved,utilization.gpu,utilization.memory,temperature.gpu,power.draw,
enforced.power.limit,clocks.sm,clocks.mem` and
`nvidia-smi --query-compute-apps=pid,used_memory` answer, as frozen `NodeSnapshot`s.

Design (docs/architecture.md, "One NVML adapter"; nvitop's libnvml idea): lazy init on the first
poll, one shutdown at exit (the hook is `BoundedSource`'s, bounded so a hung driver cannot block the
exit); every NVMLError becomes data: a field NVML does not support is None ("n/a"), a device that
errors is marked lost while the others update, and a library-level failure (no library, driver not
loaded, version mismatch, no permission) becomes the snapshot's state with a one-line reason and
remedy. Static facts (name, UUID, MIG layout, which calls are supported) are read once at init, so a
steady-state poll costs per GPU one memory call, one utilisation call, one temperature, one power
and two clock calls, and one or two process-list calls (pynvml asks for the count first): see
`STEADY_CALLS_PER_GPU`. A reading a GPU answers NOT_SUPPORTED is None ("n/a") and never asked
again; the power limit, which changes only when an administrator sets it, is read every
`REDISCOVER_EVERY` polls.
"""

from __future__ import annotations

import contextlib
import os
import socket
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from memtui.telemetry.models import (
    DeviceSnapshot,
    NodeSnapshot,
    ProcessSnapshot,
    SourceState,
    failed_snapshot,
)
from memtui.telemetry.processes import OTHER_NAMESPACE_NOTE, ProcessInfoCache
from memtui.telemetry.source import (
    SourceInfo,
    SourceKind,
    ambiguous_only_update,
    matches_only,
    no_match_update,
)

#: NVML C calls per GPU per poll once initialised, when the GPU has processes and supports
#: every reading: nvmlDeviceGetMemoryInfo_v2, nvmlDeviceGetUtilizationRates,
#: nvmlDeviceGetTemperature, nvmlDeviceGetPowerUsage, nvmlDeviceGetClockInfo twice (SM, memory)
#: and nvmlDeviceGetComputeRunningProcesses_v3 twice (size query, then fill); 7 without
#: processes; one less per reading the GPU does not support. nvmlDeviceGetEnforcedPowerLimit
#: adds one every REDISCOVER_EVERY polls.
STEADY_CALLS_PER_GPU = 8

# pynvml's nvmlTemperatureSensors_t and nvmlClockType_t values (nvml.h): spelled out, as the
# return codes below, so this module's top level never imports pynvml.
_TEMPERATURE_GPU = 0  # NVML_TEMPERATURE_GPU
_CLOCK_SM = 1  # NVML_CLOCK_SM
_CLOCK_MEM = 2  # NVML_CLOCK_MEM

#: What the NVML source is, for status lines and the timeout guard.
NVML_INFO = SourceInfo(
    SourceKind.LOCAL,
    "nvml",
    "live NVML",
    "NVML is not answering",
    "check `nvidia-smi`; a hung driver may need `nvidia-smi -r` or a reboot",
)

#: Every this many polls discovery looks again: a GPU whose discovery failed (its handle, MIG
#: mode or MIG layout) is discovered again, so one that comes back (reset, driver hiccup)
#: reappears by itself; GPUs added since (the device count grew) and the MIG devices of GPUs
#: in MIG mode (instances made or destroyed while memtui runs) are found. It costs one count
#: and one MIG mode read per GPU, every this many polls.
REDISCOVER_EVERY = 10

# NVML return codes (nvml.h); spelled out so this module's top level never imports pynvml.
_UNINITIALIZED = 1
_NOT_SUPPORTED = 3
_NO_PERMISSION = 4
_NOT_FOUND = 6
_DRIVER_NOT_LOADED = 9
_TIMEOUT = 10
_LIBRARY_NOT_FOUND = 12
_FUNCTION_NOT_FOUND = 13
_GPU_IS_LOST = 15
_LIB_RM_VERSION_MISMATCH = 18
_ARGUMENT_VERSION_MISMATCH = 25

#: Codes that mean the whole library is unusable, not one device.
_SOURCE_LEVEL = {_UNINITIALIZED, _DRIVER_NOT_LOADED, _LIB_RM_VERSION_MISMATCH, _LIBRARY_NOT_FOUND}

# used memory with no process listed above these is attributed to invisible processes
_INVISIBLE_USED_V2 = 256 * 1024**2
_INVISIBLE_USED_V1 = 1024**3  # v1 "used" includes the driver's reservation


def describe_failure(code: int, text: str) -> tuple[SourceState, str, str]:
    """(state, reason, remedy) for an NVML error that makes the whole source unusable."""
    if code == _LIBRARY_NOT_FOUND:
        return (
            SourceState.NO_LIBRARY,
            "NVML not found (no libnvidia-ml.so.1): no NVIDIA driver on this machine",
            "install the NVIDIA driver or run on a GPU node; planning works without a GPU",
        )
    if code == _DRIVER_NOT_LOADED:
        return (
            SourceState.DRIVER_NOT_LOADED,
            "NVIDIA driver not loaded",
            "load it (`sudo modprobe nvidia`) and check `nvidia-smi`",
        )
    if code == _LIB_RM_VERSION_MISMATCH:
        return (
            SourceState.VERSION_MISMATCH,
            "driver and library versions differ (NVML/kernel module mismatch)",
            "reboot or reload the nvidia kernel module",
        )
    if code == _NO_PERMISSION:
        return (
            SourceState.NO_PERMISSION,
            "no permission to use NVML",
            "check access to /dev/nvidia* (e.g. the video group) or run as that user",
        )
    if code == _FUNCTION_NOT_FOUND:
        return (
            SourceState.VERSION_MISMATCH,
            "NVML library is too old for nvidia-ml-py (function not found)",
            "update the NVIDIA driver",
        )
    if code == _TIMEOUT:
        return (
            SourceState.TIMEOUT,
            "NVML timed out",
            "check `nvidia-smi`; a hung driver may need `nvidia-smi -r` or a reboot",
        )
    return (
        SourceState.ERROR,
        f"NVML error: {text} (code {code})",
        "check `nvidia-smi`",
    )


class _SourceFailure(Exception):
    """Raised inside a poll when NVML fails as a whole; turned into a snapshot by poll()."""

    def __init__(self, code: int, text: str) -> None:
        super().__init__(text)
        self.code = code
        self.text = text


@dataclass
class _Device:
    """What init learned about one device, and which calls it supports (mutable, private)."""

    index: int
    handle: Any
    uuid: str | None
    name: str | None
    mig_index: int | None = None
    parent_uuid: str | None = None
    mig_enabled: bool = False
    gpu_instance_id: int | None = None
    memory_mode: str = "v2"  # "v2" -> "v1" on old drivers -> "host" on unified memory
    utilization_supported: bool = True
    unsupported: set[str] = field(default_factory=set)
    """Readings (`_READINGS` names) this device answered NOT_SUPPORTED: never asked again."""
    power_limit_mw: int | None = None
    limit_read_at: int | None = None
    """The poll the power limit was last read at (it is read every REDISCOVER_EVERY)."""
    processes_call: str = "v3"  # "v3" -> "v2" on old drivers
    init_error: str | None = None
    """Discovery found the device unusable (no handle, GPU_IS_LOST): shown lost, not polled."""
    partial_error: str | None = None
    """Discovery half failed (MIG mode or layout unreadable): polled, with this as `error`."""
    retry: bool = False
    """Discover this GPU again every REDISCOVER_EVERY polls."""

    @property
    def label(self) -> str:
        return str(self.index) if self.mig_index is None else f"{self.index}:{self.mig_index}"


def _code(err: BaseException) -> int:
    return int(getattr(err, "value", -1))


class NvmlSource:
    """Poll the local GPUs through NVML. `poll()` never raises for NVML problems.

    `only` holds `--only` tokens (indices or UUID prefixes). `process_info=False` skips the
    psutil lookups (name, user, command). Wrap in `BoundedSource` to bound a hanging poll.
    """

    name = NVML_INFO.label
    info = NVML_INFO

    def __init__(
        self,
        only: Sequence[str] = (),
        *,
        process_info: bool = True,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.only = tuple(only)
        self.process_info = process_info
        self._clock = clock
        self._hostname = socket.gethostname()
        self._initialized = False
        self._nvml: Any = None
        self._gpus: dict[int, list[_Device]] = {}  # selected devices per GPU, NVML order
        self._found: dict[int, list[tuple[str, str | None]]] = {}  # (label, uuid), all devices
        self._whole: dict[int, _Device] = {}  # each GPU itself, selected by --only or not
        self._retry: set[int] = set()  # GPUs whose discovery failed: discovered again later
        self._polls = 0
        self._driver: str | None = None
        self._cuda: str | None = None
        self._procs: ProcessInfoCache | None = None

    # -- lifecycle -------------------------------------------------------------------

    def _init(self) -> NodeSnapshot | None:
        """nvmlInit and discovery; returns a failure snapshot, or None when ready."""
        try:
            import pynvml
        except ImportError:  # nvidia-ml-py is a dependency, but keep the promise anyway
            return failed_snapshot(
                SourceState.NO_LIBRARY,
                "nvidia-ml-py (pynvml) is not installed",
                "pip install nvidia-ml-py",
                time=self._clock(),
                source=self.name,
            )
        self._nvml = pynvml
        try:
            pynvml.nvmlInit()
        except pynvml.NVMLError as err:
            return self._failure(_code(err), str(err))
        self._initialized = True
        try:
            self._discover()
        except pynvml.NVMLError as err:
            self._shutdown()
            return self._failure(_code(err), str(err))
        except _SourceFailure as failure:
            self._shutdown()
            return self._failure(failure.code, failure.text)
        return None

    def _discover(self) -> None:
        """Read what does not change while the driver is loaded (`nvidia-smi -L`)."""
        nv = self._nvml
        self._driver = self._optional(nv.nvmlSystemGetDriverVersion)
        try:
            cuda = nv.nvmlSystemGetCudaDriverVersion_v2()
        except nv.NVMLError as err:
            if _code(err) in _SOURCE_LEVEL:
                raise
            cuda = self._optional(nv.nvmlSystemGetCudaDriverVersion)
        self._cuda = f"{cuda // 1000}.{cuda % 1000 // 10}" if cuda else None
        self._gpus, self._found, self._whole, self._retry = {}, {}, {}, set()
        for index in range(nv.nvmlDeviceGetCount()):
            self._discover_gpu(index)

    def _rediscover(self) -> None:
        """Look again (every REDISCOVER_EVERY polls): GPUs that failed, GPUs added since, and
        the MIG devices of every GPU in MIG mode (or newly in it)."""
        nv = self._nvml
        count = nv.nvmlDeviceGetCount()
        for index in [i for i in self._found if i >= count]:  # gone from the bus
            del self._found[index], self._gpus[index], self._whole[index]
            self._retry.discard(index)
        for index in range(count):
            gpu = self._whole.get(index)
            if gpu is None or index in self._retry or gpu.mig_enabled or self._mig_on(gpu):
                self._discover_gpu(index)  # new, failed before, or its MIG devices may differ

    def _mig_on(self, gpu: _Device) -> bool:
        """Whether `gpu` is in MIG mode now (False when that cannot be read)."""
        nv = self._nvml
        try:
            return bool(nv.nvmlDeviceGetMigMode(gpu.handle)[0] == 1)
        except nv.NVMLError as err:
            self._raise_if_source_level(err)
            return False

    def _discover_gpu(self, index: int) -> None:
        """Discover one GPU and its MIG devices; a failure marks that GPU only (and retries)."""
        found = self._probe_gpu(index)
        gpu, children = found[0], found[1:]
        self._found[index] = [(d.label, d.uuid) for d in found]
        self._whole[index] = gpu
        if gpu.retry:
            self._retry.add(index)
        else:
            self._retry.discard(index)
        if matches_only(self.only, index, gpu.uuid):
            self._gpus[index] = found
        else:
            self._gpus[index] = [c for c in children if matches_only(self.only, index, c.uuid)]

    def _probe_gpu(self, index: int) -> list[_Device]:
        """The GPU at `index` (first) and its MIG devices (`nvidia-smi -L`)."""
        nv = self._nvml
        try:
            handle = nv.nvmlDeviceGetHandleByIndex(index)
        except nv.NVMLError as err:
            self._raise_if_source_level(err)
            return [_Device(index, None, None, None, init_error=self._lost_text(err), retry=True)]
        uuid = self._optional(nv.nvmlDeviceGetUUID, handle)
        name = self._optional(nv.nvmlDeviceGetName, handle)
        gpu = _Device(index, handle, uuid, name)
        try:
            gpu.mig_enabled = nv.nvmlDeviceGetMigMode(handle)[0] == 1
        except nv.NVMLError as err:
            self._raise_if_source_level(err)
            if _code(err) == _GPU_IS_LOST:
                gpu.init_error, gpu.retry = self._lost_text(err), True
                return [gpu]
            if _code(err) != _NOT_SUPPORTED:  # NOT_SUPPORTED is simply a GPU without MIG
                gpu.partial_error = f"MIG mode could not be read: {err} (code {_code(err)})"
                gpu.retry = True
        if not gpu.mig_enabled:
            return [gpu]
        try:
            return [gpu, *self._discover_mig(gpu)]
        except nv.NVMLError as err:
            self._raise_if_source_level(err)
            if _code(err) == _GPU_IS_LOST:
                gpu.init_error = self._lost_text(err)
            else:
                gpu.partial_error = f"MIG devices could not be listed: {err} (code {_code(err)})"
            gpu.retry = True
            return [gpu]

    def _discover_mig(self, gpu: _Device) -> list[_Device]:
        """MIG devices of a GPU in MIG mode (`nvidia-smi -L` lists them under the GPU)."""
        nv = self._nvml
        children: list[_Device] = []
        for slot in range(nv.nvmlDeviceGetMaxMigDeviceCount(gpu.handle)):
            try:
                handle = nv.nvmlDeviceGetMigDeviceHandleByIndex(gpu.handle, slot)
            except nv.NVMLError as err:
                if _code(err) == _NOT_FOUND:  # an empty slot
                    continue
                if _code(err) == _GPU_IS_LOST:
                    raise
                self._raise_if_source_level(err)
                # one unreadable slot: keep the others, say so on the GPU, look again later
                gpu.partial_error = (
                    f"MIG device {slot} could not be read: {err} (code {_code(err)})"
                )
                gpu.retry = True
                continue
            child = _Device(
                gpu.index,
                handle,
                self._optional(nv.nvmlDeviceGetUUID, handle),
                self._optional(nv.nvmlDeviceGetName, handle),
                mig_index=slot,
                parent_uuid=gpu.uuid,
                gpu_instance_id=self._optional(nv.nvmlDeviceGetGpuInstanceId, handle),
                # NVML has no utilisation, temperature, power or clocks per MIG device (they
                # are the parent GPU's): do not spend a call learning that
                utilization_supported=False,
                unsupported=set(_READINGS),
            )
            children.append(child)
        return children

    def close(self) -> None:
        """nvmlShutdown once. Safe to call twice. Not registered with atexit here: the exit
        hook belongs to `BoundedSource` (`open_source`), which skips it while a poll is stuck
        in the driver; a bare NvmlSource must be closed by its owner."""
        if self._initialized:
            self._shutdown()

    def _shutdown(self) -> None:
        self._initialized = False
        self._gpus, self._found, self._whole, self._retry = {}, {}, {}, set()
        # shutting down a broken library: nothing useful is left to report
        with contextlib.suppress(self._nvml.NVMLError):
            self._nvml.nvmlShutdown()

    # -- polling ---------------------------------------------------------------------

    def poll(self) -> NodeSnapshot:
        """One snapshot of the node; NVML problems come back as data."""
        started = time.perf_counter()
        if not self._initialized:
            failure = self._init()
            if failure is not None:
                return failure
        nv = self._nvml
        self._polls += 1
        try:
            if self._polls % REDISCOVER_EVERY == 0:
                self._rediscover()
            ambiguous = ambiguous_only_update(
                self.only, [pair for pairs in self._found.values() for pair in pairs]
            )
            if ambiguous is not None:
                return self._no_devices(ambiguous)
            devices = tuple(self._poll_device(d) for ds in self._gpus.values() for d in ds)
        except _SourceFailure as failure:
            self._shutdown()  # the next poll re-initialises (e.g. after a driver reload)
            return self._failure(failure.code, failure.text)
        except nv.NVMLError as err:  # defensive: a call outside the per-device guards
            self._shutdown()
            return self._failure(_code(err), str(err))
        if self._procs is not None:
            self._procs.forget_except({p.pid for d in devices for p in (d.processes or ())})
        snapshot = NodeSnapshot(
            time=self._clock(),
            hostname=self._hostname,
            source=self.name,
            driver_version=self._driver,
            cuda_version=self._cuda,
            devices=devices,
            poll_seconds=time.perf_counter() - started,
        )
        if self.only and not devices:
            return snapshot.model_copy(update=no_match_update(self.only, self._gpu_labels()))
        return snapshot

    def _gpu_labels(self) -> list[str]:
        return [str(index) for index in self._found]

    def _no_devices(self, update: dict[str, Any]) -> NodeSnapshot:
        """A snapshot without devices saying why (e.g. an ambiguous `--only`)."""
        snapshot = NodeSnapshot(
            time=self._clock(),
            hostname=self._hostname,
            source=self.name,
            driver_version=self._driver,
            cuda_version=self._cuda,
        )
        return snapshot.model_copy(update=update)

    def _poll_device(self, d: _Device) -> DeviceSnapshot:
        nv = self._nvml
        base: dict[str, Any] = {
            "index": d.index,
            "mig_index": d.mig_index,
            "parent_uuid": d.parent_uuid,
            "mig_enabled": d.mig_enabled,
            "uuid": d.uuid,
            "name": d.name,
        }
        if d.init_error is not None:
            return DeviceSnapshot(**base, lost=True, error=d.init_error, processes=None)
        try:
            total, used, free, reserved, host = _readings(*self._memory(d))
            util_gpu = util_mem = None
            if d.utilization_supported:
                try:
                    rates = nv.nvmlDeviceGetUtilizationRates(d.handle)
                    util_gpu, util_mem = _percent(rates.gpu), _percent(rates.memory)
                except nv.NVMLError as err:
                    if _code(err) != _NOT_SUPPORTED:
                        raise
                    d.utilization_supported = False  # never ask again
            sensors = self._sensors(d)
            if d.mig_enabled:
                # the processes of a GPU in MIG mode are listed under its MIG devices
                processes: tuple[ProcessSnapshot, ...] | None = ()
                note: str | None = "MIG mode: processes are listed under its MIG devices"
                if d.partial_error is not None:
                    processes, note = None, "MIG mode: processes are listed under MIG devices, "
                    "which could not be read"
            else:
                processes, note = self._processes(d)
        except nv.NVMLError as err:
            self._raise_if_source_level(err)
            return DeviceSnapshot(**base, lost=True, error=self._lost_text(err), processes=None)
        if note is None and processes is not None and self.process_info:
            note = _invisible_note(processes, used, d.memory_mode)
        return DeviceSnapshot(
            **base,
            memory_total=total,
            memory_used=used,
            memory_free=free,
            memory_reserved=reserved,
            utilization_gpu=util_gpu,
            utilization_memory=util_mem,
            **sensors,
            host_memory_fallback=host,
            processes=processes,
            processes_note=note,
            error=d.partial_error,
        )

    def _memory(self, d: _Device) -> tuple[int | None, int | None, int | None, int | None, bool]:
        """(total, used, free, reserved, host_fallback), trying v2, then v1, then host RAM."""
        nv = self._nvml
        if d.memory_mode == "v2":
            try:
                m = nv.nvmlDeviceGetMemoryInfo(d.handle, version=nv.nvmlMemory_v2)
                return (int(m.total), int(m.used), int(m.free), int(m.reserved), False)
            except nv.NVMLError as err:
                # old drivers lack the symbol or reject the struct version; unified-memory
                # parts answer NOT_SUPPORTED: both fall back, once, for good
                if _code(err) not in (_FUNCTION_NOT_FOUND, _ARGUMENT_VERSION_MISMATCH,
                                      _NOT_SUPPORTED):  # fmt: skip
                    raise
                d.memory_mode = "v1"
        if d.memory_mode == "v1":
            try:
                m = nv.nvmlDeviceGetMemoryInfo(d.handle)
                return (int(m.total), int(m.used), int(m.free), None, False)
            except nv.NVMLError as err:
                if _code(err) != _NOT_SUPPORTED:
                    raise
                d.memory_mode = "host"
        import psutil

        vm = psutil.virtual_memory()
        return (int(vm.total), int(vm.total - vm.available), int(vm.available), None, True)

    def _sensors(self, d: _Device) -> dict[str, int | None]:
        """Temperature, power and clocks as `DeviceSnapshot` fields (`nvidia-smi
        --query-gpu=temperature.gpu,power.draw,enforced.power.limit,clocks.sm,clocks.mem`)."""
        nv = self._nvml
        calls: dict[str, tuple[Callable[..., Any], tuple[Any, ...]]] = {
            "temperature_c": (nv.nvmlDeviceGetTemperature, (_TEMPERATURE_GPU,)),
            "power_mw": (nv.nvmlDeviceGetPowerUsage, ()),
            "clock_sm_mhz": (nv.nvmlDeviceGetClockInfo, (_CLOCK_SM,)),
            "clock_memory_mhz": (nv.nvmlDeviceGetClockInfo, (_CLOCK_MEM,)),
        }
        out = {name: self._sensor(d, name, fn, *args) for name, (fn, args) in calls.items()}
        if d.limit_read_at is None or self._polls - d.limit_read_at >= REDISCOVER_EVERY:
            d.limit_read_at = self._polls
            d.power_limit_mw = self._sensor(d, "power_limit_mw", nv.nvmlDeviceGetEnforcedPowerLimit)
        out["power_limit_mw"] = d.power_limit_mw
        return out

    def _sensor(self, d: _Device, name: str, fn: Callable[..., Any], *args: Any) -> int | None:
        """One reading, None (n/a) when the device cannot give it: NOT_SUPPORTED is never
        asked again; any other error but a lost GPU or a failed library is n/a for this
        poll only (the memory reading matters more than a thermometer)."""
        if name in d.unsupported:
            return None
        try:
            value = int(fn(d.handle, *args))
        except self._nvml.NVMLError as err:
            if _code(err) == _NOT_SUPPORTED:
                d.unsupported.add(name)
                return None
            if _code(err) == _GPU_IS_LOST or _code(err) in _SOURCE_LEVEL:
                raise
            return None
        # the 32-bit "not available" sentinel (nvml.h NVML_VALUE_NOT_AVAILABLE as unsigned)
        return value if 0 <= value < _NOT_AVAILABLE_32 else None

    def _processes(self, d: _Device) -> tuple[tuple[ProcessSnapshot, ...] | None, str | None]:
        """Compute processes (`nvidia-smi --query-compute-apps=pid,used_memory`)."""
        nv = self._nvml
        try:
            if d.processes_call == "v3":
                try:
                    raw = nv.nvmlDeviceGetComputeRunningProcesses_v3(d.handle)
                except nv.NVMLError as err:
                    if _code(err) != _FUNCTION_NOT_FOUND:
                        raise
                    d.processes_call = "v2"
            if d.processes_call == "v2":
                raw = nv.nvmlDeviceGetComputeRunningProcesses_v2(d.handle)
        except nv.NVMLError as err:
            if _code(err) == _NOT_SUPPORTED:
                return None, "process list not supported on this device"
            if _code(err) == _NO_PERMISSION:
                return None, "no permission to list processes (try as root)"
            if _code(err) == _GPU_IS_LOST or _code(err) in _SOURCE_LEVEL:
                raise
            # memory was read fine: keep it, and say why the list is missing
            return None, f"process list unavailable: NVML error: {err} (code {_code(err)})"
        if self.process_info and self._procs is None:
            self._procs = ProcessInfoCache()
        out = []
        for p in raw:
            name = user = command = None
            if self._procs is not None:
                name, user, command = self._procs.lookup(int(p.pid))
            gi = int(p.gpuInstanceId)
            out.append(
                ProcessSnapshot(
                    pid=int(p.pid),
                    used_bytes=_reading(p.usedGpuMemory),
                    name=name,
                    user=user,
                    command=command,
                    gpu_instance_id=None if gi == 0xFFFFFFFF else gi,
                )
            )
        return tuple(out), None

    # -- helpers ---------------------------------------------------------------------

    def _optional(self, fn: Callable[..., Any], *args: Any) -> Any:
        """Call fn; None when this field is not available (source-level errors propagate)."""
        try:
            return fn(*args)
        except self._nvml.NVMLError as err:
            self._raise_if_source_level(err)
            return None

    def _raise_if_source_level(self, err: BaseException) -> None:
        if _code(err) in _SOURCE_LEVEL:
            raise _SourceFailure(_code(err), str(err))

    @staticmethod
    def _lost_text(err: BaseException) -> str:
        if _code(err) == _GPU_IS_LOST:
            return "GPU is lost (fell off the bus): reset it (`nvidia-smi -r`) or reboot"
        return f"NVML error on this GPU: {err} (code {_code(err)})"

    def _failure(self, code: int, text: str) -> NodeSnapshot:
        state, reason, remedy = describe_failure(code, text)
        return failed_snapshot(
            state, reason, remedy, time=self._clock(), source=self.name, hostname=self._hostname
        )


def _invisible_note(
    processes: tuple[ProcessSnapshot, ...], used: int | None, memory_mode: str
) -> str | None:
    """Say so when the GPU is busy but none of its processes can be seen from here."""
    if processes:
        if all(p.name is None for p in processes):
            return OTHER_NAMESPACE_NOTE
        return None
    threshold = _INVISIBLE_USED_V2 if memory_mode == "v2" else _INVISIBLE_USED_V1
    if used is not None and memory_mode != "host" and used > threshold:
        return "memory in use but no process listed: " + OTHER_NAMESPACE_NOTE
    return None


#: NVML's "not available": every bit set in the field's width (nvml.h NVML_VALUE_NOT_AVAILABLE,
#: -1 as unsigned; pynvml turns it into None for a process's usedGpuMemory only). Anything
#: from 2^63 bytes up is taken for it: no device holds 8 EiB.
_NOT_AVAILABLE_FROM = 2**63


def _reading(value: int | None, total: int | None = None) -> int | None:
    """A byte count as NVML gave it, or None (n/a) for its sentinel or more than `total`."""
    if value is None or not 0 <= int(value) < _NOT_AVAILABLE_FROM:
        return None
    if total is not None and int(value) > total:
        return None  # "free" computed by a driver from a sentinel: total - (2^64 - 1) wraps
    return int(value)


def _readings(
    total: int | None, used: int | None, free: int | None, reserved: int | None, host: bool
) -> tuple[int | None, int | None, int | None, int | None, bool]:
    """`_memory`'s answer with NVML's sentinels read as n/a (never 17 billion GiB used)."""
    whole = _reading(total)
    return (whole, _reading(used, whole), _reading(free, whole), _reading(reserved, whole), host)


#: NVML's 32-bit "not available" (0xFFFFFFFF) and anything near it: no GPU runs at 2^31 MHz,
#: milliwatts or degrees.
_NOT_AVAILABLE_32 = 2**31

#: The readings `NvmlSource._sensors` asks for, by their `DeviceSnapshot` field.
_READINGS = ("temperature_c", "power_mw", "power_limit_mw", "clock_sm_mhz", "clock_memory_mhz")


def _percent(value: int) -> int | None:
    """A utilization rate, None for NVML's 32-bit "not available" or anything past 100."""
    return int(value) if 0 <= int(value) <= 100 else None


# -- the node's GPU count, for a plan whose files give none --------------------------------
# `accelerate launch` without a config, `deepspeed` without --num_gpus, torchrun's
# `--nproc_per_node gpu` and LLaMA-Factory without NPROC_PER_NODE start one process per
# visible GPU (torch.cuda.device_count()); `memtui estimate --from` asks here when the files
# give no count. No GPU, no driver or no pynvml: None (the caller then says what it assumed).


def local_gpu_count(env: Mapping[str, str] | None = None) -> int | None:
    """The GPUs CUDA would show a process started here with `env` (default: this process's
    environment), or None when NVML cannot count them."""
    env = os.environ if env is None else env
    try:
        import pynvml
    except ImportError:
        return None
    try:
        pynvml.nvmlInit()
    except (pynvml.NVMLError, OSError):
        return None
    try:
        count = int(pynvml.nvmlDeviceGetCount())
    except pynvml.NVMLError:
        return None
    finally:
        with contextlib.suppress(pynvml.NVMLError):
            pynvml.nvmlShutdown()
    visible = env.get("CUDA_VISIBLE_DEVICES")
    if visible is not None:
        # CUDA stops at the first entry it cannot use; "" or "-1" hides every GPU
        shown = 0
        for entry in visible.split(","):
            entry = entry.strip()
            if not entry or entry.startswith("-"):
                break
            shown += 1
        count = min(count, shown)
    return count or None
