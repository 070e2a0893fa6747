"""What a transformers model and PEFT's k-bit preparation do to a step, by version: the
stacks that train a transformers model (generic, trainer, fsdp1, fsdp2, deepspeed) lay these
rules over their own setup.

- The logits the model returns: LlamaForCausalLM.forward (and Mistral's, Qwen2's...) ran
  `logits = logits.float()` and returned the fp32 logits up to transformers 4.45 (read in
  4.37.2, 4.38.0 and 4.45.2: modeling_llama.py); 4.46.0 moved the upcast into the loss
  (loss/loss_utils.py ForCausalLMLoss), so the output holds the logits in the compute dtype.
  A loop that keeps the output through backward (`memtui.estimator.loops`) holds them beside
  the loss's buffers.
- The loss's shifted copy: up to 4.48 the shift is `logits[..., :-1, :].contiguous()` of the
  upcast logits (modeling_llama.py up to 4.45, ForCausalLMLoss 4.46.0-4.48.3), a copy alive at
  nll_loss_forward beside them; 4.49.0 pads the labels instead (nn.functional.pad) and shifts
  nothing.
- How LLaMA-style models (rotary: LLaMA and the families whose attention was copied from it)
  call SDPA, read in 4.39.3, 4.40.0, 4.44.2, 4.47.1, 4.48.3, 4.53.3, 4.54.0 and 4.56.0
  (modeling_llama.py, integrations/sdpa_attention.py): up to 4.39 LlamaModel._update_causal_mask
  builds an (s, s) causal mask even without padding and LlamaSdpaAttention passes it (4.40:
  None where _ignore_causal_mask_sdpa allows), and `query_states.contiguous()` only on CUDA
  with a mask (up to 4.47: the memory-efficient kernel, whose output needs no copy);
  4.48-4.55 sdpa_attention_forward calls `query.contiguous()` always (gone in 4.56); up to
  4.53 K and V are repeated to every query head (repeat_kv) before SDPA, 4.54 passes
  enable_gqa (use_gqa_in_sdpa); up to 4.43 each attention computes its own rotary cos and
  sin (4.44: once, in LlamaModel.forward).
- Full checkpointing's variant, read in 4.39.3, 4.48.3, 4.57.3, 5.0.0 and 5.24 (trainer.py,
  modeling_utils.py PreTrainedModel.gradient_checkpointing_enable): reentrant up to 4.57 (4.39's
  Trainer passes `gradient_checkpointing_kwargs` None as {}, so torch's own default applies,
  use_reentrant=True with a warning; 4.48-4.57 turn None into {"use_reentrant": True}),
  non-reentrant from 5.0.0 ({"use_reentrant": False}; huggingface/transformers#43203). Every
  loop that runs a transformers model checkpoints through it (Trainer's
  `gradient_checkpointing`, a hand-written loop's `model.gradient_checkpointing_enable()`);
  the generic stack's textbook step is non-reentrant.
- GPT-2's eager attention masks with its registered `bias` buffer up to 4.51 (read in 4.48.3,
  4.51.0): the model builds no (b, 1, s, s) mask, which full checkpointing would keep as every
  layer's input; 4.52.0 GPT2Model.forward builds one (_update_causal_mask), as 5.24 does.
- PEFT's prepare_model_for_kbit_training (utils/other.py) casts every non-quantized parameter
  to fp32, the embeddings and norms included, and bitsandbytes' Linear4bit.forward returns its
  input's dtype, so a QLoRA model's residual stream is fp32 (`Plan.qlora_upcast`, on unless
  the job skips the preparation).
"""

from __future__ import annotations

from dataclasses import replace

from memtui.estimator.activations import Setup
from memtui.estimator.choices import Attention, Checkpointing, CheckpointVariant, LossKind, Method
from memtui.estimator.loops import TRANSFORMERS_LOOPS, keeps_output, loop_for
from memtui.estimator.plan import Plan
from memtui.estimator.versions import Package

FP32_OUTPUT_BEFORE = (4, 46)
"""transformers releases before this one return fp32 logits from the model's forward."""
SHIFTED_COPY_BEFORE = (4, 49)
"""transformers releases before this one take a shifted copy of the upcast logits."""
MASK_BEFORE = (4, 40)
"""transformers releases before this one hand SDPA a causal mask without padding."""
CONTIGUOUS_QUERY = ((4, 48), (4, 56))
"""transformers releases from the first to before the second make SDPA's query contiguous."""
GQA_IN_SDPA_FROM = (4, 54)
"""transformers releases before this one repeat K and V before SDPA."""
FUSED_ADAMW_FROM = {Package.transformers: (4, 54), Package.torch: (2, 8)}
"""Trainer's default optimizer is adamw_torch_fused from transformers 4.54 with torch 2.8 or
later (training_args.py TrainingArguments.default_optim, read in 4.53.3 and 4.54.0), before
adamw_torch: torch.optim.AdamW with its default foreach step on CUDA."""
ROTARY_ONCE_FROM = (4, 44)
"""transformers releases before this one compute rotary cos and sin in every attention."""
GPT2_CAUSAL_MASK_FROM = (4, 52)
"""transformers releases before this one build GPT-2 no eager causal mask (its `bias` buffer)."""
NON_REENTRANT_FROM = (5, 0)
"""transformers releases before this one checkpoint with the reentrant variant by default."""


