"""Activation memory: the tensors each layer saves for backward, and the logits.

Every constant lives here, as a list of saved tensors per layer, so a measurement that
disagrees (see `memtui measure`) is corrected in one place. Sizes are per token (x s x b) or
per token x sequence (x s^2 x b, the attention scores), in elements of a given dtype.

GPT-style layers (plain MLP, LayerNorm, dropout): Korthikanti et al. 2022, "Reducing
Activation Recomputation in Large Transformer Models", sec. 4.1 and Table 2:
sbh(34 + 5as/h) bytes per layer with 16-bit activations and 1-byte dropout masks.
LLaMA-style layers (gated MLP, RMSNorm, rotary, GQA, no dropout): derived the same way from
what Hugging Face's modeling code saves (see each entry).
"""

from __future__ import annotations

from dataclasses import dataclass

from memtui.estimator.architecture import Architecture
from memtui.estimator.plan import Attention, Checkpointing, Precision

ACT, FP32, MASK = "act", "fp32", "mask"


@dataclass(frozen=True)
class Saved:
    """One tensor saved for backward: `per_token` elements x s x b, `per_token_seq` x s^2 x b."""

    what: str
    per_token: int = 0
    per_token_seq: int = 0
    dtype: str = ACT
    for_weights: frozenset[str] = frozenset()
    """Roles of the linear layers that save it only to compute their weight gradient: when
    all of them are frozen (LoRA/QLoRA base), autograd does not keep it."""
    core: bool = False
    """Saved inside the attention core (scores, probabilities, the fused kernel's output and
    log-sum-exp): selective recomputation rebuilds these from Q, K and V in backward."""


def _w(*roles: str) -> frozenset[str]:
    return frozenset(roles)


def _gpt_layer(arch: Architecture, attention: Attention) -> list[Saved]:
    """Korthikanti et al. 2022 sec. 4.1, generalised to GQA widths and MLP width f."""
    h, a, f = arch.hidden_size, arch.num_heads, arch.intermediate_size
    qw, kvw = arch.q_width, arch.kv_width
    saved = [
        Saved("layer norm inputs", per_token=arch.norms_per_layer * h),  # 4sbh for two norms
        Saved("QKV input", per_token=h, for_weights=_w("q", "k", "v", "qkv")),  # 2sbh
        Saved("Q and K", per_token=qw + kvw),  # 4sbh
        Saved("V", per_token=kvw),  # 2sbh
        Saved("projection input", per_token=qw, for_weights=_w("o")),  # 2sbh
        Saved("attention output dropout mask", per_token=h, dtype=MASK),  # sbh
        Saved("MLP input", per_token=h, for_weights=_w("fc_in")),  # 2sbh
        Saved("GeLU input", per_token=f),  # 8sbh when f = 4h
        Saved("GeLU output", per_token=f, for_weights=_w("fc_out")),  # 8sbh
        Saved("MLP dropout mask", per_token=h, dtype=MASK),  # sbh
    ]
    if attention is Attention.eager:
        saved += [
            Saved("softmax output", per_token_seq=a, core=True),  # 2as^2b
            Saved("attention dropout mask", per_token_seq=a, dtype=MASK, core=True),  # as^2b
            Saved("attention dropout output", per_token_seq=a, core=True),  # 2as^2b
        ]
    else:
        # FlashAttention keeps only its output (the projection input) and the fp32
        # log-sum-exp per head and row (Dao et al. 2022, Algorithm 2); no s x s scores.
        saved.append(Saved("attention log-sum-exp", per_token=a, dtype=FP32, core=True))
    return saved


def _gated_mlp(arch: Architecture) -> list[Saved]:
    """SwiGLU/GeGLU MLP as LlamaMLP computes down(act(gate(x)) * up(x))."""
    h, f = arch.hidden_size, arch.intermediate_size
    if arch.moe_layer_count:
        return _moe_mlp(arch)
    return [
        Saved("MLP input (norm output)", per_token=h, for_weights=_w("gate", "up", "gate_up")),
        Saved("gate output (activation input)", per_token=f),
        Saved("activation output", per_token=f),
        Saved("up output", per_token=f),
        Saved("down input", per_token=f, for_weights=_w("down")),
    ]


def _moe_mlp(arch: Architecture) -> list[Saved]:
    """Top-k routed experts (Mixtral, Qwen2-MoE): each token passes through k expert MLPs."""
    h, k, e, fe = arch.hidden_size, arch.experts_per_token, arch.num_experts, arch.expert_width
    saved = [
        Saved("router input", per_token=h, for_weights=_w("router")),
        Saved("router probabilities", per_token=e, dtype=FP32),
        Saved(
            "expert inputs (gathered tokens)",
            per_token=k * h,
            for_weights=_w("expert_gate", "expert_up"),
        ),
        Saved("expert gate outputs", per_token=k * fe),
        Saved("expert activation outputs", per_token=k * fe),
        Saved("expert up outputs", per_token=k * fe),
        Saved("expert down inputs", per_token=k * fe, for_weights=_w("expert_down")),
        Saved("expert outputs (for routing weights)", per_token=k * h),
    ]
    fs = arch.shared_expert_intermediate_size
    if fs:
        saved += [
            Saved("shared expert activations", per_token=4 * fs),
            Saved("shared expert gate input", per_token=h),
        ]
    return saved


