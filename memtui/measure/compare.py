"""Predicted beside measured, term by term, per GPU.

The plan is compared as it was measured: one process is one GPU with no sharding (`ddp` on 1
GPU is the whole state); FSDP2 over N CPU processes is the plan's sharding over N GPUs, one
rank's bytes. No runtime overhead either way (a CPU step has no CUDA context, NCCL or
fragmentation).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from enum import Enum
from typing import Any

from memtui.estimator.budget import breakdown
from memtui.estimator.choices import Method, StackName, Strategy
from memtui.estimator.plan import Hardware, OverheadSettings, Plan
from memtui.estimator.terms import TermKind
from memtui.measure.measurement import Measurement


class Measured(str, Enum):
    """A row beside the budget's terms: their sum, the transient term's parts, the peak."""

    static = "static"
    backward_buffers = "backward_buffers"
    step_temporaries = "step_temporaries"
    cpu_fold = "cpu_fold"
    peak = "peak"


RowKey = TermKind | Measured
"""What a row compares: a budget term or one of the other figures."""

# Why a measured term can differ from the estimator for reasons it cannot know.
NOTES: dict[RowKey, str] = {
    TermKind.optimizer_states: "measured without {counters:,} B of step counters",
    TermKind.activations: "CPU LayerNorm stats in bf16 (CUDA: fp32)",
    Measured.peak: "storages only: no allocator rounding, no kernel workspace",
}
BUFFERS = {
    StackName.trainer: "autocast's bf16 copies of fp32 weights",
    StackName.fsdp2: "gathered units, unsharded gradients, reduce-scatter inputs",
}
"""What a stack's backward buffers are, where `memtui measure` runs through the stack."""


@dataclass(frozen=True)
class Row:
    """One term: predicted and measured bytes, their difference and the relative error."""

    key: RowKey
    label: str
    predicted: int
    measured: int
    note: str = ""

    @property
    def difference(self) -> int:
        return self.predicted - self.measured

    @property
    def error(self) -> float:
        """(predicted - measured) / measured; 0 when both are 0."""
        if self.measured == 0:
            return 0.0 if self.predicted == 0 else float("inf")
        return self.difference / self.measured

    def as_dict(self) -> dict[str, Any]:
        fields = {**asdict(self), "key": self.key.value}
        return {**fields, "difference": self.difference, "error": self.error}


def single_gpu(plan: Plan, gpus: int = 1) -> Plan:
    """The plan as the measured processes ran it: `gpus` GPUs on one node (one: no sharding,
    `ddp`; more: the plan's sharded strategy), no runtime overhead."""
    return plan.evolve(
        hardware=Hardware(gpus_per_node=gpus, nodes=1, gpu_memory=plan.hardware.gpu_memory),
        strategy=Strategy.ddp if gpus == 1 else plan.strategy,
        tp=1,
        overhead=OverheadSettings(enabled=False),
    )


def _term(kind: TermKind, predicted: int, measured: int, note: str = "", suffix: str = "") -> Row:
    """The row of a budget term: its key and label are the term's own (`suffix` appended)."""
    return Row(kind, kind.label + suffix, predicted, measured, note)


def compare(plan: Plan, measured: Measurement) -> list[Row]:
    """Rows for every term the estimator predicts and the step measured."""
    one = single_gpu(plan, measured.world_size)
    t = breakdown(one)
    st = t.state
    m = measured
    lora = plan.method is not Method.full
    rows = [
        _term(TermKind.weights, st.weights, m.weights,
              suffix=" (frozen base + adapters)" if lora else ""),
        _term(TermKind.gradients, st.gradients, m.gradients),
        _term(TermKind.master_weights, st.master_weights, m.master_weights),
        _term(
            TermKind.optimizer_states,
            st.optimizer_states,
            m.optimizer_states,
            NOTES[TermKind.optimizer_states].format(counters=m.optimizer_step_counters)
            if m.optimizer_step_counters
            else "",
        ),
        Row(Measured.static, "Static", st.total, m.static),
        *(
            [_term(TermKind.reference_model, t.terms[TermKind.reference_model], m.reference_model)]
            if plan.objective.value != "sft"
            else []
        ),
        _term(TermKind.activations, t.terms[TermKind.activations], m.activations,
              NOTES[TermKind.activations] if plan.model.architecture.norm_kind == "layernorm"
              else ""),
        _term(TermKind.logits, t.terms[TermKind.logits], m.logits),
        *(
            [
                _term(TermKind.log_probs, t.terms[TermKind.log_probs], m.log_probs),
                Row(Measured.cpu_fold, "CPU-only head temporaries", 0, m.cpu_fold,
                    "TRL's torch fold of its fused head's tiles (CUDA: Triton kernels); "
                    "left out of the measured peak"),
            ]
            if plan.objective.value != "sft"
            else []
        ),
        Row(Measured.backward_buffers, "Backward buffers", t.transient.persistent +
            t.transient.backward, m.backward_buffers, BUFFERS.get(plan.stack, "")),
        Row(Measured.step_temporaries, "Step temporaries", t.transient.step,
            m.step_temporaries, "gradient clipping's norms (scalars)" if plan.stack in
            BUFFERS else ""),
        Row(Measured.peak, "Peak", t.total - t.terms[TermKind.reference_model], m.peak,
            NOTES[Measured.peak]),
    ]  # fmt: skip
    return rows
