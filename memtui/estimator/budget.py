"""The estimator's entry points: a plan in, a frozen report out.

`breakdown` asks the plan's training stack (`stacks/`) for every term; `per_gpu_total` is the
hot path (the lever list and the micro-batch search call it many times) and works on plain
integers; `estimate` builds the pydantic report once.
"""

from __future__ import annotations

from memtui.estimator.capabilities import CAPABILITIES
from memtui.estimator.choices import Method, Strategy
from memtui.estimator.communication import communication
from memtui.estimator.error_band import band_for
from memtui.estimator.levers import levers
from memtui.estimator.objectives import objective_sources
from memtui.estimator.optimizers import optimizer_spec
from memtui.estimator.phases import PhasePeak, phases
from memtui.estimator.plan import Plan
from memtui.estimator.report import (
    Budget,
    Parameters,
    PhaseLine,
    Report,
    RuntimeLine,
    StrategyRow,
    Term,
    Verdict,
)
from memtui.estimator.stacks import Breakdown, stack_for
from memtui.estimator.stacks.hf_model import checkpoint_note
from memtui.estimator.step_time import step_time
from memtui.estimator.strategies import offload_runs
from memtui.estimator.terms import TermKind

MAX_MICRO_BATCH = 65536


def breakdown(plan: Plan, strategy: Strategy | None = None) -> Breakdown:
    """Every term's bytes per GPU for the plan (or the plan with another strategy)."""
    return stack_for(plan).breakdown(plan, strategy or plan.strategy)


def per_gpu_total(plan: Plan, strategy: Strategy | None = None) -> int:
    """Predicted peak bytes per GPU for the plan (or the plan with another strategy)."""
    return breakdown(plan, strategy).total


