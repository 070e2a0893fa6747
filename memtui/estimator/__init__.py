"""The pure domain core: plans in, budgets out. No Textual, no pynvml, no I/O but model configs.

Public entry points: `Plan` (what the user wants to train, on what), `estimate(plan)` (the full
report: per-GPU budget, every strategy, levers, communication, largest micro-batch),
`breakdown(plan)` (every term's bytes per GPU, the hot path), `TermKind` (the budget's terms).
docs/architecture.md says where each formula lives.
"""

from memtui.estimator.architecture import Architecture, LinearLayer
from memtui.estimator.budget import breakdown, estimate, per_gpu_total
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
from memtui.estimator.report import Budget, Communication, Lever, Report, StrategyRow, Term
from memtui.estimator.stacks import Breakdown
from memtui.estimator.terms import TermKind

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
