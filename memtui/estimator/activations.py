"""Activation memory: the tensors each layer saves for backward, and the logits and loss.

Every constant lives here, as a list of saved tensors per layer, so a measurement that
disagrees (`memtui measure`, `benchmarks/accuracy.py`) is corrected in one place. Sizes are
elements per token (x s x b), per position (x s, shared by the batch) or per token x sequence
(x s^2 x b, the attention scores), each in a dtype: the activation dtype (2 bytes in bf16,
4 in fp32), fp32, int64 or a 1-byte mask.

Sources. GPT-style layers: Korthikanti et al. 2022, "Reducing Activation Recomputation in Large
Transformer Models", sec. 4.1 and Table 2 (sbh(34 + 5as/h) with 16-bit activations and 1-byte
dropout masks), with HF's GPT-2 GELU and LayerNorm statistics added. LLaMA-style layers:
derived from what transformers' modeling_llama.py saves (LlamaRMSNorm, LlamaAttention with
sdpa_attention_forward / eager_attention_forward, LlamaMLP) and checked, tensor by tensor,
against a real PyTorch step on CPU with `memtui measure` (tests/test_measure_accuracy.py).
Saved tensors are counted once per storage: views (q, k, v of a fused projection, a reshape
before a linear) and tensors saved by two ops (a norm output feeding q, k and v) count once.

The closed forms these lists add up to, in bytes per token per layer with bf16 activations
(h hidden, f MLP width, a heads, qw = a d and kvw = kv d the query and key/value widths,
s the sequence; multiply by s b):
- LLaMA, SDPA: 2 norms x (4h fp32 upcast + 4 for 1/rms + 2h normalized) + 2h QKV input
  + 2(qw + 2 kvw) q, k, v + 2qw output (= o_proj input) + 4a log-sum-exp + 2h MLP input
  + 8f (gate output, SiLU output, up output, down input) = 16h + 4qw + 4kvw + 8f + 4a + 8.
- LLaMA, eager: the attention part becomes 2qw each for q, the repeated k and v and the
  o_proj input, + 4as fp32 softmax output + 2as probabilities = 16h + 8qw + 8f + 6as + 8.
- GPT-2 (Korthikanti generalised): 2 LayerNorms x (2h + 8) + 2h QKV input + 2(qw + 2 kvw)
  + 2qw projection input + 2 x 1-byte dropout masks (h each) + 2h MLP input + 2f x (1 + k)
  with k the activation's own saves (1 for a fused GELU, 4 for HF's Python gelu_new)
  + eager 5as / flash 4a: with f = 4h and k = 1, 34h + 16 + 5as (Korthikanti Table 2).
- Full checkpointing: 2h per layer (its input); selective: the layer without its attention
  core. Backward then rebuilds one layer (or core) at a time, and its gradient buffers
  (`_attention_backward`, `_mlp_backward`) add to the peak only beyond the loss's buffers.
- Logits and loss: 12 bytes per logit, b s V (`LOSS_FP32_BUFFERS_AT_PEAK`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from memtui.estimator.architecture import Architecture
from memtui.estimator.choices import Attention, Checkpointing, Precision
from memtui.estimator.memo import memoised

ACT, FP32, MASK, INT64 = "act", "fp32", "mask", "int64"


@dataclass(frozen=True)
class Saved:
    """One tensor saved for backward: per_token x s x b + per_position x s + per_token_seq x
    s^2 x b elements."""

    what: str
    per_token: int = 0
    per_token_seq: int = 0
    per_position: int = 0
    dtype: str = ACT
    for_weights: frozenset[str] = frozenset()
    """Roles of the weights that need it only for their own gradient (linear inputs, the
    normalized tensor a norm weight multiplies): when all of them are frozen (LoRA/QLoRA
    base), autograd does not keep it."""


def _w(*roles: str) -> frozenset[str]:
    return frozenset(roles)


def _norm(arch: Architecture, what: str, width: int, count: int = 1) -> list[Saved]:
    """What one norm keeps (count of them, each of `width`)."""
    if arch.norm_kind == "layernorm":
        # aten.native_layer_norm keeps its input and fp32 mean and 1/std per row (CUDA keeps
        # the statistics in fp32 for 16-bit inputs; CPU keeps them in the input dtype).
        return [
            Saved(f"{what} input", per_token=count * width),
            Saved(f"{what} mean and 1/std", per_token=2 * count, dtype=FP32),
        ]
    # LlamaRMSNorm: pow(2) keeps the fp32 upcast x, rsqrt keeps 1/rms (fp32, one per row),
    # x * rsqrt keeps both, and weight * y keeps y (in the activation dtype) for the weight's
    # gradient only. Gemma keeps y in fp32 (it multiplies by 1 + weight in fp32).
    normalized = FP32 if arch.norm_output_fp32 else ACT
    return [
        Saved(f"{what} input upcast to fp32", per_token=count * width, dtype=FP32),
        Saved(f"{what} 1/rms", per_token=count, dtype=FP32),
        Saved(
            f"{what} normalized", per_token=count * width, dtype=normalized, for_weights=_w("norm")
        ),
    ]


def _attention_core(arch: Architecture, attention: Attention) -> tuple[list[Saved], list[Saved]]:
    """Tensors the attention function keeps, from q, k, v (after rotary) to its output, in
    forward order: (up to the softmax, what the ops after the softmax keep)."""
    a, qw, kvw = arch.num_heads, arch.q_width, arch.kv_width
    if attention is Attention.flash:
        return _flash_core(arch), []
    # eager_attention_forward: matmul(q, repeat_kv(k)^T) keeps q and the repeated k (the
    # reshape to 3-D copies them), softmax keeps its output, the cast to the activation dtype
    # feeds matmul(p, repeat_kv(v)), which keeps p and the repeated v. Without rotary (GPT-2,
    # OPT) q, k, v are views of the projection output, which bmm keeps as they are: the whole
    # output (measured). GPT-2 and Falcon softmax in the activation dtype, the others in fp32.
    # Dropout p > 0 keeps a 1-byte mask and its output (Korthikanti: 2as^2b + as^2b + 2as^2b).
    if arch.rotary:
        before = [
            Saved("query", per_token=qw),
            Saved("key, repeated to every query head", per_token=qw),
        ]
        after = [Saved("value, repeated to every query head", per_token=qw)]
    else:
        before = [Saved("q, k, v (projection output, kept by their views)", per_token=qw + 2 * kvw)]
        after = []
    if arch.attn_softcap:  # Gemma 2: cap * tanh(scores / cap) keeps the tanh output
        before.append(Saved("soft-capped scores (tanh output)", per_token_seq=a))
    fp32 = arch.eager_softmax_fp32
    before.append(Saved("softmax output", per_token_seq=a, dtype=FP32 if fp32 else ACT))
    if arch.attention_dropout:
        after += [
            Saved("attention dropout mask", per_token_seq=a, dtype=MASK),
            Saved("attention dropout output", per_token_seq=a),
        ]
    elif fp32:
        after.append(Saved("attention probabilities (cast)", per_token_seq=a))
    return before, after


def _flash_core(arch: Architecture) -> list[Saved]:
    """SDPA's flash kernel (CUDA's FlashAttention-2 and CPU's flash kernel alike) keeps q, k,
    v at their GQA widths (transformers passes enable_gqa when no mask is given), its output,
    and the fp32 log-sum-exp per head and row (Dao 2023, Algorithm 2). The output is laid out
    (b, s, a, d), so the transpose before o_proj needs no copy: o_proj's input is it."""
    a, qw, kvw = arch.num_heads, arch.q_width, arch.kv_width
    if arch.fused_qkv and arch.rotary:
        # A fused qkv_proj (Phi-3, GPT-NeoX): rotary makes new q and k, but v stays a view of
        # the projection output, so the whole output stays alive with it.
        qkv = [Saved("query, key (after rotary)", per_token=qw + kvw),
               Saved("q, k, v (fused projection output, kept by the v view)",
                     per_token=qw + 2 * kvw)]  # fmt: skip
    else:
        qkv = [Saved("query, key, value", per_token=qw + 2 * kvw)]
    return [
        *qkv,
        Saved("attention output (= o_proj input)", per_token=qw),
        Saved("attention log-sum-exp", per_token=a, dtype=FP32),
    ]


