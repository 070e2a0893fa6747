"""Activation memory: the tensors each layer saves for backward, and the logits and loss.

Every constant lives here, as a list of saved tensors per layer, so a measurement that
disagrees (`memtui measure`, `benchmarks/accuracy.py`) is corrected in one place. Sizes are
elements per token (x s x b), per position (x s, shared by the batch) or per token x sequence
(x s^2 x b, the attention scores), each in a dtype: the compute dtype of matmuls and
attention (2 bytes in bf16, 4 in fp32), the residual stream's dtype (fp32 under autocast with
fp32 weights, or after PEFT's k-bit preparation upcasts the embeddings), fp32, int64 or a
1-byte mask. How the stack runs the model (`Setup`) decides those widths and what LoRA
adapters keep.

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
- Logits and loss: 12 bytes per logit, b s V, with the fp32 upcast (`LOSS_BUFFERS_AT_PEAK`).

The step's peak falls at one of four `Moment`s: the loss's backward, the forward's end, the
lm_head's backward, a layer's backward. `_moments` sums what is alive at the loss's and the
last layer's backward (`_layer_backward_peak`: that layer's own worst moment, its MLP's or its
attention core's backward), which decide the activations term; `alive_at` adds the logits and
the loss at each moment, and a stack's buffers at each (a `MomentBytes`) go on top of the worst
(`buffers_beyond`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from enum import Enum

from memtui.estimator.architecture import (
    ATTENTION_ROLES,
    DELTA_RULE_CHUNK,
    LINEAR_ATTENTION_ROLES,
    Architecture,
    Role,
)
from memtui.estimator.capabilities import MEGATRON_TP, TensorParallelPlan
from memtui.estimator.choices import Attention, Checkpointing, LossKind
from memtui.estimator.memo import memoised
from memtui.estimator.units import ceil_div


class Dtype(Enum):
    """The dtype of a saved tensor: a width the stack's `Setup` decides, or a fixed one."""

    compute = "compute"
    """Matmuls, attention and MLP intermediates (`Setup.compute_bytes`)."""
    residual = "residual"
    """The residual stream, the norms around it, checkpointed inputs (`Setup.residual_bytes`)."""
    cast_from_fp32 = "cast from fp32"
    """A cast of an fp32 tensor to the compute dtype: a new tensor unless that dtype is fp32,
    where Tensor.to returns the tensor itself (already counted)."""
    fp32 = "fp32"
    int64 = "int64"
    mask = "mask"
    """A dropout mask: one byte per element."""


_FIXED_BYTES = {Dtype.fp32: 4, Dtype.int64: 8, Dtype.mask: 1}


class TpSplit(Enum):
    """How tensor parallelism splits a saved tensor over its ranks (`Setup.tp_plan`): the
    column-parallel q, k, v, gate, up and the row-parallel o, down shard the heads and the
    MLP width (torch distributed/tensor/parallel/style.py ColwiseParallel/RowwiseParallel,
    DeepSpeed module_inject/layers.py LinearLayer/LinearAllreduce, Megatron-LM
    ColumnParallelLinear/RowParallelLinear); what lies between them is whole on every rank
    unless sequence parallelism shards it along the sequence."""

    shard = "shard"
    """Head- or MLP-width-sharded (q, k, v, the attention core and output, the MLP's
    intermediates): split t ways under any tensor parallelism."""
    sequence = "sequence"
    """The residual stream and the norms on it: split along the sequence under sequence
    parallelism (Megatron's, torch SequenceParallel), whole otherwise."""
    gathered = "gathered"
    """A column-parallel linear's input (the norm outputs, the lm_head's input): whole unless
    sequence parallelism keeps its shard and gathers it again in backward
    (`TensorParallelPlan.saves_gathered_input`)."""
    whole = "whole"
    """On every rank whole: the batch (token ids, labels), the rotary cos/sin, masks over
    the sequence, the residual stream's gradient entering a row-parallel linear's backward
    (the all-gather that is the backward of its reduce-scatter, or the replicated gradient
    of its all-reduce), LoRA's r-wide outputs (not split here: counted whole)."""


@dataclass(frozen=True)
class Setup:
    """How a stack runs the model's forward and backward: what sizes each saved tensor."""

    attention: Attention
    checkpointing: Checkpointing
    compute_bytes: int = 2
    """Matmul inputs and outputs, attention tensors, MLP intermediates (`Dtype.compute`)."""
    residual_bytes: int = 2
    """The residual stream, the norms' inputs and outputs, checkpointed layer inputs
    (`Dtype.residual`)."""
    trainable_roles: frozenset[Role] | None = None
    """Linear roles whose weights (or adapters) train; None: every weight (full fine-tune)."""
    lora_rank: int = 0
    adapter_input_bytes: int = 0
    """Each adapted linear keeps its own copy of its input, this many bytes per element:
    PEFT casts the input to the adapter's dtype (fp32 by default) before lora_A, which saves
    the copy (bf16 again under autocast). 0: the adapter shares the base layer's input."""
    adapter_output_bytes: int = 2
    """Bytes per element of lora_A's output, which lora_B keeps."""
    adapter_dropout: bool = False
    """LoRA dropout p > 0: each adapted linear keeps a 1-byte mask and the dropped input."""
    frozen_linears_keep_inputs: bool = False
    """The frozen base linears keep their inputs anyway: bitsandbytes' MatMul4Bit before
    0.43.2 saved the input of every 4-bit linear (`ctx.tensors = (A, B)`; PR #1270
    "fix QLoRA mem bug: delete useless buffered activation" dropped it)."""
    parametrized_experts: bool = False
    """LoRA on stacked experts goes through PEFT's ParamWrapper (the plan's versions convert
    the family's expert targets: `memtui.estimator.architecture.ExpertAdapters`)."""
    one_adapter_per_input: bool = False
    """The adapters of projections that read the same input share one lora_A, one dropout
    and one kept input (lit-gpt's LoRAQKVLinear over the fused qkv projection)."""
    offload_layer_inputs: bool = False
    """Activation offloading: checkpointed layer inputs go to pinned CPU memory, a couple of
    layers' worth stays on the GPU (torchtune OffloadActivations, save_on_cpu)."""
    grad_bytes: int = 2
    """Bytes of a weight's gradient (the parameter dtype)."""
    loss: LossKind = LossKind.full
    loss_chunks: int = 8
    """Chunks of a chunked cross-entropy (torchtune's num_output_chunks = 8)."""
    kept_logits_bytes: int = 0
    """Bytes per logit of output logits the training loop still holds during backward
    (lit-gpt keeps its bf16 logit chunks referenced: 2; a loop that keeps the model output
    of transformers before 4.46, its fp32 logits: 4; `memtui.estimator.loops`)."""
    output_logits_bytes: int | None = None
    """Bytes per logit of the logits the model returns, alive at the loss's forward; None:
    the compute dtype (transformers before 4.46 upcast them in the model's forward: 4)."""
    shifted_logits_copy: bool = False
    """The loss takes a contiguous shifted copy of its upcast logits (`logits[..., :-1,
    :].contiguous()`: transformers before 4.49), alive at its forward beside them."""
    loss_bytes: int = 4
    """Bytes per logit of the log-probs the loss keeps and of its gradient buffers: 4 when it
    upcasts the logits to fp32 (transformers' ForCausalLMLoss, torchtune's chunked losses),
    2 when cross_entropy runs on the bf16 logits (torchtune's CrossEntropyLoss recipes of
    2024, lit-gpt)."""
    input_casts: frozenset[Role] = frozenset()
    """Roles of the linears that cast their input to the compute dtype themselves, each
    keeping its own copy (full fine-tuning under autocast with an fp32 residual stream: the
    norm output is fp32 and autocast casts it per op, `aten._to_copy`, caching only leaf
    weights: aten/src/ATen/autocast_mode.h cached_cast). An input read by q, k and v is then
    kept three times in the compute dtype, the MLP's by gate and up twice."""
    sdpa_repeats_kv: bool = False
    """The model code repeats K and V to every query head before SDPA (repeat_kv: transformers
    before 4.54, which passes enable_gqa instead, integrations/sdpa_attention.py
    use_gqa_in_sdpa): the kernel keeps them, and makes their gradients, at the query's width."""
    sdpa_output_copy: bool = False
    """The query is made contiguous in (b, a, s, d) before SDPA (`query.contiguous()` in
    sdpa_attention_forward 4.48-4.55), so is the flash kernel's output, and the transpose
    before o_proj copies it. (LlamaSdpaAttention.forward up to 4.47 does it only on CUDA with
    a mask, where the memory-efficient kernel runs, whose output is (b, s, a, d) anyway.)"""
    sdpa_causal_mask: bool = False
    """The model hands SDPA an (s, s) causal mask in the residual stream's dtype even without
    padding (LlamaModel._update_causal_mask up to 4.39; 4.40 returns None where
    AttentionMaskConverter._ignore_causal_mask_sdpa allows): one storage expanded over the
    batch, kept by every layer's SDPA until backward ends."""
    eager_causal_mask: bool = True
    """Eager attention gets a (b, 1, s, s) causal mask built by the model's forward (every
    family in transformers 5.24, masking_utils.py create_causal_mask); GPT-2 before 4.52 masks
    with its registered `bias` buffer instead (modeling_gpt2.py eager_attention_forward,
    read in 4.48.3 and 4.51.0; 4.52.0 GPT2Model.forward calls _update_causal_mask)."""
    reentrant_checkpoint: bool = False
    """Full checkpointing runs torch's reentrant CheckpointFunction (use_reentrant=True):
    its backward rebuilds the layer whole and holds the rebuilt output while the inner
    backward runs (torch/utils/checkpoint.py CheckpointFunction.backward, `outputs =
    ctx.run_function(*detached_inputs)` then `torch.autograd.backward(outputs_with_grad,
    args_with_grad)`, read in torch 2.13); the non-reentrant variant stops its rebuild at the
    last tensor backward unpacks, before the layer's output."""
    rotary_per_layer: bool = False
    """Each attention computes its own rotary cos and sin in the compute dtype, kept by its
    rotary's backward (LlamaAttention.forward calls self.rotary_emb up to 4.43; 4.44 computes
    position_embeddings once in LlamaModel.forward)."""
    padded_qkv_update: bool = False
    """LitGPT's LoRAQKVLinear.zero_pad: when some but not all of q, k, v are adapted, it
    scatters lora_B's output into a zero qkv-wide tensor with index_copy, whose backward keeps
    its source (lit_gpt/lora.py; checked on CPU: the enabled parts' widths per token)."""
    fused_qkv_parts: frozenset[Role] = frozenset()
    """The parts of a fused q/k/v projection its adapter updates when the plan adapts the fused
    projection itself (lit-gpt's LoRAQKVLinear enables them one by one: `padded_qkv_update`)."""
    activation_saves: int | None = None
    """f-wide tensors a plain MLP's activation saves beyond its input, when the stack's model
    code computes it differently from Transformers' (`Architecture.activation_saves`): LitGPT's
    GptNeoxMLP calls F.gelu(approximate=...), one op that keeps its input, whatever
    `gelu_new` costs in Transformers' Python."""
    batch_labels: bool = False
    """The training loop's batch holds the labels beside the token ids through the step, one
    int64 per token (Trainer's `inputs["labels"]`, torchtune's and LitGPT's batch)."""
    fused_qkv: bool | None = None
    """The model code's q, k, v projection is one linear (lit-gpt's `attn`); None: as the
    architecture says."""
    adapter_cast_bytes: int = 0
    """Bytes per element of the cast of an adapted linear's input to the adapter's dtype
    that PEFT makes and holds while the adapter runs (peft 0.21 tuners/lora/layer.py
    Linear.forward, `_cast_input_dtype`): 4 for fp32 adapters over 16-bit matmuls, 0 where
    no copy is made (the input already in the adapter's dtype, or no PEFT)."""
    head_adapter: bool = False
    """The output layer carries a LoRA adapter (a score head under all-linear, an lm_head
    named as a target): its lora_B keeps lora_A's r-wide output."""
    head_keeps_input: bool = False
    """The loss head keeps its own copy of the last hidden states whether or not its weight
    trains, and the label mask: TRL's fused LM head (trl 1.16 trainer/utils.py
    _fused_forward passes `hidden_states[:, :-1]` reshaped, a copy, or `hidden_states[mask]`
    on Triton devices, and keeps `mask` for masked_fill / masked_scatter;
    kernels/chunked_logprob.py ChunkedLogProbFunction.forward saves `hidden` for its
    backward, which recomputes the logits from it)."""
    tp: int = 1
    tp_plan: TensorParallelPlan = MEGATRON_TP
    """How the stack's tensor parallelism splits the layer (`tp` above 1): which `TpSplit`
    divides by `tp` (`tp_divisor`); the default is Megatron-LM's with sequence parallelism,
    where everything the layers keep is split (Korthikanti et al. 2022 Table 2)."""

    def tp_divisor(self, split: TpSplit) -> int:
        """The ranks a tensor split as `split` is divided over (1: whole on every rank)."""
        how = self.tp_plan
        if split is TpSplit.shard:
            return self.tp
        if split is TpSplit.sequence and how.sequence_parallel:
            return self.tp
        if split is TpSplit.gathered and how.sequence_parallel and not how.saves_gathered_input:
            return self.tp
        return 1

    @property
    def logits_divisor(self) -> int:
        """The ranks the logits and the loss's buffers are divided over: the vocab shards of a
        vocab-parallel loss (Megatron, torchtitan's loss_parallel), 1 where the lm_head's
        output is gathered (`TensorParallelPlan.logits_gathered`)."""
        return 1 if self.tp_plan.logits_gathered else self.tp

    def dtype_bytes(self, dtype: Dtype) -> int:
        """Bytes per element of a saved tensor in `dtype` under this setup."""
        if dtype is Dtype.compute:
            return self.compute_bytes
        if dtype is Dtype.residual:
            return self.residual_bytes
        if dtype is Dtype.cast_from_fp32:
            return 0 if self.compute_bytes == 4 else self.compute_bytes
        return _FIXED_BYTES[dtype]


