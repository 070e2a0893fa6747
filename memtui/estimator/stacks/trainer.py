"""Transformers' Trainer with accelerate, on one GPU or under DDP, with PEFT's defaults.

Read from transformers 5.24, accelerate 1.15, peft 0.21 and torch 2.13:
- Precision is the dtype the model was loaded in. `bf16=True` only turns on accelerate's
  autocast (training_args.py TrainingArguments.__post_init__; accelerator.py
  Accelerator.prepare_model wraps forward in torch.autocast): there is no master copy. Loaded
  without torch_dtype (fp32, memtui's `bf16-autocast`) the fp32 weights are the master and
  gradients and AdamW's moments are fp32; loaded in bf16 everything is bf16 (torch.optim
  keeps moments like the parameter: optim/adam.py Adam._init_group).
- The default optimizer is adamw_torch_fused on torch >= 2.8 (training_args.py
  default_optim): one fused kernel, no step temporaries; adamw_torch (foreach) before
  transformers 4.54 (`hf_model.trainer_fused_adamw`).
- DDP keeps its gradient buckets beside the gradients: accelerate forwards only non-default
  DistributedDataParallelKwargs, so gradient_as_bucket_view stays False (nn/parallel/
  distributed.py), and the 25 MiB buckets together cover every trainable parameter.
- PEFT upcasts adapters to fp32 (get_peft_model(autocast_adapter_dtype=True),
  tuners_utils.cast_adapter_dtype); modules_to_save copies keep the base dtype
  (ModulesToSaveWrapper). Each adapted linear casts its input to the adapter's dtype before
  lora_A (tuners/lora/layer.py Linear.forward, _cast_input_dtype), so under autocast lora_A
  saves its own bf16 copy of the input instead of sharing the base layer's.
- prepare_model_for_kbit_training (QLoRA) casts every non-quantized parameter to fp32
  (utils/other.py): the embeddings make the residual stream fp32.
- Under autocast every fp32 weight a matmul uses is cast to bf16 (aten autocast_mode.cpp
  cached_cast): the copies of trainable weights are cached for the whole forward and, with
  the frozen ones' copies, saved for backward unless the layer is checkpointed.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace

from memtui.estimator.activations import Setup
from memtui.estimator.choices import (
    Method,
    Precision,
    StackName,
    Strategy,
)
from memtui.estimator.objectives import fused_lm_head
from memtui.estimator.optimizers import optimizer_spec
from memtui.estimator.plan import Plan
from memtui.estimator.stacks.autocast import autocast_weight_copies
from memtui.estimator.stacks.base import BookStack, Breakdown
from memtui.estimator.stacks.generic import GENERIC, activation_setup
from memtui.estimator.stacks.hf_model import trainer_fused_adamw, transformers_model
from memtui.estimator.state import (
    Layout,
    StaticState,
    TrainableTensor,
    frozen_base_bytes,
    gradient_bytes,
    optimizer_state_bytes,
    parameters_of,
    split_saved,
)
from memtui.estimator.terms import TermKind
from memtui.estimator.transient import (
    Transient,
    dequantized_weight,
    optimizer_temporaries,
)
from memtui.estimator.versions import Package

ADAPTER_BYTES = 4  # PEFT's fp32 adapters (autocast_adapter_dtype=True)
FP32_ADAPTERS_FROM = (0, 12)
"""PEFT releases from this one upcast the adapters to fp32 (get_peft_model's
autocast_adapter_dtype, absent in 0.11.1); before, LoraLayer.update_layer moves them to the
base weight's dtype (tuners/lora/layer.py `self.to(weight.device, dtype=weight.dtype)`, read
in 0.10.0 and 0.11.1)."""


def adapter_bytes(plan: Plan) -> int:
    """Bytes per parameter of PEFT's adapters for the plan's PEFT."""
    if plan.versions.before(Package.peft, FP32_ADAPTERS_FROM):
        return plan.precision.weight_bytes
    return ADAPTER_BYTES


def peft_layout(
    plan: Plan, tensors: tuple[TrainableTensor, ...], width: int, adapter_width: int
) -> Layout:
    """The state of a PEFT model whose base is held in `width` bytes per parameter and
    whose adapters in `adapter_width`: weights, gradients and moments of the adapters in
    their dtype, of modules_to_save copies in the base's, no master copy."""
    adapters, saved = split_saved(plan, tensors)
    base = frozen_base_bytes(plan, base_bytes=width)
    return Layout(
        weights=base + adapter_width * parameters_of(adapters) + width * parameters_of(saved),
        gradients=gradient_bytes(plan, adapters, adapter_width)
        + gradient_bytes(plan, saved, width),
        master=0,
        optimizer=optimizer_state_bytes(plan, adapters, adapter_width)
        + optimizer_state_bytes(plan, saved, width),
        managed_fraction=1.0 if optimizer_spec(plan.optimizer).paged else 0.0,
    )


