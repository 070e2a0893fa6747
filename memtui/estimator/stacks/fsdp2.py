"""PyTorch FSDP2 (`fully_shard`) as accelerate and Transformers' Trainer apply it.

Read from torch 2.13 (distributed/fsdp/_fully_shard/), accelerate 1.15 and transformers 5.24:
- Mixed precision (memtui's bf16-mixed): accelerate upcasts every trainable parameter to fp32
  before fully_shard (utils/fsdp_utils.py fsdp2_prepare_model) and sets
  MixedPrecisionPolicy(param_dtype=bf16, reduce_dtype=bf16) (utils/dataclasses.py
  FullyShardedDataParallelPlugin.set_mixed_precision). The fp32 shards are the master;
  frozen parameters (a PEFT base) stay bf16; sharded gradients take the parameter's original
  dtype (_fsdp_collectives.py foreach_reduce casts the reduce-scatter output back), and
  AdamW's moments follow the fp32 shards. Pure bf16 (no policy) keeps all of it in bf16.
- Unsharding: an all-gather writes one flat buffer per unit, copied out into the unsharded
  parameters (foreach_all_gather, foreach_all_gather_copy_out); the flat buffer lives until
  the next unit's copy-in, and the next unit is prefetched on its own stream: the running
  unit, its buffer and the next unit's buffer. The root module (embeddings, final norm,
  lm_head) is not resharded after forward (fully_shard: reshard_after_forward defaults to
  False for the root). reshard_after_forward=False everywhere is SHARD_GRAD_OP.
- Backward: a unit's unsharded gradients (param dtype) are copied into the reduce-scatter
  input (reduce dtype) and freed; at most one earlier reduce-scatter input is in flight
  (FSDPCommContext.reduce_scatter_max_input_buffers = 1).
- Trainer's default optimizer is fused AdamW (no step temporaries).

Measured through the real stack (`memtui measure --stack fsdp2`: Trainer + accelerate's
fsdp2_prepare_model over two CPU processes) and read again where it disagreed:
- accelerate 1.15 carves the embeddings into a unit of their own, resharded after forward,
  and [final norm, lm_head] into a tail unit with reshard_after_forward=False (utils/
  fsdp_utils.py fsdp2_prepare_model); the root keeps nothing else. So at the loss's backward,
  the step's usual peak, the tail alone is gathered, not the embeddings and three layers.
- The forward's all-gather output is kept until the next unit's copy-out (implicit prefetch,
  _fsdp_param_group.py FSDPParamGroup.wait_for_unshard), the tail's until the root's
  post-forward, after the loss: the forward's end holds the tail twice, with the smaller
  logits of the loss's forward. In backward a unit prefetches the previous one
  (_backward_prefetch) and frees its all-gather output right after the copy-out.
- Parameters rest sharded whatever reshard_after_forward says (fully_shard: False only keeps
  the unsharded parameters from forward to backward): SHARD_GRAD_OP's static state is full
  sharding's, with every unit gathered at the loss's backward.
- Trainer accumulates gradients under accelerate's no_sync (Accelerator.no_sync:
  model.set_requires_gradient_sync(False)): FSDP2 then keeps every unsharded gradient, in
  the reduce dtype or the parameter dtype (FSDPParam.to_accumulated_grad_if_needed), from
  the first micro-batch to the last one's reduce-scatter.
"""

from __future__ import annotations

from collections.abc import Mapping

from memtui.estimator.activations import MomentBytes, Setup, buffers_beyond
from memtui.estimator.capabilities import fsdp_shard_bytes
from memtui.estimator.choices import Method, Precision, ReduceDtype, StackName, Strategy
from memtui.estimator.optimizers import optimizer_spec
from memtui.estimator.plan import Plan
from memtui.estimator.stacks.base import BookStack, Breakdown
from memtui.estimator.stacks.generic import GENERIC, one_dtype_setup
from memtui.estimator.stacks.hf_model import trainer_fused_adamw, transformers_model
from memtui.estimator.state import (
    Layout,
    StaticState,
    TrainableTensor,
    frozen_base_bytes,
    gradient_bytes,
    optimizer_state_bytes,
    parameters_of,
)
from memtui.estimator.strategies import strategy_spec
from memtui.estimator.terms import TermKind
from memtui.estimator.transient import (
    Transient,
    dequantized_weight,
    optimizer_temporaries,
    unit_parameters,
)