@dataclass(frozen=True)
class Saved:
    """One tensor saved for backward: per_token x s x b + per_position x s + per_token_seq x
    s^2 x b + per_square x s^2 elements."""

    what: str
    per_token: int = 0
    per_token_seq: int = 0
    per_position: int = 0
    per_square: int = 0
    """Elements per s^2 shared by the batch (an (s, s) tensor expanded over it)."""
    dtype: Dtype = Dtype.compute
    for_weights: frozenset[Role] = frozenset()
    """Roles of the weights that need it only for their own gradient (linear inputs, the
    normalized tensor a norm weight multiplies): when all of them are frozen (LoRA/QLoRA
    base), autograd does not keep it."""
    tp: TpSplit = TpSplit.sequence
    """How tensor parallelism splits it (`Setup.tp_divisor`)."""


def _w(*roles: Role) -> frozenset[Role]:
    return frozenset(roles)


def _o_proj_input(what: str, width: int) -> Saved:
    """o_proj's input, kept for its weight: head-sharded under tensor parallelism (o_proj is
    row-parallel)."""
    return Saved(what, tp=TpSplit.shard, per_token=width, for_weights=_w(Role.o))


def _norm(arch: Architecture, setup: Setup, what: str, width: int, count: int = 1) -> list[Saved]:
    """What one norm keeps (count of them, each of `width`), reading the residual stream."""
    if arch.norm_kind == "layernorm":
        # aten.native_layer_norm keeps its input and fp32 mean and 1/std per row (CUDA keeps
        # the statistics in fp32 for 16-bit inputs; CPU keeps them in the input dtype).
        return [
            Saved(f"{what} input", per_token=count * width, dtype=Dtype.residual),
            Saved(f"{what} mean and 1/std", per_token=2 * count, dtype=Dtype.fp32),
        ]
    # LlamaRMSNorm: pow(2) keeps the fp32 upcast x, rsqrt keeps 1/rms (fp32, one per row),
    # x * rsqrt keeps both, and weight * y keeps y (cast back to the input dtype) for the
    # weight's gradient only. Gemma keeps y in fp32 (it multiplies by 1 + weight in fp32).
    normalized = Dtype.fp32 if arch.norm_output_fp32 else Dtype.residual
    return [
        Saved(f"{what} input upcast to fp32", per_token=count * width, dtype=Dtype.fp32),
        Saved(f"{what} 1/rms", per_token=count, dtype=Dtype.fp32),
        Saved(
            f"{what} normalized",
            per_token=count * width,
            dtype=normalized,
            for_weights=_w(Role.norm),
        ),
    ]


def _attention_core(arch: Architecture, setup: Setup) -> tuple[list[Saved], list[Saved]]:
    """Tensors the attention function keeps, from q, k, v (after rotary) to its output, in
    forward order: (up to the softmax, what the ops after the softmax keep). The setup's
    `fused_qkv` overrides the architecture's for a stack whose model code fuses the
    projection."""
    a, qw, kvw = arch.num_heads, arch.q_width, arch.kv_width
    if setup.attention is Attention.flash:
        return _flash_core(arch, setup), []
    # eager_attention_forward: matmul(q, repeat_kv(k)^T) keeps q and the repeated k (the
    # reshape to 3-D copies them), softmax keeps its output, the cast to the activation dtype
    # feeds matmul(p, repeat_kv(v)), which keeps p and the repeated v. Without rotary (GPT-2,
    # OPT) q, k, v are views of the projection output, which bmm keeps as they are: the whole
    # output (measured). GPT-2 and Falcon softmax in the activation dtype, the others in fp32.
    # Dropout p > 0 keeps a 1-byte mask and its output (Korthikanti: 2as^2b + as^2b + 2as^2b).
    if arch.rotary:
        # (DeepSeek-V2: q and k are a (nope + rope) wide per head, v a v_head_dim; the value
        # is a strided view of kv_b_proj's output, which the 3-D reshape copies too.)
        before = [
            Saved("query", tp=TpSplit.shard, per_token=qw),
            Saved("key, repeated to every query head", tp=TpSplit.shard, per_token=qw),
        ]
        after = [
            Saved(
                "value, repeated to every query head",
                tp=TpSplit.shard,
                per_token=arch.attention_out_width,
            )
        ]
    else:
        before = [
            Saved(
                "q, k, v (projection output, kept by their views)",
                tp=TpSplit.shard,
                per_token=qw + 2 * kvw,
            )
        ]
        after = []
    if arch.attn_softcap:  # Gemma 2: cap * tanh(scores / cap) keeps the tanh output
        before.append(Saved("soft-capped scores (tanh output)", tp=TpSplit.shard, per_token_seq=a))
    fp32 = arch.eager_softmax_fp32
    before.append(
        Saved(
            "softmax output",
            tp=TpSplit.shard,
            per_token_seq=a,
            dtype=Dtype.fp32 if fp32 else Dtype.compute,
        )
    )
    if arch.attention_dropout:
        after += [
            Saved("attention dropout mask", tp=TpSplit.shard, per_token_seq=a, dtype=Dtype.mask),
            Saved("attention dropout output", tp=TpSplit.shard, per_token_seq=a),
        ]
    elif fp32:
        after.append(
            Saved(
                "attention probabilities (cast)",
                tp=TpSplit.shard,
                per_token_seq=a,
                dtype=Dtype.cast_from_fp32,
            )
        )
    return before, after


