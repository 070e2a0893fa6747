"""How long one training step of a plan takes: each part a mechanism with its source.

Public API (stable; fields are only ever added):

- `step_time(plan) -> StepTime`: seconds per optimizer step and per micro-step, tokens/s per
  GPU, MFU, the FLOPs, and each part (`StepPart`: a `StepPartKind`, seconds per optimizer
  step, its source); `StepTime.seconds_for_tokens(n)` is the time to train n tokens.
- `seconds_per_token(plan) -> float`: seconds per token the whole job trains, the figure
  the lever list compares (a lever that halves the sequence also halves the tokens of a
  step).
- `matmul_seconds(m, k, n, width, flops, bandwidth) -> float`: the roofline of one matmul.

`StepTime`, `StepPart` and `StepPartKind` live in `memtui.estimator.report` (the Report
carries one) and are re-exported here.

The model, per GPU and per micro-step of b sequences of s tokens (T = b s tokens; a
preference objective's chosen and rejected rows are both trained, `objectives.trained_shape`):

- Matmuls, from the architecture's real linear layers (`Architecture.linear_layers`): a
  linear d_in -> d_out costs 2 T d_in d_out FLOPs forward, as much again for the gradient of
  its input and again for its weight's gradient (Kaplan et al. 2020 sec. 2.1: C ~ 6N per
  token for training). A frozen weight needs no weight gradient (LoRA's base: about 4N, Hu et
  al. 2021 sec. 4.2), an adapter r (d_in + d_out) costs its own small matmuls; an MoE layer
  runs only the routed experts, T k / E tokens each (Fedus et al. 2022, Switch Transformer
  sec. 2). Each matmul's time is a roofline (Williams et al. 2009) on its per-GPU shape: the
  larger of its FLOPs over the card's dense peak times the best matmul efficiency published
  for the card (`GpuPreset.matmul_ceiling`) and its bytes (both operands and the output) over
  the memory bandwidth, so narrow shapes (LoRA's rank-r factors, a small micro-batch's
  experts) are memory-bound.
- Attention's s^2 term: QK^T and AV, 2 T s a (d_qk + d_v) FLOPs forward per layer
  (Narayanan et al. 2021 eq. 3; PaLM's appendix B counts it for MFU), half of it executed
  under a causal FlashAttention kernel that skips masked tiles (Dao 2023 sec. 3.1), its
  backward 2.5x the forward (two matmuls forward, five backward with the recomputed scores:
  ibid. sec. 3.1.2), at FlashAttention-2's published efficiency. Eager attention runs both
  as batched matmuls on the whole s x s scores, plus the softmax's passes over them.
- Elementwise kernels (norms, residual adds, rotary, the MLP's activation) are memory-bound:
  their bytes counted op by op from transformers' modeling_llama.py (LlamaRMSNorm.forward,
  apply_rotary_pos_emb, LlamaMLP.forward; 4.45 to 5.x), backward twice forward.
- Recompute: full checkpointing runs each layer's forward again in backward, selective the
  attention core (Korthikanti et al. 2022 sec. 5).
- The loss: the logits' elementwise passes (transformers loss_utils.py ForCausalLMLoss
  upcasts them to fp32; Liger's fused linear cross-entropy reads a bf16 chunk a few times).
- QLoRA: each 4-bit weight is dequantized before its forward and again in backward
  (bitsandbytes autograd/_functions.py MatMul4Bit.forward and .backward call
  F.dequantize_4bit), memory-bound.
- The optimizer step is memory-bound: the bytes its kernels read and write over the
  bandwidth (torch optim/adamw.py _fused_adamw vs _multi_tensor_adamw's eight foreach
  kernels; bitsandbytes' 8-bit state is one byte per moment); under offload it runs on the
  CPU (ZeRO-Offload, Ren et al. 2021) over the host's memory bandwidth. A paged optimizer's
  state beyond the GPU's memory is paged in over the host link every step (bitsandbytes
  prefetch_state; QLoRA sec. 2).
- Communication: the volumes of `memtui.estimator.communication` over the NVLink/NIC split,
  hidden behind the compute they overlap with (FSDP's and ZeRO-3's prefetched gathers behind
  each pass, the first unit's exposed: Zhao et al. 2023 sec. 3.3-3.4; DDP's bucketed
  all-reduce behind the last backward: Li et al. 2020 sec. 3.2.3), tensor parallelism's
  all-reduces on the critical path (Shoeybi et al. 2019 sec. 3). The compute a hidden
  collective overlaps runs on the SMs NCCL's blocks leave it (one block per channel: 24 on
  NVLink, 2 on PCIe, from NCCL's topology search), a part of its own (contention).
- Offload copies cross the card's host link (`GpuPreset.host_link`).
- Gradient accumulation: every micro-step's parts run grad_accum times, the optimizer and the
  boundary collectives once.
"""

from __future__ import annotations