def sharded_layout(plan: Plan, tensors: tuple[TrainableTensor, ...]) -> Layout:
    """What FSDP shards: trainable parameters in their master dtype (fp32 under mixed
    precision, where they are the master, else the parameter dtype), frozen ones in the
    parameter dtype, gradients and moments like the trainable ones."""
    compute = plan.precision.activation_bytes
    master = fsdp_shard_bytes(plan.precision)
    trainable = parameters_of(tensors)
    if plan.method is Method.full:
        weights = master * plan.model.parameters
    else:  # modules_to_save copies are trainable: upcast like the adapters
        weights = frozen_base_bytes(plan, compute) + master * trainable
    return Layout(
        weights=weights,
        gradients=gradient_bytes(plan, tensors, master),
        master=0,
        optimizer=optimizer_state_bytes(plan, tensors, master),
        managed_fraction=1.0 if optimizer_spec(plan.optimizer).paged else 0.0,
    )


def unit_buffers(
    plan: Plan,
    strategy: Strategy,
    state: StaticState,
    units_in_flight: int,
    reduce_bytes: int,
    layer_bytes: float | None = None,
) -> tuple[int, str]:
    """Bytes of gathered units and gradient buffers during backward: the root unit, kept
    gathered, `units_in_flight` gathered decoder layers (or every layer when parameters are
    not resharded after forward), the running unit's unsharded gradients and its
    reduce-scatter input. `layer_bytes`: a gathered layer's bytes where they are not its
    parameters in the compute dtype (a stack that gathers 4-bit codes)."""
    if plan.hardware.gpus == 1:
        return 0, "one GPU: nothing to gather"
    compute = plan.precision.activation_bytes
    layer, root = unit_parameters(plan)
    share = state.trainable / plan.model.parameters
    one = compute * layer if layer_bytes is None else layer_bytes
    if strategy_spec(strategy).shards_weights:
        gathered = compute * root + units_in_flight * one
        what = f"root unit + {units_in_flight} layers gathered {gathered / 1e9:.2f} GB"
    else:  # SHARD_GRAD_OP: unsharded from forward to backward
        gathered = compute * root + plan.model.architecture.num_layers * one
        what = f"every unit gathered (no reshard after forward) {gathered / 1e9:.2f} GB"
    grads = (compute + reduce_bytes) * (root + layer) * share
    return round(gathered + grads), f"{what}, a unit's gradients to reduce {grads / 1e9:.2f} GB"


