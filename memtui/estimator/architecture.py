"""A decoder-only transformer described by its real modules, so counts are exact.

Parameter counts, LoRA adapter sizes, 8-bit optimizer small-tensor rules, Adafactor's factored
state and the FSDP unit size all need the real tensor shapes, not a formula in P: this module
enumerates them once from the architecture numbers that a Hugging Face config.json carries.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from enum import Enum
from functools import cached_property
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from memtui.errors import PlanError
from memtui.estimator.memo import memoised
from memtui.estimator.versions import Package, Versions


class ExpertAdapters(Enum):
    """What LoRA's target names reach of a family whose experts transformers 5 stacks into
    nn.Parameters (`Architecture.stacked_experts`), by the plan's versions
    (`expert_adapters`)."""

    modules = "modules"
    """transformers before 5.0: every expert is its own nn.Linear modules, which
    target_modules and all-linear match like any other."""
    unreached = "unreached"
    """transformers 5 with PEFT before 0.19, or a family PEFT's table lacks: no name reaches
    the stacked experts or the router (not nn.Linear); a name of theirs matches only the
    shared expert's and the dense layers' modules."""
    named = "named"
    """PEFT 0.19: a list of names moves to the stacked parameters; a string target is turned
    into the set of its characters before all-linear is expanded (0.19.0
    utils/transformers_weight_conversion.py _convert_peft_config_moe, called first by
    tuners_utils BaseTuner.inject_adapter), which matches no module."""
    converted = "converted"
    """PEFT 0.20 and later: names, regexes and all-linear all move to the stacked parameters
    (0.20.0 _resolve_string_target_modules; 0.21 unchanged)."""


STACKED_EXPERTS_FROM = (5, 0)
"""transformers 5.0 stacked the experts of the MoE families into nn.Parameters and loads
transformers-4 checkpoints through conversion_mapping.py (what peft's tuners_utils gates on as
is_transformers_ge_v5)."""
PEFT_NAMED_CONVERSION_FROM = (0, 19)
"""peft 0.19.0 added utils/transformers_weight_conversion.py (huggingface/peft 5356277d0)."""
PEFT_STRING_CONVERSION_FROM = (0, 20)
"""peft 0.20.0 resolves string target_modules first (_resolve_string_target_modules,
huggingface/peft d0532e0ed)."""


@memoised  # every plan check and every breakdown asks (`Plan.expert_adapters`)
def expert_adapters(versions: Versions) -> ExpertAdapters:
    """What LoRA reaches of stacked experts under these versions (not given: the current
    releases, which convert)."""
    if versions.before(Package.transformers, STACKED_EXPERTS_FROM):
        return ExpertAdapters.modules
    if versions.before(Package.peft, PEFT_NAMED_CONVERSION_FROM):
        return ExpertAdapters.unreached
    if versions.before(Package.peft, PEFT_STRING_CONVERSION_FROM):
        return ExpertAdapters.named
    return ExpertAdapters.converted


class Role(Enum):
    """What a weight does in the model, whatever its family names the module: each linear
    layer has one, and a saved tensor names the roles whose gradients need it."""

    q = "q"
    k = "k"
    v = "v"
    qkv = "qkv"
    o = "o"
    q_a = "q_a"
    q_b = "q_b"
    kv_a = "kv_a"
    kv_b = "kv_b"
    gate = "gate"
    up = "up"
    gate_up = "gate_up"
    down = "down"
    fc_in = "fc_in"
    fc_out = "fc_out"
    router = "router"
    expert_gate = "expert_gate"
    expert_up = "expert_up"
    expert_gate_up = "expert_gate_up"
    expert_down = "expert_down"
    shared_gate = "shared_gate"
    embed_in = "embed_in"
    embed_out = "embed_out"
    embed = "embed"
    lm_head = "lm_head"
    norm = "norm"
    """A norm's weight (no linear layer: saved tensors name it for the normalized input)."""
    linear_qkvz = "linear_qkvz"
    linear_ba = "linear_ba"
    linear_qkv = "linear_qkv"
    linear_z = "linear_z"
    linear_b = "linear_b"
    linear_a = "linear_a"
    linear_out = "linear_out"


# Roles of linear layers (`Role` values), mapped to each family's module names (PEFT matches
# these names).
LLAMA_NAMES: dict[str, str] = {
    "q": "q_proj",
    "k": "k_proj",
    "v": "v_proj",
    "qkv": "qkv_proj",
    "o": "o_proj",
    # DeepSeek-V2's multi-head latent attention (modeling_deepseek_v2.py DeepseekV2Attention)
    "q_a": "q_a_proj",
    "q_b": "q_b_proj",
    "kv_a": "kv_a_proj_with_mqa",
    "kv_b": "kv_b_proj",
    "gate": "gate_proj",
    "up": "up_proj",
    "gate_up": "gate_up_proj",
    "down": "down_proj",
    "fc_in": "fc1",
    "fc_out": "fc2",
    "router": "gate",
    "expert_gate": "gate_proj",
    "expert_up": "up_proj",
    "expert_down": "down_proj",
    "shared_gate": "shared_expert_gate",
    "embed_in": "project_in",
    "embed_out": "project_out",
    "embed": "embed_tokens",
    "lm_head": "lm_head",
    # Gated DeltaNet (modeling_qwen3_next.py Qwen3NextGatedDeltaNet: in_proj_qkvz, in_proj_ba;
    # modeling_qwen3_5.py Qwen3_5GatedDeltaNet: in_proj_qkv, in_proj_z, in_proj_b, in_proj_a)
    "linear_qkvz": "in_proj_qkvz",
    "linear_ba": "in_proj_ba",
    "linear_qkv": "in_proj_qkv",
    "linear_z": "in_proj_z",
    "linear_b": "in_proj_b",
    "linear_a": "in_proj_a",
    "linear_out": "out_proj",
}
DELTA_RULE_CHUNK = 64
"""Tokens per chunk of the gated delta rule: torch_chunk_gated_delta_rule's chunk_size=64
(modeling_qwen3_next.py, transformers 5.24), fla's chunk_gated_delta_rule's 64 alike."""
LINEAR_ATTENTION_ROLES = frozenset(
    {
        Role.linear_qkvz,
        Role.linear_ba,
        Role.linear_qkv,
        Role.linear_z,
        Role.linear_b,
        Role.linear_a,
        Role.linear_out,
    }
)
"""The projections of a linear-attention (Gated DeltaNet) layer."""
ATTENTION_ROLES = frozenset(
    {Role.q, Role.k, Role.v, Role.qkv, Role.o, Role.q_a, Role.q_b, Role.kv_a, Role.kv_b}
)
"""The projections of a full-attention layer."""
# f-wide tensors an activation saves for backward beyond its output, counted op by op from
# transformers' activations.py (ACT2CLS). A fused kernel (nn.functional.gelu, silu, the tanh
# GELU "gelu_pytorch_tanh") keeps its input: 1, Korthikanti's "GeLU input". ReLU keeps its
# output, which is fc_out's input anyway: 0. Python-written ones keep every product's
# factors: NewGELUActivation 0.5*x*(1 + tanh(c(x + 0.044715 x^3))) keeps x (pow), tanh's
# output, 0.5x and (1 + tanh): 4 (measured: GPT-2 rows of docs/accuracy.md);
# FastGELUActivation keeps x, x*c, (1 + 0.044715 x^2), tanh's output, 0.5x and (1 + tanh):
# 6; QuickGELUActivation x * sigmoid(1.702 x) keeps x and the sigmoid: 2.
ACTIVATION_SAVES = {"relu": 0, "gelu_new": 4, "gelu_fast": 6, "quick_gelu": 2}
TensorGroup = Literal[
    "attention", "mlp", "expert", "shared_expert", "router", "norm", "embedding", "head", "tower"
]


