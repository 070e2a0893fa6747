"""Frozen snapshot records that every telemetry source returns (docs/architecture.md, "Data flow").

A `ClusterSnapshot` is one poll of a source: its health and one `NodeSnapshot` per host. A
`NodeSnapshot` is one node: versions, its own health (a host that stopped reporting is LOST),
and one `DeviceSnapshot` per GPU (and per MIG device), each with its `ProcessSnapshot`s. A
device is known across polls and hosts by its `DeviceKey` (host, UUID or index). Sizes are
bytes (int); a value the source cannot give is `None` (shown as "n/a"), never 0. The UI
renders these records and never calls NVML or HTTP itself. The same records are the JSONL
trace format (see docs/telemetry.md): a source of one node writes its `NodeSnapshot` per line
(format 1, unchanged), a source of many hosts its `ClusterSnapshot` (format 2).
"""

from __future__ import annotations

import functools
import socket
from collections.abc import Iterator
from enum import Enum
from typing import Annotated, NamedTuple

from pydantic import BaseModel, ConfigDict, Field, FiniteFloat

#: Version of a trace line holding one node (what single-node sources write).
TRACE_FORMAT = 1
#: Version of a trace line holding a cluster (`nodes`), what many-host sources write.
CLUSTER_TRACE_FORMAT = 2


#: A size in bytes as NVML gives it (an unsigned 64-bit count). A trace line with a size out
#: of that range, or a time that is not a finite number, is not a snapshot: readers skip it
#: rather than draw a bar of 10^400 bytes or format the time NaN.
Bytes = Annotated[int, Field(ge=0, lt=2**64)]


class SourceState(str, Enum):
    """Health of a telemetry source; anything but OK comes with a one-line reason and remedy."""

    OK = "ok"
    NO_LIBRARY = "no_library"  # NVML_ERROR_LIBRARY_NOT_FOUND: no driver installed here
    DRIVER_NOT_LOADED = "driver_not_loaded"  # NVML_ERROR_DRIVER_NOT_LOADED
    VERSION_MISMATCH = "version_mismatch"  # NVML_ERROR_LIB_RM_VERSION_MISMATCH
    NO_PERMISSION = "no_permission"  # NVML_ERROR_NO_PERMISSION
    TIMEOUT = "timeout"  # the poll did not finish in time (nvmlInit hangs on some drivers)
    ERROR = "error"  # any other source-level failure
    ENDED = "ended"  # a replayed trace has no more lines
    LOST = "lost"  # a host of a cluster stopped reporting (or its samples went stale)

    @property
    def terminal(self) -> bool:
        """Polling again cannot change this: no driver on this machine, or a replay that
        ended. Every other failure is retryable (a driver reload, a server restart)."""
        return self in (SourceState.NO_LIBRARY, SourceState.ENDED)


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="ignore")


class ProcessSnapshot(_Frozen):
    """One compute process on a device (`nvidia-smi --query-compute-apps=pid,used_memory`)."""

    pid: int
    """Host PID as NVML reports it (not the PID inside a container's namespace)."""
    used_bytes: Bytes | None = None
    """GPU memory of this process; None when NVML says "not available" (e.g. MIG, WDDM)."""
    name: str | None = None
    """Process name from psutil; None when the PID is not visible here."""
    user: str | None = None
    """Owner's user name from psutil; None when not visible or not permitted."""
    command: str | None = None
    """Command line from psutil, joined with spaces; None when not visible or not permitted."""
    gpu_instance_id: int | None = None
    """MIG GPU instance id, None without MIG."""

    @property
    def visible(self) -> bool:
        """Whether this PID could be looked up in our PID namespace."""
        return self.name is not None