def _flash_core(arch: Architecture, setup: Setup) -> list[Saved]:
    """SDPA's flash kernel (CUDA's FlashAttention-2 and CPU's flash kernel alike) keeps q, k,
    v at their GQA widths (transformers passes enable_gqa when no mask is given), its output,
    and the fp32 log-sum-exp per head and row (Dao 2023, Algorithm 2). The output takes q's
    layout: (b, s, a, d) after Llama's elementwise rotary, so the transpose before o_proj
    needs no copy and o_proj's input is the output itself; not so after a torch.cat
    (`Architecture.rotary_cat`) or a `query.contiguous()` (`Setup.sdpa_output_copy`)."""
    a, qw, kvw, out = arch.num_heads, arch.q_width, arch.kv_width, arch.attention_out_width
    fused_qkv = arch.fused_qkv if setup.fused_qkv is None else setup.fused_qkv
    if arch.latent_attention:
        # DeepSeek-V2: q (a torch.cat) and k (expand_kv's new_empty) are new tensors; v is a
        # view of kv_b_proj's output (each head's key part and value), which stays whole.
        qkv = [
            Saved("query, key (new tensors)", tp=TpSplit.shard, per_token=qw + kvw),
            Saved(
                "kv_b_proj output (kept by the value view)",
                tp=TpSplit.shard,
                per_token=arch.kv_b_width,
            ),
        ]
    elif fused_qkv and arch.rotary:
        # A fused qkv_proj (Phi-3, GPT-NeoX, lit-gpt's attn): rotary makes new q and k, but v
        # stays a view of the projection output, so the whole output stays alive with it.
        qkv = [Saved("query, key (after rotary)", tp=TpSplit.shard, per_token=qw + kvw),
               Saved("q, k, v (fused projection output, kept by the v view)", tp=TpSplit.shard,
                     per_token=qw + 2 * kvw)]  # fmt: skip
    elif setup.sdpa_repeats_kv:
        # repeat_kv's reshape makes the repeated key and value; the GQA-wide ones are freed
        qkv = [
            Saved(
                "query, key and value repeated to every query head",
                tp=TpSplit.shard,
                per_token=qw + qw + out,
            )
        ]
    else:
        qkv = [Saved("query, key, value", tp=TpSplit.shard, per_token=qw + kvw + arch.v_width)]
    saved = [
        *qkv,
        Saved("attention output (= o_proj input)", tp=TpSplit.shard, per_token=out),
        Saved("attention log-sum-exp", tp=TpSplit.shard, per_token=a, dtype=Dtype.fp32),
    ]
    if (arch.rotary_cat or setup.sdpa_output_copy) and arch.v_dim == arch.dim_head:
        # q contiguous in (b, a, s, d) (Architecture.rotary_cat): so is the flash kernel's
        # output, and the transpose to (b, s, a d) before o_proj is a copy, kept for o_proj's
        # weight. Unequal q/k and v head widths (DeepSeek-V2's 192 and 128) rule the flash
        # kernel out (sdp_utils check_head_dim_size_flash); CUDA's memory-efficient kernel
        # allocates its output (b, s, a, d) whatever q's layout, so o_proj reads it as it is.
        saved.append(_o_proj_input("o_proj input (transposed copy)", out))
    return saved


def _mlp(arch: Architecture, setup: Setup) -> list[Saved]:
    h, f = arch.hidden_size, arch.intermediate_size
    if arch.mlp_kind == "plain":
        k = arch.activation_saves if setup.activation_saves is None else setup.activation_saves
        saved = [
            Saved(
                "MLP input (norm output)",
                tp=TpSplit.gathered,
                per_token=h,
                for_weights=_w(Role.fc_in),
            )
        ]
        if k:
            saved.append(Saved("activation intermediates", tp=TpSplit.shard, per_token=k * f))
        return [
            *saved,
            Saved(
                "activation output (fc_out input)",
                tp=TpSplit.shard,
                per_token=f,
                for_weights=_w(Role.fc_out),
            ),
        ]
    if arch.moe_layer_count:
        return _moe_mlp(arch)
    # LlamaMLP: down(act(gate(x)) * up(x)). gate and up keep x; SiLU keeps its input (the gate
    # output); the product keeps both factors; down keeps the product: h + 4f.
    return [
        Saved(
            "MLP input (norm output)",
            tp=TpSplit.gathered,
            per_token=h,
            for_weights=_w(Role.gate, Role.up, Role.gate_up),
        ),
        Saved("gate output (activation input)", tp=TpSplit.shard, per_token=f),
        Saved("activation output", tp=TpSplit.shard, per_token=f),
        Saved("up output", tp=TpSplit.shard, per_token=f),
        Saved("down input", tp=TpSplit.shard, per_token=f, for_weights=_w(Role.down)),
    ]


def _moe_mlp(arch: Architecture) -> list[Saved]:
    """Top-k routed experts (Mixtral, Qwen2-MoE, Qwen3-MoE, DeepSeek-V2): each token passes
    through k expert MLPs (transformers 5's grouped experts: the gathered inputs, the fused
    gate/up output, the activation and product, the expert outputs). Checked against tiny
    Qwen3-MoE and DeepSeek-V2 steps on CPU (tests/test_measure_accuracy.py); every layer is
    counted as an MoE layer, the dense ones too (DeepSeek's first_k_dense_replace, Qwen's
    mlp_only_layers)."""
    h, k, e, fe = arch.hidden_size, arch.experts_per_token, arch.num_experts, arch.expert_width
    fs = arch.shared_expert_intermediate_size
    if arch.router_fp32:
        # DeepSeek-V2: the router's F.linear keeps an fp32 copy of its input; the norm output
        # itself is kept by the shared experts' gate and up projections
        saved = [Saved("router input upcast to fp32", tp=TpSplit.gathered, per_token=h,
                       dtype=Dtype.fp32, for_weights=_w(Role.router))]  # fmt: skip
        if fs:
            saved.append(
                Saved(
                    "shared experts' input",
                    tp=TpSplit.gathered,
                    per_token=h,
                    for_weights=_w(Role.gate, Role.up),
                )
            )
    else:
        saved = [
            Saved("router input", tp=TpSplit.gathered, per_token=h, for_weights=_w(Role.router))
        ]
    saved += [
        Saved("router probabilities", tp=TpSplit.whole, per_token=e, dtype=Dtype.fp32),
        Saved(
            "expert inputs (gathered tokens)",
            tp=TpSplit.gathered,
            per_token=k * h,
            for_weights=_w(Role.expert_gate, Role.expert_up),
        ),
        Saved("expert gate outputs", tp=TpSplit.shard, per_token=k * fe),
        Saved("expert activation outputs", tp=TpSplit.shard, per_token=k * fe),
        Saved("expert up outputs", tp=TpSplit.shard, per_token=k * fe),
        Saved(
            "expert down inputs",
            tp=TpSplit.shard,
            per_token=k * fe,
            for_weights=_w(Role.expert_down),
        ),
        Saved("expert outputs (for routing weights)", tp=TpSplit.gathered, per_token=k * h),
    ]
    if fs:
        saved.append(Saved("shared expert activations", tp=TpSplit.shard, per_token=4 * fs))
        if arch.shared_expert_gate:  # Qwen2-MoE; DeepSeek-V2 adds its shared experts ungated
            saved.append(Saved("shared expert gate input", tp=TpSplit.gathered, per_token=h))
    return saved