def max_micro_batch(plan: Plan, strategy: Strategy | None = None) -> int:
    """Largest micro-batch that fits (0 if even 1 does not).

    Activations and logits grow linearly in b and the rest does not, so the answer is
    solved from the terms at b = 1, then confirmed against the full estimate (rounding of
    tensor-parallel splits can move it by one).
    """
    capacity = plan.hardware.gpu_memory

    def total(b: int) -> int:
        return per_gpu_total(plan.model_copy(update={"micro_batch": b}), strategy)

    one = breakdown(plan.model_copy(update={"micro_batch": 1}), strategy)
    if one.total > capacity:
        return 0
    per_sample = one.per_sample
    if not per_sample:
        return MAX_MICRO_BATCH
    b = max(1, min(MAX_MICRO_BATCH, (capacity - one.fixed) // per_sample))
    while b < MAX_MICRO_BATCH and total(b + 1) <= capacity:
        b += 1
    while b > 1 and total(b) > capacity:
        b -= 1
    return b


def band_top(plan: Plan, peak: int) -> int:
    """The largest true peak the error band of the plan's kind allows for a predicted `peak`
    (the peak itself where no band is known): FITS only when it fits the card."""
    band = band_for(plan.stack, plan.method)
    return band.top(peak) if band is not None else peak


def _budget(plan: Plan, t: Breakdown, peak: PhasePeak) -> Budget:
    sources = {
        **stack_for(plan).sources(plan, t),
        **{TermKind(k): v for k, v in objective_sources(plan, t.objective).items()},
    }
    capacity = plan.hardware.gpu_memory
    total = t.total
    peak_total = max(total, peak.gpu_bytes)
    band = band_for(plan.stack, plan.method)
    top = band_top(plan, peak_total)
    if peak_total > capacity:
        verdict = Verdict.does_not_fit
    else:
        verdict = Verdict.fits if top <= capacity else Verdict.may_not_fit
    return Budget(
        terms=tuple(
            Term(key=kind, bytes=t.terms[kind], source=sources.get(kind, kind.source))
            for kind in TermKind
        ),
        static=t.state.total,
        allocated=t.runtime.allocated,
        reserved=t.runtime.reserved,
        total=total,
        capacity=capacity,
        headroom=capacity - max(total, peak.gpu_bytes),
        fits=max(total, peak.gpu_bytes) <= capacity,
        fits_static=t.state.total <= capacity,
        cpu_ram=t.cpu_bytes,
        peak_phase=peak.name,
        peak_bytes=peak.gpu_bytes,
        band=band,
        verdict=verdict,
    )


def _assumptions(plan: Plan) -> tuple[str, ...]:
    arch = plan.model.architecture
    out = []
    if arch.assumed:
        out.append(
            f"shape assumed from the parameter count: {arch.num_layers} layers, hidden "
            f"{arch.hidden_size}, {arch.num_heads} heads, vocabulary {arch.vocab_size:,} "
            "(Kaplan et al. 2020: P ~ 12 L h^2, h/L ~ 128)"
        )
    if arch.tower is not None:
        out.append(
            f"{plan.model.name}: {arch.tower.name} ({arch.tower.parameters:,} parameters) are "
            "loaded and counted"
            + (" and trained" if plan.method is Method.full else "")
            + "; batches are text only (an image batch adds the tower's activations)"
        )
    if arch.linear_attention_layers:
        out.append(
            f"{plan.model.name}: its {arch.linear_attention_layers} Gated DeltaNet layers are "
            "sized for transformers' torch path of the gated delta rule and the conv1d (taken "
            "on CPU, and on a GPU without flash-linear-attention and causal-conv1d installed), "
            "which keeps more than fla's chunk_gated_delta_rule: with fla the activations are "
            "lower"
        )
    checkpoint = checkpoint_note(plan)
    if checkpoint is not None:
        out.append(checkpoint)
    if optimizer_spec(plan.optimizer).paged:
        out.append(
            "paged optimizer state is CUDA managed memory: nvidia-smi counts it while it is on "
            "the GPU (counted here), torch's allocated and reserved figures never do, and it "
            "spills to CPU RAM under pressure"
        )
    return tuple(out)


def not_applicable(plan: Plan, strategy: Strategy) -> str | None:
    """Why `plan` cannot run with `strategy` (None when it can)."""
    why = CAPABILITIES[plan.stack].why_not(strategy, plan.hardware.gpus, plan.tp)
    if why is None and not offload_runs(plan.offload, strategy):
        return "parameter offload needs sharded parameters"
    return why


def estimate(plan: Plan) -> Report:
    """The full report: budget, every strategy side by side, levers, communication."""
    t = breakdown(plan)
    rows = []
    for strategy in Strategy:
        why = not_applicable(plan, strategy) if strategy is not plan.strategy else None
        if why is not None:
            rows.append(
                StrategyRow(
                    strategy=strategy,
                    applicable=False,
                    note=why,
                    per_gpu_static=0,
                    per_gpu_total=0,
                    fits=False,
                    fits_static=False,
                    max_micro_batch=0,
                )
            )
            continue
        st = t if strategy is plan.strategy else breakdown(plan, strategy)
        rows.append(
            StrategyRow(
                strategy=strategy,
                per_gpu_static=st.state.total,
                per_gpu_total=st.total,
                fits=st.total <= plan.hardware.gpu_memory,
                fits_static=st.state.total <= plan.hardware.gpu_memory,
                max_micro_batch=max_micro_batch(plan, strategy),
            )
        )
    own = next(r.max_micro_batch for r in rows if r.strategy is plan.strategy)
    steps = phases(plan, t)
    peak = max(steps, key=lambda p: p.gpu_bytes)
    return Report(
        parameters=Parameters(
            total=plan.model.parameters
            + (t.state.trainable if plan.method is not Method.full else 0),
            trainable=t.state.trainable,
        ),
        bytes_per_param=t.state.bytes_per_param,
        budget=_budget(plan, t, peak),
        strategies=tuple(rows),
        levers=levers(plan, t.total, per_gpu_total, t.state.trainable),
        communication=communication(plan, t.state),
        runtime=tuple(
            RuntimeLine(name=p.name, bytes=p.bytes, where=p.where, source=p.source)
            for p in t.runtime.parts
        ),
        phases=tuple(
            PhaseLine(
                name=p.name,
                gpu_bytes=p.gpu_bytes,
                cpu_bytes_per_node=p.cpu_bytes_per_node,
                source=p.source,
            )
            for p in steps
        ),
        stack=CAPABILITIES[plan.stack].label,
        max_micro_batch=own,
        assumptions=_assumptions(plan),
        step_time=step_time(plan),
    )