class DeviceSnapshot(_Frozen):
    """One GPU or one MIG device (`nvidia-smi --query-gpu=index,uuid,name,memory.*`)."""

    index: int
    """NVML index (PCI order, ignores CUDA_VISIBLE_DEVICES); for MIG, the parent's index."""
    mig_index: int | None = None
    """Index of this MIG device inside its parent; None for a whole GPU."""
    parent_uuid: str | None = None
    """UUID of the parent GPU for a MIG device; None for a whole GPU."""
    mig_enabled: bool = False
    """A whole GPU in MIG mode: its instances follow as their own rows."""
    uuid: str | None = None
    """GPU-... or MIG-... UUID: the stable way to match CUDA devices."""
    name: str | None = None
    """Product name, e.g. "NVIDIA H100 80GB HBM3"."""
    memory_total: Bytes | None = None
    """Bytes (memory.total)."""
    memory_used: Bytes | None = None
    """Bytes (memory.used); with memory info v2 this excludes `memory_reserved`."""
    memory_free: Bytes | None = None
    """Bytes (memory.free)."""
    memory_reserved: Bytes | None = None
    """Bytes the driver reserves (memory.reserved); None with memory info v1 (old drivers),
    where `memory_used` includes it."""
    utilization_gpu: int | None = None
    """Percent of time a kernel ran (utilization.gpu); None when not supported."""
    utilization_memory: int | None = None
    """Percent of time memory was read or written (utilization.memory): the memory
    controller's busy time, not the share of memory in use."""
    temperature_c: int | None = None
    """GPU core temperature in degrees Celsius (temperature.gpu); None when not supported."""
    power_mw: int | None = None
    """Power draw in milliwatts (power.draw, NVML's unit); None when not supported."""
    power_limit_mw: int | None = None
    """Power limit the driver enforces, in milliwatts (enforced.power.limit)."""
    clock_sm_mhz: int | None = None
    """Current SM clock in MHz (clocks.sm)."""
    clock_memory_mhz: int | None = None
    """Current memory clock in MHz (clocks.mem)."""
    host_memory_fallback: bool = False
    """Unified-memory part (GB10, GH200-class): NVML has no memory info, so the memory_*
    fields are the host's RAM (psutil.virtual_memory) and must be labelled as such."""
    lost: bool = False
    """NVML answered GPU_IS_LOST or another error for this device: the fields are stale/None."""
    error: str | None = None
    """One line on why the device is lost or partly unreadable."""
    processes: tuple[ProcessSnapshot, ...] | None = ()
    """Compute processes; None when the list could not be read (see `processes_note`)."""
    processes_note: str | None = None
    """Why the list is empty or partial, e.g. processes in another PID namespace."""
    memory_peak: Bytes | None = None
    """Bytes: the highest `memory_used` since the job began, when the source knows it
    (Prometheus `max_over_time`); None otherwise (the dashboard keeps its own peak)."""
    workload: str | None = None
    """Who uses the GPU as a cluster's exporter labels it (Kubernetes namespace/pod/container,
    Slurm job); None from NVML, which lists processes instead."""

    @property
    def label(self) -> str:
        """Short row label: "0" for GPU 0, "0:1" for its MIG device 1."""
        return str(self.index) if self.mig_index is None else f"{self.index}:{self.mig_index}"

    @property
    def ident(self) -> str:
        """What names this device on its host across polls: its UUID, else its label."""
        return self.uuid or self.label

    @property
    def used_fraction(self) -> float | None:
        """memory_used / memory_total, None when either is unknown."""
        if self.memory_used is None or not self.memory_total:
            return None
        return self.memory_used / self.memory_total


class NodeSnapshot(_Frozen):
    """One poll of one node, from any source (`nvidia-smi -q`, summarised)."""

    format: int = TRACE_FORMAT
    """JSONL trace format version."""
    time: FiniteFloat
    """Unix time of the poll in seconds (a replay keeps the recorded time)."""
    hostname: str | None = None
    source: str = "nvml"
    """Where the data came from: "nvml", "replay:<file>", "demo"."""
    state: SourceState = SourceState.OK
    reason: str | None = None
    """One line on what is wrong when state is not OK."""
    remedy: str | None = None
    """The usual fix for `reason`, one line."""
    driver_version: str | None = None
    """Driver version (nvidia-smi --query-gpu=driver_version), e.g. "550.54.15"."""
    cuda_version: str | None = None
    """Highest CUDA version the driver supports, e.g. "12.4"."""
    devices: tuple[DeviceSnapshot, ...] = Field(default_factory=tuple)
    poll_seconds: FiniteFloat | None = None
    """Wall time the poll took; None for sources that do not measure it."""

    @property
    def ok(self) -> bool:
        """True when the source answered normally (devices may still be lost)."""
        return self.state is SourceState.OK

    @property
    def message(self) -> str | None:
        """`reason` and `remedy` as one line, for a status bar; None when OK."""
        return _one_message(self.reason, self.remedy)


def _one_message(reason: str | None, remedy: str | None) -> str | None:
    if reason is None:
        return None
    return f"{reason}: {remedy}" if remedy else reason


class DeviceKey(NamedTuple):
    """A GPU across polls and hosts: history, peaks and alerts key on it (a label such as
    "0" is on every host)."""

    host: str
    device: str
    """The device's UUID, else its label ("0", "0:1")."""


