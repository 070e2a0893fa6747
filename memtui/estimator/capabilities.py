"""What each training stack can run, as data: one `StackCapabilities` record per stack in
`CAPABILITIES`, keyed by `StackName`.

The plan's cross-field rules (`Plan.check_rules`), the strategy table of a report, the lever
list, the loading and saving phases and the stacks' own books all read these records, so a
stack's limits are written once. The module is a leaf: it imports the choices alone, never
the plan or the stacks (which import it), and reads a plan through the `PlanChoices`
protocol.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Protocol

from memtui.errors import PlanError
from memtui.estimator.choices import Loop, LossKind, Offload, Precision, StackName, Strategy


class _Gpus(Protocol):
    @property
    def gpus(self) -> int: ...


class PlanChoices(Protocol):
    """The choices of a plan a stack's capabilities judge (`memtui.estimator.plan.Plan`)."""

    @property
    def hardware(self) -> _Gpus: ...
    @property
    def strategy(self) -> Strategy: ...
    @property
    def precision(self) -> Precision: ...
    @property
    def loss(self) -> LossKind: ...
    @property
    def offload(self) -> Offload: ...
    @property
    def optimizer_in_backward(self) -> bool: ...
    @property
    def activation_offload(self) -> bool: ...
    @property
    def tp(self) -> int: ...


def fsdp_shard_bytes(precision: Precision) -> int:
    """Bytes per element of FSDP's trainable shards, their gradients and AdamW's moments:
    fp32 (accelerate upcasts trainable parameters before sharding) unless the plan is pure
    bf16 (no mixed-precision policy: everything in bf16)."""
    return 2 if precision is Precision.bf16 else 4


@dataclass(frozen=True)
class OneGpuOnly:
    """A strategy a stack runs on one GPU only: its multi-GPU recipes run another."""

    strategy: Strategy
    instead: Strategy
    """The strategy its multi-GPU recipes run (what a plan on several GPUs switches to)."""
    why: str
    """The refusal, one line."""


@dataclass(frozen=True)
class TensorParallelPlan:
    """How a stack's tensor parallelism splits a decoder layer: what sets its collectives
    (`memtui.estimator.communication.tensor_parallel_volume`)."""

    per_projection: bool = False
    """Each column-parallel projection brings in its own copy of the layer's input (torch
    DTensor ColwiseParallel with no PrepareModuleInput before it; DeepSpeed's LinearLayer),
    so q, k, v, gate and up each cost a collective in forward or backward; False: one per
    attention and one per MLP (Megatron's f operator, torch's PrepareModuleInput)."""
    sequence_parallel: bool = True
    """Activations between the blocks are sharded over the sequence (all-gathers and
    reduce-scatters); False: replicated (all-reduces)."""
    logits_gathered: bool = False
    """The lm_head's vocab shards are all-gathered for a loss on the whole vocabulary on every
    rank; False: a vocab-parallel loss on the local shard (Megatron, torch loss_parallel).
    The logits and the loss's buffers are then whole on every rank
    (`memtui.estimator.activations.logits_bytes`)."""
    saves_gathered_input: bool = True
    """Under sequence parallelism, a column-parallel linear keeps for backward the input it
    all-gathered (whole on every rank): torch 2.4-2.13 distributed/tensor/parallel/style.py
    ColwiseParallel._prepare_input_fn / PrepareModuleInput redistribute the Shard(1) input to
    Replicate before F.linear, whose autograd saves that replicated tensor (torchtitan,
    torchtune); False: it keeps its sequence shard and all-gathers it again in backward
    (Megatron-LM core/tensor_parallel/layers.py LinearWithGradAccumulationAndAsyncCommunication,
    `sequence_parallel`: save_for_backward(input) before the gather; Korthikanti et al. 2022
    sec. 4.2.2). Without sequence parallelism the input is whole either way
    (`memtui.estimator.activations.TpSplit`)."""


MEGATRON_TP = TensorParallelPlan(saves_gathered_input=False)
"""Megatron-LM's tensor parallelism with sequence parallelism (Shoeybi et al. 2019 sec. 3,
Korthikanti et al. 2022 sec. 4.2): every tensor a layer keeps is split."""


