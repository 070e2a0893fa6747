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
- Under gradient accumulation accelerate runs FSDP's no_sync (Accelerator.no_sync), which
  accumulates the full model's unsharded gradients in the param dtype until the last
  micro-batch (FullyShardedDataParallel.no_sync: "FSDP will accumulate the full model
  gradients (instead of gradient shards)").
"""

from __future__ import annotations

from dataclasses import replace

from memtui.estimator.activations import Setup
from memtui.estimator.capabilities import fsdp_shard_bytes
from memtui.estimator.choices import StackName, Strategy
from memtui.estimator.plan import Plan
from memtui.estimator.stacks.fsdp2 import Fsdp2Stack, unit_buffers
from memtui.estimator.stacks.hf_model import trainer_fused_adamw
from memtui.estimator.state import Layout, StaticState, TrainableTensor, nf4_quant_state_bytes
from memtui.estimator.transient import Transient, dequantized_weight, optimizer_temporaries


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
        backward, detail = unit_buffers(plan, units, state, self.units_in_flight, compute)
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