class ClusterSnapshot(_Frozen):
    """One poll of a source: its health and one `NodeSnapshot` per host.

    A source of one node (NVML, the demo) answers a cluster of that node (`of_node`). The
    cluster's `state` is the source's (a Prometheus server that does not answer); a node's
    `state` is its host's (LOST when it stopped reporting)."""

    format: int = CLUSTER_TRACE_FORMAT
    """JSONL trace format version (2 for a cluster line)."""
    time: FiniteFloat
    """Unix time of the poll in seconds."""
    source: str = "nvml"
    """The source's label: "nvml", "replay:<file>", "demo", "prometheus:<url>"."""
    state: SourceState = SourceState.OK
    reason: str | None = None
    """One line on what is wrong when state is not OK."""
    remedy: str | None = None
    """The usual fix for `reason`, one line."""
    nodes: tuple[NodeSnapshot, ...] = Field(default_factory=tuple)
    poll_seconds: FiniteFloat | None = None
    """Wall time the poll took; None for sources that do not measure it."""
    single_node: bool = Field(False, exclude=True)
    """Written as its one node (trace format 1): what a single-node source answers."""
    recorded: bool = Field(False, exclude=True)
    """The state was read from a trace (a replay): it says how the machine that recorded it
    was then, not how this source is now, so it is shown as recorded, without its remedy,
    and never stops the replay."""

    @classmethod
    def of_node(cls, node: NodeSnapshot) -> ClusterSnapshot:
        """The cluster of one node, health and time taken from the node."""
        return cls(
            time=node.time,
            source=node.source,
            state=node.state,
            reason=node.reason,
            remedy=node.remedy,
            nodes=(node,),
            poll_seconds=node.poll_seconds,
            single_node=True,
        )

    @functools.cached_property
    def devices(self) -> tuple[DeviceSnapshot, ...]:
        """Every device of every node, host by host."""
        if len(self.nodes) == 1:
            return self.nodes[0].devices
        return tuple(d for node in self.nodes for d in node.devices)

    def rows(self) -> Iterator[tuple[DeviceKey, NodeSnapshot, DeviceSnapshot]]:
        """(key, node, device) for every device, host by host."""
        for node in self.nodes:
            host = node.hostname or ""
            for device in node.devices:
                yield DeviceKey(host, device.ident), node, device

    @property
    def ok(self) -> bool:
        """True when the source answered normally (hosts or devices may still be lost)."""
        return self.state is SourceState.OK

    @property
    def message(self) -> str | None:
        """`reason` and `remedy` as one line, for a status bar; None when OK. A recorded
        failure is said as recorded, without the remedy meant for the machine that had it."""
        if self.recorded and self.reason is not None:
            return f"recorded: {self.reason}"
        return _one_message(self.reason, self.remedy)

    def as_node(self) -> NodeSnapshot | None:
        """A single-node source's answer as that node, with the cluster's health and time
        (which a replay or `--only` may have changed); None for a cluster of many hosts."""
        if not self.single_node or len(self.nodes) != 1:
            return None
        return self.nodes[0].model_copy(
            update={
                "time": self.time,
                "source": self.source,
                "state": self.state,
                "reason": self.reason,
                "remedy": self.remedy,
                "poll_seconds": self.poll_seconds,
            }
        )

    def dump_json(self, indent: int | None = None) -> str:
        """The snapshot as one trace line (or `watch --json` output): a single-node source's
        as its node (format 1, what scripts read before clusters existed), else the cluster
        (format 2)."""
        node = self.as_node()
        return (node or self).model_dump_json(indent=indent)


def as_cluster(snapshot: ClusterSnapshot | NodeSnapshot) -> ClusterSnapshot:
    """A source's answer as a cluster (a source of one node may answer its node)."""
    if isinstance(snapshot, NodeSnapshot):
        return ClusterSnapshot.of_node(snapshot)
    return snapshot


@functools.lru_cache(maxsize=1)
def local_hostname() -> str:
    """This node's name (cached: it does not change while memtui runs)."""
    return socket.gethostname()


def failed_snapshot(
    state: SourceState,
    reason: str,
    remedy: str | None,
    *,
    time: float,
    source: str,
    hostname: str | None = None,
) -> NodeSnapshot:
    """A snapshot with no devices that reports a source-level problem, on this node unless
    `hostname` says otherwise (a trace of several nodes still tells them apart)."""
    return NodeSnapshot(
        time=time,
        hostname=hostname or local_hostname(),
        source=source,
        state=state,
        reason=reason,
        remedy=remedy,
    )


def failed_cluster(
    state: SourceState, reason: str, remedy: str | None, *, time: float, source: str
) -> ClusterSnapshot:
    """A cluster snapshot with no nodes that reports a source-level problem."""
    return ClusterSnapshot(time=time, source=source, state=state, reason=reason, remedy=remedy)