from memtui.estimator.architecture import Architecture, ExpertAdapters, LinearLayer, Role
from memtui.estimator.choices import (
    Attention,
    Checkpointing,
    LossKind,
    Method,
    Offload,
    OptimizerKernel,
    Precision,
)
from memtui.estimator.communication import (
    payloads,
    tensor_parallel_plan,
    tensor_parallel_volume,
    volume,
)
from memtui.estimator.hardware import GpuPreset, card_of
from memtui.estimator.memo import BoundedCache, memoised
from memtui.estimator.objectives import keeps_reference, spec_of, trained_shape
from memtui.estimator.optimizers import optimizer_spec
from memtui.estimator.plan import Plan
from memtui.estimator.report import StepPart, StepPartKind, StepTime
from memtui.estimator.stacks import stack_for
from memtui.estimator.state import nf4_bits_per_param, parameters_of, trainable_tensors
from memtui.estimator.strategies import strategy_spec

__all__ = [
    "StepPart",
    "StepPartKind",
    "StepTime",
    "matmul_seconds",
    "seconds_per_token",
    "step_time",
]

# FlashAttention-2's share of the dense peak: "50-73% of the theoretical maximum FLOPs/s on
# A100" (Dao 2023, abstract; the low end: backward is the slower pass), and "only 35%
# utilization on H100" (Shah et al. 2024, FlashAttention-3, abstract): PyTorch's SDPA flash
# backend and transformers' flash_attention_2 run FlashAttention-2's kernels on Hopper too.
FLASH_EFFICIENCY_AMPERE = 0.50
FLASH_EFFICIENCY_HOPPER = 0.35
FLASH_BACKWARD_RATIO = 2.5
"""FlashAttention's backward FLOPs over its forward's: five matmuls (the scores recomputed,
dV, dP, dQ, dK) against two (Dao 2023 sec. 3.1.2)."""

# Bytes per element each elementwise kernel moves, in units of the activation width w (2 B
# in bf16), counted op by op in transformers' modeling_llama.py (4.45-5.x), each torch op
# reading its inputs and writing its output:
# LlamaRMSNorm.forward: to(float32) (w + 2w), pow(2) (2w + 2w), mean (2w), x * rsqrt (2w + 2w
# + 2w), to(input dtype) (2w + w), weight * x (w + w + w): 20 w per element of h.
NORM_PASSES = 20
# a residual add reads two tensors and writes one
RESIDUAL_PASSES = 3
# apply_rotary_pos_emb: rotate_half's neg and cat (2 w), x * cos and rotate_half(x) * sin
# (2 x 2 w), their sum (3 w): 9 w per element of q and k, plus reading x once more
ROTARY_PASSES = 10
# LlamaMLP: act_fn(gate_proj(x)) (2 w) * up_proj(x) (3 w); a plain MLP's activation 2 w
GATED_ACT_PASSES = 5
PLAIN_ACT_PASSES = 2
ELEMENTWISE_BACKWARD_RATIO = 2
"""An elementwise op's backward reads the output's gradient and its saved inputs and writes
the input's gradient: about twice its forward's bytes."""
# PEFT tuners/lora/layer.py Linear.forward: result + lora_B(lora_A(dropout(x))) * scaling:
# the scale (2 w) and the add (3 w) on every output element; backward, the add passes its
# gradient through and the scale's backward multiplies it (2 w)
LORA_OUTPUT_PASSES = 5
LORA_OUTPUT_BACKWARD_PASSES = 2
# Eager attention's softmax over the s x s scores (modeling_llama.py eager_attention_forward):
# softmax in fp32 (read w, write 4 B), read 4 B, cast back (write w), plus the scores written
# by QK^T and the probabilities read by AV (counted in their matmuls): 14 B per score in bf16
EAGER_SOFTMAX_BYTES = 14
# Bytes per logit the loss moves, forward and backward: ForCausalLMLoss's logits.float()
# (read 2, write 4), log_softmax (read 4, write 4), its backward (read 4 + 4, write 4) and the
# upcast's backward (read 4, write 2): 32; chunked losses (torchtune CEWithChunkedOutputLoss,
# LitGPT chunked_cross_entropy) upcast each chunk the same way; Liger's
# LigerFusedLinearCrossEntropyFunction reads each bf16 chunk for its max and sum and writes
# its gradient in place (liger_kernel/ops/cross_entropy.py liger_cross_entropy_kernel): 6
LOSS_BYTES = {LossKind.full: 32, LossKind.chunked: 32, LossKind.fused: 6}
HOST_MEMORY_BANDWIDTH_PER_NODE = 2 * 307.2e9
"""Bytes/s of a node's CPU memory for the offloaded optimizer step: DGX H100's two Xeon
Platinum 8480C, eight DDR5-4800 channels each (Intel ARK: 307.2 GB/s per socket), shared by
the node's GPUs."""


def seconds_per_token(plan: Plan) -> float:
    """Seconds per token the whole job trains with `plan` (one step's over its tokens)."""
    timed = step_time(plan)
    return timed.seconds / timed.tokens_per_step