@dataclass(frozen=True)
class StackCapabilities:
    """What one stack can run and how it loads and saves; the tuples' first member is the one
    to switch to first."""

    name: StackName
    label: str
    """What a person reads next to the verdict."""
    own_loop: Loop | None = Loop.trainer
    """The loop it runs when the plan names none (`memtui.estimator.loops`; None: the generic
    stack's textbook step, no loop)."""
    strategies: tuple[Strategy, ...] = tuple(Strategy)
    precisions: tuple[Precision, ...] = tuple(Precision)
    losses: tuple[LossKind, ...] = tuple(LossKind)
    """The losses it can compute."""
    offloads: tuple[Offload, ...] = tuple(Offload)
    """What it can move to CPU RAM."""
    optimizer_in_backward: bool = True
    """It can step each parameter in its gradient hook."""
    activation_offload: bool = True
    """It can move checkpointed layer inputs to CPU RAM."""
    one_gpu_only: tuple[OneGpuOnly, ...] = ()
    """Strategies among `strategies` it runs on a single GPU only."""
    tensor_parallel: tuple[Strategy, ...] = tuple(Strategy)
    """The strategies it runs with a tensor-parallel degree above 1 (empty: no tensor
    parallelism)."""
    tensor_parallel_plan: TensorParallelPlan = MEGATRON_TP
    """How its tensor parallelism splits a layer (default: Megatron-LM's, Shoeybi et al. 2019
    sec. 3 with Korthikanti et al. 2022's sequence parallelism, its gathered inputs
    re-gathered in backward)."""
    loads_on_every_rank: bool = True
    """Every process reads the whole checkpoint into CPU RAM before the model is placed or
    sharded (False: once per node, then scattered); memtui/estimator/phases.py."""
    saves_by_module: bool = False
    """Saving a sharded model gathers one module's parameters at a time (DeepSpeed's
    GatheredParameters), not one wrapped unit (FSDP); memtui/estimator/phases.py."""
    full_state_width: Callable[[Precision], int] | None = None
    """Saving gathers the full state dict in the shards' dtype and the full optimizer state on
    rank 0 (accelerate's FSDP FULL_STATE_DICT): the shards' bytes per element for a precision.
    None: it gathers a 16-bit state dict."""
    shard_grad_op_rests_sharded: bool = False
    """Its SHARD_GRAD_OP strategy keeps the parameters sharded between steps (FSDP's), not
    whole as ZeRO-2's do; memtui/estimator/phases.py."""

    def why_not(self, strategy: Strategy, gpus: int, tp: int = 1) -> str | None:
        """Why this stack cannot run `strategy` on `gpus` GPUs with tensor-parallel degree
        `tp`; None when it can."""
        for rule in self.one_gpu_only:
            if rule.strategy is strategy and gpus > 1:
                return rule.why
        if strategy not in self.strategies:
            allowed = ", ".join(s.value for s in Strategy if s in self.strategies)
            return f"the {self.name.value} stack runs {allowed}, not {strategy.value}"
        if tp > 1 and strategy not in self.tensor_parallel:
            if not self.tensor_parallel:
                return f"the {self.name.value} stack has no tensor parallelism: tp 1"
            allowed = ", ".join(s.value for s in self.tensor_parallel)
            return (
                f"the {self.name.value} stack runs tensor parallelism with {allowed}, not "
                f"{strategy.value}"
            )
        return None

    def check(self, plan: PlanChoices) -> None:
        """Raise ValueError (one line) when the stack cannot run the plan as given."""
        why = self.why_not(plan.strategy, plan.hardware.gpus, plan.tp)
        if why is not None:
            raise PlanError(why)
        name = self.name  # a Choice: formats as its value
        if plan.precision not in self.precisions:
            allowed = ", ".join(p.value for p in Precision if p in self.precisions)
            raise PlanError(
                f"the {name} stack runs precision {allowed}, not {plan.precision.value}"
            )
        if plan.loss not in self.losses:
            allowed = ", ".join(loss.value for loss in self.losses)
            raise PlanError(f"the {name} stack computes the loss {allowed}, not {plan.loss.value}")
        if plan.offload not in self.offloads:
            allowed = ", ".join(o.value for o in self.offloads)
            raise PlanError(f"the {name} stack offloads {allowed}, not {plan.offload.value}")
        if plan.optimizer_in_backward and not self.optimizer_in_backward:
            raise PlanError(f"the {name} stack cannot step the optimizer in backward")
        if plan.activation_offload and not self.activation_offload:
            raise PlanError(f"the {name} stack has no activation offloading")

    def suited(self, plan: PlanChoices) -> dict[str, object]:
        """The changes that let this stack run `plan`: its first strategy and precision in
        place of ones it does not run (nothing else); {} when it runs the plan as it is.
        Switching stacks in the dashboard and `--stack` without those flags use it."""
        changes: dict[str, object] = {}
        gpus = plan.hardware.gpus
        if plan.strategy not in self.strategies:
            sharded = [s for s in self.strategies if s is not Strategy.ddp]
            one_gpu = gpus == 1 and Strategy.ddp in self.strategies
            changes["strategy"] = Strategy.ddp if one_gpu or not sharded else sharded[0]
        for rule in self.one_gpu_only:
            if rule.strategy is plan.strategy and gpus > 1:
                changes["strategy"] = rule.instead
        if plan.tp > 1 and changes.get("strategy", plan.strategy) not in self.tensor_parallel:
            changes["tp"] = 1
        if plan.precision not in self.precisions:
            changes["precision"] = self.precisions[0]
        if plan.loss not in self.losses:
            changes["loss"] = self.losses[0]
        if plan.offload not in self.offloads:
            changes["offload"] = Offload.none
        if plan.optimizer_in_backward and not self.optimizer_in_backward:
            changes["optimizer_in_backward"] = False
        if plan.activation_offload and not self.activation_offload:
            changes["activation_offload"] = False
        return changes


