"""The static training state: weights, gradients, master weights, optimizer state, sharded.

Bytes per parameter follow the ZeRO paper (Rajbhandari et al. 2020, sec. 3: 2 + 2 + K with K = 12
for mixed-precision Adam) and the 13B analysis of docs/references.md (16 B/param, 12 of them
optimizer-side); the sharding rules follow the ZeRO paper's Table 1 / sec. 5 and PyTorch FSDP's
sharding strategies.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from memtui.estimator.architecture import LinearLayer, QuantMethod, StoredQuantization
from memtui.estimator.choices import Method, Offload, Strategy
from memtui.estimator.memo import BoundedCache
from memtui.estimator.optimizers import optimizer_spec
from memtui.estimator.plan import Plan
from memtui.estimator.strategies import strategy_spec

# QLoRA (Dettmers et al. 2023, sec. 3): NF4 codes are 4 bits; one fp32 absmax per 64 weights
# adds 32/64 = 0.5 bit; double quantization stores that absmax in 8 bits with one fp32
# constant per 256 blocks: 8/64 + 32/(64*256) = 0.127 bit.
NF4_CODE_BITS = 4.0
NF4_BLOCK = 64
NF4_ABSMAX_BITS = 32 / NF4_BLOCK
NF4_DOUBLE_QUANT_ABSMAX_BITS = 8 / NF4_BLOCK + 32 / (NF4_BLOCK * 256)


@dataclass(frozen=True)
class TrainableTensor:
    """A trainable tensor's element count, and how many such tensors the model has."""

    numel: int
    count: int
    rows: int = 0  # for Adafactor's factored second moment (0: a vector)
    cols: int = 0


@dataclass(frozen=True)
class StaticState:
    """Per-GPU bytes of the static state, and what lives in CPU RAM per GPU."""

    weights: int
    gradients: int
    master_weights: int
    optimizer_states: int
    cpu_bytes: int
    trainable: int
    bytes_per_param: float
    managed: int = 0
    """Bytes of `optimizer_states` in CUDA managed memory (bitsandbytes' paged optimizers,
    cudaMallocManaged): on the GPU while they fit, outside PyTorch's allocator."""

    @property
    def total(self) -> int:
        return self.weights + self.gradients + self.master_weights + self.optimizer_states


@dataclass(frozen=True)
class Layout:
    """What a stack keeps of the whole model's training state, in bytes, before sharding."""

    weights: float
    gradients: float
    master: float
    optimizer: float
    managed_fraction: float = 0.0
    """Share of the optimizer state in CUDA managed memory (paged optimizers)."""
    persistent_weights: float = 0.0
    """Part of `weights` every GPU keeps whole even when parameters are sharded (ZeRO-3's
    persistence threshold)."""
    replicated_weights: float = 0.0
    """Part of `weights` that is no parameter, so the sharding and parameter offload of FSDP1
    leave it whole on every GPU (bitsandbytes' 4-bit quant_state: `nf4_quant_state_bytes`)."""


def _scaled(tensors: Sequence[TrainableTensor], scale: float) -> list[TrainableTensor]:
    """A bare count's tensors: the assumed shape's, scaled (shapes are then unknown)."""
    return [TrainableTensor(int(t.numel * scale), t.count) for t in tensors]


_TENSORS = BoundedCache()


def trainable_tensors(plan: Plan) -> tuple[TrainableTensor, ...]:
    """The tensors the optimizer updates (full: the model; LoRA: the A and B matrices, and
    the modules trained in full beside them)."""
    key = (
        plan.model,
        plan.method,
        plan.lora_rank,
        plan.lora_targets,
        plan.lora_fraction,
        plan.modules_to_save,
        plan.expert_adapters,  # what the targets reach of stacked experts
    )
    return _TENSORS.get(key, lambda: tuple(_trainable_tensors(plan)))