def _linear_attention(arch: Architecture) -> list[Saved]:
    """What a Gated DeltaNet (Qwen3NextGatedDeltaNet, Qwen3_5GatedDeltaNet; transformers
    5.24) keeps after its norm, op by op, on the path a run without flash-linear-attention
    takes: transformers picks fla's chunk_gated_delta_rule and causal-conv1d's kernels when
    they import (integrations/hub_kernels.py use_kernel_func_from_hub_with_fallback) and its
    torch reference code otherwise, always on CPU. The torch path keeps more (fla's autograd
    function keeps q, k, v, the gates and the chunks' UT matrices and recomputes the rest),
    so the estimate is the larger of the two. Per token, with Hv value heads of dk (key) and
    dv (value) width, C = 64 tokens a chunk; the rule works on the sequence padded to C."""
    h, conv = arch.hidden_size, arch.linear_conv_width
    hv, dk, dv = arch.linear_value_heads, arch.linear_key_head_dim, arch.linear_value_head_dim
    c = DELTA_RULE_CHUNK
    fp32 = Dtype.fp32
    projections = _w(Role.linear_qkvz, Role.linear_ba, Role.linear_qkv, Role.linear_z,
                     Role.linear_b, Role.linear_a)  # fmt: skip
    return [
        Saved("linear-attention input (norm output)", per_token=h, for_weights=projections),
        # causal_conv1d_fn: F.conv1d keeps its input (q, k, v side by side) even with its
        # weight frozen (convolution_backward computes every gradient in one call, so autograd
        # saves both operands; measured under LoRA); SiLU keeps the conv output
        Saved("conv1d input (q, k, v)", per_token=conv),
        Saved("conv1d output (SiLU input)", per_token=conv),
        # beta = sigmoid(b) keeps its output; g = -exp(A_log) * softplus(a.float() + dt_bias)
        Saved("beta (sigmoid output)", per_token=hv),
        Saved("decay: softplus input and output", per_token=2 * hv, dtype=fp32),
        # torch_chunk_gated_delta_rule: q and k repeated to the value heads and cast to fp32,
        # l2norm keeps them and 1/norm; v_beta, k_beta keep v, k (normalized, padded) and beta;
        # the matmuls keep q, k, k_beta and their chunk-local products (k_beta k^T, q k^T:
        # C per token each), the masked pairwise decays' exp, the decayed UT system and the
        # intra-chunk attention (C each); solve_triangular keeps its outputs (u and w); the
        # decays applied to q and k once (three exps of the cumulative decay)
        Saved("q, k in fp32 (l2norm inputs)", per_token=2 * hv * dk, dtype=fp32),
        Saved("q, k 1/norm", per_token=2 * hv, dtype=fp32),
        Saved("q, k normalized, v, beta (padded)", per_token=hv * (2 * dk + dv + 1), dtype=fp32),
        Saved("k_beta", per_token=hv * dk, dtype=fp32),
        Saved(
            "chunk products, pairwise decays, UT system, intra-chunk attention",
            per_token=5 * hv * c,
            dtype=fp32,
        ),
        Saved("cumulative decay exps", per_token=3 * hv, dtype=fp32),
        Saved("u and w (triangular solves' outputs)", per_token=hv * (dv + dk), dtype=fp32),
        Saved("decayed q and k", per_token=2 * hv * dk, dtype=fp32),
        # the scan over chunks keeps each chunk's corrected values and the recurrent state it
        # read (Hv dk dv per chunk)
        Saved("v_new per chunk", per_token=hv * dv, dtype=fp32),
        Saved("recurrent state per chunk", per_token=ceil_div(hv * dk * dv, c), dtype=fp32),
        # Qwen3NextRMSNormGated: norm before gate, in fp32 (the input upcast and 1/rms), the
        # weight times the normalized tensor cast back (kept for the weight and by the gate's
        # product), the gate z upcast (SiLU's input) and SiLU's output
        Saved("gated norm input upcast to fp32", per_token=hv * dv, dtype=fp32),
        Saved("gated norm 1/rms", per_token=hv, dtype=fp32),
        Saved("gated norm normalized", per_token=hv * dv, for_weights=_w(Role.norm)),
        Saved("gated norm weighted output", per_token=hv * dv),
        Saved("gate z in fp32 (SiLU input) and SiLU output", per_token=2 * hv * dv, dtype=fp32),
        Saved("out_proj input", per_token=hv * dv, for_weights=_w(Role.linear_out)),
    ]


def _linear_attention_backward(arch: Architecture) -> list[Saved]:
    """Gradient buffers alive at a Gated DeltaNet's backward beyond its saved tensors: the
    incoming gradient, and the fp32 gradients of the rule's q, k, v (the widest it makes)."""
    hv, dk, dv = arch.linear_value_heads, arch.linear_key_head_dim, arch.linear_value_head_dim
    return [
        Saved(
            "gradient of the linear-attention output",
            per_token=arch.hidden_size,
            dtype=Dtype.residual,
        ),
        Saved("q, k, v gradients in fp32", per_token=hv * (2 * dk + dv), dtype=Dtype.fp32),
    ]


def _not_sequence_split(saved: list[Saved]) -> list[Saved]:
    """A Gated DeltaNet's tensors as tensor parallelism keeps them: no stack's plan of its
    projections and convolution is read here, so none is split beyond what a gathered input
    would be (whole unless Megatron-style sequence parallelism re-gathers it)."""
    return [
        replace(item, tp=TpSplit.gathered) if item.tp is TpSplit.sequence else item
        for item in saved
    ]


def layer_mix(arch: Architecture) -> tuple[tuple[bool, int], ...]:
    """The model's kinds of layer, (linear attention?, how many), those present: one kind
    but for a hybrid stack of Gated DeltaNet and attention layers."""
    kinds = ((False, arch.full_attention_layers), (True, arch.linear_attention_layers))
    return tuple((linear, count) for linear, count in kinds if count)


def _attention_parts(
    arch: Architecture, setup: Setup, selective: bool
) -> tuple[list[Saved], list[Saved], list[Saved]]:
    """The attention sub-layer after its norm, split where backward meets the attention core:
    (the projections' inputs and, under selective checkpointing, the core's inputs; the core's
    tensors, none under selective checkpointing; what comes after the core)."""
    h, a, qw, kvw = arch.hidden_size, arch.num_heads, arch.q_width, arch.kv_width
    out = arch.attention_out_width
    source = "norm output" if arch.norm_position == "pre" else "layer input"  # OLMo 2: none
    upto = [
        Saved(
            f"QKV input ({source})",
            tp=TpSplit.gathered,
            per_token=h,
            for_weights=_w(Role.q, Role.k, Role.v, Role.qkv, Role.q_a, Role.kv_a),
        )
    ]
    # RMSNorms inside attention, all computing in fp32 (x.float(), rsqrt) and keeping the
    # normalized tensor for their weight in the activation dtype, or in fp32 where they
    # multiply by the weight before the cast (Gemma 3's 1 + w, OLMo 2's w * x).
    normalized = Dtype.fp32 if arch.norm_output_fp32 else Dtype.compute
    roles = setup.trainable_roles
    if arch.rotary and setup.rotary_per_layer:  # the tail's shared cos and sin, per layer
        upto.append(
            Saved(
                "rotary cos and sin (this layer's)",
                tp=TpSplit.whole,
                per_position=2 * arch.dim_head,
            )
        )
    if setup.padded_qkv_update and roles is not None:
        widths = {Role.q: qw, Role.k: kvw, Role.v: arch.v_width}
        parts = roles | setup.fused_qkv_parts if Role.qkv in roles else roles
        adapted = [w for role, w in widths.items() if role in parts]
        if 0 < len(adapted) < len(widths):
            upto.append(Saved("LoRA update before zero_pad (index_copy's source)", tp=TpSplit.shard,
                              per_token=sum(adapted)))  # fmt: skip
    if arch.qk_norm != "none":
        # per_head (Qwen3, Gemma 3): head_dim wide on every q and k head, one 1/rms per head;
        # full (OLMo 2): q_norm over q_proj's whole output, k_norm over k_proj's, one each
        rms = a + arch.kv_heads if arch.qk_norm == "per_head" else 2
        upto += [
            Saved(
                "q/k norm inputs upcast to fp32",
                tp=TpSplit.shard,
                per_token=qw + kvw,
                dtype=Dtype.fp32,
            ),
            Saved("q/k norm 1/rms", tp=TpSplit.shard, per_token=rms, dtype=Dtype.fp32),
            Saved(
                "q/k normalized",
                tp=TpSplit.shard,
                per_token=qw + kvw,
                dtype=normalized,
                for_weights=_w(Role.norm),
            ),
        ]
    if arch.latent_attention:
        # DeepSeek-V2: q_a_layernorm (with q_lora_rank) and kv_a_layernorm on the latent part
        # of kv_a_proj_with_mqa's output; each output is the next projection's input
        for rank, part, nxt in (
            (arch.q_lora_rank, "q", Role.q_b),
            (arch.kv_lora_rank, "kv", Role.kv_b),
        ):
            if rank:
                upto += [
                    Saved(f"{part}_a_layernorm input upcast to fp32", tp=TpSplit.gathered,
                          per_token=rank, dtype=Dtype.fp32),
                    Saved(f"{part}_a_layernorm 1/rms", tp=TpSplit.gathered, per_token=1,
                          dtype=Dtype.fp32),
                    Saved(f"{part}_a_layernorm normalized", tp=TpSplit.gathered,
                          per_token=rank, for_weights=_w(Role.norm)),
                    Saved(f"{part}_b_proj input", tp=TpSplit.gathered, per_token=rank,
                          for_weights=_w(nxt)),
                ]  # fmt: skip
    core: list[Saved] = []
    after: list[Saved] = []
    if selective:
        # The attention core runs under torch.utils.checkpoint: only its inputs (q, k, v at
        # their projection widths) and its output (o_proj's input) stay. A v that is a view
        # keeps its whole base: a fused projection's output after rotary made q and k anew
        # (Phi-3, GPT-NeoX, lit-gpt's attn), DeepSeek-V2's kv_b_proj output.
        fused = arch.fused_qkv if setup.fused_qkv is None else setup.fused_qkv
        if arch.latent_attention:
            v = arch.kv_b_width
        elif fused and arch.rotary:
            v = qw + 2 * kvw
        else:
            v = arch.v_width
        upto.append(
            Saved("query, key, value (checkpoint inputs)", tp=TpSplit.shard, per_token=qw + kvw + v)
        )
        after.append(_o_proj_input("attention output (o_proj input)", out))
    else:
        before, behind = _attention_core(arch, setup)
        core = before + behind
        if setup.attention is Attention.eager:
            after.append(_o_proj_input("o_proj input (transposed copy)", out))
    if arch.attention_output_gate:
        # Qwen3NextAttention: o_proj reads attn_output * sigmoid(gate); the product keeps the
        # attention output whatever o_proj needs, and the sigmoid's output
        after = [replace(item, for_weights=item.for_weights - {Role.o}) for item in after]
        after += [
            Saved("output gate (sigmoid output)", tp=TpSplit.shard, per_token=arch.q_width),
            Saved(
                "gated attention output (o_proj input)",
                tp=TpSplit.shard,
                per_token=arch.q_width,
                for_weights=_w(Role.o),
            ),
        ]
    if arch.residual_dropout and arch.attention_output_dropout:
        after.append(Saved("attention residual dropout mask", per_token=h, dtype=Dtype.mask))
    return upto, core, after


