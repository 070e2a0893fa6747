"""Sizing the plan to the GPUs telemetry found (pure: no Textual, no I/O).

The dashboard plans for the hardware it watches unless a flag or a plan file said otherwise:
GPUs per node (the most on one host, a GPU lost or unreadable included: it is still in the
node), nodes (hosts, for a source of many hosts) and memory per GPU (the smallest card seen,
NVML's total, so the verdict is never optimistic). A GPU whose memory NVML cannot read reports
the host's RAM instead (`host_memory_fallback`): that is no card's size, so it sizes the plan
only when every GPU is one (a unified-memory part, whose memory is the host's).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Set
from typing import Any

from memtui.estimator import Plan
from memtui.telemetry import ClusterSnapshot


def fit_plan(plan: Plan, snapshot: ClusterSnapshot, fit_to: Set[str]) -> Plan | None:
    """`plan` with the hardware named in `fit_to` ("gpus", "nodes", "memory") taken from
    `snapshot`; None when there is nothing to fit (`fit_to` empty, or no whole GPU reported
    its size yet). Raises ValueError when the sized plan is not valid (`Plan.evolve`
    validates)."""
    whole = [(key.host, d) for key, _, d in snapshot.rows() if d.mig_index is None]
    sized = [d for _, d in whole if d.memory_total and not d.lost]
    if not fit_to or not sized:
        return None
    hardware: dict[str, Any] = {}
    per_host = Counter(host for host, _ in whole)
    if "gpus" in fit_to:
        hardware["gpus_per_node"] = max(per_host.values())
    if "nodes" in fit_to:
        hardware["nodes"] = len(per_host)
    if "memory" in fit_to:
        cards = [d for d in sized if not d.host_memory_fallback] or sized
        smallest = min(cards, key=lambda d: d.memory_total or 0)
        hardware["gpu_memory"] = smallest.memory_total
        hardware["gpu_name"] = smallest.name or plan.hardware.gpu_name
    return plan.evolve(hardware=hardware)
