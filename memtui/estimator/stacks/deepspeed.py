"""DeepSpeed ZeRO 1/2/3 in bf16, as Transformers' Trainer and accelerate launch it.

Read from DeepSpeed 0.19.6 (deepspeedai/DeepSpeed) and transformers 5.24:
- The engine casts the whole module to bf16 (runtime/engine.py _cast_module_mixed_precision):
  the frozen base, PEFT's adapters and QLoRA's fp32-prepared parts alike. No autocast.
- ZeRO-1/2 (runtime/zero/stage_1_and_2.py DeepSpeedZeroOptimizer): an fp32 partition of the
  parameters (single_partition_of_fp32_groups) with Adam's fp32 moments; bf16 gradients,
  whole under stage 1 (param.grad until reduce_gradients), partitioned under stage 2
  (grads_in_partition); the reduce bucket (setup_buckets) of reduce_bucket_size elements,
  twice with overlap_comm; at the step the local gradient partition is copied to fp32. The
  updated partitions are all-gathered straight into the bf16 flat groups
  (runtime/utils.py all_gather_dp_groups: all_gather_into_tensor), so allgather_bucket_size
  allocates nothing.
  With data_types.grad_accum_dtype fp32 stage 1 runs BF16_Optimizer instead
  (runtime/bf16_optimizer.py: an unpartitioned fp32 gradient buffer beside the bf16 grads;
  engine.py _do_optimizer_sanity_check).
- ZeRO-3 (stage3.py, partitioned_param_coordinator.py, parameter_offload.py): bf16
  parameter partitions, fp32 partitions and moments, bf16 gradient partitions
  (grad_partitions_flat_buffer), one reduce buffer, the gathered parameters of the module
  running plus the prefetch bucket (capped by stage3_max_live_parameters), parameters under
  the persistence threshold kept whole; the step upcasts one sub-group's gradients at a time.
- "auto" (integrations/deepspeed.py HfTrainerDeepSpeedConfig.trainer_config_finalize):
  reduce_bucket_size = hidden^2, stage3_prefetch_bucket_size = 0.9 hidden^2,
  stage3_param_persistence_threshold = 10 hidden.
- DeepSpeed's optimizer for "AdamW" is its FusedAdam: no step temporaries.
"""

from __future__ import annotations

from collections.abc import Mapping

from memtui.estimator.activations import Setup
from memtui.estimator.choices import Method, Offload, StackName, Strategy
from memtui.estimator.optimizers import optimizer_spec
from memtui.estimator.plan import Plan
from memtui.estimator.stacks.base import BookStack, Breakdown
from memtui.estimator.stacks.generic import GENERIC, one_dtype_setup
from memtui.estimator.stacks.hf_model import transformers_model
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

BF16 = 2


def reduce_bucket(plan: Plan) -> int:
    """Elements of the reduce bucket: the setting, or "auto" = hidden^2."""
    return plan.deepspeed.reduce_bucket_size or plan.model.architecture.hidden_size**2


def prefetch_bucket(plan: Plan) -> int:
    """ZeRO-3's prefetch bucket in elements: the setting, or "auto" = 0.9 hidden^2."""
    setting = plan.deepspeed.prefetch_bucket_size
    return int(0.9 * plan.model.architecture.hidden_size**2) if setting is None else setting


def persistent_parameters(plan: Plan, tensors: tuple[TrainableTensor, ...]) -> int:
    """Parameters ZeRO-3 never partitions: every tensor of at most the persistence threshold
    ("auto" = 10 hidden) elements: norms, biases, small adapters."""
    arch = plan.model.architecture
    setting = plan.deepspeed.persistence_threshold
    threshold = 10 * arch.hidden_size if setting is None else setting
    scale = plan.model.parameters / arch.parameter_count
    small = sum(t.numel * t.count for t in arch.tensors if t.numel <= threshold) * scale
    if plan.method is not Method.full:
        small += sum(t.numel * t.count for t in tensors if t.numel <= threshold)
    return round(small)


