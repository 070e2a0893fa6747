"""Which GPU rows crossed into which status, and which notifications that raises (pure: no
Textual; the screen shows what `AlertTracker` returns).

A crossing is a GPU whose status becomes an alert (over budget, near capacity) or LOST. One
notification names every GPU that crossed into the same status in the same poll. A GPU
hovering at its budget crosses again and again: it is notified once per status per
`quiet_s` seconds, not once per crossing. A key refused again and again ("micro-batch is at
its maximum") shows one toast while the first is still on screen, not a pile of them.

The log keeps every crossing, quiet or not, with the poll's time, and every GPU's return from
an alert, so NEAR CAPACITY stays readable after the usage drops and the toast has gone; it
keeps the newest `LOG_MAX` entries.
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal

from memtui.telemetry import ClusterSnapshot, DeviceKey, DeviceSnapshot
from memtui.ui.gpu_state import RowStatus, classify
from memtui.ui.units import size

#: A GPU is notified again for the same status only after this many seconds.
QUIET_S = 60.0
#: A refused key's toast stays this long (Textual's default timeout); repeats inside it merge.
TOAST_S = 5.0

#: Entries the alert log keeps (the oldest are dropped past it: a GPU hovering at its
#: budget for a week must not grow memtui without bound).
LOG_MAX = 10_000

Severity = Literal["information", "warning", "error"]


@dataclass(frozen=True)
class Notice:
    """One notification to show."""

    message: str
    title: str
    severity: Severity


@dataclass(frozen=True)
class LogEntry:
    """One line of the alert log: a GPU that crossed into a status, or came back from one."""

    time: float
    """Unix time of the poll that saw it (a replay's recorded time)."""
    gpu: str
    """How the GPU is named ("3", "gpu07/3")."""
    status: RowStatus
    """The status it crossed into."""
    message: str
    severity: Severity


def row_name(key: DeviceKey, device: DeviceSnapshot, many_hosts: bool) -> str:
    """How a notification names a GPU: "3" on one node, "gpu07/3" across hosts."""
    return f"{key.host}/{device.label}" if many_hosts else device.label


class AlertTracker:
    """Row statuses between polls, and the notifications their crossings raise."""

    def __init__(
        self,
        quiet_s: float = QUIET_S,
        toast_s: float = TOAST_S,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.quiet_s = quiet_s
        self.toast_s = toast_s
        self._clock = clock
        self.statuses: dict[DeviceKey, RowStatus] = {}
        """The status of every row of the latest snapshot."""
        self._notified: dict[tuple[DeviceKey, RowStatus], float] = {}
        self._toasts: dict[str, float] = {}
        self.log: deque[LogEntry] = deque(maxlen=LOG_MAX)
        """Every crossing and every return from an alert, oldest first."""

    def update(
        self,
        snapshot: ClusterSnapshot | None,
        budget_bytes: int | None,
        unit: str,
        judged: Callable[[DeviceSnapshot], bool] | None = None,
    ) -> list[Notice]:
        """Classify every row against the job's budget per GPU (None: no job's budget, the
        cards' capacity only; `judged` says which GPUs the budget covers, None: all); the
        notifications for new crossings."""
        now = self._clock()
        many = snapshot is not None and len(snapshot.nodes) > 1
        before = self.statuses
        statuses: dict[DeviceKey, RowStatus] = {}
        crossed: dict[RowStatus, list[tuple[DeviceKey, DeviceSnapshot]]] = {}
        when = snapshot.time if snapshot is not None else 0.0  # the log's time: the poll's
        for key, _, device in snapshot.rows() if snapshot is not None else ():
            covered = judged is None or judged(device)
            budget = budget_bytes if covered else None
            status = statuses[key] = classify(device, budget)
            if before.get(key) is not status:
                self._log(when, row_name(key, device, many), before.get(key), status, device,
                          budget, unit)  # fmt: skip
            if (status.alert or status is RowStatus.LOST) and before.get(key) is not status:
                last = self._notified.get((key, status))
                if last is None or now - last >= self.quiet_s:
                    self._notified[(key, status)] = now
                    crossed.setdefault(status, []).append((key, device))
        self.statuses = statuses
        notices: list[Notice] = []
        for status, rows in crossed.items():
            if status is RowStatus.LOST:
                notices.extend(self._lost(rows, many))
            else:
                notices.append(self._alert(status, rows, many, budget_bytes, unit))
        return notices

    def _log(
        self,
        when: float,
        gpu: str,
        was: RowStatus | None,
        status: RowStatus,
        device: DeviceSnapshot,
        budget: int | None,
        unit: str,
    ) -> None:
        """Log a change of status that matters: into an alert or LOST (a GPU first seen in one
        included, `was` None), or out of one; `budget`: the job's per GPU, None when none
        covers this GPU."""
        if status.alert:
            said = budget is not None and status is not RowStatus.NEAR_CAPACITY
            planned = f", job's budget {size(budget, unit)}" if said else ""
            message = (f"{status.value}: {size(device.memory_used, unit)} used{planned}, "
                       f"card {size(device.memory_total, unit)}")  # fmt: skip
            severity: Severity = "warning" if status is RowStatus.NEAR_CAPACITY else "error"
        elif status is RowStatus.LOST:
            message, severity = f"lost: {device.error or 'no answer'}", "error"
        elif was is not None and (was.alert or was is RowStatus.LOST):
            message = (
                f"{status.value} again (was {was.value}): {size(device.memory_used, unit)} used"
            )
            severity = "information"
        else:
            return
        self.log.append(LogEntry(when, gpu, status, message, severity))

    def refused(self, message: str) -> Notice | None:
        """The toast for a refused key, or None while the same one is still on screen."""
        now = self._clock()
        shown = self._toasts.get(message)
        if shown is not None and now - shown < self.toast_s:
            return None
        self._toasts = {m: t for m, t in self._toasts.items() if now - t < self.toast_s}
        self._toasts[message] = now
        return Notice(message, "Not changed", "warning")

    @staticmethod
    def _lost(rows: list[tuple[DeviceKey, DeviceSnapshot]], many: bool) -> list[Notice]:
        # GPUs lost for the same reason (a host that stopped reporting) in one notice
        by_reason: dict[str, list[str]] = {}
        for key, device in rows:
            by_reason.setdefault(device.error or "no answer", []).append(
                row_name(key, device, many)
            )
        return [
            Notice(
                f"GPU{'s' if len(names) > 1 else ''} {', '.join(names)} lost: {reason}",
                "GPU lost",
                "error",
            )
            for reason, names in by_reason.items()
        ]

    @staticmethod
    def _alert(
        status: RowStatus,
        rows: list[tuple[DeviceKey, DeviceSnapshot]],
        many: bool,
        budget: int | None,
        unit: str,
    ) -> Notice:
        # one notification per kind of crossing, naming every GPU that crossed; the job's
        # budget where it was crossed (near capacity is said of cards nobody planned too)
        worst = max((d for _, d in rows), key=lambda d: d.memory_used or 0)
        names = ", ".join(row_name(k, d, many) for k, d in rows)
        several = len(rows) > 1
        said = budget is not None and status is not RowStatus.NEAR_CAPACITY
        planned = f", job's budget {size(budget, unit)}" if said else ""
        return Notice(
            f"GPU{'s' if several else ''} {names}: {status.value}: "
            f"{'up to ' if several else ''}{size(worst.memory_used, unit)} "
            f"used{planned}, card {size(worst.memory_total, unit)}",
            "Memory alert",
            "warning" if status is RowStatus.NEAR_CAPACITY else "error",
        )