_CACHE = BoundedCache()


def step_time(plan: Plan) -> StepTime:
    """The time of one step of `plan` on its card, part by part."""
    return _CACHE.get(plan, lambda: _step_time(plan))


class _Card:
    """The figures one estimate reads of the plan's card (`_card` memoises them)."""

    __slots__ = ("assumed", "bandwidth", "flash", "matmul_peak", "peak", "preset")

    def __init__(self, name: str, capability: float, memory: int, precision: Precision) -> None:
        preset, assumed = card_of(name, capability, memory)
        self.preset: GpuPreset = preset
        self.assumed = assumed
        self.peak = _peak(preset, precision)
        self.matmul_peak = self.peak * preset.matmul_ceiling
        self.bandwidth = preset.memory_bandwidth
        hopper = preset.compute_capability >= 9.0
        self.flash = self.peak * (FLASH_EFFICIENCY_HOPPER if hopper else FLASH_EFFICIENCY_AMPERE)

    def gemm(self, m: float, k: float, n: float, width: int) -> float:
        return matmul_seconds(m, k, n, width, self.matmul_peak, self.bandwidth)


def matmul_seconds(
    m: float, k: float, n: float, width: int, flops: float, bandwidth: float
) -> float:
    """Seconds of one (m x k) @ (k x n) matmul of `width`-byte elements on a card that runs
    `flops` FLOP/s and moves `bandwidth` bytes/s: the roofline (Williams et al. 2009), the
    larger of its 2 m k n FLOPs' time and its bytes' (both operands read, the output
    written)."""
    return max(2 * m * k * n / flops, width * (m * k + k * n + m * n) / bandwidth)


_card = memoised(_Card)


def _peak(preset: GpuPreset, precision: Precision) -> float:
    """The dense peak of the plan's matmul dtype. fp32 matmuls run on the CUDA cores: PyTorch
    leaves torch.backends.cuda.matmul.allow_tf32 False since 1.12. A card without bf16
    tensor cores (V100, T4) runs bf16 matmuls without them."""
    if precision is Precision.fp32:
        return preset.fp32_flops
    return preset.bf16_flops or preset.fp32_flops


def _active_tokens(arch: Architecture, lin: LinearLayer, tokens: float) -> float:
    """Tokens one copy of `lin` multiplies: an expert sees its routed share, T k / E."""
    if lin.group == "expert":
        return tokens * arch.experts_per_token / arch.num_experts
    return tokens


