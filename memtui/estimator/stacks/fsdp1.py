"""PyTorch FSDP1 (FullyShardedDataParallel) as accelerate applies it.

Read from torch 2.13 (distributed/fsdp/) and accelerate 1.15: accelerate upcasts trainable
parameters to fp32 before wrapping (accelerator.py prepare_model) and sets
MixedPrecision(param_dtype=bf16, reduce_dtype=bf16). What differs from FSDP2's books:
- Parameters are flattened per wrapped unit into one FlatParameter (_flat_param.py
  FlatParamHandle), not kept as per-parameter DTensors. Its fp32 shard (_local_shard) is
  the master; an all-gather writes the whole unit into one bf16 flat buffer
  (FlatParamHandle.init_flat_param_attributes: _full_param_padded in the param dtype),
  freed at reshard. The sharded gradient is cast back to fp32 (_runtime_utils.py
  _cast_grad_to_param_dtype). So the state layout is FSDP2's.
- FlatParamHandle.shard() runs for every sharded strategy (uses_sharded_strategy: FULL_SHARD,
  SHARD_GRAD_OP, HYBRID_SHARD): SHARD_GRAD_OP's parameters rest sharded too; it only keeps
  _full_param_padded from forward to backward (_runtime_utils.py _should_free_in_backward:
  freed after forward only for RESHARD_AFTER_FORWARD_HANDLE_STRATEGIES).
- accelerate passes limit_all_gathers=True, so at most two all-gathers are in flight
  (_limiter_utils.py _FreeEventQueue: _max_num_inflight_all_gathers = 2): the running unit
  and one more, plus the root unit (embeddings, final norm, lm_head) that stays gathered.
- ShardingStrategy.NO_SHARD (memtui's ddp strategy here): FlatParamHandle shards nothing
  (uses_sharded_strategy is False), every rank keeps the whole fp32 model, gradients and
  moments; under MixedPrecision the unit's low-precision copy (_mp_shard) is its unsharded
  parameter, made at unshard and freed at reshard (post_reshard), one unit at a time.
- Only parameters are flattened, sharded and offloaded (FlatParamHandle, CPUOffload): the
  4-bit linears' quant_state of a bitsandbytes QLoRA base, an attribute of each Params4bit
  that Params4bit.to moves to the GPU with the data when FSDP places the unit (_init_utils.py
  _move_states_to_device: `param.data = param.to(device_from_device_id)`, torch 2.2.2),
  stays whole on every GPU, offloaded or not (bitsandbytes 0.43+, whose quant_storage lets
  FSDP shard the codes).
- A unit whose FlatParameter needs no gradient (every decoder layer of a LoRA or QLoRA model:
  Trainer sets PEFT's fsdp_auto_wrap_policy, which wraps each trainable leaf, lora_A and
  lora_B, in a unit of its own; transformers trainer.py _fsdp_qlora_plugin_updates, peft
  utils/other.py fsdp_auto_wrap_policy) is resharded by a multi-grad hook on its forward's
  inputs (_runtime_utils.py _register_post_backward_reshard_only_hook). When the model's own
  loop checkpoints around the unit (transformers before 4.52, `CHECKPOINT_AROUND_UNIT_BEFORE`)
  with torch's reentrant checkpoint (its default where Trainer passes no use_reentrant), that
  hook runs inside the recomputation, and the step's backward ends holding one more
  hidden-state-sized tensor per layer (`retained_grads`).
- Under gradient accumulation accelerate runs FSDP's no_sync (Accelerator.no_sync), which
  accumulates the full model's unsharded gradients in the param dtype until the last
  micro-batch (FullyShardedDataParallel.no_sync: "FSDP will accumulate the full model
  gradients (instead of gradient shards)").
"""

from __future__ import annotations

from dataclasses import replace

from memtui.estimator.activations import MomentBytes, Setup, buffers_beyond
from memtui.estimator.capabilities import fsdp_shard_bytes
from memtui.estimator.choices import Checkpointing, Method, StackName, Strategy
from memtui.estimator.plan import Plan
from memtui.estimator.stacks.fsdp2 import Fsdp2Stack, unit_buffers
from memtui.estimator.stacks.hf_model import trainer_fused_adamw
from memtui.estimator.state import (
    NF4_CODE_BITS,
    Layout,
    StaticState,
    TrainableTensor,
    nf4_quant_state_bytes,
)
from memtui.estimator.transient import (
    Transient,
    dequantized_weight,
    optimizer_temporaries,
    unit_parameters,
)
from memtui.estimator.units import ceil_div
from memtui.estimator.versions import Package

CHECKPOINT_AROUND_UNIT_BEFORE = (4, 52)
"""transformers releases before this one checkpoint each decoder layer from the model's loop,
around the module the loop holds, which FSDP1 has replaced by the unit wrapping the layer
(LlamaModel.forward: `self._gradient_checkpointing_func(decoder_layer.__call__, ...)`, read in
4.44.2 and 4.51.3); 4.52 checkpoints inside the layer's own call (modeling_layers.py
GradientCheckpointingLayer, read in 4.52.1 and 5.24.0), so inside the FSDP1 wrapper."""


