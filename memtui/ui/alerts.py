"""Which GPU rows crossed into which status, and which notifications that raises (pure: no
Textual; the screen shows what `AlertTracker` returns).

A crossing is a GPU whose status becomes an alert (over budget, near capacity) or LOST. One
notification names every GPU that crossed into the same status in the same poll. A GPU
hovering at its budget crosses again and again: it is notified once per status per
`quiet_s` seconds, not once per crossing. A key refused again and again ("micro-batch is at
its maximum") shows one toast while the first is still on screen, not a pile of them.
"""

from __future__ import annotations

import time
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

Severity = Literal["information", "warning", "error"]


@dataclass(frozen=True)
class Notice:
    """One notification to show."""

    message: str
    title: str
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
        for key, _, device in snapshot.rows() if snapshot is not None else ():
            covered = judged is None or judged(device)
            status = statuses[key] = classify(device, budget_bytes if covered else None)
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