def _step_time(plan: Plan) -> StepTime:
    arch = plan.model.architecture
    hw = plan.hardware
    card: _Card = _card(hw.gpu_name, hw.compute_capability, hw.gpu_memory, plan.precision)
    t = plan.tp
    w = plan.precision.activation_bytes
    wb = plan.precision.weight_bytes
    seq, rows = trained_shape(plan)
    tokens = seq * rows
    scale = plan.model.parameters / arch.parameter_count  # a bare count's assumed shape
    full = plan.method is Method.full
    adapted = (
        _adapted(arch, plan.lora_targets, plan.expert_adapters)
        if not full and plan.lora_fraction is None
        else frozenset()
    )
    spec = spec_of(plan)
    notes: list[str] = []

    # --- matmuls of the decoder layers
    fwd, bwd, flops_f, flops_b, lora_fwd, lora_bwd, lora_flops = _matmuls(
        arch, tokens, t, wb, w, card, full, adapted, plan.lora_rank
    )
    if plan.lora_fraction is not None and not full:
        # adapters given as a share of a bare count: 2 T A forward, twice that backward
        adapters = plan.model.parameters * plan.lora_fraction / t
        lora_fwd = 2 * tokens * adapters / card.matmul_peak
        lora_bwd = 2 * lora_fwd
        lora_flops = 2 * tokens * adapters
    fwd, bwd, flops_f, flops_b = (x * scale for x in (fwd, bwd, flops_f, flops_b))

    # --- attention's s^2 term and the elementwise kernels
    tp_plan = tensor_parallel_plan(plan)
    attn_f, attn_b, attn_run, attn_hw, attn_full, elem_f = _layers(
        arch, seq, rows, t, w, card, plan.attention, tp_plan.sequence_parallel
    )
    attn_model = 3 * attn_full  # forward and twice for backward, whole (PaLM appendix B)
    elem_b = ELEMENTWISE_BACKWARD_RATIO * elem_f

    # --- the output layer and the loss
    head_f = head_b = head_flops_f = head_flops_b = loss = 0.0
    if not spec.classification:
        width = arch.embed_proj_dim or arch.hidden_size
        vocab = arch.vocab_size / t
        head_f = card.gemm(tokens, width, vocab, wb)
        head_flops_f = 2 * tokens * width * vocab
        head_trains = full or "lm_head" in plan.modules_to_save
        head_b = (2 if head_trains else 1) * head_f
        head_flops_b = (2 if head_trains else 1) * head_flops_f
        # a stack that all-gathers the vocab shards computes the loss on the whole
        # vocabulary on every rank (`TensorParallelPlan.logits_gathered`)
        gathered = t > 1 and tp_plan.logits_gathered
        loss_vocab = arch.vocab_size if gathered else vocab
        loss = LOSS_BYTES[plan.loss] * tokens * loss_vocab / card.bandwidth

    layers_f = fwd + attn_f + elem_f + lora_fwd
    forward = layers_f + head_f
    backward = bwd + attn_b + elem_b + lora_bwd + head_b
    model_flops = flops_f + flops_b + attn_model + 3 * lora_flops + head_flops_f + head_flops_b
    hardware_flops = flops_f + flops_b + attn_hw + 3 * lora_flops + head_flops_f + head_flops_b

    # --- recompute
    if plan.checkpointing is Checkpointing.full:
        recompute = layers_f
        hardware_flops += flops_f + lora_flops + attn_run
    elif plan.checkpointing is Checkpointing.selective:
        recompute = attn_f
        hardware_flops += attn_run
    else:
        recompute = 0.0

    # --- a reference model's forward (no backward)
    if keeps_reference(plan):
        forward += fwd + attn_f + elem_f + head_f
        hardware_flops += flops_f + head_flops_f + attn_run
    if spec.online:
        notes.append("generating the completions (the rollout) is not timed")
    if spec.value_model or spec.reward_model:
        notes.append("the value and reward models' passes are not timed")

    # --- QLoRA's dequantization
    dequant = 0.0
    if plan.method is Method.qlora:
        # bitsandbytes converts the linears inside the blocks (state.frozen_base_bytes)
        linears = (lin for lin in arch.linear_layers if lin.group != "head")
        nf4 = sum(lin.d_in * lin.d_out * lin.count for lin in linears) * scale / t
        passes = 3 if plan.checkpointing is Checkpointing.full else 2
        moved = nf4 * (nf4_bits_per_param(plan.qlora_double_quant) / 8 + wb)
        dequant = passes * moved / card.bandwidth
        if keeps_reference(plan):
            dequant += moved / card.bandwidth
    elif arch.quantized is not None:
        notes.append(f"the {arch.quantized.method.value} kernels' unpacking is not timed")

    micro_compute_f = forward
    micro_compute_b = backward + recompute

    # --- communication, exposed after overlap
    trainable = parameters_of(trainable_tensors(plan))
    communication, boundary, slowed, slowed_boundary = _communication(
        plan, card, trainable, micro_compute_f, micro_compute_b
    )

    # --- offload copies and the optimizer step
    offload, optimizer = _offload_and_optimizer(
        plan, card, trainable, micro_compute_f, micro_compute_b
    )

    ga = plan.grad_accum
    parts = (
        StepPart(StepPartKind.forward, ga * forward, _FORWARD),
        StepPart(StepPartKind.backward, ga * backward, _BACKWARD),
        StepPart(StepPartKind.recompute, ga * recompute, _RECOMPUTE[plan.checkpointing]),
        StepPart(StepPartKind.loss, ga * loss, _LOSS[plan.loss]),
        StepPart(StepPartKind.dequantization, ga * dequant, _DEQUANT),
        StepPart(StepPartKind.communication, ga * communication, _COMMUNICATION),
        StepPart(StepPartKind.offload, ga * offload, _OFFLOAD),
        StepPart(StepPartKind.optimizer, optimizer, _OPTIMIZER),
        StepPart(StepPartKind.step_communication, boundary, _BOUNDARY),
        StepPart(StepPartKind.contention, ga * slowed + slowed_boundary, _CONTENTION),
    )
    seconds = sum(p.seconds for p in parts)
    # the parts of every micro-step
    micro = (seconds - optimizer - boundary - slowed_boundary) / ga
    per_step = tokens * ga * plan.data_parallel
    return StepTime(
        seconds=seconds,
        micro_step_seconds=micro,
        tokens_per_second_per_gpu=per_step / seconds / plan.hardware.gpus,
        mfu=ga * model_flops / seconds / card.peak,
        tokens_per_step=per_step,
        model_flops=ga * model_flops,
        hardware_flops=ga * hardware_flops,
        peak_flops=card.peak,
        card=card.preset.name,
        card_assumed=card.assumed,
        parts=parts,
        not_modelled=tuple(notes),
    )


@memoised
def _adapted(
    arch: Architecture, targets: tuple[str, ...], adapters: ExpertAdapters
) -> frozenset[Role]:
    """The roles of the linears PEFT adapts for `targets`."""
    return frozenset(lin.role for lin in arch.lora_layers(targets, adapters))