@dataclass(frozen=True)
class _Layer:
    """One decoder layer's saved tensors in forward order, split where its backward frees
    them: the attention core's backward comes after everything past the core is freed."""

    before_core: tuple[Saved, ...]
    """The attention norm, the projections' inputs, the q/k norms; under selective
    checkpointing the core's inputs too."""
    core: tuple[Saved, ...]
    """The attention core's tensors (none under selective checkpointing: rebuilt in backward)."""
    after_core: tuple[Saved, ...]
    """o_proj's input, the MLP's norm, the output norms, the MLP."""

    @property
    def saved(self) -> tuple[Saved, ...]:
        return (*self.before_core, *self.core, *self.after_core)


@memoised
def _layer_parts(
    arch: Architecture, setup: Setup, checkpointing: Checkpointing, linear: bool = False
) -> _Layer:
    """One layer's saved tensors under `checkpointing` (none or selective); `linear`: a
    Gated DeltaNet layer (selective checkpointing recomputes no part of it)."""
    h = arch.hidden_size
    core: list[Saved] = []
    after: list[Saved] = []
    if linear:
        upto = _not_sequence_split(_linear_attention(arch))
    else:
        selective = checkpointing is Checkpointing.selective
        upto, core, after = _attention_parts(arch, setup, selective)
    pre = arch.norm_position == "pre"
    # Norms on the attention and MLP outputs: Gemma 2 and 3's two beyond the pre-norms,
    # OLMo 2's two post-norms (their inputs are o_proj's and down_proj's outputs).
    output_norms = max(0, arch.norms_per_layer - 2) if pre else arch.norms_per_layer
    mlp = _mlp(arch, setup)
    if not pre:
        pass  # OLMo 2: the MLP reads the residual stream itself
    elif not arch.parallel_residual:
        after += _norm(arch, setup, "MLP norm", h)
    elif arch.norms_per_layer >= 2:  # its own norm, whose input is the attention norm's input
        after += _norm(arch, setup, "MLP norm", h)[1:]
    else:  # one norm feeds both (Falcon-7B, Phi): the MLP's input is the QKV input, kept once
        mlp, shared = mlp[1:], mlp[0]
        upto[0] = replace(upto[0], for_weights=upto[0].for_weights | shared.for_weights)
    if output_norms:
        after += _norm(arch, setup, "output norms", h, count=output_norms)
    if arch.residual_dropout:
        mlp.append(Saved("MLP residual dropout mask", per_token=h, dtype=Dtype.mask))
    first = _norm(arch, setup, "attention norm", h) if pre else []
    return _Layer(tuple(first + upto), tuple(core), tuple(after + mlp))


@memoised  # pure in its arguments; called for every plan the levers and search try
def layer_saved(
    arch: Architecture,
    setup: Setup,
    checkpointing: Checkpointing | None = None,
    linear: bool = False,
) -> tuple[Saved, ...]:
    """What one decoder layer keeps for backward through the forward pass (under `setup`'s
    checkpointing unless another is given); `linear`: a Gated DeltaNet layer."""
    checkpointing = setup.checkpointing if checkpointing is None else checkpointing
    if checkpointing is Checkpointing.full:
        # Non-reentrant torch.utils.checkpoint keeps the layer's inputs (the hidden states;
        # the rotary cos/sin are shared by all layers and counted once in the tail).
        return (Saved("layer input", per_token=arch.hidden_size, dtype=Dtype.residual),)
    return _layer_parts(arch, setup, checkpointing, linear).saved


def _attention_backward(arch: Architecture, setup: Setup) -> list[Saved]:
    """Gradient buffers alive at the attention core's backward, beyond its saved tensors."""
    a, qw, kvw = arch.num_heads, arch.q_width, arch.kv_width
    attention = setup.attention
    # the residual stream's gradient has the stream's dtype (fp32 under autocast with fp32
    # weights: measured, memtui measure --stack trainer)
    incoming = Saved(
        "gradient of the attention output",
        tp=TpSplit.whole,
        per_token=arch.hidden_size,
        dtype=Dtype.residual,
    )
    if attention is Attention.eager:
        if not arch.eager_softmax_fp32:
            # GPT-2: the probabilities' gradient, dropout's and softmax's, in the activation dtype.
            return [incoming, Saved("score gradients", tp=TpSplit.shard, per_token_seq=2 * a)]
        # The bf16 cast's backward makes an fp32 gradient of the scores; softmax's backward
        # makes another (fp32 opmath, cast to bf16 after): two fp32 s x s per head.
        return [
            incoming,
            Saved("fp32 score gradients", tp=TpSplit.shard, per_token_seq=2 * a, dtype=Dtype.fp32),
        ]
    # Flash backward: dq, dk, dv and an fp32 dq accumulator (FlashAttention-2's dq_accum);
    # dk and dv of the repeated key and value are query-wide (Setup.sdpa_repeats_kv).
    kv = qw + arch.attention_out_width if setup.sdpa_repeats_kv else kvw + arch.v_width
    return [
        Saved("dq, dk, dv", tp=TpSplit.shard, per_token=qw + kv),
        Saved("fp32 dq accumulator", tp=TpSplit.shard, per_token=qw, dtype=Dtype.fp32),
    ]


def _mlp_backward(arch: Architecture) -> list[Saved]:
    """Gradient buffers alive at the MLP's backward: the incoming gradient and two f-wide ones
    (the product's two factors for a gated MLP; the activation's input and output for a plain
    one)."""
    width = arch.expert_width * max(1, arch.experts_per_token)
    return [
        # the incoming one is the residual stream's gradient, in the stream's dtype (fp32
        # under autocast with fp32 weights: measured, memtui measure --stack trainer)
        Saved(
            "gradient of the layer output",
            tp=TpSplit.whole,
            per_token=arch.hidden_size,
            dtype=Dtype.residual,
        ),
        Saved("MLP gradients", tp=TpSplit.shard, per_token=2 * width),
    ]


def _weight_gradient_elements(arch: Architecture) -> int:
    """Elements of an MoE layer's largest weight gradient: transformers (v5) stores the
    experts stacked, gate and up fused, as one (E, 2 f_e, h) parameter (MixtralExperts)."""
    return arch.num_experts * 2 * arch.expert_width * arch.hidden_size


