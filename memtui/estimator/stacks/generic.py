"""The generic stack: memtui's own model of a training step, as the design and the seeds
state it (ZeRO paper's state layout, Korthikanti et al.'s activations, the buffers of DDP,
DeepSpeed and FSDP named by the strategy), measured against real PyTorch steps by
`memtui measure`."""

from __future__ import annotations

from collections.abc import Mapping

from memtui.estimator.activations import Setup, activation_bytes, logits_bytes
from memtui.estimator.architecture import Architecture
from memtui.estimator.choices import Method, Strategy
from memtui.estimator.memo import memoised
from memtui.estimator.plan import Plan
from memtui.estimator.runtime import overhead_bytes, overhead_source
from memtui.estimator.stacks.base import Breakdown
from memtui.estimator.state import static_state
from memtui.estimator.terms import TermKind
from memtui.estimator.transient import transient

_METHOD_TEXT = {
    Method.full: "full fine-tune",
    Method.lora: "frozen base + adapter",
    Method.qlora: "NF4 base + adapter",
}


def trainable_roles(plan: Plan) -> frozenset[str] | None:
    """Linear roles whose weights train (None: every weight, a full fine-tune)."""
    if plan.method is Method.full:
        return None
    if plan.lora_fraction is not None:
        return frozenset({"q", "k", "v", "qkv", "o"})
    return _adapted_roles(plan.model.architecture, plan.lora_targets)


@memoised
def _adapted_roles(arch: Architecture, targets: tuple[str, ...]) -> frozenset[str]:
    return frozenset(lin.role for lin in arch.lora_layers(targets))


def activation_setup(plan: Plan) -> Setup:
    """The plan's model run as the design states it: every activation in the plan's compute
    dtype (the residual stream in fp32 under autocast), adapters sharing their inputs."""
    precision = plan.precision
    lora = plan.method is not Method.full
    return Setup(
        attention=plan.attention,
        checkpointing=plan.checkpointing,
        compute_bytes=precision.activation_bytes,
        residual_bytes=precision.residual_bytes,
        trainable_roles=trainable_roles(plan),
        lora_rank=plan.lora_rank if lora else 0,
        adapter_output_bytes=precision.activation_bytes,
        grad_bytes=precision.weight_bytes,
        tp=plan.tp,
    )


class GenericStack:
    """Today's step: bf16 weights and gradients, an fp32 master copy in mixed precision,
    the optimizer's state, every layer's saved tensors, 12 B per logit, and the buffers of
    the framework the strategy names."""

    name = "generic"
    label = "generic"

    def breakdown(self, plan: Plan, strategy: Strategy) -> Breakdown:
        arch = plan.model.architecture
        state = static_state(plan, strategy)
        setup = activation_setup(plan)
        acts = activation_bytes(arch, setup, plan.seq_len, plan.micro_batch)
        logits = logits_bytes(arch, setup, plan.seq_len, plan.micro_batch)
        extra = transient(plan, strategy, state)
        terms = {
            TermKind.weights: state.weights,
            TermKind.gradients: state.gradients,
            TermKind.master_weights: state.master_weights,
            TermKind.optimizer_states: state.optimizer_states,
            TermKind.activations: acts,
            TermKind.logits: logits,
            TermKind.transient: extra.peak_extra(acts + logits),
            TermKind.overhead: overhead_bytes(plan),
        }
        return Breakdown(terms, state, extra)

    def sources(self, plan: Plan, breakdown: Breakdown) -> Mapping[TermKind, str]:
        arch = plan.model.architecture
        s = breakdown.state
        sharded = f"{plan.strategy.value} over {plan.data_parallel} GPU(s)"
        return {
            TermKind.weights: f"{plan.precision.value} weights, {_METHOD_TEXT[plan.method]}; "
            f"{sharded} (ZeRO paper sec. 5)",
            TermKind.gradients: f"{s.trainable:,} trainable parameters; {sharded}",
            TermKind.master_weights: "fp32 copy, 4 B/trainable param (mixed precision, "
            "Micikevicius et al. 2018)",
            TermKind.optimizer_states: f"{plan.optimizer.value}, "
            f"{plan.optimizer_state_dtype.value} state",
            TermKind.activations: f"{arch.num_layers} layers, s={plan.seq_len}, "
            f"b={plan.micro_batch}, {plan.attention.value} attention, checkpointing "
            f"{plan.checkpointing.value} (Korthikanti et al. 2022)",
            TermKind.logits: f"b s V with V={arch.vocab_size:,}: fp32 log-probs, their "
            "gradient and the logits' fp32 gradient at the loss's backward (12 B per logit; "
            "memtui measure)",
            TermKind.transient: breakdown.transient.detail,
            TermKind.overhead: overhead_source(plan),
        }


GENERIC = GenericStack()