def packed_layer_bytes(plan: Plan) -> float | None:
    """A gathered decoder layer's bytes under a bitsandbytes QLoRA base loaded in 4 bits, or
    None (its parameters in the compute dtype). FSDP flattens what the unit holds as
    parameters (module docstring) and all-gathers that FlatParameter: the Params4bit codes,
    4 bits a weight packed into the quant_storage dtype (bitsandbytes 0.43 nn/modules.py
    Params4bit, `quant_storage`), beside the norms in the compute dtype; the absmax and the
    rest of the quant_state are no parameters (the layout's replicated weights). The matmul's
    dequantized weight is `dequantized_weight`."""
    arch = plan.model.architecture
    if plan.method is not Method.qlora or arch.quantized is not None:
        return None
    scale = plan.model.parameters / arch.parameter_count / plan.tp
    quantized = sum(lin.d_in * lin.d_out * lin.count for lin in arch.linear_layers
                    if lin.group != "head") / arch.num_layers * scale  # fmt: skip
    layer, _ = unit_parameters(plan)
    rest = max(0.0, layer - quantized)
    return plan.precision.activation_bytes * rest + NF4_CODE_BITS / 8 * quantized


def retained_grads(plan: Plan, setup: Setup) -> int:
    """Bytes the end of backward holds beyond the activations under FSDP1 when the checkpoint
    runs around frozen units (module docstring): one hidden-state-sized tensor per layer in
    the compute dtype, measured on CPU (a tiny Llama with PEFT LoRA on q, k, v, o over two
    gloo processes, torch 2.13 FSDP1 with PEFT's fsdp_auto_wrap_policy, MixedPrecision bf16,
    reentrant checkpointing: transformers 4.44.2 with peft 0.12.0 peaks L x b x s x h x 2
    bytes above transformers 5.24.0 with peft 0.21.2, at 8 and 12 layers, and patching out
    _register_post_backward_reshard_only_hook removes the residual-stream gradients it
    held). 0 where no unit is frozen (a full fine-tune), nothing is gathered (one GPU), the
    model is not checkpointed, or the checkpoint runs inside the unit (transformers 4.52+)."""
    if (
        plan.hardware.gpus == 1
        or plan.method is Method.full
        or plan.checkpointing is not Checkpointing.full
        or not plan.versions.before(Package.transformers, CHECKPOINT_AROUND_UNIT_BEFORE)
    ):
        return 0
    arch = plan.model.architecture
    per_layer = arch.hidden_size * setup.compute_bytes * plan.seq_len * plan.micro_batch
    return ceil_div(arch.num_layers * per_layer, setup.tp)


class Fsdp1Stack(Fsdp2Stack):
    """FullyShardedDataParallel through accelerate (fsdp_version: 1)."""

    name = StackName.fsdp1
    units_in_flight = 2  # limit_all_gathers

    def layout(
        self, plan: Plan, strategy: Strategy, tensors: tuple[TrainableTensor, ...]
    ) -> Layout:
        # the quant_state is no parameter: never sharded or offloaded (module docstring)
        sharded = super().layout(plan, strategy, tensors)
        return replace(sharded, replicated_weights=nf4_quant_state_bytes(plan))

    def transient(
        self, plan: Plan, strategy: Strategy, state: StaticState, setup: Setup
    ) -> Transient:
        compute = plan.precision.activation_bytes  # param_dtype = reduce_dtype under accelerate
        # NO_SHARD (ddp) keeps the whole fp32 model on every rank, but casts it to
        # param_dtype one unit at a time as FULL_SHARD gathers it: the unit's bf16 _mp_shard
        # is its unsharded parameter, freed at reshard (_flat_param.py post_reshard)
        units = Strategy.fsdp if strategy is Strategy.ddp else strategy
        backward, detail = unit_buffers(
            plan, units, state, self.units_in_flight, compute, packed_layer_bytes(plan)
        )
        retained = retained_grads(plan, setup)
        if retained:  # held as the last layers' backward runs (the step's end of backward)
            arch = plan.model.architecture
            moments = MomentBytes(layer_backward=retained)
            extra, _ = buffers_beyond(arch, setup, plan.seq_len, plan.micro_batch, moments)
            backward += extra
            detail += (
                f", residual gradients the reshard-only hooks hold {retained / 1e9:.2f} GB "
                "(the checkpoint runs around each unit: transformers before 4.52)"
            )
        persistent = 0
        if plan.grad_accum > 1 and plan.hardware.gpus > 1:  # no_sync: unsharded gradients
            persistent = round(compute * state.trainable / plan.tp)
            detail += f", unsharded gradients between micro-batches {persistent / 1e9:.2f} GB"
        width = fsdp_shard_bytes(plan.precision)
        fused = trainer_fused_adamw(plan)
        step, why = optimizer_temporaries(plan, strategy, state, width, fused=fused)
        return Transient(
            persistent,
            backward + dequantized_weight(plan),
            step,
            f"{detail}; optimizer step: {why}",
        )


FSDP1 = Fsdp1Stack()