def _layer_backward_peak(
    arch: Architecture, setup: Setup, b: int, s: int, linear: bool = False
) -> int:
    """The most one layer holds during its backward, its own saved tensors included: the
    larger of its two worst moments, the MLP's backward and the attention core's. Under full
    checkpointing the layer is rebuilt first, beside its checkpointed input; under selective
    checkpointing its attention core is, when backward reaches it (after the MLP): Korthikanti
    sec. 5 for the rebuilt layer, the gradient buffers as measured."""

    def size(items: Sequence[Saved]) -> int:
        return _bytes(items, s, b, setup)

    full = setup.checkpointing is Checkpointing.full
    # the layer as its backward sees it: rebuilt whole under full checkpointing
    mode = Checkpointing.none if full else setup.checkpointing
    layer = _layer_parts(arch, setup, mode, linear)
    checkpoint = size(layer_saved(arch, setup, linear=linear)) if full else 0
    if (
        full
        and arch.norms_per_layer
        and (arch.norm_kind == "layernorm" or setup.residual_bytes == 4)
    ):
        # The rebuilt layer's first norm saves the checkpointed layer input itself, already
        # counted with the layer: LayerNorm saves its input as it is, and LlamaRMSNorm's upcast
        # `hidden_states.to(torch.float32)` of an fp32 stream returns the same tensor
        # (measured: memtui measure --stack trainer, fp32 and bf16-autocast).
        checkpoint = 0
    if setup.reentrant_checkpoint:
        # the rebuilt layer's output, held through the layer's backward (measured: memtui
        # measure --stack trainer --checkpoint-variant reentrant, 4h bytes per token under
        # bf16-autocast, transformers 4.39.3, 4.48.3 and 5.24)
        checkpoint += size([Saved("rebuilt layer output", per_token=arch.hidden_size,
                                  dtype=Dtype.residual)])  # fmt: skip
    adapters = _adapter_bytes(arch, setup, s, b, linear)

    # At the MLP's backward: every tensor the layer saved, its adapters', the MLP's gradients.
    at_mlp = checkpoint + size(layer.saved) + adapters + size(_mlp_backward(arch))
    if setup.trainable_roles is None and arch.moe_layer_count:
        # Accumulating into an existing .grad (every micro-batch after the first, or
        # zero_grad(set_to_none=False)), autograd first materialises the new gradient of a
        # weight, then adds it in place: a weight-sized temporary. It matters for the stacked
        # experts of an MoE layer (GBs); a dense layer's largest weight is small beside its
        # activations, and leaving it out keeps this term growing with b and s.
        # (the rank's shard of it: the experts' width is split, ExpertParallel aside)
        at_mlp += ceil_div(_weight_gradient_elements(arch) * setup.grad_bytes, setup.tp)

    # At the attention core's backward, what the layer saved after the core is freed: what it
    # saved before the core, the core's tensors up to the softmax (rebuilt under selective
    # checkpointing), the adapters' tensors and the attention's gradients. The eager core's
    # tensors kept by the ops after the softmax are freed before the softmax's backward, its
    # worst moment.
    if linear:
        # A Gated DeltaNet's backward: everything it saved, its gradient buffers
        at_mixer = (
            checkpoint
            + size(layer.before_core)
            + adapters
            + size(_not_sequence_split(_linear_attention_backward(arch)))
        )
        return max(at_mlp, at_mixer)
    up_to_softmax, _ = _attention_core(arch, setup)
    at_attention = (
        checkpoint
        + size(layer.before_core)
        + size(up_to_softmax)
        + adapters
        + size(_attention_backward(arch, setup))
    )
    return max(at_mlp, at_attention)


@memoised
def _tail(arch: Architecture, setup: Setup) -> tuple[tuple[Saved, ...], tuple[Saved, ...]]:
    """Outside the layers: (what lives through backward: token ids, rotary cos/sin; what the
    loss's and lm_head's backward free before the layers' backward: final norm, lm_head
    input, labels)."""
    h = arch.hidden_size
    # The batch's token ids: held by the training loop (the embedding keeps them too).
    kept = [Saved("token ids", tp=TpSplit.whole, per_token=1, dtype=Dtype.int64)]
    if setup.batch_labels:
        kept.append(Saved("the batch's labels", tp=TpSplit.whole, per_token=1, dtype=Dtype.int64))
    if arch.embedding_dropout:
        kept.append(Saved("embedding dropout mask", per_token=h, dtype=Dtype.mask))
    if setup.sdpa_causal_mask and setup.attention is Attention.flash:
        kept.append(
            Saved(
                "causal mask handed to SDPA", tp=TpSplit.whole, per_square=1, dtype=Dtype.residual
            )
        )
    if arch.rotary and not setup.rotary_per_layer:
        # LlamaRotaryEmbedding: cos and sin of (1, s, head_dim) in the residual stream's
        # dtype, built once per forward from position ids of shape (1, s) and kept by every
        # layer's rotary (GPT-NeoX's partial rotary keeps no more: its rotary dims are at
        # most head_dim).
        kept.append(
            Saved(
                "rotary cos and sin",
                tp=TpSplit.whole,
                per_position=2 * arch.dim_head,
                dtype=Dtype.residual,
            )
        )
    freed = _norm(arch, setup, "final norm", h) if arch.final_norm else []
    # a head that keeps its input itself needs it whatever trains (no weight named)
    head_weights = frozenset() if setup.head_keeps_input else _w(Role.lm_head)
    freed += [
        Saved("lm_head input", tp=TpSplit.gathered, per_token=h, for_weights=head_weights),
        # ForCausalLMLoss pads and shifts the labels: one int64 per token kept by nll_loss.
        Saved("shifted labels", tp=TpSplit.whole, per_token=1, dtype=Dtype.int64),
    ]
    if setup.head_keeps_input:
        freed.append(
            Saved("the fused head's label mask", tp=TpSplit.whole, per_token=1, dtype=Dtype.mask)
        )
    return tuple(kept), tuple(freed)


# Roles whose input a frozen linear of the base could keep (not norms, not the vocabulary).
_BASE_LINEAR_ROLES = frozenset({Role.norm, Role.lm_head, Role.embed})


def _bytes(saved: Sequence[Saved], s: int, b: int, setup: Setup) -> int:
    """What `saved` holds on one GPU, each tensor split over the tensor-parallel ranks as
    its `TpSplit` says (`Setup.tp_divisor`)."""
    return sum(
        ceil_div(_item_bytes(item, s, b, setup), setup.tp_divisor(item.tp)) for item in saved
    )


def _item_bytes(item: Saved, s: int, b: int, setup: Setup) -> int:
    """What one saved tensor holds before tensor parallelism splits it."""
    roles = setup.trainable_roles
    copies = setup.adapter_input_bytes or setup.adapter_dropout
    elements = (
        item.per_token * s * b
        + item.per_position * s
        + item.per_token_seq * s * s * b
        + item.per_square * s * s
    )
    width = setup.dtype_bytes(item.dtype)
    if roles is not None and item.for_weights:
        adapted = item.for_weights & roles
        base_keeps = setup.frozen_linears_keep_inputs and bool(
            item.for_weights - _BASE_LINEAR_ROLES
        )
        # the base layer's own saved input
        base = elements * width if base_keeps else 0
        if not adapted:
            return base  # only frozen weights would need it: autograd keeps nothing
        if copies:
            # each adapted linear keeps its own input: PEFT's cast to the adapter's dtype
            # (tuners/lora/layer.py Linear.forward, _cast_input_dtype) or the output of
            # its dropout (and the dropout's 1-byte mask)
            per_module = setup.adapter_input_bytes or width
            modules = 1 if setup.one_adapter_per_input else len(adapted)
            return base + modules * elements * (per_module + int(setup.adapter_dropout))
        if base_keeps:
            return base  # the adapter shares the input the base layer kept
    # every linear reading it keeps its own cast (Setup.input_casts), else one tensor
    readers = len(item.for_weights & setup.input_casts) if roles is None else 0
    return max(1, readers) * elements * width


def _adapters(arch: Architecture, setup: Setup, linear: bool = False) -> int:
    """Adapted linear modules per layer (each lora_B keeps lora_A's r-wide output), of a
    Gated DeltaNet layer when `linear` (the other kind's token mixer left out)."""
    roles = setup.trainable_roles or frozenset()
    other = LINEAR_ATTENTION_ROLES if not linear else ATTENTION_ROLES
    if not arch.linear_attention_layers:
        other = frozenset()
    return sum(1 for lin in arch.linear_layers if lin.role in roles - other and lin.count)


@memoised
def _own_input_copies(arch: Architecture, setup: Setup) -> int:
    """Bytes per token per layer of the input copies kept by adapters whose input the layer
    keeps anyway for another op, so no saved tensor names their role (SDPA keeps its output,
    which o_proj reads): PEFT casts the input of every adapted linear all the same
    (tuners/lora/layer.py Linear.forward, _cast_input_dtype) and lora_A keeps the copy."""
    roles = setup.trainable_roles
    if roles is None or not (setup.adapter_input_bytes or setup.adapter_dropout):
        return 0
    named = frozenset[Role]().union(
        *(
            item.for_weights
            for linear, _ in layer_mix(arch)
            for item in layer_saved(arch, setup, Checkpointing.none, linear)
        )
    )
    width = (setup.adapter_input_bytes or setup.compute_bytes) + int(setup.adapter_dropout)
    elements = sum(
        lin.d_in * lin.count
        for lin in arch.linear_layers
        if lin.role in roles - named and lin.group not in ("embedding", "head")
    )
    return width * elements // max(1, arch.num_layers)


def _adapter_bytes(arch: Architecture, setup: Setup, s: int, b: int, linear: bool = False) -> int:
    """What one layer's LoRA adapters keep beyond the layer's saved tensors: PEFT's lora_B
    keeps lora_A's output (r per token) for every adapted linear, and lora_A the input copies
    no saved tensor names (`_own_input_copies`)."""
    if setup.trainable_roles is None:
        return 0
    outputs = _adapters(arch, setup, linear) * setup.lora_rank * setup.adapter_output_bytes
    return (outputs + _own_input_copies(arch, setup)) * s * b