def _mlp(arch: Architecture) -> list[Saved]:
    h, f = arch.hidden_size, arch.intermediate_size
    if arch.mlp_kind == "plain":
        k = arch.activation_saves
        saved = [Saved("MLP input (norm output)", per_token=h, for_weights=_w("fc_in"))]
        if k:
            saved.append(Saved("activation intermediates", per_token=k * f))
        return [
            *saved,
            Saved("activation output (fc_out input)", per_token=f, for_weights=_w("fc_out")),
        ]
    if arch.moe_layer_count:
        return _moe_mlp(arch)
    # LlamaMLP: down(act(gate(x)) * up(x)). gate and up keep x; SiLU keeps its input (the gate
    # output); the product keeps both factors; down keeps the product: h + 4f.
    return [
        Saved("MLP input (norm output)", per_token=h, for_weights=_w("gate", "up", "gate_up")),
        Saved("gate output (activation input)", per_token=f),
        Saved("activation output", per_token=f),
        Saved("up output", per_token=f),
        Saved("down input", per_token=f, for_weights=_w("down")),
    ]


def _moe_mlp(arch: Architecture) -> list[Saved]:
    """Top-k routed experts (Mixtral, Qwen2-MoE): each token passes through k expert MLPs.
    Not yet checked against a measurement (see docs/accuracy.md)."""
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