@memoised
def _matmuls(
    arch: Architecture,
    tokens: int,
    t: int,
    wb: int,
    w: int,
    card: _Card,
    full: bool,
    adapted: frozenset[Role],
    r: int,
) -> tuple[float, float, float, float, float, float, float]:
    """The decoder layers' linears for one micro-step of `tokens` tokens on one GPU of a
    tensor-parallel group of `t`: (forward seconds, backward seconds, forward FLOPs, backward
    FLOPs, the adapters' forward seconds, backward seconds and forward FLOPs)."""
    fwd = bwd = flops_f = flops_b = 0.0
    lora_fwd = lora_bwd = lora_flops = 0.0
    # the input's gradient always (earlier layers need it), the weight's when it trains
    grads = 2 if full else 1
    for lin in arch.linear_layers:
        m = _active_tokens(arch, lin, tokens)
        d_out = lin.d_out / t
        once = card.gemm(m, lin.d_in, d_out, wb) * lin.count
        flops = 2 * m * lin.d_in * d_out * lin.count
        fwd += once
        flops_f += flops
        bwd += grads * once
        flops_b += grads * flops
        if lin.role in adapted:
            a = card.gemm(m, lin.d_in, r, wb) + card.gemm(m, r, d_out, wb)
            out = w * m * d_out / card.bandwidth
            lora_fwd += (a + LORA_OUTPUT_PASSES * out) * lin.count
            lora_bwd += (2 * a + LORA_OUTPUT_BACKWARD_PASSES * out) * lin.count
            lora_flops += 2 * m * r * (lin.d_in + d_out) * lin.count
    return fwd, bwd, flops_f, flops_b, lora_fwd, lora_bwd, lora_flops


@memoised
def _layers(
    arch: Architecture,
    seq: int,
    rows: int,
    t: int,
    w: int,
    card: _Card,
    attention: Attention,
    sequence_parallel: bool,
) -> tuple[float, float, float, float, float, float]:
    """Attention's s^2 term and the elementwise kernels of one micro-step of `rows`
    sequences of `seq` tokens: (attention forward seconds, backward seconds, forward FLOPs
    executed, all FLOPs executed, forward FLOPs counted whole, elementwise forward
    seconds). Without sequence parallelism every rank of a tensor-parallel group runs the
    norms and residual adds on the whole replicated sequence."""
    tokens = seq * rows
    heads = arch.num_heads / t
    attended = arch.full_attention_layers  # a Gated DeltaNet layer has no s^2 term
    attn_full = 2 * tokens * seq * heads * (arch.dim_head + arch.v_dim) * attended
    if attention is Attention.flash:
        attn_run = 0.5 * attn_full  # causal: the masked half of the tiles skipped
        attn_f = attn_run / card.flash
        attn_b = FLASH_BACKWARD_RATIO * attn_f
        attn_hw = attn_run * (1 + FLASH_BACKWARD_RATIO)
    else:
        attn_run = attn_full
        pairs = rows * heads * attended
        scores = pairs * seq * seq
        qk = card.gemm(seq, arch.dim_head, seq, w) + card.gemm(seq, seq, arch.v_dim, w)
        softmax = EAGER_SOFTMAX_BYTES * (w / 2) * scores / card.bandwidth
        attn_f = pairs * qk + softmax
        attn_b = 2 * pairs * qk + ELEMENTWISE_BACKWARD_RATIO * softmax
        attn_hw = 3 * attn_full
    # the Gated DeltaNet layers' delta rule: small batched matmuls (chunks of 64 tokens), timed
    # at the attention kernels' rate, backward twice the forward's matmuls
    delta = tokens * arch.delta_rule_flops * arch.linear_attention_layers / t
    attn_f += delta / card.flash
    attn_b += 2 * delta / card.flash
    attn_run += delta
    attn_hw += 3 * delta
    attn_full += delta
    # elementwise kernels, memory-bound
    moe = arch.moe_layer_count
    dense = arch.num_layers - moe
    mlp_width = dense * arch.intermediate_size + moe * (
        arch.expert_width * arch.experts_per_token + arch.shared_expert_intermediate_size
    )
    act = GATED_ACT_PASSES if arch.mlp_kind == "gated" else PLAIN_ACT_PASSES
    stream = (arch.norms_per_layer * NORM_PASSES + 2 * RESIDUAL_PASSES) * arch.hidden_size
    split = (ROTARY_PASSES * (arch.q_width + arch.kv_width) if arch.rotary else 0) * (
        arch.num_layers
    ) + act * mlp_width  # over the rank's heads and MLP columns
    stream_share = t if sequence_parallel else 1
    per_token = stream * arch.num_layers / stream_share + split / t
    elem_f = w * per_token * tokens / card.bandwidth
    return attn_f, attn_b, attn_run, attn_hw, attn_full, elem_f