def _trainable_tensors(plan: Plan) -> list[TrainableTensor]:
    arch = plan.model.architecture
    scale = plan.model.parameters / arch.parameter_count
    if plan.method is Method.full:
        tensors = [
            TrainableTensor(t.numel, t.count, *(t.shape if len(t.shape) == 2 else (0, 0)))
            for t in arch.tensors
        ]
        if not arch.assumed:
            return tensors
        tensors = _scaled(tensors, scale)
        rest = plan.model.parameters - sum(t.numel * t.count for t in tensors)
        return [*tensors, TrainableTensor(rest, 1)]  # so they sum to the count exactly
    if plan.lora_fraction is not None:
        # An adapter given as a share of the model (the rule-of-thumb analysis of
        # docs/references.md: 2.5 percent).
        return [TrainableTensor(round(plan.model.parameters * plan.lora_fraction), 1)]
    r = plan.lora_rank
    tensors = []
    for lin in arch.lora_layers(plan.lora_targets, plan.expert_adapters):
        # LoRA (Hu et al. 2021): A is r x d_in, B is d_out x r.
        tensors.append(TrainableTensor(r * lin.d_in, lin.count, r, lin.d_in))
        tensors.append(TrainableTensor(r * lin.d_out, lin.count, lin.d_out, r))
    for tower in arch.tower_lora_layers(plan.lora_targets):  # adapted too, never run on text
        tensors.append(TrainableTensor(r * tower.d_in, tower.count, r, tower.d_in))
        tensors.append(TrainableTensor(r * tower.d_out, tower.count, tower.d_out, r))
    # PEFT's ModulesToSaveWrapper trains a full copy of each (utils/other.py)
    tensors += [
        TrainableTensor(lin.d_in * lin.d_out, 1, lin.d_out, lin.d_in)
        for lin in arch.saved_modules(plan.modules_to_save)
    ]
    return _scaled(tensors, scale) if arch.assumed else tensors


def split_saved(
    plan: Plan, tensors: Sequence[TrainableTensor]
) -> tuple[Sequence[TrainableTensor], Sequence[TrainableTensor]]:
    """`trainable_tensors` split into (the adapters, the full copies of modules_to_save): a
    stack may keep them in different dtypes (PEFT upcasts adapters, not the copies)."""
    if plan.method is Method.full or not plan.modules_to_save:
        return tensors, ()
    count = len(plan.model.architecture.saved_modules(plan.modules_to_save))
    return tensors[: len(tensors) - count], tensors[len(tensors) - count :]


def parameters_of(tensors: Sequence[TrainableTensor]) -> int:
    """Elements in these tensors."""
    return sum(t.numel * t.count for t in tensors)


def optimizer_state_bytes(
    plan: Plan, tensors: Sequence[TrainableTensor], moment_bytes: int | None = None
) -> int:
    """Exact optimizer-state bytes for these tensors (unsharded), with moments of
    `moment_bytes` (default: the plan's optimizer_state_dtype)."""
    opt = optimizer_spec(plan.optimizer)
    moment = plan.optimizer_state_dtype.bytes if moment_bytes is None else moment_bytes
    block = plan.optimizer_block_size
    return sum(opt.state_bytes(t.numel, t.rows, t.cols, moment, block) * t.count for t in tensors)


def nf4_bits_per_param(double_quant: bool) -> float:
    """Bits per quantized base weight: 4.5 with fp32 absmax, 4.127 with double quantization."""
    return NF4_CODE_BITS + (NF4_DOUBLE_QUANT_ABSMAX_BITS if double_quant else NF4_ABSMAX_BITS)


def stored_linear_bytes(stored: StoredQuantization, lin: LinearLayer) -> float:
    """Bytes of one linear layer's weight as a pre-quantized checkpoint keeps it on the GPU
    (its bias, 16-bit, is counted with the unconverted parameters)."""
    d_in, d_out = lin.d_in, lin.d_out
    method = stored.method
    if method is QuantMethod.bnb_4bit:
        # bitsandbytes Params4bit: 4-bit codes, absmax per 64 (QLoRA's figures, above)
        return d_in * d_out * nf4_bits_per_param(stored.double_quant) / 8
    if method is QuantMethod.bnb_8bit:
        # bitsandbytes nn/modules.py Int8Params: int8 CB (out, in) and fp32 SCB (out,)
        return d_in * d_out + 4 * d_out
    if method is QuantMethod.fp8:
        # transformers 5.24 integrations/finegrained_fp8.py FP8Linear: float8_e4m3fn weight
        # (out, in), fp32 weight_scale_inv of ceil(out/b0) x ceil(in/b1), one scalar per tensor
        # without blocks
        b_out, b_in = stored.block
        scales = math.ceil(d_out / b_out) * math.ceil(d_in / b_in) if b_out else 1
        return d_in * d_out + 4 * scales
    # GPTQ (AutoGPTQ nn_modules/qlinear QuantLinear, the layout gptqmodel keeps) and AWQ
    # (AutoAWQ modules/linear/gemm.py WQLinear_GEMM): int32-packed qweight of bits per weight,
    # per group of inputs an int32-packed zero and an fp16 scale per output; GPTQ adds an int32
    # g_idx per input.
    groups = math.ceil(d_in / (stored.group_size or d_in))
    packed = (d_in * d_out + groups * d_out) * stored.bits / 8
    g_idx = 4 * d_in if method is QuantMethod.gptq else 0
    return packed + 2 * groups * d_out + g_idx