def accelerate_buffers(
    plan: Plan, strategy: Strategy, state: StaticState, setup: Setup
) -> tuple[int, int, str]:
    """(persistent, backward-phase) bytes of FSDP2's buffers as accelerate shards the model
    (module docstring), and a description. The backward-phase figure is what the worst of
    the step's moments holds beyond the activations and logits terms (`buffers_beyond`)."""
    if plan.hardware.gpus == 1:
        return 0, 0, "one GPU: nothing to gather"
    arch = plan.model.architecture
    c = plan.precision.activation_bytes  # param_dtype: bf16 under accelerate's policy
    # the reduce-scatter input's dtype: accelerate sets reduce_dtype = param_dtype; an fp32
    # MixedPrecisionPolicy.reduce_dtype (`--reduce-dtype fp32`, torchtitan's default) makes
    # foreach_reduce allocate it in fp32 at the unsharded gradients' size (torch 2.4-2.13
    # distributed/fsdp/_fully_shard/_fsdp_collectives.py foreach_reduce:
    # reduce_scatter_input = torch.empty(..., dtype=reduce_dtype))
    r = 4 if plan.reduce_dtype is ReduceDtype.fp32 else c
    layer, outside = unit_parameters(plan)
    scale = plan.model.parameters / arch.parameter_count / plan.tp
    embeddings = 0 if arch.tie_embeddings else arch.vocab_size * arch.hidden_size * scale
    # the tail unit (final norm, lm_head; the embeddings too when tied) and what the root
    # keeps (learned position embeddings): all outside the layers but a separate embedding
    tail = outside - embeddings
    share = state.trainable / plan.model.parameters
    # the unit's gradients (all of them: an upper bound at its worst moment) and the previous
    # unit's reduce-scatter input, still in flight (reduce_scatter_max_input_buffers = 1)
    grads = c * layer * share + r * max(layer, tail) * share
    if strategy_spec(strategy).shards_weights:
        resident, what = c * tail, "tail unit (final norm, lm_head) gathered"
        # the unit and the previous one prefetched, with the prefetch's all-gather output
        # during its copy-out (freed before the unit's gradients grow)
        at_layer = 2 * c * layer + max(c * layer, grads)
    else:  # SHARD_GRAD_OP: every unit stays gathered from its forward to its backward
        resident, what = c * plan.model.parameters / plan.tp, "every unit gathered"
        at_layer = resident + grads
    backward, worst = buffers_beyond(
        arch,
        setup,
        plan.seq_len,
        plan.micro_batch,
        MomentBytes(
            loss_backward=resident,
            # the tail's all-gather output too, kept until the root's post-forward
            forward_end=resident + c * tail,
            # its gradients and their reduce-scatter input, the last layer prefetched
            lm_head_backward=resident + (c + r) * tail * share + 2 * c * layer,
            layer_backward=at_layer,
        ),
    )
    persistent = 0
    if plan.grad_accum > 1:
        # no_sync: every unsharded gradient, accumulated in the reduce dtype where it differs
        # from the param dtype (_fsdp_param.py FSDPParam.to_accumulated_grad_if_needed)
        persistent = round(r * state.trainable / plan.tp)
    parts = [f"{what} {resident / 1e9:.2f} GB; at the {worst}: {backward / 1e9:.2f} GB"]
    if persistent:
        parts.append(f"unsharded gradients between micro-batches {persistent / 1e9:.2f} GB")
    return persistent, backward, ", ".join(parts)


class Fsdp2Stack(BookStack):
    """PyTorch fully_shard through accelerate or Trainer (fsdp_version: 2)."""

    name = StackName.fsdp2

    def layout(
        self, plan: Plan, strategy: Strategy, tensors: tuple[TrainableTensor, ...]
    ) -> Layout:
        return sharded_layout(plan, tensors)

    def setup(self, plan: Plan) -> Setup:
        # adapters are gathered in param_dtype with the rest: they share their inputs
        return transformers_model(plan, one_dtype_setup(plan, plan.precision.activation_bytes))

    def static_state(self, plan: Plan, strategy: Strategy) -> StaticState:
        # parameters rest sharded under SHARD_GRAD_OP too (fully_shard's
        # reshard_after_forward=False only keeps them unsharded from forward to backward:
        # `accelerate_buffers`; FSDP1's FlatParameter likewise: fsdp1.py)
        if strategy is Strategy.fsdp_shard_grad_op:
            strategy = Strategy.fsdp
        return super().static_state(plan, strategy)

    def transient(
        self, plan: Plan, strategy: Strategy, state: StaticState, setup: Setup
    ) -> Transient:
        persistent, backward, detail = accelerate_buffers(plan, strategy, state, setup)
        dequant = dequantized_weight(plan)
        master = fsdp_shard_bytes(plan.precision)
        fused = trainer_fused_adamw(plan)
        step, why = optimizer_temporaries(plan, strategy, state, master, fused=fused)
        return Transient(persistent, backward + dequant, step, f"{detail}; optimizer step: {why}")

    def sources(self, plan: Plan, breakdown: Breakdown) -> Mapping[TermKind, str]:
        out = dict(GENERIC.sources(plan, breakdown))
        if plan.precision is Precision.bf16_mixed:
            out[TermKind.weights] = (
                "trainable parameters sharded in fp32 (the master), frozen in bf16"
            )
            out[TermKind.master_weights] = "none apart: the fp32 shards are the master"
        out[TermKind.gradients] = "sharded gradients in the parameters' own dtype"
        return out


FSDP2 = Fsdp2Stack()