def _communication(
    plan: Plan, card: _Card, trainable: int, forward: float, backward: float
) -> tuple[float, float, float, float]:
    """(exposed seconds per micro-step, exposed seconds at the accumulation boundary, and the
    compute seconds NCCL's blocks slow behind the hidden ones of each)."""
    nvlink = _nvlink(plan, card.preset)
    intra = plan.hardware.intra_node_bandwidth * (NCCL_NVLINK_SHARE if nvlink else 1.0)
    micro, boundary, hidden_micro, hidden_boundary = _collectives(
        plan, trainable, forward, backward, intra
    )
    share = _nccl_sm_share(plan, card.preset)
    return micro, boundary, share * hidden_micro, share * hidden_boundary


NCCL_NVLINK_SHARE = 0.8
"""The share of the datasheet's NVLink bandwidth NCCL's rings reach: its topology takes a
link at 20.0 GB/s per direction on sm70-sm80, 20.6 on sm90 and 40.1 on sm100 (src/graph/
topo.h SM80_NVLINK_BW, SM90_NVLINK_BW, SM100_NVLINK_BW; 2.18-2.30) against the datasheets'
25, 25 and 50 GB/s a link, and its search settles on 6 rings of 40 GB/s (sm90: 60) over
NVSwitch (search.cc speedArrayIntra, sm90SpeedArrayIntra): 240 of A100's 300 GB/s, 360 of
H100's 450."""


# NCCL's channel count, each channel one CUDA block held on an SM for the collective's
# whole run (src/enqueue.cc launches a collective's kernel with a grid of nChannels), from its
# topology search (src/graph/search.cc ncclTopoCompute, 2.18-2.27): on NVLink/NVSwitch
# (SM80_NVLINK_BW 20 GB/s x 12 links on A100; SM90 20.6 x 18 on H100, topo.h) the search
# settles at 40 GB/s (sm90: 60) per channel, 6 channels; ncclTopoDupChannels doubles them
# (bwIntra >= 25) and ncclTopoPostset doubles them again (connect.cc): 24. NVIDIA's forum,
# "Compute-Communication Overlap Causes Severe GEMM Performance Degradation" (2025, Nsight
# Systems on H100 under FSDP-style prefetch): "the concurrent ncclAllGather kernel launches 24
# blocks". Over PCIe (PCI_BW 24 GB/s) the search keeps 1 channel at 20 GB/s, no duplication
# (below 25), doubled by the postset: 2.
NCCL_BLOCKS_NVLINK = 24
NCCL_BLOCKS_PCIE = 2


def _nvlink(plan: Plan, preset: GpuPreset) -> bool:
    """Whether the node's GPUs talk over NVLink: a link faster than the card's PCIe x16."""
    return plan.hardware.intra_node_bandwidth > preset.host_link


def _nccl_sm_share(plan: Plan, preset: GpuPreset) -> float:
    """The share of the card's SMs NCCL's blocks hold while a collective runs: compute
    overlapped with it runs on the rest, so each hidden second of communication costs this
    share of a second of compute (a lower bound: the GEMM's last wave can spill into a
    second one, the forum's case)."""
    blocks = NCCL_BLOCKS_NVLINK if _nvlink(plan, preset) else NCCL_BLOCKS_PCIE
    return blocks / preset.sms


def _hidden(seconds: float, window: float, units: int) -> float:
    """What of `seconds` of prefetched transfers stays exposed beside `window` seconds of
    compute: at least the first of `units` equal pieces (nothing to hide it behind yet)."""
    if seconds <= 0:
        return 0.0
    return max(seconds / units, seconds - window)


def _collectives(
    plan: Plan, trainable: int, forward: float, backward: float, intra_rate: float
) -> tuple[float, float, float, float]:
    """(exposed seconds per micro-step, exposed seconds at the accumulation boundary, and
    the seconds hidden behind compute of each), the node's collectives at `intra_rate` bytes/s."""
    hw = plan.hardware
    units = plan.model.architecture.num_layers
    tp = tensor_parallel_volume(plan) / plan.grad_accum
    # Megatron's tensor-parallel all-reduces wait for the layer's output: on the critical path
    tp_link = intra_rate if plan.tp <= hw.gpus_per_node else hw.inter_node_bandwidth
    micro = tp / tp_link
    if plan.data_parallel == 1:
        return micro, 0.0, 0.0, 0.0
    how = strategy_spec(plan.strategy)
    intra, inter = volume(plan, plan.strategy, trainable)
    ga = plan.grad_accum
    weights, grads = payloads(plan, trainable)
    if how.hybrid:
        # HSDP: FSDP's gathers and reduce-scatters inside the node every micro-step, the
        # replicas' all-reduce across nodes behind the last backward
        each = intra / intra_rate / ga
        gather = each * weights / (2 * weights + grads)
        exposed = _hidden(gather, forward, units) + _hidden(each - gather, backward, units)
        # (issued per unit after its reduce-scatter: torch fsdp _runtime_utils.py
        # _post_backward_reshard / FSDP2 foreach_reduce's all_reduce on the replicate group)
        across = inter / hw.inter_node_bandwidth
        last = _hidden(across, backward, units)
        return micro + exposed, last, each - exposed, across - last
    link = intra / intra_rate + inter / hw.inter_node_bandwidth
    if how.shards_weights:
        # ZeRO-3 / FSDP: the forward's gather behind the forward, the backward's gather and
        # reduce-scatter behind the backward, every micro-step
        each = link / ga
        gather = each * weights / (2 * weights + grads)
        exposed = _hidden(gather, forward, units) + _hidden(each - gather, backward, units)
        return micro + exposed, 0.0, each - exposed, 0.0
    if how.shards_gradients:
        # ZeRO-2 / SHARD_GRAD_OP: each micro-step's reduce-scatter behind its backward, the
        # updated parameters' all-gather after the step, exposed
        share = link / (ga + 1)
        exposed = _hidden(share, backward, units)
        return micro + exposed, share, share - exposed, 0.0
    if how.shards_optimizer:
        # ZeRO-1: the gradients reduce-scattered behind the last backward, the updated
        # parameters all-gathered after the step
        behind = _hidden(link / 2, backward, units)
        return micro, behind + link / 2, 0.0, link / 2 - behind
    # DDP: the bucketed all-reduce behind the last micro-step's backward (no_sync before it)
    behind = _hidden(link, backward, units)
    return micro, behind, 0.0, link - behind