def _attention_parts(
    arch: Architecture, attention: Attention, selective: bool
) -> tuple[list[Saved], list[Saved]]:
    """The attention sub-layer after its norm, split where backward meets the attention core:
    (projection inputs and the core's tensors, what comes after the core)."""
    h, a, qw, kvw = arch.hidden_size, arch.num_heads, arch.q_width, arch.kv_width
    upto = [Saved("QKV input (norm output)", per_token=h, for_weights=_w("q", "k", "v", "qkv"))]
    if arch.qk_norm == "per_head":  # Qwen3: an RMSNorm of head_dim on every q and k head
        upto += [
            Saved("q/k norm inputs upcast to fp32", per_token=qw + kvw, dtype=FP32),
            Saved("q/k norm 1/rms", per_token=a + arch.kv_heads, dtype=FP32),
            Saved("q/k normalized", per_token=qw + kvw, for_weights=_w("norm")),
        ]
    after: list[Saved] = []
    if selective:
        # The attention core runs under torch.utils.checkpoint: only its inputs (q, k, v at
        # their projection widths) and its output (o_proj's input) stay.
        upto.append(Saved("query, key, value (checkpoint inputs)", per_token=qw + 2 * kvw))
        after.append(Saved("attention output (o_proj input)", per_token=qw, for_weights=_w("o")))
    else:
        before, behind = _attention_core(arch, attention)
        upto += before + behind
        if attention is Attention.eager:
            after.append(Saved("o_proj input (transposed copy)", per_token=qw, for_weights=_w("o")))
    if arch.residual_dropout:
        after.append(Saved("attention residual dropout mask", per_token=h, dtype=MASK))
    return upto, after


