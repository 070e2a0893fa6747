"""torchtune's recipes: pure bf16, its own LoRA, losses and memory levers.

Read from pytorch/torchtune (recipes/*.py, recipes/configs/, torchtune/modules/,
torchtune/training/):
- The model is built in the recipe's dtype (training.set_default_dtype, `dtype: bf16`):
  weights, gradients and torch.optim's moments in bf16, no master copy. Distributed recipes
  shard with FSDP2 without a MixedPrecisionPolicy (training/_distributed.py shard_model):
  bf16 shards, bf16 gradients and reduce-scatter; single-device recipes run one GPU.
  Before v0.3.0 they wrapped with FSDP1 instead (recipes/*_finetune_distributed.py v0.1.0 to
  v0.2.1: `FSDP(..., ShardingStrategy.FULL_SHARD, mixed_precision=None)`, each
  TransformerDecoderLayer a unit and, for LoRA, each lora_a and lora_b one of its own:
  utils/_distributed.py lora_fsdp_wrap_policy), the same bf16 state. Read in torch 2.2.2
  (the release torchtune 0.1 was tested with), FSDP1 holds less than the FSDP2 books below,
  which are kept for it: limit_all_gathers (on by default) allows two all-gathers in flight
  (_limiter_utils.py _FreeEventQueue), written straight into the unit's flat parameter (no
  separate all-gather output), and a frozen unit is resharded once its input's gradient is
  computed (_runtime_utils.py _register_post_backward_reshard_only_hook).
- LoRA adapters are plain bf16 nn.Linear (modules/peft/lora.py LoRALinear) applied to the
  same input as the base layer, with no cast: they share it, unless a dropout runs first
  (`self.lora_a(self.dropout(x))`): the model builders' lora_dropout is 0.05 before v0.3.0
  (models/llama2/_model_builders.py lora_llama2_7b) and 0.0 since.
- QLoRA quantizes the linears to torchao's NF4 (64-element blocks, double-quantized scalers)
  and leaves norms, embeddings and the output projection in bf16 (no upcast).
- Configs use torch.optim.AdamW(fused=True): no step temporaries. optimizer_in_bwd steps and
  frees each gradient in its hook (training/memory.py register_optim_in_bwd_hooks).
- Activation offloading (training/_activation_offloading.py OffloadActivations) needs
  activation checkpointing; the loss is chunked (LinearCrossEntropyLoss,
  CEWithChunkedOutputLoss: 8 chunks) in current configs.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace

from memtui.estimator.activations import Setup
from memtui.estimator.choices import LossKind, Method, StackName, Strategy
from memtui.estimator.optimizers import optimizer_spec
from memtui.estimator.plan import Plan
from memtui.estimator.stacks.base import BookStack, Breakdown
from memtui.estimator.stacks.fsdp2 import unit_buffers
from memtui.estimator.stacks.generic import GENERIC, one_dtype_setup
from memtui.estimator.state import (
    Layout,
    StaticState,
    TrainableTensor,
    frozen_base_bytes,
    gradient_bytes,
    optimizer_state_bytes,
    parameters_of,
)
from memtui.estimator.terms import TermKind
from memtui.estimator.transient import Transient, dequantized_weight, optimizer_temporaries
from memtui.estimator.versions import Package


def same_dtype_layout(plan: Plan, tensors: tuple[TrainableTensor, ...]) -> Layout:
    """Every parameter, gradient and (torch.optim) moment in the model's dtype; a QLoRA base
    quantized with its other parameters left in that dtype; no master copy."""
    width = plan.precision.weight_bytes
    trainable = parameters_of(tensors)
    if plan.method is Method.full:
        weights = width * plan.model.parameters
    else:
        weights = frozen_base_bytes(plan, width, width) + width * trainable
    return Layout(
        weights=weights,
        gradients=gradient_bytes(plan, tensors, width),
        master=0,
        optimizer=optimizer_state_bytes(plan, tensors, width),
        managed_fraction=1.0 if optimizer_spec(plan.optimizer).paged else 0.0,
    )


def same_dtype_setup(plan: Plan) -> Setup:
    """The model run in its own dtype (torchtune's recipes pop the labels from the batch for
    the loss; LitGPT's fit loop reads batch["labels"])."""
    return one_dtype_setup(plan, plan.precision.weight_bytes)


class TorchtuneStack(BookStack):
    """torchtune's full, LoRA and QLoRA recipes (single device or distributed)."""

    name = StackName.torchtune

    def layout(
        self, plan: Plan, strategy: Strategy, tensors: tuple[TrainableTensor, ...]
    ) -> Layout:
        return same_dtype_layout(plan, tensors)

    def setup(self, plan: Plan) -> Setup:
        base = same_dtype_setup(plan)
        if plan.loss is not LossKind.full:
            return base  # CEWithChunkedOutputLoss upcasts each chunk; the recipe frees them
        # Without output chunks TransformerDecoder.forward returns fp32 logits
        # (modules/transformer.py: `self.output(h).float()`, v0.1.0 to v0.6.1), so
        # torch.nn.CrossEntropyLoss runs in fp32. Before v0.3.0 the recipes' train loop takes
        # `logits[..., :-1, :].contiguous()` and keeps it referenced through backward
        # (full_finetune_distributed.py, lora_finetune_single_device.py v0.1.0-v0.2.1);
        # v0.3.0 shifts the labels instead and runs `del logits` before backward.
        before_03 = plan.versions.before(Package.torchtune, (0, 3))
        return replace(
            base,
            output_logits_bytes=4,
            loss_bytes=4,
            shifted_logits_copy=before_03,
            kept_logits_bytes=4 if before_03 else 0,
        )

    def transient(
        self, plan: Plan, strategy: Strategy, state: StaticState, setup: Setup
    ) -> Transient:
        width = plan.precision.weight_bytes
        # FSDP2 without a policy: the running unit, its buffer, the prefetched next one (an
        # upper bound of what FSDP1 holds before v0.3.0: module docstring)
        backward, detail = unit_buffers(plan, strategy, state, 3, width)
        step, why = optimizer_temporaries(plan, strategy, state, width, fused=True)
        return Transient(
            0, backward + dequantized_weight(plan), step, f"{detail}; optimizer step: {why}"
        )

    def sources(self, plan: Plan, breakdown: Breakdown) -> Mapping[TermKind, str]:
        out = dict(GENERIC.sources(plan, breakdown))
        out[TermKind.weights] = f"{plan.precision.value} model (dtype: in the recipe)"
        out[TermKind.master_weights] = "none: pure bf16 recipes"
        out[TermKind.optimizer_states] = f"{plan.optimizer.value}, moments in the model's dtype"
        return out


TORCHTUNE = TorchtuneStack()
