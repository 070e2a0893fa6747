"""bf16 copies that torch.autocast makes of fp32 weights, shared by the stacks that run fp32
weights under autocast: Trainer + accelerate, LitGPT's bf16-mixed and a generic bf16-autocast
plan."""

from __future__ import annotations

from memtui.estimator.activations import MomentBytes, Setup, buffers_beyond
from memtui.estimator.choices import Checkpointing, Method, Precision
from memtui.estimator.plan import Plan
from memtui.estimator.state import parameters_of, split_saved, trainable_tensors


def _matmul_parameters(plan: Plan) -> tuple[float, float]:
    """(a decoder layer's, the lm_head's) parameters that matmuls read: the linears' weights
    and biases, which autocast casts (norm weights and embeddings are not autocast ops)."""
    arch = plan.model.architecture
    scale = plan.model.parameters / arch.parameter_count / plan.tp
    linears = sum((lin.d_in * lin.d_out + lin.d_out * lin.bias) * lin.count
                  for lin in arch.linear_layers)  # fmt: skip
    return linears / arch.num_layers * scale, arch.vocab_size * arch.hidden_size * scale


def autocast_weight_copies(plan: Plan, setup: Setup, peft: bool) -> int:
    """bf16 copies of fp32 weights that autocast makes, at the step's worst moment.

    Autocast casts an fp32 weight for every matmul (aten/src/ATen/autocast_mode.h
    cached_cast). The copy of a trainable leaf (a full fine-tune's weights, PEFT's fp32
    adapters) is cached until autocast exits, at the end of the wrapped forward (torch/amp/
    autocast_mode.py autocast.__exit__ clears the cache); a frozen weight's copy (the fp32
    base under LoRA) is made per use. Either is saved for backward by its matmul when the
    input needs a gradient. Without checkpointing every copy is saved until its layer's
    backward. With checkpointing, the loss's backward holds the lm_head's copy (saved by its
    matmul), a layer's backward that layer's copies (made again by the recomputation, under
    its own autocast), and the forward's end every cached copy (measured by `memtui measure
    --stack trainer`); `buffers_beyond` picks the worst. QLoRA's 4-bit linears are dequantized
    instead (`dequantized_weight`); only its fp32-upcast lm_head is copied. Every stack that
    runs fp32 weights under torch.autocast pays this: Trainer with bf16=True, LitGPT's
    bf16-mixed (Fabric's MixedPrecision.forward_context), a generic bf16-autocast plan;
    `peft`: PEFT's conventions hold (adapters in fp32 whatever the base; under QLoRA,
    prepare_model_for_kbit_training's fp32 upcast of the lm_head when `qlora_upcast`)."""
    if plan.precision is Precision.fp32:
        return 0
    arch = plan.model.architecture
    if plan.method is Method.qlora:
        upcast = (peft and plan.qlora_upcast) or plan.precision is Precision.bf16_autocast
        return round(2 * _matmul_parameters(plan)[1]) if upcast else 0
    base = 1 if plan.precision is Precision.bf16_autocast else 0  # fp32 base weights
    adapters = 0.0
    if plan.method is not Method.full and (peft or base):
        # fp32 adapters (PEFT's, or any under an fp32 base); a modules_to_save copy keeps
        # the base dtype and stands in for the module it copies, whose cast the base's count
        # already has
        adapters = parameters_of(split_saved(plan, trainable_tensors(plan))[0])
    if not base and not adapters:
        return 0  # bf16 weights (bf16-mixed, bf16-true): autocast has nothing to cast
    layer, head = _matmul_parameters(plan)
    head_copy = 2 * base * head
    if plan.checkpointing is Checkpointing.none:
        every = 2 * base * arch.num_layers * layer + head_copy + 2 * adapters
        moments = MomentBytes(
            loss_backward=every,
            forward_end=every,
            lm_head_backward=every,
            layer_backward=every - head_copy,
        )
    else:
        full = plan.method is Method.full
        cached = 2 * base * arch.num_layers * layer + head_copy if full else 2 * adapters
        moments = MomentBytes(
            loss_backward=head_copy,
            forward_end=cached + (0 if full else head_copy),
            lm_head_backward=head_copy,
            layer_backward=2 * (base * layer + adapters / arch.num_layers),
        )
    copies, _ = buffers_beyond(arch, setup, plan.seq_len, plan.micro_batch, moments)
    return copies
