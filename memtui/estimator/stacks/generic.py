"""The generic stack: memtui's own model of a training step, as the design and the seeds
state it (ZeRO paper's state layout, Korthikanti et al.'s activations, the buffers of DDP,
DeepSpeed and FSDP named by the strategy), measured against real PyTorch steps by
`memtui measure`."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace

from memtui.estimator.activations import Setup
from memtui.estimator.architecture import Architecture, ExpertAdapters, Role
from memtui.estimator.choices import LossKind, Method, StackName, Strategy
from memtui.estimator.communication import tensor_parallel_plan
from memtui.estimator.memo import memoised
from memtui.estimator.plan import Plan
from memtui.estimator.stacks.autocast import autocast_weight_copies
from memtui.estimator.stacks.base import BookStack, Breakdown
from memtui.estimator.stacks.hf_model import transformers_model
from memtui.estimator.state import Layout, StaticState, TrainableTensor, generic_layout
from memtui.estimator.terms import TermKind
from memtui.estimator.transient import Transient, transient

_METHOD_TEXT = {
    Method.full: "full fine-tune",
    Method.lora: "frozen base + adapter",
    Method.qlora: "NF4 base + adapter",
}


def trainable_roles(plan: Plan) -> frozenset[Role] | None:
    """Linear roles whose weights train (None: every weight, a full fine-tune)."""
    if plan.method is Method.full:
        return None
    if plan.lora_fraction is not None:
        return frozenset({Role.q, Role.k, Role.v, Role.qkv, Role.o})
    return _adapted_roles(
        plan.model.architecture, plan.lora_targets, plan.modules_to_save, plan.expert_adapters
    )


@memoised
def _adapted_roles(
    arch: Architecture, targets: tuple[str, ...], saved: tuple[str, ...], adapters: ExpertAdapters
) -> frozenset[Role]:
    adapted = {lin.role for lin in arch.lora_layers(targets, adapters)}
    return frozenset(adapted | {lin.role for lin in arch.saved_modules(saved)})


@memoised
def _head_adapted(arch: Architecture, targets: tuple[str, ...]) -> bool:
    # the output layer is never an expert: the versions do not matter here
    return any(lin.role is Role.lm_head for lin in arch.lora_layers(targets))


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
        adapter_dropout=lora and plan.lora_dropout > 0,
        head_adapter=lora and _head_adapted(plan.model.architecture, plan.lora_targets),
        parametrized_experts=lora
        and plan.model.architecture.peft_expert_conversion
        and plan.expert_adapters in (ExpertAdapters.named, ExpertAdapters.converted),
        frozen_linears_keep_inputs=plan.method is Method.qlora and plan.qlora_keeps_inputs,
        offload_layer_inputs=plan.activation_offload,
        grad_bytes=precision.weight_bytes,
        loss=plan.loss,
        tp=plan.tp,
        tp_plan=tensor_parallel_plan(plan),
    )


def one_dtype_setup(plan: Plan, width: int) -> Setup:
    """A loop that runs every tensor in one dtype of `width` bytes (activations, the residual
    stream, adapter outputs, gradients; the adapters share their inputs) and whose batch
    holds the labels through the step (the real stacks' loops)."""
    return replace(
        activation_setup(plan),
        compute_bytes=width,
        residual_bytes=width,
        adapter_output_bytes=width,
        grad_bytes=width,
        batch_labels=True,
    )


class GenericStack(BookStack):
    """Today's step: bf16 weights and gradients, an fp32 master copy in mixed precision,
    the optimizer's state, every layer's saved tensors, 12 B per logit, and the buffers of
    the framework the strategy names."""

    name = StackName.generic

    def layout(
        self, plan: Plan, strategy: Strategy, tensors: tuple[TrainableTensor, ...]
    ) -> Layout:
        return generic_layout(plan, tensors)

    def setup(self, plan: Plan) -> Setup:
        return transformers_model(plan, activation_setup(plan))

    def transient(
        self, plan: Plan, strategy: Strategy, state: StaticState, setup: Setup
    ) -> Transient:
        buffers = transient(plan, strategy, state)
        # bf16-autocast: fp32 weights under torch.autocast, which keeps bf16 copies of them
        copies = autocast_weight_copies(plan, setup, peft=False)
        if not copies:
            return buffers
        detail = f"{buffers.detail}, autocast's bf16 weight copies {copies / 1e9:.2f} GB"
        return replace(buffers, backward=buffers.backward + copies, detail=detail)

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
            TermKind.logits: _loss_text(plan),
            TermKind.transient: breakdown.transient.detail,
            TermKind.overhead: _runtime_text(breakdown),
        }


def _loss_text(plan: Plan) -> str:
    v = plan.model.architecture.vocab_size
    if plan.loss is LossKind.full:
        return (
            f"b s V with V={v:,}: fp32 log-probs, their gradient and the logits' fp32 gradient "
            "at the loss's backward (12 B per logit; memtui measure)"
        )
    if plan.loss is LossKind.chunked:
        return f"b s V with V={v:,}: fp32 log-probs of every chunk (4 B per logit) + one chunk"
    return "fused linear cross-entropy: one chunk of logits at a time (about b s h)"


def _runtime_text(breakdown: Breakdown) -> str:
    parts = [p for p in breakdown.runtime.parts if p.bytes]
    if not parts:
        return "turned off (--overhead none)"
    return " + ".join(p.name for p in parts)


GENERIC = GenericStack()