def _output_projection_forward(arch: Architecture, setup: Setup, s: int, b: int) -> int:
    """What the last layer's forward holds at its MLP output projection beyond the layers'
    kept tensors, where that projection's adapter casts its input (`Setup.adapter_cast_bytes`):
    PEFT holds the f-wide cast while lora_A, lora_B and `result + lora_B(lora_A(x)) *
    scaling` run (peft 0.21 tuners/lora/layer.py Linear.forward); the 16-bit input itself
    (the MLP's product), which only the adapter's own copy keeps; the base layer's output,
    the scaled update and their sum; and the h-wide tensors the model's frames hold meanwhile
    (transformers 5.24 modeling_llama.py LlamaModel.forward `inputs_embeds`, the loop's layer
    input, LlamaDecoderLayer.forward's `residual` and the post-attention norm's output).
    Measured: memtui measure --stack trainer --objective reward with LoRA, where no logits
    hide it. Under full checkpointing the rebuilt layer's backward holds more; MoE layers are
    not modelled here."""
    roles = setup.trainable_roles
    full = setup.checkpointing is Checkpointing.full
    if roles is None or not setup.adapter_cast_bytes or full or arch.moe_layer_count:
        return 0
    if not roles & {Role.down, Role.fc_out}:
        return 0
    h, f = arch.hidden_size, arch.intermediate_size
    held = 4 * setup.residual_bytes * h
    projection = (setup.compute_bytes + setup.adapter_cast_bytes) * f
    projection += 3 * setup.compute_bytes * h
    return (held + projection) * s * b


class Moment(Enum):
    """The moments of a step at which its peak can fall: a stack says what its own buffers
    hold at each (`MomentBytes`), and `buffers_beyond` finds the worst."""

    loss_backward = "loss's backward"
    forward_end = "forward's end"
    lm_head_backward = "lm_head's backward"
    layer_backward = "a layer's backward"

    def __str__(self) -> str:
        return self.value


@dataclass(frozen=True)
class MomentBytes:
    """Bytes alive at each `Moment` (0: nothing at that one)."""

    loss_backward: float = 0
    forward_end: float = 0
    lm_head_backward: float = 0
    layer_backward: float = 0

    def items(self) -> tuple[tuple[Moment, float], ...]:
        """(moment, bytes) in `Moment`'s order (of equal moments, the first is the worst)."""
        return (
            (Moment.loss_backward, self.loss_backward),
            (Moment.forward_end, self.forward_end),
            (Moment.lm_head_backward, self.lm_head_backward),
            (Moment.layer_backward, self.layer_backward),
        )


@memoised  # the strategy table and the UI ask again for the same micro-batch
def activation_bytes(
    arch: Architecture, setup: Setup, seq_len: int, micro_batch: int, head: int | None = None
) -> int:
    """Bytes the activations add to the step's peak per GPU for one micro-batch.

    That is every layer's saved tensors, the tail's, and what backward rebuilds for one layer
    at a time under recomputation, the last only where it exceeds the logits and loss
    buffers (`logits_bytes`): those are freed before the first layer's backward runs.
    With trainable roles (LoRA), only the adapted linears keep their inputs (or their own
    copies of them), each adapter keeps its r-wide A output, and the first norm, whose input
    needs no gradient, keeps nothing. Tensor parallelism splits each tensor as its `TpSplit`
    and the stack's `TensorParallelPlan` say (`Setup.tp_divisor`): with Megatron's sequence
    parallelism everything the layers keep is divided by t (Korthikanti Table 2); without it
    only the head- and MLP-width-sharded tensors are. `head`: the loss head's bytes where an
    objective replaces the logits (TRL's fused LM head, a reward model's score head), which the last
    layer's backward then hides behind instead.
    """
    at_loss, at_layer, at_projection = _moments(arch, setup, seq_len, micro_batch)
    logits = logits_bytes(arch, setup, seq_len, micro_batch) if head is None else head
    # the loss's backward, and what the last layer's backward (or its forward, before any
    # logits) holds beyond it with the logits
    beyond = max(at_layer, at_projection) - at_loss
    # where the loss's forward holds as much as its backward or more (transformers 4.46-4.48's
    # shifted copy, 14 B per logit), that moment, the first, is the peak, and the model's
    # forward still holds the last hidden state, which a frozen lm_head did not save
    # (measured: 4.48.3, LoRA)
    roles = setup.trainable_roles
    forward_peak = (
        head is None
        and setup.loss is LossKind.full
        and _forward_per_logit(setup)
        >= setup.loss_bytes * LOSS_BUFFERS_AT_PEAK + setup.kept_logits_bytes
    )
    frozen_head = roles is not None and Role.lm_head not in roles
    # (under autocast with an fp32 stream the head saved its bf16 cast, not that state:
    # measured, 4.39.3 and 4.48.3, full fine-tuning)
    if forward_peak and (frozen_head or setup.residual_bytes > setup.compute_bytes):
        held = setup.residual_bytes * arch.hidden_size * seq_len * micro_batch
        held = ceil_div(held, setup.tp_divisor(TpSplit.sequence))
        return at_loss + max(held, beyond - logits)
    if head is not None and arch.final_norm and arch.norm_kind != "layernorm":
        # right after a small head's backward, every saved tensor alive but the head's
        # input: LlamaRMSNorm's backward through its fp32 upcast holds five h-wide fp32
        # gradients per token (measured: memtui measure --stack trainer --objective reward,
        # transformers 5.24)
        per_token = (5 * 4 - setup.compute_bytes) * arch.hidden_size
        norm_backward = per_token * seq_len * micro_batch
        beyond = max(beyond, ceil_div(norm_backward, setup.tp_divisor(TpSplit.sequence)))
    return at_loss + max(0, beyond - logits)


@memoised  # every breakdown of a stack with buffers of its own asks (buffers_beyond)
def alive_at(arch: Architecture, setup: Setup, seq_len: int, micro_batch: int) -> MomentBytes:
    """What the activations and logits terms hold at each moment, per GPU."""
    s, b = seq_len, micro_batch
    at_loss, at_layer, at_projection = _moments(arch, setup, s, b)
    # While the loss runs inside the model's forward, the model output still holds the last
    # hidden state; with an fp32 stream feeding bf16 matmuls that is the final norm's fp32
    # output, apart from lm_head's bf16 input (measured: memtui measure --stack trainer)
    held = setup.residual_bytes * arch.hidden_size * s * b // setup.tp_divisor(TpSplit.sequence)
    last_hidden = held if setup.residual_bytes > setup.compute_bytes else 0
    # the gradient of the logits, whole unless a fused linear cross-entropy made it chunk by
    # chunk inside the loss (Liger's LigerFusedLinearCrossEntropyFunction)
    logits_gradient = 0
    if setup.loss is not LossKind.fused:
        logits = setup.compute_bytes * s * b * arch.vocab_size
        logits_gradient = ceil_div(logits, setup.logits_divisor)
    return MomentBytes(
        # every layer's kept tensors and the tail's, the loss's backward buffers
        loss_backward=at_loss + logits_bytes(arch, setup, s, b),
        # the same activations, the loss's forward buffers and the model output; or, before
        # them, the last layer's output projection (`_output_projection_forward`)
        forward_end=max(
            at_loss + forward_logits_bytes(arch, setup, s, b) + last_hidden, at_projection
        ),
        # the same activations and the gradient of the logits, the loss's buffers freed
        lm_head_backward=at_loss + logits_gradient,
        # the last layer's backward, the tail's freed tensors and the logits buffers gone
        layer_backward=at_layer,
    )


