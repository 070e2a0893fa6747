"""The dashboard's two plans (pure: no Textual, no estimator call, no I/O).

- The **job's budget**: the plan the job on the GPUs was planned or launched with, and where it
  came from (`--plan FILE`, `--from FILES`, the attached job (`j`), the job recognised on the
  node at start, or the what-if plan promoted (`b`)). The live bars and the budget alarms are
  judged against it, and against nothing else.
- The **what-if plan**: the plan the settings edit. It is compared with the job's budget side
  by side (`comparison`) and never moves the bars' budget.

With no job's budget (plain `memtui` or `--demo` on a node nobody planned) the bars show each
card's capacity only: no GPU is "over budget" for a job nobody planned. A budget is the
estimator's per-GPU figure (`Budget.total`, memtui/estimator/report.py), compared with each
GPU's own use, on the GPUs the job runs on (every GPU when its source does not say which).
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum
from typing import TYPE_CHECKING

from memtui.estimator import Plan
from memtui.telemetry import DeviceSnapshot
from memtui.text import shown
from memtui.ui.units import num

if TYPE_CHECKING:  # the report's model: loaded with the first estimate, after the first frame
    from memtui.estimator import Budget


class BudgetFrom(str, Enum):
    """Where the job's budget came from, as the screen names it."""

    GIVEN = "given plan"
    """The plan a caller of `make_app` said the job runs (the tests, the benchmarks)."""
    PLAN_FILE = "--plan"
    JOB_FILES = "--from"
    ATTACHED = "attached job"
    RECOGNISED = "job on the node"
    PROMOTED = "what-if plan"

    @property
    def at_start(self) -> bool:
        """The plan the dashboard started with: sized, like the what-if plan, to the GPUs the
        first poll finds."""
        return self in (BudgetFrom.GIVEN, BudgetFrom.PLAN_FILE, BudgetFrom.JOB_FILES)


@dataclass(frozen=True)
class BudgetSource:
    """Where a job's budget came from, and the GPUs its job runs on."""

    kind: BudgetFrom
    detail: str = ""
    """The file or the job ("plan.toml", "torchrun train.py (pid 4242 on GPU 0,1)")."""
    devices: frozenset[str] | None = None
    """The GPUs (row labels: "0", "0:1") the job runs on; None: every GPU of the node."""

    def __str__(self) -> str:
        # a path or a command line from outside: controls escaped
        return f"{self.kind.value} {shown(self.detail)}" if self.detail else self.kind.value


#: `make_app`'s default: the plan passed in is the job's (the CLI says when it is not).
GIVEN = BudgetSource(BudgetFrom.GIVEN)


@dataclass(frozen=True)
class JobBudget:
    """The job's budget: its plan, the estimator's budget for it, where it came from."""

    plan: Plan
    budget: Budget
    source: BudgetSource

    def judges(self, device: DeviceSnapshot) -> bool:
        """Whether `device`'s use is judged against this budget (the job runs on it)."""
        devices = self.source.devices
        return devices is None or device.label in devices

    def judged(self, device: DeviceSnapshot) -> int | None:
        """The budget's bytes per GPU for `device`; None where the job does not run."""
        return self.budget.total if self.judges(device) else None


@dataclass(frozen=True)
class CompareRow:
    """One line of the side-by-side comparison: a label, the job's figure, the what-if's."""

    label: str
    job: str
    what_if: str


def source_line(job: JobBudget | None) -> str:
    """Where the job's budget came from, or the keys that give it one (attach the job,
    promote the what-if plan); the what-if plan always comes from the settings."""
    if job is None:
        return "job's budget: none, capacity only (j: attach, b: promote)"
    return f"job's budget from {job.source}"


def comparison(job: JobBudget | None, what_if: Budget, unit: str) -> tuple[CompareRow, ...]:
    """The job's budget beside the what-if plan: the budget per GPU against the card, and
    the headroom it leaves. A figure the estimator adds to `Report` (the step time) is one
    more row here."""

    def budget(b: Budget) -> str:
        return f"{num(b.total, unit)}/{num(b.capacity, unit)} {unit}"

    def headroom(b: Budget) -> str:
        return f"{num(b.headroom, unit)} {unit}" + ("" if b.fits else " NO FIT")

    if job is None:
        return (
            CompareRow("per GPU", "capacity only", budget(what_if)),
            CompareRow("headroom", "-", headroom(what_if)),
        )
    return (
        CompareRow("per GPU", budget(job.budget), budget(what_if)),
        CompareRow("headroom", headroom(job.budget), headroom(what_if)),
    )
