"""The source interface, what a source says about itself, the timeout guard, and `--only`.

Every source (NVML, replay, synthetic, Prometheus) implements `TelemetrySource`: `poll()`
returns a `ClusterSnapshot` (a source of one node may answer its `NodeSnapshot`; `as_cluster`
lifts it) and never raises for an NVML or HTTP problem; `close()` releases it; `info` says
what it is. The UI polls from a thread worker, and live sources are wrapped in
`BoundedSource` so a hung driver or server cannot freeze it.
"""

from __future__ import annotations

import atexit
import os
import threading
import time
import traceback
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from enum import Enum
from typing import Protocol, runtime_checkable

from memtui.telemetry.models import (
    ClusterSnapshot,
    DeviceSnapshot,
    NodeSnapshot,
    SourceState,
    as_cluster,
    failed_cluster,
    failed_snapshot,
)


class SourceKind(str, Enum):
    """What a source's readings are (the UI tells sources apart by this alone). A new source
    takes the kind that describes its readings; a kind is added only when the screen must
    treat a source differently."""

    LOCAL = "local"
    """This machine's GPUs through its driver (NVML): the processes it lists are this
    machine's, so their command lines can be read and a job attached."""
    RECORDED = "recorded"
    """A trace played back: readings of another time, maybe another machine."""
    SYNTHETIC = "synthetic"
    """A made-up node (`--demo`): nothing real behind it."""
    CLUSTER = "cluster"
    """A server that gathers many hosts' readings (Prometheus): other machines' processes."""


@dataclass(frozen=True)
class SourceInfo:
    """What a source says about itself, for status lines and failure messages."""

    kind: SourceKind
    label: str
    """The snapshots' `source`: "nvml", "replay:run.jsonl", "demo", "prometheus:URL"."""
    mode: str
    """How a status line names it: "live NVML", "replay run.jsonl", "Prometheus URL"."""
    silent: str
    """What "not answering" means for it, e.g. "NVML is not answering"."""
    silent_remedy: str
    """The usual fix when it does not answer."""
    live: bool = True
    """Its failures may heal by themselves, so polling again is worth it (a driver reload, a
    server restart); a trace file that cannot be read does not heal."""
    cluster: bool = False
    """It reports many hosts (its failures leave no node to blame)."""

    def gives_up(self, snapshot: ClusterSnapshot) -> bool:
        """Whether polling again after `snapshot` is pointless: its state is terminal, or the
        source is not live and failed. A failure recorded in a trace is data, not the
        replay's own: the replay goes on."""
        if snapshot.recorded:
            return False
        state = snapshot.state
        return state.terminal or (not self.live and state is not SourceState.OK)


@runtime_checkable
class TelemetrySource(Protocol):
    """What the UI and `memtui watch` need from a source of snapshots."""

    name: str
    """The snapshots' `source`, e.g. "nvml", "replay:run.jsonl", "demo" (`info.label`)."""
    info: SourceInfo
    """What kind of source it is and what its silence means."""

    def poll(self) -> ClusterSnapshot | NodeSnapshot:
        """Read the source now. Problems come back as `state`/`reason`, not as exceptions."""
        ...

    def close(self) -> None:
        """Release the source (NVML shutdown, files). Safe to call twice."""
        ...