@memoised
def _moments(
    arch: Architecture, setup: Setup, seq_len: int, micro_batch: int
) -> tuple[int, int, int]:
    """Activation bytes at (the loss's backward, the last layer's backward, the last layer's
    output projection in forward), the moments that decide the activations term, before
    tensor parallelism divides them. The step's activation peak is one of them: every layer's
    kept tensors, the tail, beside the logits buffers; or the tail and the logits buffers
    freed, the last layer's own worst moment instead of its kept tensors
    (`_layer_backward_peak`); or, before the tail exists, what the last layer's output
    projection holds in forward (`_output_projection_forward`)."""
    s, b, layers = seq_len, micro_batch, arch.num_layers
    roles = setup.trainable_roles
    full = setup.checkpointing is Checkpointing.full

    def size(items: Sequence[Saved]) -> int:
        return _bytes(items, s, b, setup)

    # What each layer keeps from its forward to its backward: its saved tensors and its
    # adapters' (rebuilt with the layer under full checkpointing), per kind of layer.
    mix = layer_mix(arch)
    per_kind = {
        linear: size(layer_saved(arch, setup, linear=linear))
        + (0 if full else _adapter_bytes(arch, setup, s, b, linear))
        for linear, _ in mix
    }
    if setup.offload_layer_inputs and full:
        # the checkpointed inputs move to CPU as the forward goes; the layer being computed
        # and the next one's prefetch stay on the GPU (torchtune OffloadActivations, its
        # streams overlapping one copy each way)
        layers_kept = min(layers, 2) * max(per_kind.values())
    else:
        layers_kept = sum(count * per_kind[linear] for linear, count in mix)
    if setup.parametrized_experts and (roles or frozenset()) & {
        Role.expert_gate,
        Role.expert_down,
    }:
        # LoRA on the stacked experts: PEFT's ParamWrapper parametrizes each one as W + B A
        # per expert (peft 0.21 tuners/lora/layer.py ParamWrapper._activate_lora), a
        # parameter-sized tensor each expert's F.linear keeps in the compute dtype (measured
        # with memtui measure on a tiny Qwen3-Next: the same bytes at 256, 512, 1024 tokens)
        experts = 3 * arch.num_experts * arch.expert_width * arch.hidden_size
        # (a weight shard on each tensor-parallel rank)
        layers_kept += ceil_div(arch.moe_layer_count * experts * setup.compute_bytes, setup.tp)
    if roles is not None and not full and arch.leading_norm and Role.embed not in roles:
        # The embedding is frozen: the first layer's first norm sees no gradient.
        layers_kept -= size(_norm(arch, setup, "first norm", arch.hidden_size))
    tail_kept, tail_freed = _tail(arch, setup)
    # outside the layers, alive until backward ends (token ids, rotary cos/sin)
    tail = size(tail_kept)
    if setup.attention is Attention.eager and full and setup.eager_causal_mask:
        # The eager causal mask (b, 1, s, s), in the residual stream's dtype, is an input of
        # every checkpointed layer, so it lives until backward ends (measured).
        tail += size(
            [Saved("causal mask", tp=TpSplit.whole, per_token_seq=1, dtype=Dtype.residual)]
        )
    # freed by the loss's and lm_head's backward (final norm, lm_head input, labels)
    freed = size(tail_freed)
    if setup.head_adapter:
        # the output layer's lora_A output, kept by its lora_B (its input copy is the tail's)
        freed += setup.lora_rank * setup.adapter_output_bytes * s * b

    at_loss = layers_kept + tail + freed
    # the last layer's kept tensors give way to its backward's worst moment, which has them
    # (of a hybrid stack, the kind whose backward holds more beyond what it kept)
    last = max(
        _layer_backward_peak(arch, setup, b, s, linear) - per_kind[linear] for linear, _ in mix
    )
    at_layer = layers_kept + tail + last
    projection = _output_projection_forward(arch, setup, s, b)
    return at_loss, at_layer, layers_kept + tail + projection if projection else 0


def buffers_beyond(
    arch: Architecture,
    setup: Setup,
    seq_len: int,
    micro_batch: int,
    buffers: MomentBytes,
) -> tuple[int, Moment]:
    """The most a stack's buffers add to the step's peak beyond the activations and logits
    terms, and at which moment: `buffers` gives what they hold at each `Moment`, and the
    activations and logits are alive beside them as `alive_at` says."""
    s, b = seq_len, micro_batch
    alive = dict(alive_at(arch, setup, s, b).items())
    base = activation_bytes(arch, setup, s, b) + logits_bytes(arch, setup, s, b)
    extra = {moment: alive[moment] + held - base for moment, held in buffers.items()}
    worst = max(extra, key=lambda moment: extra[moment])
    return max(0, round(extra[worst])), worst


def base_linear_inputs(arch: Architecture, setup: Setup, seq_len: int, micro_batch: int) -> int:
    """Bytes of the inputs that frozen base linears keep themselves, over every layer
    (`Setup.frozen_linears_keep_inputs`; 0 without it or under full checkpointing)."""
    if not setup.frozen_linears_keep_inputs or setup.checkpointing is Checkpointing.full:
        return 0
    base_only = replace(setup, trainable_roles=None, input_casts=frozenset())
    total = 0
    for linear, count in layer_mix(arch):
        saved = layer_saved(arch, setup, linear=linear)
        kept = [item for item in saved if item.for_weights - _BASE_LINEAR_ROLES]
        total += count * _bytes(kept, seq_len, micro_batch, base_only)
    return total


def offloaded_bytes(arch: Architecture, setup: Setup, seq_len: int, micro_batch: int) -> int:
    """Pinned CPU bytes activation offloading needs: every checkpointed layer input."""
    if not (setup.offload_layer_inputs and setup.checkpointing is Checkpointing.full):
        return 0
    kept = _bytes(layer_saved(arch, setup), seq_len, micro_batch, setup)
    return arch.num_layers * kept


# The loss's buffers per logit at their peak (the start of backward): cross_entropy's
# log_softmax keeps its output for backward; in backward nll_loss writes its gradient into a
# new b s V tensor and log_softmax's backward a third one, all in the loss's dtype. With
# transformers' ForCausalLMLoss, which upcasts the logits (logits.float()), that is 3 fp32
# buffers, 12 bytes per logit (measured). The forward holds less: bf16 logits + the fp32
# upcast + the log-probs = 10 bytes per logit (fp32: the upcast is the logits themselves, 8).
LOSS_BUFFERS_AT_PEAK = 3
# A chunked cross-entropy keeps every chunk's log-probs until backward (log_softmax saves its
# output: `Setup.loss_bytes` per logit), and works one chunk at a time otherwise: in backward
# a chunk's gradient, its log_softmax gradient and the bf16 logits' gradient, 4 + 4 + 2 bytes
# per logit of the chunk upcast to fp32 (torchtune CEWithChunkedOutputLoss /
# LinearCrossEntropyLoss), 2 + 2 + 2 in bf16 (lit-gpt chunked_cross_entropy).
CHUNKED_GRADIENT_BUFFERS = 2
# A fused linear cross-entropy never holds the logits of more than one chunk of tokens: Liger's
# FusedLinearCrossEntropy sizes its chunks so a chunk's logits are about the hidden states'
# size (chunk = b s h / V tokens), and keeps their fp32 and bf16 gradients for the chunk:
# about (4 + 4 + 2) bytes x b s h in all.
FUSED_PER_HIDDEN = 4 + 4 + 2


def forward_logits_bytes(arch: Architecture, setup: Setup, seq_len: int, micro_batch: int) -> int:
    """Bytes of the logits and loss at the forward's loss (the whole-logits loss): the logits
    in the compute dtype, their upcast to the loss's dtype when that differs, and the
    log-probs the loss keeps (10 bytes per logit in bf16 with transformers' ForCausalLMLoss,
    8 in fp32); `logits_bytes` minus this is what the forward's end holds less than the
    loss's backward. The chunked and fused losses: `logits_bytes` (no smaller moment known)."""
    if setup.loss is not LossKind.full:
        return logits_bytes(arch, setup, seq_len, micro_batch)
    logits = seq_len * micro_batch * arch.vocab_size
    return ceil_div(_forward_per_logit(setup) * logits, setup.logits_divisor)


def _forward_per_logit(setup: Setup) -> int:
    """Bytes per logit alive at the whole-logits loss's forward (nll_loss_forward): the model's
    logits, their upcast to the loss's dtype when that differs, a shifted copy, the log-probs.
    transformers 4.49+ ForCausalLMLoss (loss/loss_utils.py: pads the labels) 2 + 4 + 4 = 10;
    4.46-4.48 (logits[..., :-1, :].contiguous() of the upcast) 2 + 4 + 4 + 4 = 14; up to
    4.45 LlamaForCausalLM.forward upcasts the logits itself (logits.float()) and takes the
    shifted copy: 4 + 4 + 4 = 12."""
    output = setup.output_logits_bytes or setup.compute_bytes
    upcast = setup.loss_bytes if setup.loss_bytes != output else 0
    shifted = setup.loss_bytes if setup.shifted_logits_copy else 0
    return output + upcast + shifted + setup.loss_bytes


def kept_output_bytes(arch: Architecture, setup: Setup, seq_len: int, micro_batch: int) -> int:
    """Bytes of the output logits the training loop holds (`Setup.kept_logits_bytes`)."""
    logits = seq_len * micro_batch * arch.vocab_size
    return ceil_div(setup.kept_logits_bytes * logits, setup.logits_divisor)


def logits_bytes(arch: Architecture, setup: Setup, seq_len: int, micro_batch: int) -> int:
    """Peak bytes of the logits and the causal-LM loss for the setup's loss (see the
    constants above; full, upcast to fp32: 3 x 4 bytes per logit, b s V, measured)."""
    tokens = seq_len * micro_batch
    logits = tokens * arch.vocab_size
    if setup.loss is LossKind.fused:
        total = FUSED_PER_HIDDEN * tokens * arch.hidden_size
    elif setup.loss is LossKind.chunked:
        per_chunk = ceil_div(logits, max(1, setup.loss_chunks))
        chunk_buffers = CHUNKED_GRADIENT_BUFFERS * setup.loss_bytes + setup.compute_bytes
        total = setup.loss_bytes * logits + chunk_buffers * per_chunk
    else:
        # the backward's buffers and the logits the loop keeps, or the forward's when more
        # (transformers 4.46-4.48's shifted copy: 14 B per logit at nll_loss_forward)
        backward = setup.loss_bytes * LOSS_BUFFERS_AT_PEAK + setup.kept_logits_bytes
        total = max(backward, _forward_per_logit(setup)) * logits
    if setup.loss is not LossKind.full:
        total += setup.kept_logits_bytes * logits
    if arch.logit_softcap:  # the final soft-cap's tanh output, in the compute dtype
        total += setup.compute_bytes * logits
    return ceil_div(total, setup.logits_divisor)