@dataclass(frozen=True)
class Tensor:
    """One parameter tensor of the model, `count` times (per layer x layers x experts)."""

    name: str
    shape: tuple[int, ...]
    count: int
    group: TensorGroup
    in_layer: bool

    @property
    def numel(self) -> int:
        return math.prod(self.shape)


@dataclass(frozen=True)
class TowerLinear:
    """An nn.Linear of a multimodal checkpoint's vision tower or projector: bitsandbytes
    quantizes it and PEFT adapts it like the decoder's (by name suffix, or all-linear)."""

    name: str
    d_in: int
    d_out: int
    bias: bool
    count: int


@dataclass(frozen=True)
class Tower:
    """What a multimodal checkpoint holds beside its text decoder (a vision encoder and the
    projector into the decoder's width): loaded with the model, trained under full fine-tuning,
    never run on text-only batches (no activations). Built in towers.py."""

    name: str
    linears: tuple[TowerLinear, ...]
    other: tuple[Tensor, ...]
    """Every parameter that is not an nn.Linear weight or bias: convolutions, position
    embeddings, norms, a projector's bare nn.Parameter."""

    @property
    def tensors(self) -> tuple[Tensor, ...]:
        out = []
        for lin in self.linears:
            shape = (lin.d_out, lin.d_in)
            out.append(Tensor(f"{lin.name}.weight", shape, lin.count, "tower", False))
            if lin.bias:
                out.append(Tensor(f"{lin.name}.bias", (lin.d_out,), lin.count, "tower", False))
        return (*out, *self.other)

    @property
    def parameters(self) -> int:
        return sum(t.numel * t.count for t in self.tensors)

    @property
    def linear_weights(self) -> int:
        """Elements of the nn.Linear weights (what bitsandbytes converts; biases stay 16-bit)."""
        return sum(lin.d_in * lin.d_out * lin.count for lin in self.linears)

    def adapted(self, targets: tuple[str, ...]) -> tuple[TowerLinear, ...]:
        """The linears PEFT adapts for these targets: all of them for 'all-linear' (every
        nn.Linear but the output layer, peft tuners_utils _maybe_include_all_linear_layers),
        else those whose name a target ends with (PEFT matches module-name suffixes)."""
        if "all-linear" in targets:
            return self.linears
        return tuple(lin for lin in self.linears if lin.name in targets)


@dataclass(frozen=True)
class LinearLayer:
    """A linear module (PEFT's unit of adaptation): d_in -> d_out, `count` of them in the model."""

    role: Role
    name: str
    d_in: int
    d_out: int
    bias: bool
    count: int
    group: TensorGroup


class QuantMethod(Enum):
    """How a pre-quantized checkpoint stores its linear weights (its config's
    `quantization_config.quant_method`, and for bitsandbytes which of load_in_4bit/8bit)."""

    bnb_4bit = "bnb-4bit"
    bnb_8bit = "bnb-8bit"
    gptq = "gptq"
    awq = "awq"
    fp8 = "fp8"