def _offload_and_optimizer(
    plan: Plan, card: _Card, trainable: int, forward: float, backward: float
) -> tuple[float, float]:
    """(exposed host-link seconds per micro-step, seconds of the optimizer step)."""
    hw = plan.hardware
    link = card.preset.host_link
    spec = optimizer_spec(plan.optimizer)
    wb = plan.precision.weight_bytes
    how = strategy_spec(plan.strategy)
    _, _, opt_div = how.divisors(plan)
    local = trainable / plan.tp / opt_div
    gw = 4 if plan.fp32_grad_buffer else wb
    units = plan.model.architecture.num_layers
    offload = 0.0
    if plan.activation_offload:
        # torchtune OffloadActivations: each checkpointed layer input to the CPU in forward
        # and back in backward, on a side stream (training/_activation_offloading.py)
        arch = plan.model.architecture
        seq, rows = trained_shape(plan)
        inputs = arch.num_layers * seq * rows * arch.hidden_size * plan.precision.residual_bytes
        copy = inputs / plan.tp / link
        offload += _hidden(copy, forward, units) + _hidden(copy, backward, units)
    if plan.offload is Offload.none:
        step = local * _gpu_step_bytes(plan) / card.bandwidth
        return offload, step + _paging_seconds(plan, link)
    # ZeRO-Offload: every micro-step's gradients to the CPU behind the backward
    # (stage_1_and_2.py async_inplace_copy_grad_to_fp32_buffer_from_gpu), the step on the
    # CPU, the updated 16-bit parameters copied back before the next forward
    offload += _hidden(local * gw / link, backward, units)
    if plan.offload is Offload.params:
        # the parameter shards cross the host link for each pass's gather (ZeRO-Infinity
        # offload_param, FSDP CPUOffload), prefetched like the gathers
        weights, _ = payloads(plan, trainable)
        shard = weights / how.divisors(plan)[0] / link
        offload += _hidden(shard, forward, units) + _hidden(shard, backward, units)
    host = HOST_MEMORY_BANDWIDTH_PER_NODE / hw.gpus_per_node
    # everything fp32 on the CPU. DeepSpeed steps with its fused CPU Adam (csrc/adam/
    # cpu_adam_impl.cpp Step_AVX: one pass); FSDP's CPU offload leaves the step to the
    # user's torch.optim optimizer on CPU tensors, whose default there is the unfused
    # _single_tensor_adamw: the same eight operations one tensor at a time (torch
    # optim/optimizer.py _default_to_fused_or_foreach picks foreach only on CUDA tensors)
    moved = _adam_bytes(spec.moments, 4, 4, 4, fused=how.framework == "deepspeed")
    return offload, local * moved / host + local * wb / link


def _paging_seconds(plan: Plan, link: float) -> float:
    """Seconds per optimizer step moving a paged optimizer's state over the host link.

    bitsandbytes allocates each paged state tensor of 1e5 elements or more in CUDA managed
    memory (optim/optimizer.py Optimizer8bit.get_state_buffer: F.get_paged,
    cudaMallocManaged; 0.39 and later) and prefetches it to the GPU before its update
    (prefetch_state: F.prefetch_tensor, cudaMemPrefetchAsync): "automatically evicted to CPU
    RAM when the GPU runs out-of-memory and paged back into GPU memory when the memory is
    needed in the optimizer update step" (Dettmers et al. 2023, QLoRA, sec. 2, Paged
    Optimizers). What of the state does not fit beside the rest of the step's peak comes in
    for its update every step while as much is evicted: in and out run in the two
    directions of the full-duplex link at once.
    """
    if not optimizer_spec(plan.optimizer).paged:
        return 0.0
    peak = stack_for(plan).breakdown(plan, plan.strategy)
    spill = min(peak.state.managed, max(0, peak.total - plan.hardware.gpu_memory))
    return spill / link