def _gated_layer(arch: Architecture, attention: Attention) -> list[Saved]:
    """LLaMA-style layer as Hugging Face's LlamaDecoderLayer saves it (no dropout)."""
    h, a = arch.hidden_size, arch.num_heads
    qw, kvw = arch.q_width, arch.kv_width
    saved = [
        # RMSNorm saves its input and the fp32 reciprocal RMS per token.
        Saved("norm inputs", per_token=arch.norms_per_layer * h),
        Saved("norm 1/rms", per_token=arch.norms_per_layer, dtype=FP32),
        Saved("QKV input (norm output)", per_token=h, for_weights=_w("q", "k", "v", "qkv")),
        Saved("query after rotary", per_token=qw),
        Saved("o_proj input", per_token=qw, for_weights=_w("o")),
    ]
    if attention is Attention.eager:
        saved += [
            # eager_attention_forward: repeat_kv copies K and V to every query head.
            Saved("key, repeated to all heads", per_token=qw),
            Saved("value, repeated to all heads", per_token=qw),
            # softmax runs in fp32 and keeps its output; the bf16 cast feeds P @ V.
            Saved("softmax output (fp32)", per_token_seq=a, dtype=FP32, core=True),
            Saved("attention probabilities", per_token_seq=a, core=True),
        ]
    else:
        saved += [
            # SDPA / FlashAttention-2 keep K and V at their GQA width, the output, and the
            # fp32 log-sum-exp; the transpose before o_proj makes a contiguous copy.
            Saved("key", per_token=kvw),
            Saved("value", per_token=kvw),
            Saved("attention output", per_token=qw, core=True),
            Saved("attention log-sum-exp", per_token=a, dtype=FP32, core=True),
        ]
    return saved + _gated_mlp(arch)


def layer_saved(arch: Architecture, attention: Attention) -> list[Saved]:
    """What one decoder layer saves for backward with no recomputation."""
    if arch.mlp_kind == "plain":
        return _gpt_layer(arch, attention)
    return _gated_layer(arch, attention)


def _dtype_bytes(dtype: str, precision: Precision) -> int:
    if dtype == MASK:
        return 1
    if dtype == FP32 or precision is Precision.fp32:
        return 4
    return 2


def _bytes(
    saved: list[Saved], s: int, b: int, precision: Precision, trainable_roles: frozenset[str] | None
) -> int:
    total = 0
    for item in saved:
        if (
            trainable_roles is not None
            and item.for_weights
            and not (item.for_weights & trainable_roles)
        ):
            continue
        elements = item.per_token * s * b + item.per_token_seq * s * s * b
        total += elements * _dtype_bytes(item.dtype, precision)
    return total


def activation_bytes(
    arch: Architecture,
    *,
    seq_len: int,
    micro_batch: int,
    attention: Attention,
    checkpointing: Checkpointing,
    precision: Precision,
    tp: int = 1,
    trainable_roles: frozenset[str] | None = None,
) -> int:
    """Peak bytes of saved activations per GPU for one micro-batch.

    `trainable_roles` None means every weight trains (full fine-tune); otherwise only the
    linear roles with adapters keep their inputs. Tensor parallelism with sequence parallelism
    divides everything by t (Korthikanti et al. Table 2).
    """
    s, b, layers = seq_len, micro_batch, arch.num_layers
    saved = layer_saved(arch, attention)
    if checkpointing is Checkpointing.selective:
        # Selective recomputation keeps Q, K, V and rebuilds the attention core (all of its
        # s^2 terms, or the fused kernel's output) in backward (Korthikanti sec. 5).
        saved = [item for item in saved if not item.core]
    one_layer = _bytes(saved, s, b, precision, trainable_roles)
    layer_input = _bytes([Saved("layer input", per_token=arch.hidden_size)], s, b, precision, None)
    if checkpointing is Checkpointing.full:
        # Full checkpointing keeps each layer's input, then rebuilds one layer at a time; the
        # layer being rebuilt saves its input anyway (its first norm's input), so that one
        # checkpoint is not counted twice.
        total = (layers - 1) * layer_input + one_layer
    else:
        total = layers * one_layer
    # After the last layer: the final norm's input and the lm_head's input.
    head_roles = None if trainable_roles is None else trainable_roles | {"norm"}
    tail = [
        Saved("final norm input", per_token=arch.hidden_size),
        Saved("lm_head input", per_token=arch.hidden_size, for_weights=_w("lm_head")),
    ]
    total += _bytes(tail, s, b, precision, head_roles)
    return -(-total // tp)


def logits_bytes(
    arch: Architecture, *, seq_len: int, micro_batch: int, precision: Precision, tp: int = 1
) -> int:
    """Logits and the causal-LM loss: b s V in the activation dtype, the fp32 upcast that
    transformers' ForCausalLMLoss makes (kept by log_softmax) and its fp32 gradient."""
    act = 4 if precision is Precision.fp32 else 2
    per_element = act + 4 + 4
    return -(-(seq_len * micro_batch * arch.vocab_size * per_element) // tp)