class DeepSpeedStack(BookStack):
    """DeepSpeed ZeRO in bf16 (bf16: {enabled: true}), through Transformers or accelerate."""

    name = StackName.deepspeed
    # the engine owns its gradient partitions (runtime/zero/stage_1_and_2.py,
    # stage3.py), not read for when they are freed: counted through the step

    def layout(
        self, plan: Plan, strategy: Strategy, tensors: tuple[TrainableTensor, ...]
    ) -> Layout:
        trainable = parameters_of(tensors)
        if plan.method is Method.full:
            weights = BF16 * plan.model.parameters
        else:  # the engine casts base, adapters and QLoRA's upcast parts to bf16
            weights = frozen_base_bytes(plan, BF16, BF16) + BF16 * trainable
        gradients = gradient_bytes(plan, tensors, BF16)
        if plan.deepspeed.grad_accum_fp32 and strategy is Strategy.zero1:
            gradients += gradient_bytes(plan, tensors, 4)  # BF16_Optimizer's fp32 buffer
        zero3 = strategy_spec(strategy).shards_weights
        return Layout(
            weights=weights,
            gradients=gradients,
            master=4 * trainable,
            optimizer=optimizer_state_bytes(plan, tensors, 4),
            managed_fraction=1.0 if optimizer_spec(plan.optimizer).paged else 0.0,
            persistent_weights=BF16 * persistent_parameters(plan, tensors) if zero3 else 0.0,
        )

    def setup(self, plan: Plan) -> Setup:
        # everything bf16 (the engine cast it): the adapters share their inputs
        return transformers_model(plan, one_dtype_setup(plan, BF16))

    def transient(
        self, plan: Plan, strategy: Strategy, state: StaticState, setup: Setup
    ) -> Transient:
        spec = strategy_spec(strategy)
        n = spec.shard_count(plan)
        settings = plan.deepspeed
        overlap = (
            settings.overlap_comm if settings.overlap_comm is not None else spec.shards_weights
        )
        bucket = BF16 * reduce_bucket(plan) / plan.tp
        if not spec.shards_weights and overlap:
            bucket *= 2  # stage 1/2 double-buffer the reduce bucket to overlap communication
        fp32_grads = 4 * state.trainable / plan.tp / n
        if spec.shards_weights:
            fp32_grads = min(fp32_grads, 4 * settings.sub_group_size)
        step, why = optimizer_temporaries(plan, strategy, state, 4, fused=True)
        if plan.offload is Offload.none:
            step += round(fp32_grads)
            why += f" + fp32 gradient partition {fp32_grads / 1e9:.2f} GB"
        parts = []
        backward = dequantized_weight(plan)
        if spec.shards_weights or overlap or spec.shards_gradients:
            backward += round(bucket)  # filled by gradient hooks during backward
            parts.append(f"reduce bucket {bucket / 1e9:.2f} GB")
        else:  # stage 1 without overlap reduces after backward, then steps
            step = max(step, round(bucket))
            parts.append(f"reduce bucket after backward {bucket / 1e9:.2f} GB")
        if spec.shards_weights:
            layer, _ = unit_parameters(plan)
            arch = plan.model.architecture
            head = arch.vocab_size * arch.hidden_size / plan.tp
            live = min(settings.max_live_parameters, max(layer, head) + prefetch_bucket(plan))
            backward += round(BF16 * live)
            parts.append(f"gathered parameters {BF16 * live / 1e9:.2f} GB")
        return Transient(0, backward, step, f"{', '.join(parts)}; optimizer step: {why}")

    def sources(self, plan: Plan, breakdown: Breakdown) -> Mapping[TermKind, str]:
        out = dict(GENERIC.sources(plan, breakdown))
        out[TermKind.weights] = "bf16 module (the engine casts it), partitioned under ZeRO-3"
        out[TermKind.gradients] = "bf16 gradients (grad_accum_dtype bf16), partitioned from ZeRO-2"
        out[TermKind.master_weights] = "fp32 partition of the trainable parameters"
        out[TermKind.optimizer_states] = f"{plan.optimizer.value} on the fp32 partition"
        return out


DEEPSPEED = DeepSpeedStack()