def nf4_quant_state_bytes(plan: Plan) -> float:
    """Bytes of bitsandbytes' quant_state of a QLoRA base quantized at load: the absmax
    constants of every quantized weight (the codes are the Params4bit's data). QuantState is an
    attribute of the Params4bit, not a parameter or buffer (bitsandbytes nn/modules.py; the
    reason FSDP's sync_module_states cannot broadcast it: AnswerDotAI/fsdp_qlora PR #4), and
    Params4bit.to moves it with the data to the GPU, whole."""
    if plan.method is not Method.qlora or plan.model.architecture.quantized is not None:
        return 0.0
    absmax_bits = nf4_bits_per_param(plan.qlora_double_quant) - NF4_CODE_BITS
    return quantized_parameters(plan) * absmax_bits / 8


def quantized_parameters(plan: Plan) -> int:
    """Weights bitsandbytes quantizes when it loads a base in 4 bits: the linear layers inside
    the blocks (embeddings, lm_head, norms and biases stay unquantized: transformers'
    get_keys_to_not_convert) and a vision tower's nn.Linear layers (get_keys_to_not_convert,
    quantizers/base.py, 5.24, spares only tied weights, the output embedding and the last
    module), scaled to the model's parameter count."""
    arch = plan.model.architecture
    linears = [lin for lin in arch.linear_layers if lin.group != "head"]
    tower = arch.tower.linear_weights if arch.tower is not None else 0
    quantized = sum(lin.d_in * lin.d_out * lin.count for lin in linears) + tower
    return round(quantized * plan.model.parameters / arch.parameter_count)


def frozen_base_bytes(
    plan: Plan, base_bytes: int | None = None, upcast_bytes: int | None = None
) -> int:
    """Bytes of the frozen base model under LoRA (`base_bytes` per parameter, default the
    plan's weight width), QLoRA (NF4 linears, the rest in `upcast_bytes`: 4 by default when
    PEFT's k-bit preparation upcasts it, else the weight width), or either on a pre-quantized
    checkpoint (its linears as it stores them, whatever the method: transformers loads the
    checkpoint's own quantization_config over one passed to from_pretrained, quantizers/auto.py
    merge_quantization_configs, 5.24)."""
    arch = plan.model.architecture
    p = plan.model.parameters
    wbytes = plan.precision.weight_bytes if base_bytes is None else base_bytes
    stored = arch.quantized
    if plan.method is Method.lora and stored is None:
        return wbytes * p
    # bitsandbytes quantizes the weights of the linear layers inside the blocks; embeddings,
    # lm_head, norms and biases stay unquantized (transformers' get_keys_to_not_convert).
    linears = [lin for lin in arch.linear_layers if lin.group != "head"]
    if stored is None:
        quantized = quantized_parameters(plan)
        converted = quantized * nf4_bits_per_param(plan.qlora_double_quant) / 8
    else:
        kept = [lin.count - stored.unconverted(lin.name, lin.count) for lin in linears]
        quantized = sum(lin.d_in * lin.d_out * n for lin, n in zip(linears, kept, strict=True))
        converted = sum(
            stored_linear_bytes(stored, lin) * n for lin, n in zip(linears, kept, strict=True)
        )
    # PEFT's prepare_model_for_kbit_training casts the non-quantized parameters to fp32,
    # except on GPTQ checkpoints (peft 0.21 utils/other.py: is_gptq_quantized).
    if upcast_bytes is None:
        gptq = stored is not None and stored.method is QuantMethod.gptq
        upcast_bytes = 4 if plan.qlora_upcast and not gptq else wbytes
    return round(converted) + (p - quantized) * upcast_bytes