def _gpu_step_bytes(plan: Plan) -> float:
    """Bytes the optimizer step reads and writes per local trainable parameter on the GPU."""
    spec = optimizer_spec(plan.optimizer)
    wb = plan.precision.weight_bytes
    pw = 4 if plan.precision.master_bytes else wb  # the fp32 master, or the weight itself
    gw = 4 if plan.fp32_grad_buffer else wb
    m: float
    if spec.eight_bit:
        m = 1 + 4 / plan.optimizer_block_size  # one byte per moment and its block's absmax
    else:
        m = spec.moment_width or plan.optimizer_state_dtype.bytes
    moved: float
    if spec.layout == "factored":
        # transformers' Adafactor.step: per tensor, the fp32 update written and read back
        # twice (grad^2 + eps, then the factored estimate times the gradient)
        moved = gw + 2 * pw + 4 * 4
    else:
        # auto counts the foreach kernels, the larger figure
        fused = spec.step != "foreach" or plan.optimizer_kernel is OptimizerKernel.fused
        moved = _adam_bytes(spec.moments, pw, m, gw, fused)
    if plan.precision.master_bytes:
        moved += pw + wb  # the fp32 master copied into the 16-bit weights
    return moved


def _adam_bytes(moments: int, pw: float, m: float, gw: float, fused: bool) -> float:
    """Bytes an Adam-like step moves per parameter of `pw` bytes with `moments` moments of
    `m` bytes and a gradient of `gw` bytes, in one fused pass or in torch's separate
    operations."""
    if fused or not moments:
        # one pass (SGD's in-place add too): read the parameter, gradient and moments, write
        # them back
        return gw + 2 * pw + 2 * moments * m
    # torch optim/adamw.py _multi_tensor_adamw and _single_tensor_adamw, each operation
    # reading and writing its operands: the weight decay (2 pw), lerp of m (2 m + gw), mul of
    # v (2 m), addcmul of v (2 m + 2 gw), sqrt (2 m), div (2 m), add eps (2 m), addcdiv into
    # p (2 pw + 2 m). Lion (Chen et al. 2023, Algorithm 2): the decay (2 pw), the
    # interpolated update (2 m + gw), its sign added into p (m + 2 pw), the moment's lerp
    # (2 m + gw).
    return 4 * pw + (14 * m + 3 * gw if moments == 2 else 5 * m + 2 * gw)


_FORWARD = (
    "linear layers 2 T d_in d_out each (MoE: routed experts only), each a roofline of its "
    "per-GPU shape at the card's dense peak x its best matmul share; causal FlashAttention "
    "2 T s a d / 2; elementwise bytes of modeling_llama.py over the bandwidth"
)
_BACKWARD = (
    "input gradients always, weight gradients for trained weights (full: 6N, LoRA's frozen "
    "base: 4N); FlashAttention's backward 2.5x its forward (Dao 2023)"
)
_RECOMPUTE = {
    Checkpointing.none: "no checkpointing: nothing recomputed",
    Checkpointing.full: "full checkpointing: each layer's forward again in backward "
    "(Korthikanti et al. 2022 sec. 5)",
    Checkpointing.selective: "selective checkpointing: the attention core again in backward",
}
_LOSS = {
    LossKind.full: "32 B per logit: ForCausalLMLoss's fp32 upcast, log_softmax and backward",
    LossKind.chunked: "32 B per logit: each chunk upcast to fp32 as the whole loss would be",
    LossKind.fused: "6 B per logit: Liger's fused linear cross-entropy, bf16 chunks",
}
_DEQUANT = (
    "QLoRA: NF4 weights expanded to 16 bits before the forward and again in backward "
    "(bitsandbytes MatMul4Bit), memory-bound"
)
_COMMUNICATION = (
    "gathers and reduce-scatters each micro-step beyond the compute they overlap "
    "(FSDP/ZeRO-3 prefetch; the first unit exposed), tensor-parallel all-reduces in full"
)
_OFFLOAD = "host-link copies (PCIe x16 per direction) beyond the compute they overlap"
_OPTIMIZER = (
    "memory-bound: the step's bytes over the bandwidth (fused, foreach, 8-bit); a paged "
    "state's part beyond the GPU's memory paged in over the host link (bitsandbytes "
    "prefetch_state); under offload the CPU step over the host's memory bandwidth and the "
    "parameters copied back"
)
_BOUNDARY = (
    "DDP/ZeRO-1 all-reduce behind the last backward; ZeRO-1/2 parameters all-gathered "
    "after the step; HSDP's all-reduce across nodes"
)
_CONTENTION = (
    "compute overlapped with hidden collectives runs on the SMs NCCL's blocks leave: their "
    "seconds x NCCL's channels (24 on NVLink, 2 on PCIe: nccl graph/search.cc, "
    "connect.cc) over the card's SMs"
)
