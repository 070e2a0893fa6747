"""The phases of a job beyond the training step that users run out of memory in: loading the
model and saving a checkpoint, per GPU (the busiest rank) and in CPU RAM per node.

- Loading. The checkpoint is read into CPU RAM and moved to the GPUs: under DDP, and under
  accelerate's FSDP without cpu_ram_efficient_loading (its default, utils/dataclasses.py
  FullyShardedDataParallelPlugin), every process materialises the whole model in CPU RAM
  before wrapping; DeepSpeed's zero.Init (Transformers' from_pretrained under ZeRO-3) and
  torchtune's distributed recipes load it once per node and scatter it. On the GPU a sharded
  stack holds its shard and the unit being sharded; QLoRA quantizes one bf16 tensor at a
  time (bitsandbytes Params4bit on .to(cuda)).
- Saving. A full state dict is gathered on rank 0, unit by unit, into CPU RAM: accelerate's
  FSDP FULL_STATE_DICT gathers the parameters in their sharded dtype (fp32 under mixed
  precision) and, for the optimizer, FSDP.optim_state_dict's full moments
  (FullStateDictConfig(offload_to_cpu=True, rank0_only=True)); DeepSpeed ZeRO-3 with
  stage3_gather_16bit_weights_on_model_save gathers the bf16 weights
  (_zero3_consolidated_16bit_state_dict); torchtune's and LitGPT's FSDP checkpoints gather the
  model's own dtype. Unsharded stacks save each tensor from the GPU copy it already has.
The verdict takes the largest GPU phase; the CPU RAM a node needs is the largest phase's.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from memtui.estimator.capabilities import CAPABILITIES
from memtui.estimator.choices import Method, Strategy
from memtui.estimator.objectives import spec_of
from memtui.estimator.strategies import strategy_spec
from memtui.estimator.transient import unit_parameters

if TYPE_CHECKING:
    from memtui.estimator.plan import Plan
    from memtui.estimator.stacks.base import Breakdown


@dataclass(frozen=True)
class PhasePeak:
    """One phase's peak: on the busiest GPU and in the CPU RAM of its node."""

    name: str
    gpu_bytes: int
    """Per GPU, as nvidia-smi would show it (the runtime outside the allocator included)."""
    cpu_bytes_per_node: int
    source: str


def phases(plan: Plan, step: Breakdown) -> tuple[PhasePeak, ...]:
    """The training step and the phases around it, for `plan` whose step is `step`."""
    rt = step.runtime
    outside = rt.device - rt.reserved  # the CUDA context, NCCL, managed memory
    per_node = plan.hardware.gpus_per_node
    return (
        PhasePeak(
            "training step",
            step.total,
            step.cpu_bytes * per_node,
            "the budget's terms; CPU RAM: offloaded state and activations (pinned)",
        ),
        _loading(plan, step, outside),
        _saving(plan, step, outside),
        *_generation(plan, step, outside),
    )


def _rests_sharded(plan: Plan) -> bool:
    """The parameters rest sharded over several GPUs: ZeRO-3 and FSDP's full and hybrid
    sharding, and FSDP's SHARD_GRAD_OP too (fully_shard(reshard_after_forward=False) and
    FSDP1's FlatParamHandle.shard() shard every sharded strategy's parameters at rest;
    stacks/fsdp1.py, stacks/fsdp2.py)."""
    if plan.hardware.gpus == 1:
        return False
    return strategy_spec(plan.strategy).shards_weights or (
        CAPABILITIES[plan.stack].shard_grad_op_rests_sharded
        and plan.strategy is Strategy.fsdp_shard_grad_op
    )


def _model_bytes(plan: Plan) -> int:
    """The checkpoint as the stack loads it: bf16 for a QLoRA base read before quantizing,
    else the parameters' dtype."""
    width = 2 if plan.method is Method.qlora else plan.precision.weight_bytes
    return width * plan.model.parameters


def _loading(plan: Plan, step: Breakdown, outside: int) -> PhasePeak:
    layer, root = unit_parameters(plan)
    width = 2 if plan.method is Method.qlora else plan.precision.weight_bytes
    sharded = _rests_sharded(plan)
    in_flight = width * max(layer, root)  # the unit being sharded, or the tensor quantized
    gpu = step.state.weights + (round(in_flight) if sharded or plan.method is Method.qlora else 0)
    copies = plan.hardware.gpus_per_node if CAPABILITIES[plan.stack].loads_on_every_rank else 1
    how = "by every process" if copies > 1 else "once per node"
    return PhasePeak(
        "model loading",
        gpu + outside,
        copies * _model_bytes(plan),
        f"the checkpoint read into CPU RAM {how}; on the GPU the weights"
        + (" and the unit being placed" if sharded else ""),
    )


def _saving(plan: Plan, step: Breakdown, outside: int) -> PhasePeak:
    spec = strategy_spec(plan.strategy)
    trainable = step.state.trainable
    frozen = plan.model.parameters - (trainable if plan.method is Method.full else 0)
    layer, root = unit_parameters(plan)
    gathered = 0
    cpu = 0
    what = "each tensor saved from the GPU copy it has"
    if _rests_sharded(plan):
        # FSDP gathers one unit at a time (the root unit holds the embeddings and lm_head),
        # DeepSpeed one module's parameters (GatheredParameters): the largest tensor
        arch = plan.model.architecture
        largest = arch.vocab_size * (arch.embed_proj_dim or arch.hidden_size) / plan.tp
        stack = CAPABILITIES[plan.stack]
        unit = max(largest, layer) if stack.saves_by_module else max(layer, root)
        gathered = round(plan.precision.activation_bytes * unit)
        if stack.full_state_width is not None:
            master = stack.full_state_width(plan.precision)  # the stack's own width of its shards
            moments = step.state.optimizer_states * spec.shard_count(plan) * plan.tp
            cpu = master * trainable + 2 * frozen + moments
            what = "FSDP's full state dict and full optimizer state gathered on rank 0"
        else:
            cpu = 2 * plan.model.parameters
            what = "a full 16-bit state dict gathered on rank 0"
    allocator = sum(p.bytes for p in step.runtime.parts if p.where != "outside")
    gpu = step.state.total + step.transient.persistent + gathered + allocator + outside
    return PhasePeak("checkpoint saving", gpu, cpu, what)


def _generation(plan: Plan, step: Breakdown, outside: int) -> tuple[PhasePeak, ...]:
    """Online RL's generation phase (none for other objectives): the trainer's static state,
    the objective's other models and persistent buffers beside the generator's full share
    (colocated vLLM awake, or the KV cache of Transformers' generate); the activations and
    the step's buffers are not alive then (memtui.estimator.objectives)."""
    if not spec_of(plan).online:
        return ()
    goal = step.objective
    models = goal.reference + goal.value_model + goal.reward_model
    allocator = sum(p.bytes for p in step.runtime.parts if p.where != "outside")
    trainer = step.state.total + models + goal.log_probs + step.transient.persistent + allocator
    return (
        PhasePeak(
            "generation",
            trainer + outside + goal.generation,
            step.cpu_bytes * plan.hardware.gpus_per_node,
            f"the trainer's {trainer / 1e9:.2f} GB beside the generator's "
            f"{goal.generation / 1e9:.2f} GB ({plan.vllm_mode.value})",
        ),
    )
