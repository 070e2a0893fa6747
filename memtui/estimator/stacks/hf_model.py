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
- PEFT's prepare_model_for_kbit_training (utils/other.py) casts every non-quantized parameter
  to fp32, the embeddings and norms included, and bitsandbytes' Linear4bit.forward returns its
  input's dtype, so a QLoRA model's residual stream is fp32 (`Plan.qlora_upcast`, on unless
  the job skips the preparation).
"""

from __future__ import annotations

from dataclasses import replace

from memtui.estimator.activations import Setup
from memtui.estimator.choices import LossKind, Method
from memtui.estimator.loops import keeps_output
from memtui.estimator.plan import Plan
from memtui.estimator.versions import Package

FP32_OUTPUT_BEFORE = (4, 46)
"""transformers releases before this one return fp32 logits from the model's forward."""
SHIFTED_COPY_BEFORE = (4, 49)
"""transformers releases before this one take a shifted copy of the upcast logits."""


def kbit_upcast(plan: Plan) -> bool:
    """Whether PEFT's k-bit preparation made the residual stream fp32."""
    return plan.method is Method.qlora and plan.qlora_upcast


def transformers_model(plan: Plan, setup: Setup) -> Setup:
    """`setup` with the residual stream, the model's logits, the loss's copies and the logits
    the loop keeps as the plan's transformers, PEFT and loop make them."""
    if kbit_upcast(plan):
        setup = replace(setup, residual_bytes=4)
    if setup.loss is not LossKind.full:  # a chunked or fused loss is not the model's own
        return setup
    versions = plan.versions
    fp32_output = versions.before(Package.transformers, FP32_OUTPUT_BEFORE)
    output = 4 if fp32_output else setup.compute_bytes
    kept = output if keeps_output(plan.stack, plan.loop, plan.loop_keeps_output) else 0
    return replace(
        setup,
        output_logits_bytes=output,
        shifted_logits_copy=versions.before(Package.transformers, SHIFTED_COPY_BEFORE),
        kept_logits_bytes=kept,
    )