class StoredQuantization(BaseModel):
    """A pre-quantized checkpoint's storage, as its config.json's `quantization_config` says
    (read by `memtui.estimator.configs`; sized by `memtui.estimator.state.stored_linear_bytes`).
    Only the decoder's linear layers are converted: transformers' quantizers keep the lm_head,
    tied and output embeddings 16-bit (quantizers/base.py get_keys_to_not_convert, 5.24), and
    the modules `skip` names."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    method: QuantMethod
    bits: int = Field(4, ge=2, le=8)
    """Bits per stored weight (GPTQ and AWQ: 2, 3, 4 or 8; bitsandbytes: 4 or 8; fp8: 8)."""
    group_size: int = Field(0, ge=0)
    """Input features sharing one scale and zero (GPTQ, AWQ); 0 for one group per row
    (GPTQ's group_size -1)."""
    block: tuple[int, int] = (0, 0)
    """fp8's weight_block_size (out, in) sharing one fp32 scale; (0, 0) for one per tensor."""
    double_quant: bool = False
    """bitsandbytes 4-bit: the absmax constants quantized again (bnb_4bit_use_double_quant)."""
    skip: tuple[str, ...] = ()
    """Module names the checkpoint leaves unconverted (modules_to_not_convert,
    llm_int8_skip_modules)."""
    only: tuple[str, ...] = ()
    """When not empty, the only module names converted (GPTQ's
    modules_in_block_to_quantize)."""

    def unconverted(self, name: str, count: int) -> int:
        """How many of the `count` linear modules called `name` stay 16-bit. A key matches
        as transformers' should_convert_module (quantizers/quantizers_utils.py, 5.24) matches
        a suffix: a key ending in the name covers every layer's module, a key with a layer
        index ("model.layers.3.mlp.down_proj") that one module."""
        if self.only and not any(_names_module(key, name) for key in self.only):
            return count
        hits = [key for key in self.skip if _names_module(key, name)]
        if any(not any(part.isdigit() for part in key.split(".")) for key in hits):
            return count
        return min(count, len(hits))


def _weights(lin: LinearLayer) -> int:
    """Parameters of every copy of a linear module, bias included."""
    return (lin.d_in + int(lin.bias)) * lin.d_out * lin.count


def _names_module(key: str, name: str) -> bool:
    return key == name or key.endswith(f".{name}")


class Architecture(BaseModel):
    """The numbers of a decoder-only transformer that decide its parameters and activations."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    model_type: str = "llama"
    """The Hugging Face `model_type` it was read from (or 'assumed' for a bare count)."""
    hidden_size: int = Field(gt=0)
    """h: width of the residual stream."""
    num_layers: int = Field(gt=0)
    """L: decoder layers."""
    num_heads: int = Field(gt=0)
    """a: query heads."""
    num_kv_heads: int = Field(0, ge=0)
    """Key/value heads (GQA/MQA); 0 means as many as query heads."""
    head_dim: int = Field(0, ge=0)
    """Per-head width; 0 means hidden_size / num_heads."""
    intermediate_size: int = Field(gt=0)
    """f: MLP width of the dense layers."""
    vocab_size: int = Field(gt=0)
    """V: embedding rows (padded, as in the checkpoint)."""
    tie_embeddings: bool = False
    """lm_head shares the input embedding matrix."""
    mlp_kind: Literal["gated", "plain"] = "gated"
    """gated: SwiGLU/GeGLU (gate, up, down); plain: fc_in, activation, fc_out."""
    attention_bias: bool = False
    """Bias on the q, k, v projections."""
    attention_out_bias: bool = False
    """Bias on the attention output projection."""
    mlp_bias: bool = False
    """Bias on the MLP projections."""
    norm_kind: Literal["rmsnorm", "layernorm"] = "rmsnorm"
    """RMSNorm (weight only) or LayerNorm (weight and bias)."""
    norms_per_layer: int = Field(2, ge=0)
    """Norm modules per decoder layer (Gemma 2 has 4, Falcon-7B 1)."""
    norm_position: Literal["pre", "post"] = "pre"
    """pre: attention and MLP read a normalized copy of the residual stream (Llama's
    input_layernorm and post_attention_layernorm; Gemma 2 and 3 add two more on the outputs,
    norms_per_layer 4). post: they read the residual stream itself and their outputs are
    normalized before the residual add (OLMo 2's post_attention_layernorm and
    post_feedforward_layernorm, modeling_olmo2.py Olmo2DecoderLayer)."""
    final_norm: bool = True
    """A norm after the last layer."""
    qk_norm: Literal["none", "per_head", "full"] = "none"
    """RMSNorm on queries and keys inside attention: per_head is Qwen3's and Gemma 3's q_norm
    and k_norm, one weight of head_dim each per layer, applied to every head (modeling_qwen3.py
    Qwen3Attention); full is OLMo 2's, one weight over the whole projection output, q_width and
    kv_width wide (modeling_olmo2.py Olmo2Attention)."""
    fused_qkv: bool = False
    """q, k, v in one linear module (GPT-2, Falcon, GPT-NeoX, Phi-3)."""
    fused_gate_up: bool = False
    """gate and up in one linear module (Phi-3)."""
    position_embeddings: int = Field(0, ge=0)
    """Rows of a learned absolute position table (GPT-2, OPT); 0 for rotary."""
    embed_proj_dim: int = Field(0, ge=0)
    """OPT's word_embed_proj_dim when it differs from hidden_size (project_in/out); else 0."""
    num_experts: int = Field(0, ge=0)
    """MoE experts per MoE layer; 0 for a dense model."""
    experts_per_token: int = Field(0, ge=0)
    """Experts each token is routed to (top-k)."""
    moe_intermediate_size: int = Field(0, ge=0)
    """Width of one expert's MLP; 0 means intermediate_size."""
    moe_layers: int = Field(-1, ge=-1)
    """How many layers are MoE; -1 means all of them when num_experts > 0."""
    shared_expert_intermediate_size: int = Field(0, ge=0)
    """Width of the always-on shared expert MLP of each MoE layer (Qwen2-MoE's shared_expert;
    DeepSeek-V2's shared_experts, n_shared_experts x moe_intermediate_size); 0 for none."""
    shared_expert_gate: bool = True
    """The shared expert's output is scaled by a sigmoid gate, Linear(h, 1) (Qwen2-MoE's
    shared_expert_gate); DeepSeek-V2 adds its shared experts ungated."""
    router_fp32: bool = False
    """The router keeps its weight in fp32 and multiplies an fp32 copy of its input
    (DeepseekV2TopkRouter: weight created as float32, `_keep_in_fp32_modules_strict =
    ["gate.weight"]` keeps it so in a bf16 model)."""
    q_lora_rank: int = Field(0, ge=0)
    """Multi-head latent attention (DeepSeek-V2): the query's low-rank width, q_a_proj (h -> r),
    q_a_layernorm, q_b_proj (r -> q_width); 0 for a plain q_proj (DeepSeek-V2-Lite)."""
    kv_lora_rank: int = Field(0, ge=0)
    """Multi-head latent attention: the compressed key/value width. kv_a_proj_with_mqa maps h
    to kv_lora_rank + qk_rope_head_dim, kv_a_layernorm normalizes the first part, kv_b_proj
    expands it to every head's key part without rotary and value (modeling_deepseek_v2.py
    DeepseekV2Attention). 0: ordinary q/k/v projections. With it, head_dim is the query and
    key head width, qk_nope_head_dim + qk_rope_head_dim."""
    qk_rope_head_dim: int = Field(0, ge=0)
    """Multi-head latent attention: the rotary part of each query and key head, shared by all
    heads on the key side (the `_with_mqa` part of kv_a_proj_with_mqa)."""
    v_head_dim: int = Field(0, ge=0)
    """Value head width when it differs from head_dim (DeepSeek-V2's 128 beside 192); 0 means
    head_dim."""
    hidden_act: str = "silu"
    """The MLP's activation function (config `hidden_act` / `activation_function`): what it
    saves for backward depends on how it is written (`activation_saves`)."""
    rotary: bool = True
    """Rotary position embeddings applied to q and k (new tensors); False for learned
    absolute positions (GPT-2, OPT) or ALiBi."""
    rotary_cat: bool = False
    """q leaves the rotary embedding as a torch.cat of its rotated and unrotated parts, a new
    tensor contiguous in (batch, heads, s, d): partial rotary (Phi, Phi-3, StableLM, GPT-NeoX
    apply_rotary_pos_emb) and DeepSeek-V2's query. Llama's elementwise rotary keeps the
    projection's (batch, s, heads, d) layout instead. It matters because SDPA's output follows
    q's layout (measured on CPU's flash kernel; FlashAttention-2's mha_fwd allocates it with
    empty_like(q)), so the transpose before o_proj copies it."""
    parallel_residual: bool = False
    """Attention and MLP read the same layer input (GPT-NeoX use_parallel_residual, Falcon
    parallel_attn): the MLP's norm shares its input with the attention's."""
    attention_dropout: float = Field(0.0, ge=0, lt=1)
    """Dropout on the attention probabilities (eager attention keeps a 1-byte mask)."""
    residual_dropout: float = Field(0.0, ge=0, lt=1)
    """Dropout on the attention and MLP outputs before each residual add (a mask each)."""
    attention_output_dropout: bool = True
    """residual_dropout applies to the attention output too; False where only the MLP's is
    dropped (StableLM's hidden_dropout, modeling_stablelm.py StableLmDecoderLayer)."""
    embedding_dropout: float = Field(0.0, ge=0, lt=1)
    """Dropout after the embeddings (one mask per token)."""
    eager_softmax_fp32: bool = True
    """Eager attention computes the softmax in fp32 and casts back (Llama's, OPT's and
    GPT-NeoX's eager_attention_forward); GPT-2 and Falcon run it in the activation dtype."""
    norm_output_fp32: bool = False
    """The RMSNorm multiplies by its weight in fp32 and keeps the normalized tensor in fp32
    (Gemma's (1 + weight) * x, modeling_gemma.py GemmaRMSNorm)."""
    attn_softcap: float = Field(0.0, ge=0)
    """Soft-capping of the attention scores, cap * tanh(x / cap) (Gemma 2); 0 for none."""
    logit_softcap: float = Field(0.0, ge=0)
    """Soft-capping of the final logits (Gemma 2); 0 for none."""
    lm_head_bias: bool = False
    """The lm_head has a bias of V (Phi-1.5 and Phi-2, modeling_phi.py PhiForCausalLM)."""
    score_labels: int = Field(0, ge=0)
    """A sequence-classification head of this many scores in place of the lm_head (0: the
    LM head): transformers' *ForSequenceClassification `score`, nn.Linear(hidden_size,
    num_labels, bias=False) (modeling_llama.py LlamaForSequenceClassification, 5.24)."""
    names: dict[str, str] = Field(default_factory=lambda: dict(LLAMA_NAMES))
    """Module name per role, as the family's PyTorch code names them (what PEFT targets)."""
    assumed: bool = False
    """True when the shape was inferred from a bare parameter count, not read from a config."""
    tower: Tower | None = None
    """A multimodal checkpoint's vision tower and projector, counted in the parameters (its
    tensors follow the decoder's in `tensors`); None for a text-only model."""
    router_bias: bool = False
    """The MoE router has a bias of E (gpt-oss, modeling_gpt_oss.py GptOssTopKRouter)."""
    attention_sinks: bool = False
    """One learned sink logit per query head per layer (gpt-oss, GptOssAttention.sinks)."""
    parameter_experts: bool = False
    """The experts and router are nn.Parameters, not nn.Linear modules (gpt-oss GptOssExperts,
    GptOssTopKRouter), and PEFT maps no transformers-4 names onto them (peft 0.21
    utils/transformers_weight_conversion.py _MOE_TARGET_MODULE_MAPPING: mixtral and qwen2_moe
    only): target_modules, 'all-linear' included, never reach them."""
    quantized: StoredQuantization | None = None
    """The checkpoint's storage when it is pre-quantized (GPTQ, AWQ, bitsandbytes, fp8);
    None for 16-bit weights."""
    stacked_experts: bool = False
    """transformers 5 stores the experts as stacked nn.Parameters (gate_up_proj E x 2f x h,
    down_proj E x h x f; modeling_mixtral.py MixtralExperts, modeling_qwen2_moe.py
    Qwen2MoeExperts, modeling_qwen3_moe.py, modeling_deepseek_v2.py, 5.24) and the router
    as a TopKRouter module holding a bare weight; transformers 4 had one nn.Linear module
    per expert projection (`ExpertAdapters`)."""
    peft_expert_conversion: bool = False
    """PEFT maps the transformers-4 module names of this family's MoE layers onto its
    stacked expert parameters: peft 0.21 utils/transformers_weight_conversion.py
    _convert_peft_config_moe converts a model_type that _MODEL_TO_CONVERSION_PATTERN
    (transformers 5.24 conversion_mapping.py, plus peft's own "mixtral" entry) sends to
    "mixtral" or "qwen2_moe", the two of _MOE_TARGET_MODULE_MAPPING. qwen2_moe itself is no
    key of that table: it is not converted (`_peft_expert_targets`)."""
    linear_attention_layers: int = Field(0, ge=0)
    """Layers whose token mixer is a Gated DeltaNet (linear attention) instead of attention:
    Qwen3-Next and Qwen3.5 (config `layer_types`, default three of every
    `full_attention_interval` = 4; configuration_qwen3_next.py Qwen3NextConfig.__post_init__).
    The other num_layers - linear_attention_layers layers are full attention."""
    linear_key_heads: int = Field(0, ge=0)
    """Gated DeltaNet query/key heads (linear_num_key_heads)."""
    linear_value_heads: int = Field(0, ge=0)
    """Gated DeltaNet value heads (linear_num_value_heads), a multiple of the key heads."""
    linear_key_head_dim: int = Field(0, ge=0)
    linear_value_head_dim: int = Field(0, ge=0)
    linear_conv_kernel: int = Field(0, ge=0)
    """Width of the depthwise causal conv1d over q, k and v (linear_conv_kernel_dim)."""
    linear_fused_projections: bool = False
    """Qwen3-Next's two input projections, in_proj_qkvz (h -> 2 key + 2 value widths) and
    in_proj_ba (h -> 2 value heads); False for Qwen3.5's four, in_proj_qkv, in_proj_z,
    in_proj_b, in_proj_a (the same weights split)."""
    attention_output_gate: bool = False
    """The full-attention layers gate their output: q_proj is twice as wide (query and gate)
    and o_proj reads attention x sigmoid(gate) (Qwen3NextAttention, Qwen3_5Attention)."""

    @model_validator(mode="after")
    def _check(self) -> Architecture:
        if self.kv_heads and self.num_heads % self.kv_heads:
            raise PlanError(
                f"num_heads ({self.num_heads}) must be a multiple of num_kv_heads ({self.kv_heads})"
            )
        if self.num_experts and not 0 < self.experts_per_token <= self.num_experts:
            raise PlanError("experts_per_token must be between 1 and num_experts")
        if self.kv_lora_rank and not 0 < self.qk_rope_head_dim < self.dim_head:
            raise PlanError(
                f"qk_rope_head_dim ({self.qk_rope_head_dim}) must be between 1 and the query/key "
                f"head width ({self.dim_head}) below it"
            )
        if (self.q_lora_rank or self.qk_rope_head_dim) and not self.kv_lora_rank:
            raise PlanError("q_lora_rank and qk_rope_head_dim need kv_lora_rank (latent attention)")
        if self.linear_attention_layers:
            if self.linear_attention_layers > self.num_layers:
                raise PlanError("linear_attention_layers exceeds num_layers")
            sizes = (self.linear_key_heads, self.linear_value_heads, self.linear_key_head_dim,
                     self.linear_value_head_dim, self.linear_conv_kernel)  # fmt: skip
            if not all(sizes):
                raise PlanError("linear attention needs its head counts, head widths and kernel")
            if self.linear_value_heads % self.linear_key_heads:
                # each key head serves value_heads / key_heads value heads (repeat_interleave)
                raise PlanError("linear_value_heads must be a multiple of linear_key_heads")
        return self

    @property
    def activation_saves(self) -> int:
        """f-wide tensors a plain MLP's activation saves beyond fc_out's input
        (`ACTIVATION_SAVES`; 1 for a fused kernel: it keeps its input)."""
        return ACTIVATION_SAVES.get(self.hidden_act, 1)

    @property
    def kv_heads(self) -> int:
        return self.num_kv_heads or self.num_heads

    @property
    def dim_head(self) -> int:
        return self.head_dim or self.hidden_size // self.num_heads

    @property
    def q_width(self) -> int:
        return self.num_heads * self.dim_head

    @property
    def kv_width(self) -> int:
        """Keys' width (and values' unless v_head_dim differs)."""
        return self.kv_heads * self.dim_head

    @property
    def leading_norm(self) -> bool:
        """A layer starts by normalizing its input (every pre-norm family); OLMo 2's starts
        with q/k/v_proj."""
        return self.norms_per_layer > 0 and self.norm_position == "pre"

    @property
    def v_dim(self) -> int:
        return self.v_head_dim or self.dim_head

    @property
    def v_width(self) -> int:
        """Values' width: kv_width unless v_head_dim differs (DeepSeek-V2)."""
        return self.kv_heads * self.v_dim

    @property
    def attention_out_width(self) -> int:
        """The attention output, o_proj's input: one value head per query head."""
        return self.num_heads * self.v_dim

    @property
    def latent_attention(self) -> bool:
        """DeepSeek-V2's multi-head latent attention (kv_lora_rank > 0)."""
        return self.kv_lora_rank > 0

    @property
    def kv_b_width(self) -> int:
        """kv_b_proj's output: every head's key part without rotary, and its value."""
        return self.kv_heads * (self.dim_head - self.qk_rope_head_dim + self.v_dim)

    @property
    def full_attention_layers(self) -> int:
        """Layers whose token mixer is attention (every layer but the linear-attention ones)."""
        return self.num_layers - self.linear_attention_layers

    @property
    def linear_key_width(self) -> int:
        """A Gated DeltaNet's query (and key) width, key heads x key head width."""
        return self.linear_key_heads * self.linear_key_head_dim

    @property
    def linear_value_width(self) -> int:
        """A Gated DeltaNet's value (and output gate z) width."""
        return self.linear_value_heads * self.linear_value_head_dim

    @property
    def linear_conv_width(self) -> int:
        """Channels of the conv1d over the concatenated q, k, v (Qwen3NextGatedDeltaNet
        conv_dim = key_dim * 2 + value_dim)."""
        return 2 * self.linear_key_width + self.linear_value_width

    @property
    def delta_rule_flops(self) -> int:
        """Forward FLOPs per token of one Gated DeltaNet's chunked delta rule beyond its
        projections (torch_chunk_gated_delta_rule), linear in the sequence: per chunk of C
        tokens and value head, k_beta k^T and q k^T (2 C^2 dk each), the two triangular
        solves (C^2 dv, C^2 dk), the intra-chunk attention times v_new (2 C^2 dv) and three
        products with the dk x dv state (reading it twice, updating it: 6 C dk dv); per
        token Hv (C (5 dk + 3 dv) + 6 dk dv)."""
        c, dk, dv = DELTA_RULE_CHUNK, self.linear_key_head_dim, self.linear_value_head_dim
        return self.linear_value_heads * (c * (5 * dk + 3 * dv) + 6 * dk * dv)

    @property
    def moe_layer_count(self) -> int:
        if not self.num_experts:
            return 0
        return self.num_layers if self.moe_layers < 0 else self.moe_layers

    @property
    def expert_width(self) -> int:
        return self.moe_intermediate_size or self.intermediate_size

    @classmethod
    def assumed_from_parameters(cls, parameters: int, vocab_size: int = 32000) -> Architecture:
        """A plausible shape for a bare parameter count, for activations and shard units only.

        Kaplan et al. 2020 (and GPT-3's table): P ~= 12 L h^2 with h / L ~= 128, so
        L = (P / (12 * 128^2))^(1/3); heads of width 128; GPT-style 4h MLP.
        """
        layers = max(1, round((parameters / (12 * 128**2)) ** (1 / 3)))
        hidden = max(128, round(math.sqrt(parameters / (12 * layers)) / 128) * 128)
        return cls(
            model_type="assumed",
            hidden_size=hidden,
            num_layers=layers,
            num_heads=hidden // 128,
            intermediate_size=4 * hidden,
            vocab_size=vocab_size,
            mlp_kind="plain",
            # Korthikanti et al.'s GPT layer: GELU, learned positions, dropout everywhere
            hidden_act="gelu",
            rotary=False,
            attention_dropout=0.1,
            residual_dropout=0.1,
            embedding_dropout=0.1,
            eager_softmax_fp32=False,
            assumed=True,
        )

    # --- the modules -------------------------------------------------------------------------

    def _linear(
        self, role: Role, d_in: int, d_out: int, bias: bool, count: int, group: TensorGroup
    ):
        name = self.names.get(role.value, role.value)
        return LinearLayer(role, name, d_in, d_out, bias, count, group)

    def _mlp(
        self, width: int, count: int, group: TensorGroup, *, experts: bool = False
    ) -> list[LinearLayer]:
        h, bias = self.hidden_size, self.mlp_bias
        if self.mlp_kind == "plain":
            return [
                self._linear(Role.fc_in, h, width, bias, count, group),
                self._linear(Role.fc_out, width, h, bias, count, group),
            ]
        gate, up, gate_up, down = (
            (Role.expert_gate, Role.expert_up, Role.expert_gate_up, Role.expert_down)
            if experts
            else (Role.gate, Role.up, Role.gate_up, Role.down)
        )
        if self.fused_gate_up:
            ups = [self._linear(gate_up, h, 2 * width, bias, count, group)]
        else:
            ups = [
                self._linear(gate, h, width, bias, count, group),
                self._linear(up, h, width, bias, count, group),
            ]
        return [*ups, self._linear(down, width, h, bias, count, group)]

    def _latent_attention(self) -> list[LinearLayer]:
        """DeepseekV2Attention's projections before o_proj: q_proj (h -> a(nope + rope)) or
        q_a_proj, q_b_proj; kv_a_proj_with_mqa (h -> kv_lora_rank + rope); kv_b_proj
        (kv_lora_rank -> a(nope + v)). The reader admits no attention bias (see configs.py)."""
        h, n, qb = self.hidden_size, self.num_layers, self.attention_bias
        if self.q_lora_rank:
            q = [
                self._linear(Role.q_a, h, self.q_lora_rank, qb, n, "attention"),
                self._linear(Role.q_b, self.q_lora_rank, self.q_width, False, n, "attention"),
            ]
        else:
            q = [self._linear(Role.q, h, self.q_width, False, n, "attention")]
        kv_a = self.kv_lora_rank + self.qk_rope_head_dim
        return [
            *q,
            self._linear(Role.kv_a, h, kv_a, qb, n, "attention"),
            self._linear(Role.kv_b, self.kv_lora_rank, self.kv_b_width, False, n, "attention"),
        ]

    def _linear_attention(self) -> list[LinearLayer]:
        """The Gated DeltaNet's projections, all without bias: Qwen3NextGatedDeltaNet's
        in_proj_qkvz (h -> 2 key + 2 value widths: q, k, v and the output gate z) and
        in_proj_ba (h -> 2 value heads: beta and the decay's a), or Qwen3_5GatedDeltaNet's
        in_proj_qkv, in_proj_z, in_proj_b, in_proj_a; out_proj (value width -> h)."""
        n = self.linear_attention_layers
        if not n:
            return []
        h, kw, vw, hv = (self.hidden_size, self.linear_key_width, self.linear_value_width,
                         self.linear_value_heads)  # fmt: skip
        if self.linear_fused_projections:
            ins = [
                self._linear(Role.linear_qkvz, h, 2 * kw + 2 * vw, False, n, "attention"),
                self._linear(Role.linear_ba, h, 2 * hv, False, n, "attention"),
            ]
        else:
            ins = [
                self._linear(Role.linear_qkv, h, 2 * kw + vw, False, n, "attention"),
                self._linear(Role.linear_z, h, vw, False, n, "attention"),
                self._linear(Role.linear_b, h, hv, False, n, "attention"),
                self._linear(Role.linear_a, h, hv, False, n, "attention"),
            ]
        return [*ins, self._linear(Role.linear_out, vw, h, False, n, "attention")]

    def _linear_attention_tensors(self) -> list[Tensor]:
        """The Gated DeltaNet's parameters that are no linear weight: the depthwise conv1d
        (conv_dim x 1 x kernel, bias=False), dt_bias and A_log (one per value head) and the
        gated RMSNorm's weight (value head width), per layer."""
        n = self.linear_attention_layers
        if not n:
            return []
        hv = self.linear_value_heads
        conv = (self.linear_conv_width, 1, self.linear_conv_kernel)
        return [
            Tensor("conv1d.weight", conv, n, "attention", True),
            Tensor("dt_bias", (hv,), n, "attention", True),
            Tensor("A_log", (hv,), n, "attention", True),
            Tensor("linear_attn.norm.weight", (self.linear_value_head_dim,), n, "norm", True),
        ]

    @cached_property
    def linear_layers(self) -> tuple[LinearLayer, ...]:
        """Every linear module of the model, excluding the lm_head and embeddings."""
        h, n = self.hidden_size, self.full_attention_layers
        qb, ob = self.attention_bias, self.attention_out_bias
        # an output gate doubles q_proj: query and gate per head (Qwen3NextAttention)
        q_out = self.q_width * (2 if self.attention_output_gate else 1)
        if self.latent_attention:
            attn = self._latent_attention()
        elif self.fused_qkv:
            attn = [self._linear(Role.qkv, h, self.q_width + 2 * self.kv_width, qb, n, "attention")]
        else:
            attn = [
                self._linear(Role.q, h, q_out, qb, n, "attention"),
                self._linear(Role.k, h, self.kv_width, qb, n, "attention"),
                self._linear(Role.v, h, self.v_width, qb, n, "attention"),
            ]
        layers: list[LinearLayer] = []
        if n:
            layers += [*attn, self._linear(Role.o, self.attention_out_width, h, ob, n, "attention")]
        layers += self._linear_attention()
        moe, dense = self.moe_layer_count, self.num_layers - self.moe_layer_count
        if dense:
            layers += self._mlp(self.intermediate_size, dense, "mlp")
        if moe:
            router = self._linear(Role.router, h, self.num_experts, self.router_bias, moe, "router")
            layers.append(router)
            layers += self._mlp(self.expert_width, moe * self.num_experts, "expert", experts=True)
            if self.shared_expert_intermediate_size:
                layers += self._mlp(self.shared_expert_intermediate_size, moe, "shared_expert")
                if self.shared_expert_gate:
                    layers.append(self._linear(Role.shared_gate, h, 1, False, moe, "router"))
        if self.embed_proj_dim:
            e = self.embed_proj_dim
            layers += [
                self._linear(Role.embed_in, e, h, False, 1, "embedding"),
                self._linear(Role.embed_out, h, e, False, 1, "head"),
            ]
        return tuple(layers)

    @cached_property
    def tensors(self) -> tuple[Tensor, ...]:
        """Every parameter tensor with its shape, as the checkpoint stores it."""
        out: list[Tensor] = []
        for lin in self.linear_layers:
            in_layer = lin.group not in ("embedding", "head")
            out.append(
                Tensor(f"{lin.name}.weight", (lin.d_out, lin.d_in), lin.count, lin.group, in_layer)
            )
            if lin.bias:
                out.append(Tensor(f"{lin.name}.bias", (lin.d_out,), lin.count, lin.group, in_layer))
        h = self.hidden_size
        norm_tensors = 2 if self.norm_kind == "layernorm" else 1
        if self.norms_per_layer:
            out.append(
                Tensor(
                    "layer_norm",
                    (h,),
                    self.num_layers * self.norms_per_layer * norm_tensors,
                    "norm",
                    True,
                )
            )
        out += self._linear_attention_tensors()
        n = self.full_attention_layers
        if self.attention_sinks:
            out.append(Tensor("sinks", (self.num_heads,), n, "attention", True))
        if self.qk_norm == "per_head":
            out.append(Tensor("qk_norm", (self.dim_head,), 2 * n, "norm", True))
        elif self.qk_norm == "full":
            out.append(Tensor("q_norm", (self.q_width,), n, "norm", True))
            out.append(Tensor("k_norm", (self.kv_width,), n, "norm", True))
        if self.q_lora_rank:
            out.append(Tensor("q_a_layernorm", (self.q_lora_rank,), n, "norm", True))
        if self.kv_lora_rank:
            out.append(Tensor("kv_a_layernorm", (self.kv_lora_rank,), n, "norm", True))
        if self.final_norm:
            out.append(Tensor("final_norm", (h,), norm_tensors, "norm", False))
        embed_width = self.embed_proj_dim or h
        out.append(Tensor("embed_tokens", (self.vocab_size, embed_width), 1, "embedding", False))
        if self.position_embeddings:
            out.append(
                Tensor("embed_positions", (self.position_embeddings, h), 1, "embedding", False)
            )
        if self.score_labels:
            out.append(Tensor("score", (self.score_labels, h), 1, "head", False))
        elif not self.tie_embeddings:
            out.append(Tensor("lm_head", (self.vocab_size, embed_width), 1, "head", False))
        if self.lm_head_bias and not self.score_labels:
            out.append(Tensor("lm_head.bias", (self.vocab_size,), 1, "head", False))
        if self.tower is not None:
            out += self.tower.tensors
        return tuple(out)

    @cached_property
    def parameter_count(self) -> int:
        """Exact number of parameters (tied embeddings counted once, as PyTorch does)."""
        return sum(t.numel * t.count for t in self.tensors)

    @cached_property
    def layer_parameters(self) -> int:
        """Parameters of the largest decoder layer: the FSDP/ZeRO-3 unit when wrapping per block."""
        in_layers = sum(t.numel * t.count for t in self.tensors if t.in_layer)
        mixer = 0
        if self.linear_attention_layers:
            # Hybrid stacks: the larger of the two token mixers (a Gated DeltaNet or an
            # attention layer) in the unit, beside what every layer has
            linear = self._linear_attention()
            full = [lin for lin in self.linear_layers if lin.role in ATTENTION_ROLES]
            linear_total = sum(_weights(lin) for lin in linear) + sum(
                t.numel * t.count for t in self._linear_attention_tensors()
            )
            full_total = sum(_weights(lin) for lin in full)
            if self.qk_norm == "per_head":
                full_total += 2 * self.dim_head * self.full_attention_layers
            in_layers -= linear_total + full_total
            mixer = max(
                linear_total // self.linear_attention_layers,
                full_total // max(1, self.full_attention_layers),
            )
        if not self.moe_layer_count or self.moe_layer_count == self.num_layers:
            return in_layers // self.num_layers + mixer
        # Mixed dense/MoE stacks: the MoE layer is the larger unit.
        dense_mlp = sum(t.numel * t.count for t in self.tensors if t.group == "mlp")
        return (in_layers - dense_mlp) // self.moe_layer_count + mixer

    @cached_property
    def vocabulary_modules(self) -> tuple[LinearLayer, ...]:
        """The input embedding and the output layer as LoRA sees them: an adapter on the
        embedding is A (r x V) and B (d x r), on lm_head A (r x d) and B (V x r)
        (peft.tuners.lora.layer Embedding, Linear)."""
        width = self.embed_proj_dim or self.hidden_size
        return (
            self._linear(Role.embed, self.vocab_size, width, False, 1, "embedding"),
            # Phi-1.5/2's lm_head has a bias: modules_to_save trains it with the weight
            self._linear(Role.lm_head, width, self.vocab_size, self.lm_head_bias, 1, "head"),
        )

    @property
    def score_layers(self) -> tuple[LinearLayer, ...]:
        """A sequence-classification model's score head as PEFT's all-linear sees it: such a
        model has no output embeddings (get_output_embeddings() is None), so all-linear
        leaves the head out only for task_type SEQ_CLS (peft 0.21 tuners_utils
        _maybe_include_all_linear_layers), which TRL's LoRA config does not set
        (trl 1.16 trainer/utils.py get_peft_config: ModelConfig.lora_task_type, "CAUSAL_LM"
        by default); the LM head's role, as it reads the final norm's output."""
        if not self.score_labels:
            return ()
        h = self.hidden_size
        return (LinearLayer(Role.lm_head, "score", h, self.score_labels, False, 1, "head"),)

    def lora_layers(
        self, targets: tuple[str, ...], adapters: ExpertAdapters = ExpertAdapters.converted
    ) -> tuple[LinearLayer, ...]:
        """The linear modules PEFT adapts for these target names (LoraConfig.target_modules):
        'all-linear' is every nn.Linear but the output layer (peft.tuners.tuners_utils
        _maybe_include_all_linear_layers; a score head is not one, `score_layers`), 'attention'
        the q, k, v and output projections (and a Gated DeltaNet's); the embedding and lm_head
        only when named. `adapters`: what the names reach of stacked experts under the plan's
        versions (`expert_adapters`; default the current releases). Raises PlanError naming
        the modules that exist when a target matches none, or for what PEFT refuses."""
        stacked = self.stacked_experts and adapters is not ExpertAdapters.modules
        # the experts and the router are no nn.Linear, but a shared expert's gate is
        # (Qwen3NextSparseMoeBlock.shared_expert_gate)
        unreached = self.parameter_experts or stacked
        layers = [
            lin
            for lin in self.linear_layers
            if lin.group != "head"
            and not (unreached and (lin.group == "expert" or lin.role is Role.router))
        ]
        named = [*layers, *self.vocabulary_modules]
        converts = stacked and adapters in (ExpertAdapters.named, ExpertAdapters.converted)
        converted = self._peft_expert_targets() if converts else {}
        if converted and adapters is ExpertAdapters.named and "all-linear" in targets:
            raise PlanError(
                "PEFT 0.19 cannot apply 'all-linear' to this model's stacked experts (its "
                "_convert_peft_config_moe splits the string into characters): name the "
                "modules, or plan for PEFT 0.20 or later"
            )
        chosen: list[LinearLayer] = []
        for target in targets:
            if target == "all-linear":
                matched = [*layers, *self.score_layers]
            elif target == "attention":
                # the token mixers: a hybrid stack's Gated DeltaNet projections too
                mixers = ATTENTION_ROLES | LINEAR_ATTENTION_ROLES
                matched = [lin for lin in layers if lin.role in mixers]
            else:
                matched = [lin for lin in named if lin.name == target] or converted.get(target, [])
                if not matched:
                    names = sorted({lin.name for lin in named} | set(converted))
                    raise PlanError(
                        f"LoRA target {target!r} matches no module of this model; "
                        f"use attention, all-linear or some of: {', '.join(names)}"
                    )
            chosen += [lin for lin in matched if lin not in chosen]
        if converted:
            # PEFT moves these names from the modules to the stacked expert parameters;
            # 'all-linear' resolves to every one of them, the router's gate.weight included
            hits = [
                name
                for name in converted
                if "all-linear" in targets or any(lin.name == name for lin in chosen)
            ]
            roles = (Role.expert_gate, Role.expert_up)
            gate, up = (self.names.get(role.value, role.value) for role in roles)
            if (gate in hits) != (up in hits):
                # _convert_peft_config_moe: "Cannot convert PEFT target(s) ... without also
                # targeting ... because they are fused into gate_up_proj"
                one, other = (gate, up) if gate in hits else (up, gate)
                raise PlanError(
                    f"LoRA target {one!r} needs {other!r} too: PEFT fuses both into the "
                    "stacked experts' gate_up_proj and refuses one alone"
                )
            chosen = [lin for lin in chosen if lin.name not in converted]
            for name in hits:
                chosen += [lin for lin in converted[name] if lin not in chosen]
        return tuple(chosen)

    def _peft_expert_targets(self) -> dict[str, list[LinearLayer]]:
        """For a family PEFT converts (`peft_expert_conversion`): each transformers-4 module
        name and the stacked parameters it adapts instead. peft 0.21
        utils/transformers_weight_conversion.py _convert_peft_config_moe with
        _MOE_TARGET_MODULE_MAPPING "qwen2_moe" (gate, gate_proj, up_proj, down_proj) or
        "mixtral" (gate, w1, w3, w2): the router -> gate.weight (r x h, E x r); the gate and
        up projections -> experts.gate_up_proj, whose rank _MOE_FUSED_TARGETS doubles (2r E h
        and 2f x 2r E: two adapters of h -> 2f here); the down projection ->
        experts.down_proj (r E f and h x r E). Never the shared experts' or a dense layer's
        modules of those names (measured with PEFT 0.21 on tiny Qwen3-Next, Qwen3-MoE,
        DeepSeek-V2 and Mixtral models, tests/test_moe_lora_conversion.py)."""
        if not (self.peft_expert_conversion and self.moe_layer_count):
            return {}
        h, f, moe = self.hidden_size, self.expert_width, self.moe_layer_count
        copies = moe * self.num_experts
        router = self._linear(Role.router, h, self.num_experts, self.router_bias, moe, "router")
        gate, up = (
            self._linear(role, h, 2 * f, False, copies, "expert")
            for role in (Role.expert_gate, Role.expert_up)
        )
        down = self._linear(Role.expert_down, f, h, False, copies, "expert")
        fused = [gate, up]
        return {router.name: [router], gate.name: fused, up.name: fused, down.name: [down]}

    def tower_lora_layers(self, targets: tuple[str, ...]) -> tuple[TowerLinear, ...]:
        """The vision tower's linears PEFT adapts too: its suffix match reaches a tower module
        of the same leaf name ('attention' stands for this decoder's attention names)."""
        if self.tower is None:
            return ()
        names = set(targets)
        if "attention" in names:
            names |= {lin.name for lin in self.linear_layers if lin.role in ATTENTION_ROLES}
        return self.tower.adapted(tuple(names))

    def saved_modules(self, names: tuple[str, ...]) -> tuple[LinearLayer, ...]:
        """The modules PEFT trains in full for `modules_to_save` (the embedding and lm_head
        by their names in this family); ValueError for any other name."""
        found = {lin.name: lin for lin in self.vocabulary_modules}
        unknown = [n for n in names if n not in found]
        if unknown:
            raise PlanError(
                f"modules_to_save {unknown[0]!r} is not a module memtui can size here; "
                f"use {' or '.join(found)}"
            )
        return tuple(found[n] for n in dict.fromkeys(names))

    @cached_property
    def _value(self) -> tuple[object, ...]:
        return tuple(
            tuple(sorted(v.items())) if isinstance(v, dict) else v
            for v in (getattr(self, name) for name in type(self).model_fields)
        )

    @cached_property
    def _hash(self) -> int:
        return hash(self._value)

    def __hash__(self) -> int:
        # by value (the `names` dict hashed as sorted pairs), so caches key on what the
        # architecture is, not on which object holds it; computed once (it is frozen)
        return self._hash

    def __eq__(self, other: object) -> bool:
        # by the same value, computed once: pydantic's own comparison would also compare the
        # cached module lists, and caches compare keys on every hit by an equal copy
        if self is other:
            return True
        if not isinstance(other, Architecture):
            return NotImplemented
        return self._hash == other._hash and self._value == other._value

    @cached_property
    def outside_layer_parameters(self) -> int:
        """Embeddings, positions, final norm and lm_head: FSDP's root unit."""
        return sum(t.numel * t.count for t in self.tensors if not t.in_layer)