_FSDP2 = StackCapabilities(
    name=StackName.fsdp2,
    label="FSDP2 (fully_shard)",
    strategies=(Strategy.fsdp, Strategy.fsdp_shard_grad_op, Strategy.hsdp),
    precisions=(Precision.bf16_mixed, Precision.bf16, Precision.fp32),
    # Transformers' own loss, or Liger's fused linear cross-entropy (use_liger_kernel=True)
    losses=(LossKind.full, LossKind.fused),
    # CPUOffloadPolicy moves parameters, gradients and the optimizer step together
    offloads=(Offload.none, Offload.params),
    optimizer_in_backward=False,
    full_state_width=fsdp_shard_bytes,  # accelerate's FULL_STATE_DICT
    # fully_shard(reshard_after_forward=False) still shards every parameter at rest (FSDP1's
    # FlatParamHandle.shard() too)
    shard_grad_op_rests_sharded=True,
    # accelerate's ParallelismConfig: tp over FSDP2's dp_shard (2D) or dp_replicate x
    # dp_shard (HSDP, 3D) meshes
    tensor_parallel=(Strategy.fsdp, Strategy.fsdp_shard_grad_op, Strategy.hsdp),
    # ... applying the model's tp_plan (transformers 5.24 models/llama configuration_llama.py
    # base_model_tp_plan: q, k, v, gate, up "colwise", o, down "rowwise", no sequence
    # parallelism; modeling_llama.py _tp_plan lm_head "colwise_gather_output");
    # distributed/tensor_parallel.py ColwiseParallel.transform_inputs_pre_forward wraps each
    # projection's input as its own DTensor
    tensor_parallel_plan=TensorParallelPlan(
        per_projection=True, sequence_parallel=False, logits_gathered=True
    ),
)