class BoundedSource:
    """Run each `poll()` of an inner source in a thread and give up waiting after `timeout_s`.

    nvmlInit and some device queries are known to hang on broken drivers; a Python thread
    stuck in C cannot be killed, so it is abandoned: the caller gets a TIMEOUT snapshot at
    once and may poll again later. Polls never overlap: while the abandoned poll is still
    running, further polls answer TIMEOUT without touching NVML. When it ends, the next poll
    starts afresh (its stale result is dropped).

    What "not answering" means comes from the inner source's `info` (NVML, a Prometheus
    server). It also owns the exit hook: `close()` runs at interpreter exit (the inner source
    does not register its own), skips the inner close while an abandoned poll is stuck (nvmlShutdown
    would block on the same driver) and otherwise gives it `timeout_s` in a daemon thread, so
    a hung driver can never keep memtui from exiting.
    """

    def __init__(
        self,
        inner: TelemetrySource,
        timeout_s: float = 5.0,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.inner = inner
        self.timeout_s = timeout_s
        self.name = inner.name
        self.info = inner.info
        self._clock = clock
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None
        self._started_at = 0.0
        self._closed = False
        atexit.register(self.close)

    def poll(self) -> ClusterSnapshot | NodeSnapshot:
        """Poll the inner source, bounded by `timeout_s` (its answer as it gave it)."""
        with self._lock:  # callers from several threads still never overlap
            if self._closed:  # polled again after close(): the inner source re-initialises
                self._closed = False
                atexit.register(self.close)
            if self._thread is not None and self._thread.is_alive():
                waited = self._clock() - self._started_at
                return self._timeout(f"previous poll still running after {waited:.0f} s")
            box: list[ClusterSnapshot | NodeSnapshot] = []
            errors: list[BaseException] = []

            def work() -> None:
                try:
                    box.append(self.inner.poll())
                except BaseException as exc:  # a bug, not an NVML problem: re-raised below
                    errors.append(exc)

            thread = threading.Thread(
                target=work,
                name=f"memtui-poll-{self.name}",
                daemon=True,  # an abandoned, hung poll must not keep the process alive
            )
            self._thread = thread
            self._started_at = self._clock()
            thread.start()
            thread.join(self.timeout_s)
            if thread.is_alive():
                return self._timeout(f"poll did not finish within {self.timeout_s:g} s")
            self._thread = None
            if errors:
                raise errors[0]
            return box[0]

    def busy(self) -> bool:
        """True while an abandoned poll is still running."""
        thread = self._thread
        return thread is not None and thread.is_alive()

    def close(self) -> None:
        """Close the inner source, bounded: never while a hung poll still holds it (closing
        would hang too), and never waiting more than `timeout_s`. Safe to call twice."""
        atexit.unregister(self.close)
        if self._closed or self.busy():
            return  # a stuck poll: leave NVML to the OS, the process can still exit
        self._closed = True
        closer = threading.Thread(
            target=self.inner.close, name=f"memtui-close-{self.name}", daemon=True
        )
        closer.start()
        closer.join(self.timeout_s)

    def _timeout(self, why: str) -> ClusterSnapshot | NodeSnapshot:
        # no "retrying" here: whether the caller polls again is the caller's to say
        failed = failed_cluster if self.info.cluster else failed_snapshot
        return failed(
            SourceState.TIMEOUT,
            f"{self.info.silent} ({why})",
            self.info.silent_remedy,
            time=self._clock(),
            source=self.name,
        )


def poll_safely(source: TelemetrySource) -> ClusterSnapshot:
    """One poll as a cluster; a source that raises (a bug, not an NVML or HTTP problem)
    becomes an ERROR snapshot, so a worker thread can always post an answer."""
    try:
        return as_cluster(source.poll())
    except Exception as err:
        # the kind and where, never the text: an exception's text can quote what a server
        # sent or a request carried (a header with its credentials)
        frame = traceback.extract_tb(err.__traceback__)[-1:] or None
        where = f" at {os.path.basename(frame[0].filename)}:{frame[0].lineno}" if frame else ""
        return failed_cluster(
            SourceState.ERROR,
            f"telemetry source failed: {type(err).__name__}{where}",
            "please report this; memtui keeps retrying",
            time=time.time(),
            source=source.name,
        )


def parse_only(value: str | Sequence[str] | None) -> tuple[str, ...]:
    """Split `--only 0,2,GPU-...` into tokens (indices or UUIDs, UUID prefixes allowed)."""
    if not value:
        return ()
    parts: Iterable[str] = value.split(",") if isinstance(value, str) else value
    return tuple(p.strip() for token in parts for p in token.split(",") if p.strip())


def matches_only(
    only: Sequence[str], index: int, uuid: str | None, parent_uuid: str | None = None
) -> bool:
    """Whether a device is selected by `--only` tokens (empty selects everything).

    A token is an NVML index ("2") or a UUID or unambiguous UUID prefix ("GPU-5f3a");
    selecting a GPU selects its MIG devices too. NVML numbers GPUs in PCI order, not in
    CUDA's order, which is why UUIDs are the reliable way to name a CUDA device.
    """
    if not only:
        return True
    for token in only:
        if token.isdigit():
            if int(token) == index:
                return True
            continue
        for candidate in (uuid, parent_uuid):
            if candidate and candidate.lower().startswith(token.lower()):
                return True
    return False


def select_devices(snapshot: NodeSnapshot, only: Sequence[str]) -> NodeSnapshot:
    """The snapshot restricted to the devices `only` selects (replay, synthetic sources)."""
    if not only:
        return snapshot
    ambiguous = ambiguous_only_update(only, [(d.label, d.uuid) for d in snapshot.devices])
    if ambiguous is not None:
        return snapshot.model_copy(update={"devices": (), **ambiguous})
    kept: tuple[DeviceSnapshot, ...] = tuple(
        d for d in snapshot.devices if matches_only(only, d.index, d.uuid, d.parent_uuid)
    )
    if not kept and snapshot.devices:
        labels = sorted({str(d.index) for d in snapshot.devices}, key=int)
        return snapshot.model_copy(update={"devices": kept, **no_match_update(only, labels)})
    return snapshot.model_copy(update={"devices": kept})


def select_in_cluster(snapshot: ClusterSnapshot, only: Sequence[str]) -> ClusterSnapshot:
    """The cluster restricted to the devices `only` selects, host by host; a selection that
    matches nothing (or is ambiguous) says so as the cluster's state."""
    if not only:
        return snapshot
    node = snapshot.as_node()
    if node is not None:
        return ClusterSnapshot.of_node(select_devices(node, only))
    nodes = tuple(
        n.model_copy(
            update={
                "devices": tuple(
                    d for d in n.devices if matches_only(only, d.index, d.uuid, d.parent_uuid)
                )
            }
        )
        for n in snapshot.nodes
    )
    if snapshot.devices and not any(n.devices for n in nodes):
        labels = sorted({str(d.index) for d in snapshot.devices}, key=int)
        return snapshot.model_copy(update={"nodes": nodes, **no_match_update(only, labels)})
    return snapshot.model_copy(update={"nodes": nodes})


def ambiguous_only_update(
    only: Sequence[str], devices: Iterable[tuple[str, str | None]]
) -> dict[str, object] | None:
    """Snapshot fields saying that a UUID prefix in `only` names several devices, or None.

    `devices` are (label, UUID) of every GPU and MIG device. A token equal to a UUID is never
    ambiguous; a prefix must match exactly one UUID ("GPU-" would match them all). Matching
    a GPU through its MIG devices' parent does not count: that selects the GPU's children.
    """
    pairs = list(devices)
    for token in only:
        if token.isdigit():
            continue
        t = token.lower()
        if any(uuid and uuid.lower() == t for _, uuid in pairs):
            continue
        hits = [label for label, uuid in pairs if uuid and uuid.lower().startswith(t)]
        if len(hits) > 1:
            return {
                "state": SourceState.ERROR,
                "reason": f"--only {token} is ambiguous: it matches devices {', '.join(hits)}",
                "remedy": "give more of the UUID (`memtui watch --once --json` lists them)",
            }
    return None


def no_match_update(only: Sequence[str], labels: Sequence[str]) -> dict[str, object]:
    """Snapshot fields saying that `--only` selected nothing (a usage problem, one line)."""
    here = ", ".join(labels) or "none"
    return {
        "state": SourceState.ERROR,
        "reason": f"no GPU matches --only {','.join(only)} (GPUs here: {here})",
        "remedy": "use an index or UUID shown by `memtui watch --once`",
    }