def pure_layout(plan: Plan, tensors: tuple[TrainableTensor, ...], width: int) -> Layout:
    """A full fine-tune whose parameters, gradients and (torch.optim) moments all have the
    parameter dtype: no master copy."""
    return Layout(
        weights=width * plan.model.parameters,
        gradients=gradient_bytes(plan, tensors, width),
        master=0,
        optimizer=optimizer_state_bytes(plan, tensors, width),
        managed_fraction=1.0 if optimizer_spec(plan.optimizer).paged else 0.0,
    )


class TrainerStack(BookStack):
    """Transformers' Trainer + accelerate (one GPU or DDP), PEFT's defaults for LoRA."""

    name = StackName.trainer

    def layout(
        self, plan: Plan, strategy: Strategy, tensors: tuple[TrainableTensor, ...]
    ) -> Layout:
        width = plan.precision.weight_bytes  # the dtype the model was loaded in
        if plan.method is Method.full:
            return pure_layout(plan, tensors, width)
        return peft_layout(plan, tensors, width, adapter_bytes(plan))

    def setup(self, plan: Plan) -> Setup:
        autocast = plan.precision is not Precision.fp32  # bf16=True: accelerate's autocast
        lora = plan.method is not Method.full
        fp32_stream = plan.precision is Precision.bf16_autocast or (
            plan.method is Method.qlora and plan.qlora_upcast
        )
        arch = plan.model.architecture
        own = replace(
            activation_setup(plan),
            compute_bytes=2 if autocast else 4,
            residual_bytes=4 if fp32_stream or not autocast else 2,
            # fp32 stream, bf16 matmuls: each trained linear keeps its own bf16 cast of the
            # fp32 norm output (autocast casts per op; memtui measure --stack trainer)
            input_casts=frozenset(lin.role for lin in arch.linear_layers)
            if autocast and fp32_stream and not lora
            else frozenset(),
            # fp32 adapters: their own copy of each input, which autocast makes bf16 again
            # (adapters in a bf16 base's dtype share the base layer's input)
            adapter_input_bytes=2 if lora and autocast and adapter_bytes(plan) == 4 else 0,
            # PEFT's fp32 adapters over bf16 matmuls: the MLP's bf16 product is cast to fp32
            adapter_cast_bytes=4 if lora and autocast and adapter_bytes(plan) == 4 else 0,
            adapter_output_bytes=2 if autocast else 4,
            batch_labels=True,
            head_keeps_input=fused_lm_head(plan),
        )
        return transformers_model(plan, own)

    def transient(
        self, plan: Plan, strategy: Strategy, state: StaticState, setup: Setup
    ) -> Transient:
        buckets = state.gradients if plan.hardware.gpus > 1 else 0
        copies = autocast_weight_copies(plan, setup, peft=True)
        dequant = dequantized_weight(plan)
        step, why = optimizer_temporaries(
            plan, strategy, state, plan.precision.weight_bytes, fused=trainer_fused_adamw(plan)
        )
        parts = [f"DDP gradient buckets {buckets / 1e9:.2f} GB" if buckets else "one GPU"]
        if copies:
            parts.append(f"autocast's bf16 weight copies {copies / 1e9:.2f} GB")
        if dequant:
            parts.append(f"a dequantized 4-bit weight {dequant / 1e9:.2f} GB")
        detail = ", ".join(parts)
        return Transient(buckets, copies + dequant, step, f"{detail}; optimizer step: {why}")

    def sources(self, plan: Plan, breakdown: Breakdown) -> Mapping[TermKind, str]:
        out = dict(GENERIC.sources(plan, breakdown))
        loaded = {
            Precision.bf16: "loaded in bf16, bf16=True (autocast)",
            Precision.bf16_autocast: "loaded in fp32, bf16=True (autocast)",
            Precision.fp32: "fp32",
        }[plan.precision]
        adapters = (
            ""
            if plan.method is Method.full
            else "; PEFT adapters in "
            + ("fp32" if adapter_bytes(plan) == 4 else "the base's dtype")
        )
        out[TermKind.weights] = f"model {loaded}{adapters}"
        out[TermKind.master_weights] = "none: the optimizer steps the model's own parameters"
        out[TermKind.optimizer_states] = (
            f"{plan.optimizer.value} (adamw: "
            f"{'adamw_torch_fused' if trainer_fused_adamw(plan) else 'adamw_torch'}), "
            "moments in the parameters' dtype"
        )
        return out


TRAINER = TrainerStack()