def _layer_parts(
    arch: Architecture, attention: Attention, checkpointing: Checkpointing
) -> tuple[list[Saved], list[Saved]]:
    """One layer's saved tensors in forward order, split after the attention core."""
    h = arch.hidden_size
    upto, after = _attention_parts(arch, attention, checkpointing is Checkpointing.selective)
    extra_norms = max(0, arch.norms_per_layer - 2)  # Gemma 2's post-attention/post-MLP norms
    mlp = _mlp(arch)
    if not arch.parallel_residual:
        after += _norm(arch, "MLP norm", h)
    elif arch.norms_per_layer >= 2:  # its own norm, whose input is the attention norm's input
        after += [item for item in _norm(arch, "MLP norm", h) if item.what != "MLP norm input"]
    else:  # one norm feeds both (Falcon-7B): the MLP's input is the QKV input, kept once
        mlp = mlp[1:]
    if extra_norms:
        after += _norm(arch, "extra norms", h, count=extra_norms)
    if arch.residual_dropout:
        mlp.append(Saved("MLP residual dropout mask", per_token=h, dtype=MASK))
    return [*_norm(arch, "attention norm", h), *upto], [*after, *mlp]


@memoised  # pure in its arguments; called for every plan the levers and search try
def layer_saved(
    arch: Architecture, attention: Attention, checkpointing: Checkpointing = Checkpointing.none
) -> tuple[Saved, ...]:
    """What one decoder layer keeps for backward through the forward pass."""
    if checkpointing is Checkpointing.full:
        # Non-reentrant torch.utils.checkpoint keeps the layer's inputs (the hidden states;
        # the rotary cos/sin are shared by all layers and counted once in the tail).
        return (Saved("layer input", per_token=arch.hidden_size),)
    upto, after = _layer_parts(arch, attention, checkpointing)
    return (*upto, *after)


def _attention_backward(arch: Architecture, attention: Attention) -> list[Saved]:
    """Gradient buffers alive at the attention core's backward, beyond its saved tensors."""
    a, qw, kvw = arch.num_heads, arch.q_width, arch.kv_width
    incoming = Saved("gradient of the attention output", per_token=arch.hidden_size)
    if attention is Attention.eager:
        if not arch.eager_softmax_fp32:
            # GPT-2: the probabilities' gradient, dropout's and softmax's, in the activation dtype.
            return [incoming, Saved("score gradients", per_token_seq=2 * a)]
        # The bf16 cast's backward makes an fp32 gradient of the scores; softmax's backward
        # makes another (fp32 opmath, cast to bf16 after): two fp32 s x s per head.
        return [incoming, Saved("fp32 score gradients", per_token_seq=2 * a, dtype=FP32)]
    # Flash backward: dq, dk, dv and an fp32 dq accumulator (FlashAttention-2's dq_accum).
    return [
        Saved("dq, dk, dv", per_token=qw + 2 * kvw),
        Saved("fp32 dq accumulator", per_token=qw, dtype=FP32),
    ]


def _freed_before_softmax_backward(arch: Architecture, attention: Attention) -> list[Saved]:
    """The eager core's tensors that backward frees before the softmax's backward (its worst
    moment): those the ops after the softmax keep."""
    return _attention_core(arch, attention)[1]


def _mlp_backward(arch: Architecture) -> list[Saved]:
    """Gradient buffers alive at the MLP's backward: the incoming gradient and two f-wide ones
    (the product's two factors for a gated MLP; the activation's input and output for a plain
    one)."""
    width = arch.expert_width * max(1, arch.experts_per_token)
    return [Saved("MLP gradients", per_token=arch.hidden_size + 2 * width)]


def _weight_gradient_elements(arch: Architecture) -> int:
    """Elements of an MoE layer's largest weight gradient: transformers (v5) stores the
    experts stacked, gate and up fused, as one (E, 2 f_e, h) parameter (MixtralExperts)."""
    return arch.num_experts * 2 * arch.expert_width * arch.hidden_size