CAPABILITIES: dict[StackName, StackCapabilities] = {
    caps.name: caps
    for caps in (
        StackCapabilities(name=StackName.generic, label="generic", own_loop=None),
        StackCapabilities(
            name=StackName.trainer,
            label="Trainer + accelerate",
            strategies=(Strategy.ddp,),
            precisions=(Precision.bf16, Precision.bf16_autocast, Precision.fp32),
            # Transformers' own loss, or Liger's fused linear cross-entropy
            # (use_liger_kernel=True)
            losses=(LossKind.full, LossKind.fused),
            # accelerate offers no optimizer offload under DDP; Trainer's checkpointing can
            # offload layer inputs (activation_checkpointing_kwargs offload=True: save_on_cpu)
            offloads=(Offload.none,),
            optimizer_in_backward=False,
            # accelerate 1.10+ parallelism_config.py ParallelismConfig: tensor parallelism
            # composes with FSDP2's sharding, not with DDP's replicas (__post_init__ refuses
            # dp_replicate_size > 1 with dp_shard_size 1); tp over every GPU, no data
            # parallelism, is not sized as a Trainer plan
            tensor_parallel=(),
        ),
        StackCapabilities(
            name=StackName.deepspeed,
            label="DeepSpeed ZeRO",
            strategies=(Strategy.zero3, Strategy.zero2, Strategy.zero1),
            precisions=(Precision.bf16_mixed,),
            # Transformers' own loss, or Liger's fused linear cross-entropy
            # (use_liger_kernel=True)
            losses=(LossKind.full, LossKind.fused),
            # offload_optimizer / offload_param (ZeRO-Offload, ZeRO-Infinity)
            offloads=(Offload.none, Offload.optimizer, Offload.params),
            optimizer_in_backward=False,
            # AutoTP training (tensor_parallel.autotp_size): "only works with ZeRO stages 0,
            # 1, and 2" (deepspeedai/DeepSpeed docs/_tutorials/autotp-training.md,
            # Limitations; commit 7e1c059)
            tensor_parallel=(Strategy.zero2, Strategy.zero1),
            # DeepSpeed 0.19 module_inject/layers.py LinearLayer.forward: ColumnParallel
            # all-reduces each projection's input gradient in backward (tp_overlap_comm off),
            # LinearAllreduce each row-parallel output in forward; auto_tp.py: in training the
            # lm_head is a LinearLayer(gather_output=True)
            tensor_parallel_plan=TensorParallelPlan(
                per_projection=True, sequence_parallel=False, logits_gathered=True
            ),
            loads_on_every_rank=False,  # zero.Init: once per node, scattered
            saves_by_module=True,  # _zero3_consolidated_16bit_state_dict: GatheredParameters
        ),
        _FSDP2,
        # FullyShardedDataParallel through accelerate runs what fully_shard does, and
        # ShardingStrategy.NO_SHARD (ddp: nothing sharded, each unit cast to bf16 in turn)
        replace(
            _FSDP2,
            name=StackName.fsdp1,
            label="FSDP1 (FullyShardedDataParallel)",
            strategies=(*_FSDP2.strategies, Strategy.ddp),
            # ParallelismConfig._validate_accelerator: FSDP version 2 (or plain multi-GPU)
            # only
            tensor_parallel=(),
        ),
        StackCapabilities(
            name=StackName.torchtune,
            label="torchtune",
            own_loop=Loop.torchtune,
            strategies=(Strategy.fsdp, Strategy.ddp),
            precisions=(Precision.bf16, Precision.fp32),
            # the chunked losses, or CrossEntropyLoss
            losses=(LossKind.chunked, LossKind.full),
            offloads=(Offload.none, Offload.params),  # fsdp_cpu_offload
            # the distributed recipes shard with FSDP (training/_distributed.py shard_model)
            one_gpu_only=(
                OneGpuOnly(
                    Strategy.ddp,
                    instead=Strategy.fsdp,
                    why="torchtune's distributed recipes shard with FSDP: use fsdp on more "
                    "than one GPU (ddp stands for its single-device recipes)",
                ),
            ),
            loads_on_every_rank=False,  # the distributed recipes load once per node, scatter
            # tensor_parallel_dim: recipes/full_finetune_distributed.py, TP inside FSDP2's
            # data-parallel shards (torchtune 0.6+)
            tensor_parallel=(Strategy.fsdp,),
            # models/llama3/_parallelism.py @bd2a0fc7c _get_base_llama_tp_training_plan:
            # PrepareModuleInput on attn and mlp, SequenceParallel norms, output
            # ColwiseParallel(output_layouts=Replicate())
            tensor_parallel_plan=TensorParallelPlan(logits_gathered=True),
        ),
        StackCapabilities(
            name=StackName.litgpt,
            label="LitGPT",
            own_loop=Loop.litgpt,
            strategies=(Strategy.fsdp, Strategy.ddp),
            precisions=(Precision.bf16, Precision.bf16_autocast),
            losses=(LossKind.chunked,),  # chunked_cross_entropy
            offloads=(Offload.none, Offload.params),  # FSDPStrategy(cpu_offload=True)
            optimizer_in_backward=False,
            activation_offload=False,
            tensor_parallel=(),  # litgpt/finetune/*.py: FSDPStrategy or DDP, no tensor parallelism
        ),
    )
}
"""Every stack's capabilities by its name."""