def gradient_bytes(plan: Plan, tensors: Sequence[TrainableTensor], width: float) -> float:
    """Gradient bytes at `width` per element: every trainable element, or under
    optimizer_in_backward only the largest tensor's (each gradient is stepped and freed in its
    own hook: torchtune training/memory.py register_optim_in_bwd_hooks)."""
    if plan.optimizer_in_backward:
        return width * max(t.numel for t in tensors)
    return width * parameters_of(tensors)


def generic_layout(plan: Plan, tensors: Sequence[TrainableTensor]) -> Layout:
    """The state as the ZeRO paper and the reference analyses (docs/references.md) count it: weights
    and gradients in the parameter dtype (plus an optional fp32 accumulation buffer, as Megatron and
    DeepSpeed keep), an fp32 master copy under mixed precision, the optimizer's state."""
    trainable = parameters_of(tensors)
    precision = plan.precision
    wbytes = precision.weight_bytes
    gbytes = wbytes + (4 if plan.fp32_grad_buffer and wbytes < 4 else 0)
    if plan.method is Method.full:
        weights = wbytes * plan.model.parameters
    else:
        weights = frozen_base_bytes(plan) + wbytes * trainable
    return Layout(
        weights=weights,
        gradients=gradient_bytes(plan, tensors, gbytes),
        master=precision.master_bytes * trainable,
        optimizer=optimizer_state_bytes(plan, tensors),
        managed_fraction=1.0 if optimizer_spec(plan.optimizer).paged else 0.0,
    )


def shard(
    plan: Plan, strategy: Strategy, layout: Layout, tensors: Sequence[TrainableTensor]
) -> StaticState:
    """Per-GPU bytes of `layout` under `strategy`, with offload applied."""
    trainable = parameters_of(tensors)
    # Tensor parallelism splits every weight matrix (and its state) t ways (Megatron-LM).
    t = plan.tp
    dw, dg, do = strategy_spec(strategy).divisors(plan)
    keep = layout.persistent_weights if dw > 1 else 0.0
    whole = layout.replicated_weights
    w = keep / t + (layout.weights - keep - whole) / t / dw
    g = layout.gradients / t / dg
    m = layout.master / t / do
    o = layout.optimizer / t / do
    cpu = 0.0
    if plan.offload is not Offload.none:
        # ZeRO-Offload (Ren et al. 2021): master weights and optimizer state live in CPU RAM,
        # where the step runs, with an fp32 copy of the gradients beside them.
        cpu += m + o + 4 * trainable / t / do
        m = o = 0.0
    if plan.offload is Offload.params:
        # ZeRO-Infinity / FSDP CPUOffload: the parameter and gradient shards move too.
        cpu += w + g
        w = g = 0.0
    w += whole / t
    total = layout.weights + layout.gradients + layout.master + layout.optimizer
    return StaticState(
        weights=round(w),
        gradients=round(g),
        master_weights=round(m),
        optimizer_states=round(o),
        cpu_bytes=round(cpu),
        trainable=trainable,
        bytes_per_param=total / plan.model.parameters,
        managed=round(o * layout.managed_fraction),
    )


_CACHE = BoundedCache()


def static_state(plan: Plan, strategy: Strategy | None = None) -> StaticState:
    """Per-GPU static bytes of the generic stack for `strategy` (default: the plan's)."""
    strategy = strategy or plan.strategy

    def compute() -> StaticState:
        tensors = trainable_tensors(plan)
        return shard(plan, strategy, generic_layout(plan, tensors), tensors)

    # keyed on what the state depends on: the lever list and the micro-batch search reuse it
    return _CACHE.get((strategy, plan.state_key), compute)


def frozen_copy_bytes(plan: Plan, strategy: Strategy) -> int:
    """Per-GPU bytes of one more frozen copy of the model (a reference or reward model): in
    the policy's dtype, NF4 under QLoRA (TRL loads its reference with the policy's dtype and
    quantization_config), sharded like the policy's weights (prepare_deepspeed /
    prepare_fsdp)."""
    width = plan.precision.weight_bytes
    whole = (
        frozen_base_bytes(plan, base_bytes=width, upcast_bytes=width)
        if (plan.method is Method.qlora)
        else width * plan.model.parameters
    )
    dw = strategy_spec(strategy).divisors(plan)[0]
    return round(whole / plan.tp / dw)
