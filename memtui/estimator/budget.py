"""The estimator's one entry point: a plan in, a frozen report out.

`per_gpu_total` is the hot path (the lever list and the micro-batch search call it many
times), so it works on plain integers; `estimate` builds the pydantic report once.
"""

from __future__ import annotations

from dataclasses import dataclass

from memtui.estimator.activations import activation_bytes, logits_bytes
from memtui.estimator.communication import communication
from memtui.estimator.levers import levers
from memtui.estimator.plan import Method, Plan, Strategy
from memtui.estimator.report import (
    Budget,
    Parameters,
    Report,
    StrategyRow,
    Term,
)
from memtui.estimator.state import StaticState, static_state
from memtui.estimator.transient import Transient, transient

MAX_MICRO_BATCH = 65536


@dataclass(frozen=True)
class _Terms:
    state: StaticState
    activations: int
    logits: int
    transient: Transient
    transient_bytes: int
    overhead: int

    @property
    def total(self) -> int:
        return (
            self.state.total + self.activations + self.logits + self.transient_bytes + self.overhead
        )


def _trainable_roles(plan: Plan) -> frozenset[str] | None:
    if plan.method is Method.full:
        return None
    if plan.lora_fraction is not None:
        return frozenset({"q", "k", "v", "qkv", "o"})
    return frozenset(lin.role for lin in plan.model.architecture.lora_layers(plan.lora_targets))


def overhead_bytes(plan: Plan) -> int:
    """CUDA context + NCCL (with more than one GPU) + allocator fragmentation."""
    o = plan.overhead
    if not o.enabled:
        return 0
    nccl = o.nccl if plan.hardware.gpus > 1 else 0
    return o.cuda_context + nccl + round(o.fragmentation * plan.hardware.gpu_memory)


def _terms(plan: Plan, strategy: Strategy | None = None) -> _Terms:
    strategy = strategy or plan.strategy
    arch = plan.model.architecture
    state = static_state(plan, strategy)
    acts = activation_bytes(
        arch,
        seq_len=plan.seq_len,
        micro_batch=plan.micro_batch,
        attention=plan.attention,
        checkpointing=plan.checkpointing,
        precision=plan.precision,
        tp=plan.tp,
        trainable_roles=_trainable_roles(plan),
        lora_rank=plan.lora_rank if plan.method is not Method.full else 0,
    )
    logits = logits_bytes(
        arch,
        seq_len=plan.seq_len,
        micro_batch=plan.micro_batch,
        precision=plan.precision,
        tp=plan.tp,
    )
    extra = transient(plan, strategy, state)
    return _Terms(state, acts, logits, extra, extra.peak_extra(acts + logits), overhead_bytes(plan))


def per_gpu_total(plan: Plan, strategy: Strategy | None = None) -> int:
    """Predicted peak bytes per GPU for the plan (or the plan with another strategy)."""
    return _terms(plan, strategy).total


def max_micro_batch(plan: Plan, strategy: Strategy | None = None) -> int:
    """Largest micro-batch that fits (0 if even 1 does not).

    Activations and logits grow linearly in b and the rest does not, so the answer is
    solved from the terms at b = 1, then confirmed against the full estimate (rounding of
    tensor-parallel splits can move it by one).
    """
    capacity = plan.hardware.gpu_memory

    def total(b: int) -> int:
        return per_gpu_total(plan.model_copy(update={"micro_batch": b}), strategy)

    one = _terms(plan.model_copy(update={"micro_batch": 1}), strategy)
    if one.total > capacity:
        return 0
    per_sample = one.activations + one.logits
    if not per_sample:
        return MAX_MICRO_BATCH
    fixed = one.state.total + one.overhead + one.transient.persistent + one.transient.backward
    b = max(1, min(MAX_MICRO_BATCH, (capacity - fixed) // per_sample))
    while b < MAX_MICRO_BATCH and total(b + 1) <= capacity:
        b += 1
    while b > 1 and total(b) > capacity:
        b -= 1
    return b


def _budget(plan: Plan, t: _Terms) -> Budget:
    s = t.state
    arch = plan.model.architecture
    method = {
        Method.full: "full fine-tune",
        Method.lora: "frozen base + adapter",
        Method.qlora: "NF4 base + adapter",
    }[plan.method]
    sharded = f"{plan.strategy.value} over {plan.data_parallel} GPU(s)"
    terms = (
        Term(
            key="weights",
            label="Weights",
            bytes=s.weights,
            source=f"{plan.precision.value} weights, {method}; {sharded} (ZeRO paper sec. 5)",
        ),
        Term(
            key="gradients",
            label="Gradients",
            bytes=s.gradients,
            source=f"{s.trainable:,} trainable parameters; {sharded}",
        ),
        Term(
            key="master_weights",
            label="Master weights",
            bytes=s.master_weights,
            source="fp32 copy, 4 B/trainable param (mixed precision, Micikevicius et al. 2018)",
        ),
        Term(
            key="optimizer_states",
            label="Optimizer states",
            bytes=s.optimizer_states,
            source=f"{plan.optimizer.value}, {plan.optimizer_state_dtype.value} state",
        ),
        Term(
            key="activations",
            label="Activations",
            bytes=t.activations,
            source=f"{arch.num_layers} layers, s={plan.seq_len}, b={plan.micro_batch}, "
            f"{plan.attention.value} attention, checkpointing {plan.checkpointing.value} "
            "(Korthikanti et al. 2022)",
        ),
        Term(
            key="logits",
            label="Logits and loss",
            bytes=t.logits,
            source=f"b s V with V={arch.vocab_size:,}: fp32 log-probs, their gradient and the "
            "logits' fp32 gradient at the loss's backward (12 B per logit; memtui measure)",
        ),
        Term(
            key="transient",
            label="Transient buffers",
            bytes=t.transient_bytes,
            source=t.transient.detail,
        ),
        Term(
            key="overhead",
            label="Runtime overhead",
            bytes=t.overhead,
            source="CUDA context + NCCL buffers + allocator fragmentation"
            if plan.overhead.enabled
            else "turned off (--overhead none)",
        ),
    )
    capacity = plan.hardware.gpu_memory
    return Budget(
        terms=terms,
        static=s.total,
        total=t.total,
        capacity=capacity,
        headroom=capacity - t.total,
        fits=t.total <= capacity,
        fits_static=s.total <= capacity,
        cpu_ram=s.cpu_bytes,
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
    if plan.optimizer.value.startswith("paged"):
        out.append("paged optimizer state can spill to CPU RAM under pressure; counted on GPU")
    return tuple(out)


def estimate(plan: Plan) -> Report:
    """The full report: budget, every strategy side by side, levers, communication."""
    t = _terms(plan)
    rows = []
    for strategy in Strategy:
        st = t if strategy is plan.strategy else _terms(plan, strategy)
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
    return Report(
        parameters=Parameters(
            total=plan.model.parameters
            + (t.state.trainable if plan.method is not Method.full else 0),
            trainable=t.state.trainable,
        ),
        bytes_per_param=t.state.bytes_per_param,
        budget=_budget(plan, t),
        strategies=tuple(rows),
        levers=levers(plan, t.total),
        communication=communication(plan, t.state),
        max_micro_batch=own,
        assumptions=_assumptions(plan),
    )
