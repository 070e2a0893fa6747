"""The plan's prediction beside what the allocator held: which term grew past its budget.

The estimator's budget (memtui/estimator/budget.py) predicts each term at the step's peak.
The snapshot's attribution is compared at the moment that matters most: the OOM (what was
live plus the failed request, the least the job needed), else the trace's peak, else the
snapshot's blocks. Attributed bytes are a lower bound for their term (unattributed bytes may
belong to any term), so a term whose attributed bytes exceed its budget is over for certain;
one below it is within only up to the unattributed bytes, and the output says so.

The overhead term lives outside the allocator, so it is compared in its two parts: the
fragmentation allowance against reserved-but-unallocated memory, and the CUDA context and
NCCL buffers against the card less CUDA's free memory and the reserved memory at the OOM.
"""

from __future__ import annotations

from dataclasses import dataclass

from memtui.estimator import Plan, Report
from memtui.estimator.terms import TermKind
from memtui.forensics.allocator import gib
from memtui.forensics.model import (
    ALLOCATOR_TERMS,
    UNATTRIBUTED,
    Bucket,
    DeviceSummary,
    Finding,
)

LABELS: dict[Bucket, str] = {
    **{kind: kind.label for kind in TermKind},
    UNATTRIBUTED: "Unattributed",
}


@dataclass(frozen=True)
class TermRow:
    key: TermKind
    label: str
    planned: int
    observed: int

    @property
    def delta(self) -> int:
        return self.observed - self.planned

    @property
    def over(self) -> bool:
        return self.observed > self.planned


@dataclass(frozen=True)
class PlanComparison:
    plan: str
    """The plan in one line."""
    basis: str
    """Which moment the observed bytes are from."""
    rows: tuple[TermRow, ...]
    unattributed: int
    planned_total: int
    """The allocator's share of the budget: every term but overhead."""
    observed_total: int
    free_in_reserved: int | None
    fragmentation_allowance: int
    outside_allocator: int | None
    """Card - CUDA free - reserved at the OOM: the CUDA context, NCCL, other processes."""
    planned_outside: int
    findings: tuple[Finding, ...]


def describe(plan: Plan) -> str:
    hw = plan.hardware
    return (
        f"{plan.model.name}, {plan.method.value}, {plan.precision.value}, "
        f"{plan.optimizer.value}, {plan.strategy.value} on {hw.gpus} x {hw.gpu_name}, "
        f"micro-batch {plan.micro_batch} x seq {plan.seq_len}"
    )


