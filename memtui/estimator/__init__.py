"""The pure domain core: plans in, budgets out. No Textual, no pynvml, no I/O but model configs.

Public entry points: `Plan` (what the user wants to train, on what), `estimate(plan)` (the full
report: per-GPU budget, every strategy, levers, communication, largest micro-batch),
`breakdown(plan)` (every term's bytes per GPU, the hot path), `TermKind` (the budget's terms).
docs/architecture.md says where each formula lives.

The plan's half (`Plan` and what it is made of) is imported with the package; the estimate's
half (`estimate`, `breakdown`, the report's models, the stacks: a third of the estimator's
import time) on first use (PEP 562 module `__getattr__`), so a program that builds a plan and
draws before it estimates (the dashboard's first frame) does not wait for it.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from memtui.estimator.architecture import Architecture, LinearLayer
from memtui.estimator.plan import (
    Attention,
    Checkpointing,
    Hardware,
    LossKind,
    Method,
    ModelSpec,
    Offload,
    Optimizer,
    OptimizerKernel,
    OverheadSettings,
    Plan,
    Precision,
    StackName,
    StateDtype,
    Strategy,
)
from memtui.estimator.terms import TermKind

if TYPE_CHECKING:
    from memtui.estimator.budget import breakdown, estimate, per_gpu_total
    from memtui.estimator.report import (
        Budget,
        Communication,
        Lever,
        Report,
        StrategyRow,
        Term,
    )
    from memtui.estimator.stacks import Breakdown

#: The names imported on first use, and the module each comes from.
_ON_FIRST_USE = {
    **dict.fromkeys(("breakdown", "estimate", "per_gpu_total"), "memtui.estimator.budget"),
    **dict.fromkeys(
        ("Budget", "Communication", "Lever", "Report", "StrategyRow", "Term"),
        "memtui.estimator.report",
    ),
    "Breakdown": "memtui.estimator.stacks",
}

__all__ = [
    "Architecture",
    "Attention",
    "Breakdown",
    "Budget",
    "Checkpointing",
    "Communication",
    "Hardware",
    "Lever",
    "LinearLayer",
    "LossKind",
    "Method",
    "ModelSpec",
    "Offload",
    "Optimizer",
    "OptimizerKernel",
    "OverheadSettings",
    "Plan",
    "Precision",
    "Report",
    "StackName",
    "StateDtype",
    "Strategy",
    "StrategyRow",
    "Term",
    "TermKind",
    "breakdown",
    "estimate",
    "per_gpu_total",
]


def __getattr__(name: str) -> Any:
    module = _ON_FIRST_USE.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value  # once: later lookups do not come here
    return value