def _layer_backward_peak(
    arch: Architecture,
    attention: Attention,
    checkpointing: Checkpointing,
    b: int,
    s: int,
    precision: Precision,
    roles: frozenset[str] | None,
) -> int:
    """The most one layer holds during its backward (its kept tensors included), at the MLP's
    backward (every saved tensor of the layer alive) or the attention core's (what comes after
    the core already freed). Under full checkpointing the layer is rebuilt first; under
    selective checkpointing its attention core is."""

    def size(items: Sequence[Saved]) -> int:
        return _bytes(items, s, b, precision, roles)

    kept = size(layer_saved(arch, attention, checkpointing))
    inner = Checkpointing.none if checkpointing is Checkpointing.full else checkpointing
    upto, after = _layer_parts(arch, attention, inner)
    rebuilt = size(upto + after) if checkpointing is Checkpointing.full else 0
    before, behind = _attention_core(arch, attention)
    core = before + behind
    rebuilt_core = size(core) if checkpointing is Checkpointing.selective else 0
    # The attention core is rebuilt (selective) only when backward reaches it, after the MLP.
    mlp = kept + rebuilt + size(_mlp_backward(arch))
    if roles is None and arch.moe_layer_count:
        # Accumulating into an existing .grad (every micro-batch after the first, or
        # zero_grad(set_to_none=False)), autograd first materialises the new gradient of a
        # weight, then adds it in place: a weight-sized temporary. It matters for the stacked
        # experts of an MoE layer (GBs); a dense layer's largest weight is small beside its
        # activations, and leaving it out keeps this term growing with b and s.
        mlp += _weight_gradient_elements(arch) * _dtype_bytes(ACT, precision)
    attn = (
        kept
        + rebuilt
        + rebuilt_core
        - size(after)
        - size(_freed_before_softmax_backward(arch, attention))
        + size(_attention_backward(arch, attention))
    )
    return max(mlp, attn)


@memoised
def _tail(arch: Architecture) -> tuple[tuple[Saved, ...], tuple[Saved, ...]]:
    """Outside the layers: (what lives through backward: token ids, rotary cos/sin; what the
    loss's and lm_head's backward free before the layers' backward: final norm, lm_head
    input, labels)."""
    h = arch.hidden_size
    # The batch's token ids: held by the training loop (the embedding keeps them too).
    kept = [Saved("token ids", per_token=1, dtype=INT64)]
    if arch.embedding_dropout:
        kept.append(Saved("embedding dropout mask", per_token=h, dtype=MASK))
    if arch.rotary:
        # LlamaRotaryEmbedding: cos and sin of (1, s, head_dim) in the activation dtype, built
        # once per forward from position ids of shape (1, s) and kept by every layer's rotary
        # (GPT-NeoX's partial rotary keeps no more: its rotary dims are at most head_dim).
        kept.append(Saved("rotary cos and sin", per_position=2 * arch.dim_head))
    freed = _norm(arch, "final norm", h) if arch.final_norm else []
    freed += [
        Saved("lm_head input", per_token=h, for_weights=_w("lm_head")),
        # ForCausalLMLoss pads and shifts the labels: one int64 per token kept by nll_loss.
        Saved("shifted labels", per_token=1, dtype=INT64),
    ]
    return tuple(kept), tuple(freed)


def _dtype_bytes(dtype: str, precision: Precision) -> int:
    if dtype == MASK:
        return 1
    if dtype == INT64:
        return 8
    if dtype == FP32 or precision is Precision.fp32:
        return 4
    return 2


def _bytes(
    saved: Sequence[Saved],
    s: int,
    b: int,
    precision: Precision,
    trainable_roles: frozenset[str] | None,
) -> int:
    total = 0
    for item in saved:
        if (
            trainable_roles is not None
            and item.for_weights
            and not item.for_weights & trainable_roles
        ):
            continue
        elements = item.per_token * s * b + item.per_position * s + item.per_token_seq * s * s * b
        total += elements * _dtype_bytes(item.dtype, precision)
    return total