def kbit_upcast(plan: Plan) -> bool:
    """Whether PEFT's k-bit preparation made the residual stream fp32."""
    return plan.method is Method.qlora and plan.qlora_upcast


def reentrant(plan: Plan) -> bool:
    """Whether the plan's full checkpointing runs torch's reentrant CheckpointFunction: as the
    plan says, else the default of the loop's transformers (`NON_REENTRANT_FROM`)."""
    if plan.checkpoint_variant is not CheckpointVariant.auto:
        return plan.checkpoint_variant is CheckpointVariant.reentrant
    return loop_for(plan.stack, plan.loop) in TRANSFORMERS_LOOPS and plan.versions.before(
        Package.transformers, NON_REENTRANT_FROM
    )


def checkpoint_note(plan: Plan) -> str | None:
    """The assumption line for the plan's checkpointing variant (None: no full checkpointing
    of a transformers model, nothing to say)."""
    if plan.checkpointing is not Checkpointing.full:
        return None
    given = plan.checkpoint_variant is not CheckpointVariant.auto
    if not given and loop_for(plan.stack, plan.loop) not in TRANSFORMERS_LOOPS:
        return None
    why = (
        "as given"
        if given
        else "gradient_checkpointing_enable's default, reentrant before transformers 5.0"
    )
    if reentrant(plan):
        return (
            f"full checkpointing is reentrant ({why}): torch.utils.checkpoint's "
            "CheckpointFunction rebuilds each layer whole and holds its output through the "
            "layer's backward; a frozen base needs enable_input_require_grads"
        )
    return f"full checkpointing is non-reentrant ({why})"


def transformers_model(plan: Plan, setup: Setup) -> Setup:
    """`setup` with the residual stream, the model's logits, the loss's copies and the logits
    the loop keeps as the plan's transformers, PEFT and loop make them."""
    if kbit_upcast(plan):
        setup = replace(setup, residual_bytes=4)
    if setup.checkpointing is Checkpointing.full and reentrant(plan):
        setup = replace(setup, reentrant_checkpoint=True)
    versions = plan.versions
    if plan.model.architecture.model_type == "gpt2" and versions.before(
        Package.transformers, GPT2_CAUSAL_MASK_FROM
    ):
        setup = replace(setup, eager_causal_mask=False)
    if plan.model.architecture.rotary:
        setup = _llama_attention(plan, setup)
    if setup.loss is not LossKind.full:  # a chunked or fused loss is not the model's own
        return setup
    fp32_output = versions.before(Package.transformers, FP32_OUTPUT_BEFORE)
    output = 4 if fp32_output else setup.compute_bytes
    kept = output if keeps_output(plan.stack, plan.loop, plan.loop_keeps_output) else 0
    return replace(
        setup,
        output_logits_bytes=output,
        shifted_logits_copy=versions.before(Package.transformers, SHIFTED_COPY_BEFORE),
        kept_logits_bytes=kept,
    )


def trainer_fused_adamw(plan: Plan) -> bool:
    """Whether Trainer's default AdamW is the fused one for the plan's versions."""
    return not any(plan.versions.before(p, v) for p, v in FUSED_ADAMW_FROM.items())


def _llama_attention(plan: Plan, setup: Setup) -> Setup:
    """`setup` with a LLaMA-style model's SDPA call as the plan's transformers makes it."""
    versions = plan.versions
    mask = versions.before(Package.transformers, MASK_BEFORE)
    first, end = CONTIGUOUS_QUERY
    contiguous = versions.before(Package.transformers, end) and not versions.before(
        Package.transformers, first
    )
    sdpa = setup.attention is Attention.flash
    return replace(
        setup,
        sdpa_repeats_kv=sdpa and versions.before(Package.transformers, GQA_IN_SDPA_FROM),
        sdpa_output_copy=sdpa and contiguous,
        sdpa_causal_mask=sdpa and mask,
        rotary_per_layer=versions.before(Package.transformers, ROTARY_ONCE_FROM),
    )