def compare_plan(d: DeviceSummary, plan: Plan, report: Report) -> PlanComparison | None:
    """The plan's terms beside `d`'s attribution; None when `d` has no attribution (a
    memory_stats dump has no frames)."""
    budget = report.budget
    oom = d.oom
    if oom is not None and d.at_oom is not None:
        observed = dict(d.at_oom.by_term)
        term = oom.term or UNATTRIBUTED
        observed[term] = observed.get(term, 0) + oom.requested
        basis = f"at the OOM (live + the failed {gib(oom.requested)} request, for {term})"
    elif d.at_peak is not None:
        observed = dict(d.at_peak.by_term)
        basis = "at the trace's peak (requested bytes)"
    elif d.at_snapshot is not None:
        observed = dict(d.at_snapshot.by_term)
        basis = "at the snapshot (block sizes)"
    else:
        return None
    rows = tuple(
        TermRow(key, LABELS[key], budget.term(key), observed.get(key, 0)) for key in ALLOCATOR_TERMS
    )
    unattributed = observed.get(UNATTRIBUTED, 0)
    planned_total = sum(r.planned for r in rows)
    observed_total = sum(observed.values())
    capacity = plan.hardware.gpu_memory
    o = plan.overhead
    allowance = round(o.fragmentation * capacity) if o.enabled else 0
    planned_outside = (
        (o.cuda_context + (o.nccl if plan.hardware.gpus > 1 else 0)) if o.enabled else 0
    )
    free_in_reserved = None
    outside = None
    if oom is not None and oom.reserved is not None and oom.live is not None:
        free_in_reserved = oom.reserved - oom.live
        if oom.device_free is not None:
            outside = capacity - oom.device_free - oom.reserved
    elif d.reserved is not None and d.allocated is not None:
        free_in_reserved = d.reserved - d.allocated
    out: list[Finding] = []
    for r in sorted((r for r in rows if r.over), key=lambda r: -r.delta):
        out.append(
            Finding(
                "plan",
                f"{r.label.lower()} grew past the budget: {gib(r.observed)} attributed vs "
                f"{gib(r.planned)} planned (+{gib(r.delta)})",
                r.delta,
            )
        )
    static_obs = sum(observed.get(k, 0) for k in TermKind if k.static)
    by_key = {r.key: r for r in rows}
    master = by_key[TermKind.master_weights]
    autocast_split = by_key[TermKind.weights].over and master.planned > 0 and master.observed == 0
    if autocast_split and static_obs <= budget.static:
        out.append(
            Finding(
                "plan",
                f"the static state as a whole is within the plan ({gib(static_obs)} vs "
                f"{gib(budget.static)}): the split differs (fp32 parameters under autocast are "
                "counted as weights here, as master weights in the plan)",
                static_obs,
            )
        )
    if unattributed:
        out.append(
            Finding(
                "plan",
                f"{gib(unattributed)} is unattributed: a term within its budget here may still "
                "be over by up to that much",
                unattributed,
            )
        )
    if observed_total > planned_total:
        out.append(
            Finding(
                "plan",
                f"the allocator held {gib(observed_total)} {basis.split(' (')[0]} against "
                f"{gib(planned_total)} planned for the allocator's terms "
                f"(+{gib(observed_total - planned_total)})",
                observed_total - planned_total,
            )
        )
    if free_in_reserved is not None and allowance and free_in_reserved > allowance:
        out.append(
            Finding(
                "plan",
                f"reserved but unallocated {gib(free_in_reserved)} exceeds the plan's "
                f"fragmentation allowance {gib(allowance)} ({o.fragmentation:.0%} of the card)",
                free_in_reserved - allowance,
            )
        )
    if outside is not None and outside > planned_outside:
        out.append(
            Finding(
                "plan",
                f"{gib(outside)} of the card was outside PyTorch's allocator at the OOM (card "
                f"{gib(capacity)} - CUDA free - reserved): CUDA context, NCCL, other processes; "
                f"the plan allows {gib(planned_outside)}",
                outside - planned_outside,
            )
        )
    if oom is not None:
        short = observed_total - capacity + (outside or planned_outside) + (free_in_reserved or 0)
        levers = [lv for lv in report.levers if not lv.applied and lv.saves_bytes > 0]
        # of the levers that would cover the shortfall, the ones that slow the step least
        # (the list is by saving; its step-time changes rank them here)
        covering = sorted(
            (lv for lv in levers if lv.saves_bytes >= max(short, 0)),
            key=lambda lv: float("inf") if lv.percent_change is None else lv.percent_change,
        )[:3]
        for lv in covering or levers[:2]:
            slower = "" if lv.percent_change is None else f", step time {lv.time_text}"
            out.append(
                Finding(
                    "advice",
                    f"{lv.name}: saves {gib(lv.saves_bytes)} per GPU in the plan{slower} "
                    f"({lv.cost})",
                    lv.saves_bytes,
                )
            )
    return PlanComparison(
        plan=describe(plan),
        basis=basis,
        rows=rows,
        unattributed=unattributed,
        planned_total=planned_total,
        observed_total=observed_total,
        free_in_reserved=free_in_reserved,
        fragmentation_allowance=allowance,
        outside_allocator=outside,
        planned_outside=planned_outside,
        findings=tuple(out),
    )


def comparison_json(c: PlanComparison) -> dict[str, object]:
    return {
        "plan": c.plan,
        "basis": c.basis,
        "terms": {
            r.key.value: {"planned": r.planned, "observed": r.observed, "over": r.over}
            for r in c.rows
        },
        "unattributed": c.unattributed,
        "planned_total": c.planned_total,
        "observed_total": c.observed_total,
        "free_in_reserved": c.free_in_reserved,
        "fragmentation_allowance": c.fragmentation_allowance,
        "outside_allocator": c.outside_allocator,
        "planned_outside": c.planned_outside,
        "findings": [{"kind": f.kind, "text": f.text, "bytes": f.figure} for f in c.findings],
    }