@memoised  # the strategy table and the UI ask again for the same micro-batch
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
    lora_rank: int = 0,
) -> int:
    """Bytes the activations add to the step's peak per GPU for one micro-batch.

    That is every layer's saved tensors, the tail's, and what backward rebuilds for one layer
    at a time under recomputation, the last only where it exceeds the logits and loss
    buffers (`logits_bytes`): those are freed before the first layer's backward runs.
    `trainable_roles` None means every weight trains (full fine-tune); otherwise only the
    linear roles with adapters keep their inputs, each adapter keeps its r-wide A output
    (`lora_rank`), and the first norm, whose input needs no gradient, keeps nothing.
    Tensor parallelism with sequence parallelism divides everything by t (Korthikanti
    Table 2).
    """
    s, b, layers = seq_len, micro_batch, arch.num_layers
    roles = trainable_roles
    kept = _bytes(layer_saved(arch, attention, checkpointing), s, b, precision, roles)
    tail_kept, tail_freed = _tail(arch)
    tail = _bytes(tail_kept, s, b, precision, roles)
    freed = _bytes(tail_freed, s, b, precision, roles)
    if roles is not None:
        # PEFT's lora_B keeps lora_A's output (r per token) for every adapted linear.
        adapted = sum(1 for lin in arch.linear_layers if lin.role in roles and lin.count)
        adapter = adapted * lora_rank * s * b * _dtype_bytes(ACT, precision)
        if checkpointing is not Checkpointing.full:  # else rebuilt with the layer
            kept += adapter
        if checkpointing is not Checkpointing.full and arch.norms_per_layer:
            # The embedding is frozen: the first layer's first norm sees no gradient.
            first = _norm(arch, "first norm", arch.hidden_size)
            tail -= _bytes(first, s, b, precision, roles)
    tail += freed
    # The step's activation peak is either the loss's backward (every layer's kept tensors,
    # the tail, the logits buffers) or the last layer's backward (the tail and the logits
    # buffers freed by then, the layer's own worst moment instead): Korthikanti sec. 5 for
    # the rebuilt layer, the gradient buffers as measured.
    if attention is Attention.eager and checkpointing is Checkpointing.full:
        # The eager causal mask (b, 1, s, s) in the activation dtype is an input of every
        # checkpointed layer, so it lives until backward ends (measured).
        tail += _bytes([Saved("causal mask", per_token_seq=1)], s, b, precision, None)
    loss = logits_bytes(arch, seq_len=s, micro_batch=b, precision=precision)
    layer_peak = _layer_backward_peak(arch, attention, checkpointing, b, s, precision, roles)
    if roles is not None:
        layer_peak += adapter
    total = layers * kept + tail + max(0, layer_peak - kept - freed - loss)
    return -(-total // tp)


# The loss's buffers, in fp32 elements per logit, at their peak (the start of backward):
# transformers' ForCausalLMLoss upcasts the logits (logits.float()), cross_entropy's
# log_softmax keeps its fp32 output for backward; in backward nll_loss writes its gradient
# into a new fp32 b s V tensor and log_softmax's backward a third one. The forward holds less:
# bf16 logits + the fp32 upcast + the log-probs = 10 bytes per logit (fp32: the upcast is the
# logits themselves, 8).
LOSS_FP32_BUFFERS_AT_PEAK = 3


def logits_bytes(
    arch: Architecture, *, seq_len: int, micro_batch: int, precision: Precision, tp: int = 1
) -> int:
    """Peak bytes of the logits and the causal-LM loss: 3 x 4 bytes per logit (b s V) in
    bf16 and fp32 alike, measured (see LOSS_FP32_BUFFERS_AT_PEAK)."""
    per_logit = 4 * LOSS_FP32_BUFFERS_AT_PEAK
    if arch.logit_softcap:  # the final soft-cap's tanh output, in the activation dtype
        per_logit += 4 if precision is Precision.fp32 else 2
    return -(-(seq_len * micro_batch * arch.vocab_size * per_logit) // tp)
