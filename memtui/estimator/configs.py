"""Hugging Face `config.json` dicts -> `Architecture`, family by family, without transformers.

Each reader mirrors the module structure of that family's `modeling_*.py` in transformers
(the source of truth for which tensors exist) and the defaults of its `configuration_*.py`
(the value a key takes when `save_pretrained` left it out: it writes a key that
`PretrainedConfig` also has, such as `tie_word_embeddings`, only when it differs from a default,
so those defaults matter). Size keys (hidden size, layers, heads, vocabulary) are always written
by `save_pretrained`, so a config.json without one is malformed: it is reported, never guessed.

Nothing here imports transformers or executes model code; the config is plain JSON data.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from pydantic import ValidationError

from memtui.errors import MemtuiError
from memtui.estimator import towers
from memtui.estimator.architecture import (
    LLAMA_NAMES,
    Architecture,
    QuantMethod,
    StoredQuantization,
)


class ModelConfigError(MemtuiError):
    """A config.json that memtui cannot read; `str()` is one line naming the file and field."""


_MISSING = object()
MAX_CONFIG_INT = 2**53
"""The largest integer a config may give: JSON numbers past it are not exact in the reader
that wrote them, and no size of a real model comes near it."""
MAX_LAYERS = 100_000
"""The most layers a config may give: some 500x the deepest published models (GPT-3 has 96,
Llama 3.1 405B 126); the readers walk the layers one by one (MoE sparse-layer rules)."""
_MAXIMA = {"num_hidden_layers": MAX_LAYERS, "n_layer": MAX_LAYERS}


def _describe(value: object) -> str:
    """A short, one-line description of a JSON value for an error message."""
    if value is None:
        return "null"
    kind = {
        bool: "boolean",
        int: "integer",
        float: "number",
        str: "string",
        list: "list",
        dict: "object",
    }.get(type(value), type(value).__name__)
    text = repr(value).replace("\n", " ")
    return f"{kind} {text[:40] + '...' if len(text) > 40 else text}"


class _Reader:
    """Typed access to one config dict; every failure is a one-line ModelConfigError."""

    def __init__(
        self,
        config: Mapping[str, Any],
        source: str,
        model_type: str,
        *,
        prefix: str = "",
        defaults: Mapping[str, int] | None = None,
    ) -> None:
        self.config = config
        self.source = source
        self.model_type = model_type
        self.prefix = prefix
        """Where this dict sits in the file ('text_config.'), for error messages."""
        self.defaults = defaults or {}
        """Integer defaults of the configuration class for keys that may be absent: a nested
        config (Gemma 3's text_config) is saved as its difference from its own class's
        defaults, so even size keys can be left out there."""

    def error(self, field: str, problem: str) -> ModelConfigError:
        return ModelConfigError(
            f"{self.source}: field '{self.prefix}{field}' {problem} (model_type {self.model_type})"
        )

    def nested(self, key: str, model_type: str, defaults: Mapping[str, int]) -> _Reader:
        """A reader of the sub-config object at `key` (required), whose own `model_type`, if
        given, must be `model_type`."""
        value = self.config.get(key)
        if not isinstance(value, dict):
            problem = (
                "is missing" if value is None else f"must be an object, got {_describe(value)}"
            )
            raise self.error(key, problem)
        sub = _Reader(value, self.source, self.model_type, prefix=f"{self.prefix}{key}.",
                      defaults=defaults)  # fmt: skip
        found = sub.text("model_type", default=model_type)
        if found != model_type:
            raise sub.error("model_type", f"is {found!r}, expected {model_type!r}")
        return sub

    def _get(self, keys: tuple[str, ...]) -> tuple[str, object]:
        """The first key present (aliases, as transformers' `attribute_map` lists them)."""
        for key in keys:
            if key in self.config:
                return key, self.config[key]
        return keys[0], _MISSING

    def integer(self, *keys: str, default: int | object | None = _MISSING, minimum: int = 1) -> int:
        """An integer >= minimum; `default` when absent or null (if a default is given)."""
        key, value = self._get(keys)
        if default is _MISSING and key in self.defaults:
            default = self.defaults[key]
        if value is _MISSING or (value is None and default is not _MISSING):
            if default is _MISSING:
                raise self.error(key, "is missing")
            return default  # type: ignore[return-value]
        # JSON has no integer type of its own: 4096.0 or "4096" is a wrong type, as is true.
        if not isinstance(value, int) or isinstance(value, bool):
            raise self.error(key, f"must be an integer, got {_describe(value)}")
        if value < minimum:
            raise self.error(key, f"must be at least {minimum}, got {value}")
        top = _MAXIMA.get(key, MAX_CONFIG_INT)
        if value > top:  # str() of a 4,300-digit int raises: say its size, not its digits
            raise self.error(key, f"must be at most {top:,}, got a {value.bit_length()}-bit number")
        return value

    def opt_int(self, *keys: str, minimum: int = 1) -> int | None:
        """An integer or None when absent/null (a default that depends on other fields), unless
        the reader knows the class default of that key (`defaults`)."""
        key, _ = self._get(keys)
        value = self.integer(*keys, default=self.defaults.get(key), minimum=minimum)
        return value  # type: ignore[return-value]

    def probability(self, *keys: str, default: float = 0.0) -> float:
        """A dropout probability in [0, 1); `default` when absent or null."""
        key, value = self._get(keys)
        if value is _MISSING or value is None:
            return default
        if not isinstance(value, (int, float)) or isinstance(value, bool):
            raise self.error(key, f"must be a number, got {_describe(value)}")
        if not 0 <= value < 1:
            raise self.error(key, f"must be at least 0 and below 1, got {value}")
        return float(value)

    def number(self, *keys: str, default: float) -> float:
        """A non-negative number; `default` when absent, 0 when null (turned off)."""
        key, value = self._get(keys)
        if value is _MISSING:
            return default
        if value is None:
            return 0.0
        if not isinstance(value, (int, float)) or isinstance(value, bool) or value < 0:
            raise self.error(key, f"must be a number of at least 0, got {_describe(value)}")
        return float(value)

    def text(self, *keys: str, default: str) -> str:
        """A string; `default` when absent or null."""
        key, value = self._get(keys)
        if value is _MISSING or value is None:
            return default
        if not isinstance(value, str):
            raise self.error(key, f"must be a string, got {_describe(value)}")
        return value

    def flag(self, *keys: str, default: bool) -> bool:
        key, value = self._get(keys)
        if value is _MISSING or value is None:
            return default
        if not isinstance(value, bool):
            raise self.error(key, f"must be true or false, got {_describe(value)}")
        return value

    def names(self, key: str) -> tuple[str, ...]:
        """A list of module names (nested lists flattened, as GPTQ's
        modules_in_block_to_quantize groups them); empty when absent or null."""
        value = self.config.get(key)
        if value is None:
            return ()
        flat = (
            [v for item in value for v in (item if isinstance(item, list) else [item])]
            if (isinstance(value, list))
            else None
        )
        if flat is None or any(not isinstance(v, str) for v in flat):
            raise self.error(key, f"must be a list of module names, got {_describe(value)}")
        return tuple(flat)

    def int_list(self, key: str) -> list[int]:
        value = self.config.get(key)
        if value is None:
            return []
        if not isinstance(value, list) or any(
            not isinstance(v, int) or isinstance(v, bool) for v in value
        ):
            raise self.error(key, f"must be a list of integers, got {_describe(value)}")
        return value

    def heads(self, heads_key: tuple[str, ...], kv_key: tuple[str, ...] | None) -> tuple[int, int]:
        """Query heads and key/value heads (None/absent: as many as query heads, GQA off)."""
        heads = self.integer(*heads_key)
        kv = self.opt_int(*kv_key) if kv_key else None
        if kv is not None and heads % kv:
            raise self.error(
                kv_key[0] if kv_key else "", f"({kv}) must divide {heads_key[0]} ({heads})"
            )
        return heads, kv or heads

    def head_dim(self, hidden: int, heads: int, key: str | None = "head_dim") -> int:
        """`head_dim` when the config has it (Gemma, Llama 3.2, Mistral Nemo), else h / a."""
        explicit = self.opt_int(key) if key else None
        if explicit is not None:
            return explicit
        if hidden % heads:
            raise self.error(
                "hidden_size", f"({hidden}) is not a multiple of the head count ({heads})"
            )
        return hidden // heads


def _names(**overrides: str) -> dict[str, str]:
    return {**LLAMA_NAMES, **overrides}


# --- families --------------------------------------------------------------------------------
# Each returns the keyword arguments of Architecture. Comments cite the transformers module.


def _sizes(r: _Reader, *, tie: bool, head_dim_key: str | None = "head_dim") -> dict[str, Any]:
    """The size keys the Llama-derived configs share: hidden_size, num_hidden_layers,
    num_attention_heads, num_key_value_heads (absent: as many as the heads), head_dim (where
    the attention reads one, else h / a), intermediate_size, vocab_size, tie_word_embeddings
    (default `tie`, the configuration class's)."""
    hidden = r.integer("hidden_size")
    heads, kv = r.heads(("num_attention_heads",), ("num_key_value_heads",))
    return dict(
        hidden_size=hidden,
        num_layers=r.integer("num_hidden_layers"),
        num_heads=heads,
        num_kv_heads=kv,
        head_dim=r.head_dim(hidden, heads, key=head_dim_key),
        intermediate_size=r.integer("intermediate_size"),
        vocab_size=r.integer("vocab_size"),
        tie_embeddings=r.flag("tie_word_embeddings", default=tie),
    )


def _llama_like(
    r: _Reader, *, tie: bool, qkv_bias: bool | None = None, o_bias: bool | None = None
) -> dict[str, Any]:
    """Llama, Mistral, Qwen2, Gemma, Gemma 2, Phi-3, Mixtral, Qwen2-MoE: RMSNorm, rotary,
    q/k/v/o (modeling_llama.py LlamaAttention), gate/up/down (LlamaMLP)."""
    # LlamaAttention: bias=config.attention_bias on q, k, v and o alike (default False).
    attention_bias = r.flag("attention_bias", default=False)
    return dict(
        _sizes(r, tie=tie),
        mlp_kind="gated",
        attention_bias=attention_bias if qkv_bias is None else qkv_bias,
        attention_out_bias=attention_bias if o_bias is None else o_bias,
        # LlamaMLP: bias=config.mlp_bias (default False, Llama only; others have no key).
        mlp_bias=r.flag("mlp_bias", default=False),
        norm_kind="rmsnorm",
        norms_per_layer=2,  # input_layernorm, post_attention_layernorm
        # LlamaMLP: act_fn = ACT2FN[config.hidden_act]; eager_attention_forward applies
        # dropout=config.attention_dropout (default 0.0) to the fp32-softmaxed probabilities
        hidden_act=r.text("hidden_act", default="silu"),
        attention_dropout=r.probability("attention_dropout"),
        names=_names(),
    )


def _llama(r: _Reader) -> dict[str, Any]:
    # configuration_llama.py: tie_word_embeddings=False (Llama 3.2 1B/3B set it true).
    return _llama_like(r, tie=False)


def _mistral(r: _Reader) -> dict[str, Any]:
    # modeling_mistral.py: q/k/v/o without bias, no attention_bias key; tie default False.
    return _llama_like(r, tie=False, qkv_bias=False, o_bias=False)


def _qwen2(r: _Reader) -> dict[str, Any]:
    # modeling_qwen2.py Qwen2Attention: q/k/v bias=True, o_proj bias=False; tie default False.
    return _llama_like(r, tie=False, qkv_bias=True, o_bias=False)


def _gemma(r: _Reader) -> dict[str, Any]:
    # configuration_gemma.py: head_dim=256, tie_word_embeddings=True; GemmaRMSNorm keeps one
    # weight of size h (applied as 1 + w).
    arch = _llama_like(r, tie=True)
    arch["head_dim"] = r.integer("head_dim", default=256)
    # GemmaRMSNorm: output = x.float() normalized * (1.0 + weight.float()), cast at the end
    arch["norm_output_fp32"] = True
    # configuration_gemma.py: hidden_act "gelu_pytorch_tanh"; the legacy "gelu" of the
    # official releases is rewritten to it (GemmaConfig.__post_init__)
    act = r.text("hidden_act", default="gelu_pytorch_tanh")
    arch["hidden_act"] = "gelu_pytorch_tanh" if act == "gelu" else act
    return arch


def _gemma2(r: _Reader, softcaps: tuple[float, float] = (50.0, 30.0)) -> dict[str, Any]:
    # modeling_gemma2.py Gemma2DecoderLayer: input_layernorm, post_attention_layernorm,
    # pre_feedforward_layernorm, post_feedforward_layernorm -> 4 RMSNorms per layer.
    arch = _gemma(r)
    arch["norms_per_layer"] = 4
    # Gemma2MLP: act_fn = ACT2FN[config.hidden_activation] (default "gelu_pytorch_tanh");
    # hidden_act is not read
    arch["hidden_act"] = r.text("hidden_activation", default="gelu_pytorch_tanh")
    # configuration_gemma2.py: attn_logit_softcapping 50.0, final_logit_softcapping 30.0
    # (null turns either off)
    arch["attn_softcap"] = r.number("attn_logit_softcapping", default=softcaps[0])
    arch["logit_softcap"] = r.number("final_logit_softcapping", default=softcaps[1])
    return arch


# configuration_gemma3.py Gemma3TextConfig's defaults. They matter: a multimodal config.json
# can store text_config as its difference from these, leaving out the keys at their default
# (copies of Gemma 3's config.json have no text vocab_size: the 262,208 below applies).
GEMMA3_TEXT_DEFAULTS = {
    "vocab_size": 262_208,
    "hidden_size": 2304,
    "intermediate_size": 9216,
    "num_hidden_layers": 26,
    "num_attention_heads": 8,
    "num_key_value_heads": 4,
    "head_dim": 256,
}


def _gemma3_text(r: _Reader) -> dict[str, Any]:
    # modeling_gemma3.py: Gemma3DecoderLayer has Gemma 2's four Gemma3RMSNorms; Gemma3Attention
    # adds q_norm and k_norm = Gemma3RMSNorm(head_dim) on every head, computed and multiplied by
    # 1 + weight in fp32 like the others. Gemma3TextConfig: tie_word_embeddings True,
    # attn_logit_softcapping and final_logit_softcapping None (off).
    sub = _Reader(r.config, r.source, r.model_type, prefix=r.prefix,
                  defaults={**GEMMA3_TEXT_DEFAULTS, **r.defaults})  # fmt: skip
    arch = _gemma2(sub, softcaps=(0.0, 0.0))
    arch["qk_norm"] = "per_head"
    return arch


def _gemma3(r: _Reader) -> dict[str, Any]:
    # configuration_gemma3.py Gemma3Config: the text decoder is text_config (a Gemma3TextConfig),
    # beside vision_config (SigLIP) and the projector, all three in the parameters (towers.py).
    # Its lm_head is tied by the top-level tie_word_embeddings (default True;
    # modeling_utils.get_expanded_tied_weights_keys reads the model's own config).
    text = r.nested("text_config", "gemma3_text", GEMMA3_TEXT_DEFAULTS)
    arch = _gemma3_text(text)
    arch["tie_embeddings"] = r.flag("tie_word_embeddings", default=True)
    v = _vision(r, "siglip_vision_model", SIGLIP_VISION_DEFAULTS)
    arch["tower"] = towers.siglip_gemma3(
        hidden=v.integer("hidden_size"), intermediate=v.integer("intermediate_size"),
        layers=v.integer("num_hidden_layers"), channels=v.integer("num_channels"),
        patch=v.integer("patch_size"), image=v.integer("image_size"),
        pooling_head=v.flag("vision_use_head", default=True), text_hidden=arch["hidden_size"],
    )  # fmt: skip
    return arch


# configuration_siglip.py SiglipVisionConfig's defaults (Gemma3Config builds its vision_config
# from that class, and save_pretrained leaves out the keys at their default).
SIGLIP_VISION_DEFAULTS = {
    "hidden_size": 768,
    "intermediate_size": 3072,
    "num_hidden_layers": 12,
    "num_channels": 3,
    "image_size": 224,
    "patch_size": 16,
}
# configuration_pixtral.py PixtralVisionConfig's defaults, for a vision_config that is given;
# Mistral3Config builds an absent one with its own init_kwargs (patch_size 14 instead).
PIXTRAL_VISION_DEFAULTS = {
    "hidden_size": 1024,
    "intermediate_size": 4096,
    "num_hidden_layers": 24,
    "num_channels": 3,
    "patch_size": 16,
}
MISTRAL3_VISION_DEFAULTS = {**PIXTRAL_VISION_DEFAULTS, "patch_size": 14}


def _vision(r: _Reader, model_type: str, defaults: Mapping[str, int]) -> _Reader:
    """The vision_config reader; an absent one is its class built with its defaults."""
    if r.config.get("vision_config") is None:
        return _Reader({}, r.source, r.model_type, prefix="vision_config.", defaults=defaults)
    return r.nested("vision_config", model_type, defaults)


# configuration_mistral.py MistralConfig's size defaults: a nested text_config may leave out
# the keys at their class default.
MISTRAL_DEFAULTS = {
    "vocab_size": 32000,
    "hidden_size": 4096,
    "intermediate_size": 14336,
    "num_hidden_layers": 32,
    "num_attention_heads": 32,
    "num_key_value_heads": 8,
}


def _mistral3(r: _Reader) -> dict[str, Any]:
    # configuration_mistral3.py Mistral3Config (Mistral Small 3.x): the text decoder is
    # text_config (a MistralConfig), beside vision_config (Pixtral) and the projector, all in
    # the parameters (towers.py). Its lm_head is tied by the top-level tie_word_embeddings
    # (PreTrainedConfig's default True: transformers 5.24 ties a Mistral3Config that does not
    # say otherwise), not text_config's.
    arch = _mistral(r.nested("text_config", "mistral", MISTRAL_DEFAULTS))
    arch["tie_embeddings"] = r.flag("tie_word_embeddings", default=True)
    given = r.config.get("vision_config") is not None
    v = _vision(r, "pixtral", PIXTRAL_VISION_DEFAULTS if given else MISTRAL3_VISION_DEFAULTS)
    # one layer's features (an int, default -1) or several concatenated (a list)
    layer = r.config.get("vision_feature_layer", -1)
    if isinstance(layer, list):
        feature_layers = len(r.int_list("vision_feature_layer"))
    elif isinstance(layer, int) and not isinstance(layer, bool):
        feature_layers = 1
    else:
        problem = f"must be an integer or a list, got {_describe(layer)}"
        raise r.error("vision_feature_layer", problem)
    arch["tower"] = towers.pixtral_mistral3(
        hidden=v.integer("hidden_size"), intermediate=v.integer("intermediate_size"),
        layers=v.integer("num_hidden_layers"), channels=v.integer("num_channels"),
        patch=v.integer("patch_size"), merge=r.integer("spatial_merge_size", default=2),
        feature_layers=max(1, feature_layers),
        projector_bias=r.flag("multimodal_projector_bias", default=False),
        text_hidden=arch["hidden_size"],
    )  # fmt: skip
    return arch


def _qwen3(r: _Reader) -> dict[str, Any]:
    # modeling_qwen3.py Qwen3Attention: bias=config.attention_bias on q/k/v/o (default False)
    # and q_norm / k_norm = Qwen3RMSNorm(head_dim) per layer; tie default False.
    arch = _llama_like(r, tie=False)
    arch["qk_norm"] = "per_head"
    return arch


def _phi3(r: _Reader) -> dict[str, Any]:
    # modeling_phi3.py: qkv_proj = Linear(h, a*d + 2*kv*d, bias=False), o_proj bias=False,
    # gate_up_proj = Linear(h, 2f, bias=False); configuration_phi3.py tie default False.
    arch = _llama_like(r, tie=False, qkv_bias=False, o_bias=False)
    # Phi3DecoderLayer: resid_attn_dropout / resid_mlp_dropout (resid_pdrop) before each
    # residual add; Phi3Model: embd_pdrop is in the config (default 0.0) but not applied
    arch.update(
        fused_qkv=True,
        fused_gate_up=True,
        mlp_bias=False,
        residual_dropout=r.probability("resid_pdrop"),
        # apply_rotary_pos_emb rotates q[..., :rotary_dim] and cats the rest back, whatever
        # partial_rotary_factor is (Phi-4-mini 0.75, Phi-3 1.0)
        rotary_cat=True,
    )
    return arch


def _mixtral(r: _Reader) -> dict[str, Any]:
    # modeling_mixtral.py MixtralSparseMoeBlock: gate = Linear(h, E, bias=False), experts with
    # w1 (gate), w3 (up), w2 (down), no bias; attention as Mistral; tie default False.
    arch = _llama_like(r, tie=False, qkv_bias=False, o_bias=False)
    experts = r.integer("num_local_experts")
    top_k = r.integer("num_experts_per_tok")
    if top_k > experts:
        raise r.error("num_experts_per_tok", f"({top_k}) exceeds num_local_experts ({experts})")
    arch.update(
        num_experts=experts,
        experts_per_token=top_k,
        names=_names(router="gate", expert_gate="w1", expert_up="w3", expert_down="w2"),
        # transformers 5: MixtralExperts' stacked parameters, which PEFT converts to
        # (its own _MODEL_TO_CONVERSION_PATTERN["mixtral"] entry)
        stacked_experts=True,
        peft_expert_conversion=True,
    )
    return arch


def _gpt_oss(r: _Reader) -> dict[str, Any]:
    # modeling_gpt_oss.py (transformers 5.24): GptOssAttention q/k/v/o with
    # bias=attention_bias (default True) and a `sinks` parameter of num_attention_heads;
    # every layer's GptOssMLP is a GptOssTopKRouter (weight E x h, bias E) and GptOssExperts
    # (gate_up_proj E x h x 2f with its bias E x 2f, down_proj E x f x h with its bias E x h,
    # f = intermediate_size), all nn.Parameters. GptOssConfig: tie False, head_dim 64.
    # layer_types alternate sliding (sliding_window 128) and full attention: a window changes
    # no tensor a training step keeps (the attention core saves O(s) with flash attention,
    # and eager's s x s scores are masked, not shortened).
    bias = r.flag("attention_bias", default=True)
    arch = _llama_like(r, tie=False, qkv_bias=bias, o_bias=bias)
    experts = r.integer("num_local_experts", "num_experts")
    top_k = r.integer("num_experts_per_tok", "experts_per_token")
    if top_k > experts:
        raise r.error("num_experts_per_tok", f"({top_k}) exceeds num_local_experts ({experts})")
    arch.update(
        num_experts=experts,
        experts_per_token=top_k,
        fused_gate_up=True,
        mlp_bias=True,
        router_bias=True,
        attention_sinks=True,
        parameter_experts=True,
        names=_names(router="router", expert_gate_up="gate_up_proj", expert_down="down_proj"),
    )
    return arch


def _experts(r: _Reader, experts_key: str, moe_layers: int) -> dict[str, Any]:
    """The routed experts of `moe_layers` MoE layers: E (`experts_key`), top-k and the expert
    width (moe_intermediate_size); a model without MoE layers gets none."""
    experts = r.integer(experts_key)
    top_k = r.integer("num_experts_per_tok")
    if top_k > experts:
        raise r.error("num_experts_per_tok", f"({top_k}) exceeds {experts_key} ({experts})")
    return dict(
        num_experts=experts if moe_layers else 0,
        experts_per_token=top_k if moe_layers else 0,
        moe_intermediate_size=r.integer("moe_intermediate_size"),
        moe_layers=moe_layers,
    )


def _qwen_sparse_layers(r: _Reader, layers: int) -> int:
    """Qwen2-MoE's and Qwen3-MoE's rule: layer i is sparse when i is not in mlp_only_layers and
    (i + 1) % decoder_sparse_step == 0 (and num_experts > 0), else a dense MLP of
    intermediate_size (modeling_qwen2_moe.py / modeling_qwen3_moe.py DecoderLayer.__init__;
    configuration defaults: decoder_sparse_step 1, mlp_only_layers [])."""
    step = r.integer("decoder_sparse_step", default=1)
    dense_only = set(r.int_list("mlp_only_layers"))
    return sum(1 for i in range(layers) if i not in dense_only and (i + 1) % step == 0)


def _qwen2_moe(r: _Reader) -> dict[str, Any]:
    # modeling_qwen2_moe.py: attention as Qwen2 (q/k/v bias, o without). A sparse layer has
    # gate = Linear(h, E), E experts of moe_intermediate_size, one shared_expert of
    # shared_expert_intermediate_size and shared_expert_gate = Linear(h, 1), all without bias.
    arch = _qwen2(r)
    arch.update(
        _experts(r, "num_experts", _qwen_sparse_layers(r, arch["num_layers"])),
        # configuration_qwen2_moe.py: shared_expert_intermediate_size default 5632; 0 = none.
        shared_expert_intermediate_size=r.integer(
            "shared_expert_intermediate_size", default=5632, minimum=0
        ),
        # transformers 5: Qwen2MoeExperts' stacked parameters; "qwen2_moe" is no key of
        # _MODEL_TO_CONVERSION_PATTERN, so PEFT 0.21 does not convert (measured)
        stacked_experts=True,
    )
    return arch


def _qwen3_moe(r: _Reader) -> dict[str, Any]:
    # modeling_qwen3_moe.py: attention as Qwen3 (q_norm / k_norm of head_dim, bias =
    # attention_bias); a sparse layer (the Qwen2-MoE rule) has Qwen3MoeSparseMoeBlock's router
    # gate (E x h) and E experts of moe_intermediate_size, no shared expert; a dense one a
    # Qwen3MoeMLP of intermediate_size. configuration_qwen3_moe.py: tie default False.
    arch = _qwen3(r)
    arch.update(_experts(r, "num_experts", _qwen_sparse_layers(r, arch["num_layers"])))
    # transformers 5: Qwen3MoeExperts' stacked parameters; conversion_mapping.py
    # _MODEL_TO_CONVERSION_PATTERN "qwen3_moe" -> "qwen2_moe", which PEFT converts
    arch.update(stacked_experts=True, peft_expert_conversion=True)
    return arch


def _linear_attention_layers(r: _Reader, layers: int) -> int:
    """How many layers are Gated DeltaNet: `layer_types` when given (each "linear_attention"
    or "full_attention", one per layer), else three of every `full_attention_interval`
    (default 4): layer i is full attention when (i + 1) % interval == 0
    (configuration_qwen3_next.py Qwen3NextConfig.__post_init__, the same in
    configuration_qwen3_5.py Qwen3_5TextConfig)."""
    types = r.config.get("layer_types")
    if types is None:
        interval = r.integer("full_attention_interval", default=4)
        return sum(1 for i in range(layers) if (i + 1) % interval)
    names = r.names("layer_types")
    if len(names) != layers:
        raise r.error("layer_types", f"has {len(names)} entries for {layers} layers")
    unknown = sorted(set(names) - {"linear_attention", "full_attention"})
    if unknown:
        raise r.error("layer_types", f"names {unknown[0]!r}, not linear_ or full_attention")
    return names.count("linear_attention")


def _gated_delta_net(r: _Reader, *, fused: bool, sparse: Callable[[int], int]) -> dict[str, Any]:
    """Qwen3-Next's and Qwen3.5's hybrid decoder (modeling_qwen3_next.py, modeling_qwen3_5.py,
    transformers 5.24). Each layer's token mixer is a Gated DeltaNet (linear attention) or a
    gated attention, by `_linear_attention_layers`. The attention: q_proj of 2 a d (query and
    output gate), k_proj and v_proj of kv d, o_proj, bias=attention_bias on all four; q_norm and
    k_norm of head_dim; partial rotary by torch.cat. The Gated DeltaNet: its projections
    (`Architecture.linear_fused_projections`), a depthwise conv1d, dt_bias, A_log, a gated
    RMSNorm of the value head width and out_proj. Every RMSNorm multiplies by 1 + weight in
    fp32 (Qwen3NextRMSNorm). The MLP of layer i is MoE when `sparse` counts it: a router
    (nn.Parameter E x h), E experts of moe_intermediate_size stored as nn.Parameters
    (Qwen3NextExperts: PEFT's target_modules never reach them), a shared expert of
    shared_expert_intermediate_size and its sigmoid gate, Linear(h, 1); else a dense MLP of
    intermediate_size. Configuration defaults: head_dim 256, the linear heads 16 (key) and 32
    (value) of 128, conv kernel 4, tie_word_embeddings False."""
    arch = _llama_like(r, tie=False)
    layers = arch["num_layers"]
    moe_layers = sparse(layers)
    if moe_layers:
        arch.update(_experts(r, "num_experts", moe_layers))
        arch["shared_expert_intermediate_size"] = r.integer(
            "shared_expert_intermediate_size", default=512, minimum=0
        )
        arch["stacked_experts"] = True
    arch.update(
        head_dim=r.integer("head_dim", default=256),
        qk_norm="per_head",
        norm_output_fp32=True,
        rotary_cat=True,
        attention_output_gate=True,
        linear_attention_layers=_linear_attention_layers(r, layers),
        linear_key_heads=r.integer("linear_num_key_heads", default=16),
        linear_value_heads=r.integer("linear_num_value_heads", default=32),
        linear_key_head_dim=r.integer("linear_key_head_dim", default=128),
        linear_value_head_dim=r.integer("linear_value_head_dim", default=128),
        linear_conv_kernel=r.integer("linear_conv_kernel_dim", default=4),
        linear_fused_projections=fused,
    )
    return arch


def _qwen3_next(r: _Reader) -> dict[str, Any]:
    # Qwen3NextGatedDeltaNet: in_proj_qkvz and in_proj_ba; Qwen3NextDecoderLayer: the
    # Qwen2-MoE sparse-layer rule (decoder_sparse_step, mlp_only_layers, num_experts > 0).
    # Qwen3NextConfig: num_experts 512, num_experts_per_tok 10, moe_intermediate_size 512.
    sub = _Reader(r.config, r.source, r.model_type, prefix=r.prefix,
                  defaults={**QWEN3_NEXT_MOE_DEFAULTS, **r.defaults})  # fmt: skip

    def sparse(layers: int) -> int:
        if not sub.integer("num_experts", minimum=0):
            return 0
        return _qwen_sparse_layers(sub, layers)

    arch = _gated_delta_net(sub, fused=True, sparse=sparse)
    # conversion_mapping.py _MODEL_TO_CONVERSION_PATTERN: "qwen3_next" -> "qwen2_moe", which
    # PEFT's MoE conversion knows; qwen3_5_moe_text -> qwen3_5_text, which it does not
    arch["peft_expert_conversion"] = bool(arch.get("num_experts"))
    return arch


QWEN3_NEXT_MOE_DEFAULTS = {
    "num_experts": 512,
    "num_experts_per_tok": 10,
    "moe_intermediate_size": 512,
}


# configuration_qwen3_5.py Qwen3_5TextConfig's size defaults (a nested text_config may leave
# out the keys at their class default), and Qwen3_5MoeTextConfig's.
QWEN3_5_TEXT_DEFAULTS = {
    "vocab_size": 248_320,
    "hidden_size": 4096,
    "intermediate_size": 12288,
    "num_hidden_layers": 32,
    "num_attention_heads": 16,
    "num_key_value_heads": 4,
}
QWEN3_5_MOE_TEXT_DEFAULTS = {
    "vocab_size": 248_320,
    "hidden_size": 2048,
    "num_hidden_layers": 40,
    "num_attention_heads": 16,
    "num_key_value_heads": 2,
    "num_experts": 256,
    "num_experts_per_tok": 8,
    "moe_intermediate_size": 512,
}


def _qwen3_5_text(r: _Reader) -> dict[str, Any]:
    # Qwen3_5GatedDeltaNet: in_proj_qkv, in_proj_z, in_proj_b, in_proj_a; Qwen3_5DecoderLayer:
    # a dense Qwen3_5MLP of intermediate_size in every layer
    sub = _Reader(r.config, r.source, r.model_type, prefix=r.prefix,
                  defaults={**QWEN3_5_TEXT_DEFAULTS, **r.defaults})  # fmt: skip
    return _gated_delta_net(sub, fused=False, sparse=lambda layers: 0)


def _qwen3_5_moe_text(r: _Reader) -> dict[str, Any]:
    # Qwen3_5MoeDecoderLayer: a Qwen3_5MoeSparseMoeBlock in every layer (no dense layers, no
    # intermediate_size in Qwen3_5MoeTextConfig: the dense width is the experts', never used)
    sub = _Reader(r.config, r.source, r.model_type, prefix=r.prefix,
                  defaults={**QWEN3_5_MOE_TEXT_DEFAULTS, **r.defaults})  # fmt: skip
    if "intermediate_size" not in sub.config:
        sub.defaults = {**sub.defaults, "intermediate_size": sub.integer("moe_intermediate_size")}
    return _gated_delta_net(sub, fused=False, sparse=lambda layers: layers)


def _text_decoder_of(
    r: _Reader, text_type: str, read: Callable[[_Reader], dict[str, Any]],
    defaults: Mapping[str, int],
) -> dict[str, Any]:  # fmt: skip
    """A Qwen3.5 checkpoint's text decoder, text_config. A text fine-tune loads only it:
    AutoModelForCausalLM maps qwen3_5 to Qwen3_5ForCausalLM and qwen3_5_moe to
    Qwen3_5MoeForCausalLM ("VLM compatibility", models/auto/modeling_auto.py, 5.24), built
    from the text config (auto_factory.py get_text_config), which ignores the checkpoint's
    vision tower (_keys_to_ignore_on_load_unexpected ^model.visual.*) and its multi-token
    prediction layers (^mtp.*). Its lm_head ties by text_config's tie_word_embeddings."""
    text = r.nested("text_config", text_type, defaults)
    arch = read(text)
    outer = r.config.get("tie_word_embeddings")
    if outer is not None and r.flag("tie_word_embeddings", default=False) != arch["tie_embeddings"]:
        raise r.error(
            "tie_word_embeddings",
            f"is {outer}, text_config's is {arch['tie_embeddings']}: which ties is unclear",
        )
    return arch


def _qwen3_5(r: _Reader) -> dict[str, Any]:
    return _text_decoder_of(r, "qwen3_5_text", _qwen3_5_text, QWEN3_5_TEXT_DEFAULTS)


def _qwen3_5_moe(r: _Reader) -> dict[str, Any]:
    return _text_decoder_of(r, "qwen3_5_moe_text", _qwen3_5_moe_text, QWEN3_5_MOE_TEXT_DEFAULTS)


def _olmo2(r: _Reader) -> dict[str, Any]:
    # modeling_olmo2.py Olmo2Attention: q/k/v/o with bias=config.attention_bias (default False),
    # q_norm = Olmo2RMSNorm(a * head_dim) on the whole q_proj output, k_norm likewise over
    # kv * head_dim; Olmo2MLP gate/up/down without bias. Olmo2DecoderLayer normalizes the
    # attention and MLP outputs (post_attention_layernorm, post_feedforward_layernorm) and
    # has no input norm. Olmo2RMSNorm multiplies by its weight in fp32 before the cast back.
    # configuration_olmo2.py: num_key_value_heads None -> num_attention_heads, tie False.
    arch = _llama_like(r, tie=False)
    arch.update(mlp_bias=False, norm_position="post", qk_norm="full", norm_output_fp32=True)
    return arch


def _deepseek_v2(r: _Reader) -> dict[str, Any]:
    # modeling_deepseek_v2.py DeepseekV2Attention (multi-head latent attention): q_proj =
    # Linear(h, a (nope + rope), bias=False) when q_lora_rank is None, else q_a_proj (h -> q_lora,
    # bias=attention_bias), q_a_layernorm, q_b_proj (-> a (nope + rope), bias=False);
    # kv_a_proj_with_mqa (h -> kv_lora_rank + rope, bias=attention_bias), kv_a_layernorm
    # (kv_lora_rank), kv_b_proj (kv_lora_rank -> a (nope + v), bias=False), o_proj (a v -> h,
    # bias=attention_bias). DeepseekV2DecoderLayer: a DeepseekV2Moe when layer_idx >=
    # first_k_dense_replace, else a dense DeepseekV2MLP of intermediate_size. DeepseekV2Moe:
    # router weight (E x h), E experts of moe_intermediate_size, shared_experts = one
    # DeepseekV2MLP of moe_intermediate_size x n_shared_experts, added without a gate.
    # configuration_deepseek_v2.py defaults: q_lora_rank 1536 (null: none), kv_lora_rank 512,
    # qk_nope_head_dim 128, qk_rope_head_dim 64, v_head_dim 128, n_routed_experts 64,
    # n_shared_experts 2, first_k_dense_replace 0, moe_intermediate_size 1407, mlp_bias False,
    # attention_bias False, tie False.
    if r.flag("mlp_bias", default=False):
        # DeepseekV2MLP (dense layers, shared experts) would have biases, the experts none
        raise r.error("mlp_bias", "is true: MLP biases of DeepSeek-V2 are not supported")
    freq = r.integer("moe_layer_freq", default=1)
    if freq != 1:
        # DeepSeek's own modeling code makes only every moe_layer_freq-th layer MoE;
        # transformers' DeepseekV2DecoderLayer ignores the key: the two disagree
        raise r.error("moe_layer_freq", f"is {freq}: only 1 is supported")
    arch = _llama_like(r, tie=False)
    heads = arch["num_heads"]
    if arch["num_kv_heads"] != heads:
        # kv_b_proj expands the latent to every query head; repeat_kv would repeat them again
        raise r.error("num_key_value_heads", f"must equal num_attention_heads ({heads}) for MLA")
    # An explicit null q_lora_rank means a plain q_proj; an absent one is the class default
    # 1536 (DeepSeek-V2-Lite's config.json says null: reading it as absent adds 42,508,800).
    q_lora = 0 if r.config.get("q_lora_rank", 0) is None else r.integer("q_lora_rank", default=1536)
    nope = r.integer("qk_nope_head_dim", default=128)
    rope = r.integer("qk_rope_head_dim", default=64)
    layers = arch["num_layers"]
    dense = r.integer("first_k_dense_replace", default=0, minimum=0)
    moe = max(0, layers - dense)
    experts = _experts(r, "n_routed_experts", moe) if moe else {}
    shared = r.integer("n_shared_experts", default=2, minimum=0)
    arch.update(
        head_dim=nope + rope,
        q_lora_rank=q_lora,
        kv_lora_rank=r.integer("kv_lora_rank", default=512),
        qk_rope_head_dim=rope,
        v_head_dim=r.integer("v_head_dim", default=128),
        mlp_bias=False,
        **experts,
        shared_expert_intermediate_size=shared * experts.get("moe_intermediate_size", 0),
        shared_expert_gate=False,
        router_fp32=True,
        rotary_cat=True,  # query_states = torch.cat((q_nope, q_pe), dim=-1)
        names=_names(router="gate"),
        # transformers 5: DeepseekV2Experts' stacked parameters; conversion_mapping.py
        # _MODEL_TO_CONVERSION_PATTERN "deepseek_v2" -> "qwen2_moe", which PEFT converts
        stacked_experts=True,
        peft_expert_conversion=True,
    )
    return arch


def _phi(r: _Reader) -> dict[str, Any]:
    # modeling_phi.py PhiDecoderLayer: one input_layernorm (LayerNorm, weight and bias) whose
    # output feeds self_attn and mlp in parallel; PhiAttention q/k/v_proj (h -> a d, kv d) and
    # dense, all with bias; PhiMLP fc1/fc2 with bias, ACT2FN[hidden_act]; PhiModel
    # final_layernorm; PhiForCausalLM lm_head = Linear(h, V, bias=True). configuration_phi.py:
    # num_key_value_heads None -> num_attention_heads, hidden_act "gelu_new", resid_pdrop,
    # embd_pdrop and attention_dropout 0.0, tie_word_embeddings False, partial_rotary_factor
    # 0.5 (rotary on part of each head: no parameters, the same saved tensors).
    if r.flag("qk_layernorm", default=False):
        raise r.error("qk_layernorm", "is true: Phi's q/k LayerNorms are not supported")
    resid = r.probability("resid_pdrop")  # PhiDecoderLayer.resid_dropout, attention and MLP
    return dict(
        # PhiAttention: getattr(config, "head_dim", hidden_size // num_attention_heads)
        _sizes(r, tie=False),
        mlp_kind="plain",
        attention_bias=True,
        attention_out_bias=True,
        mlp_bias=True,
        norm_kind="layernorm",
        norms_per_layer=1,
        parallel_residual=True,
        rotary_cat=True,  # PhiAttention: torch.cat((query_rot, query_pass), dim=-1)
        lm_head_bias=True,
        hidden_act=r.text("hidden_act", default="gelu_new"),
        attention_dropout=r.probability("attention_dropout"),
        residual_dropout=resid,
        embedding_dropout=r.probability("embd_pdrop"),  # PhiModel.embed_dropout
        names=_names(o="dense"),
    )


def _stablelm(r: _Reader) -> dict[str, Any]:
    # modeling_stablelm.py StableLmAttention: head_dim = hidden_size // num_attention_heads,
    # q/k/v_proj with bias=config.use_qkv_bias (default False), o_proj without; StableLmMLP
    # gate/up/down without bias; StableLmDecoderLayer: input_layernorm (LayerNorm with bias),
    # post_attention_layernorm only without use_parallel_residual (default False), in which
    # case attention and MLP read the same normalized input; StableLmModel.norm (LayerNorm);
    # lm_head without bias, tie default False; partial_rotary_factor 0.25 (no parameters).
    if r.flag("qk_layernorm", default=False):
        raise r.error("qk_layernorm", "is true: StableLM's per-head LayerNorms are not supported")
    qkv_bias = r.flag("use_qkv_bias", default=False)
    parallel = r.flag("use_parallel_residual", default=False)
    return dict(
        _sizes(r, tie=False, head_dim_key=None),  # StableLmAttention reads no head_dim
        mlp_kind="gated",
        attention_bias=qkv_bias,
        attention_out_bias=False,
        norm_kind="layernorm",
        norms_per_layer=1 if parallel else 2,
        parallel_residual=parallel,
        rotary_cat=True,  # StableLmAttention: torch.cat((query_rot, query_pass), dim=-1)
        hidden_act=r.text("hidden_act", default="silu"),
        attention_dropout=r.probability("attention_dropout"),
        # StableLmDecoderLayer.dropout (hidden_dropout, default 0.0) acts on the MLP output only
        residual_dropout=r.probability("hidden_dropout"),
        attention_output_dropout=False,
        names=_names(),
    )


def _gpt2(r: _Reader) -> dict[str, Any]:
    # modeling_gpt2.py: wte, wpe (n_positions rows), per block ln_1, attn.c_attn = Conv1D(3h),
    # attn.c_proj, ln_2, mlp.c_fc = Conv1D(n_inner or 4h), mlp.c_proj, all with bias; ln_f;
    # lm_head tied (PretrainedConfig default). attribute_map: hidden_size -> n_embd, etc.
    if r.flag("add_cross_attention", default=False):
        raise r.error("add_cross_attention", "is true: encoder-decoder GPT-2 is not supported")
    hidden = r.integer("n_embd", "hidden_size")
    heads, _ = r.heads(("n_head", "num_attention_heads"), None)
    return dict(
        hidden_size=hidden,
        num_layers=r.integer("n_layer", "num_hidden_layers"),
        num_heads=heads,
        head_dim=r.head_dim(hidden, heads, key=None),
        intermediate_size=r.integer("n_inner", default=4 * hidden),
        vocab_size=r.integer("vocab_size"),
        tie_embeddings=r.flag("tie_word_embeddings", default=True),
        mlp_kind="plain",
        attention_bias=True,
        attention_out_bias=True,
        mlp_bias=True,
        norm_kind="layernorm",
        norms_per_layer=2,
        fused_qkv=True,
        position_embeddings=r.integer("n_positions", "max_position_embeddings"),
        # configuration_gpt2.py: activation_function "gelu_new", attn_pdrop, resid_pdrop and
        # embd_pdrop 0.1; eager_attention_forward softmaxes in the activation dtype
        hidden_act=r.text("activation_function", default="gelu_new"),
        rotary=False,
        attention_dropout=r.probability("attn_pdrop", default=0.1),
        residual_dropout=r.probability("resid_pdrop", default=0.1),
        embedding_dropout=r.probability("embd_pdrop", default=0.1),
        eager_softmax_fp32=False,
        names=_names(qkv="c_attn", o="c_proj", fc_in="c_fc", fc_out="c_proj", embed="wte"),
    )


def _gpt_neox(r: _Reader) -> dict[str, Any]:
    # modeling_gpt_neox.py: embed_in; per layer input_layernorm and post_attention_layernorm
    # (LayerNorm, both present whatever use_parallel_residual says), attention.query_key_value
    # = Linear(h, 3h) and attention.dense with bias=config.attention_bias (default True),
    # mlp.dense_h_to_4h / dense_4h_to_h with bias; final_layer_norm; embed_out = Linear(h, V,
    # bias=False). configuration_gpt_neox.py: tie_word_embeddings=False.
    hidden = r.integer("hidden_size")
    heads, _ = r.heads(("num_attention_heads",), None)
    bias = r.flag("attention_bias", default=True)
    # configuration_gpt_neox.py: hidden_act "gelu", hidden_dropout and attention_dropout 0.0;
    # GPTNeoXLayer applies hidden_dropout after attention and MLP, GPTNeoXModel after the
    # embeddings (emb_dropout)
    hidden_dropout = r.probability("hidden_dropout")
    return dict(
        hidden_size=hidden,
        num_layers=r.integer("num_hidden_layers"),
        num_heads=heads,
        head_dim=r.head_dim(hidden, heads, key=None),
        intermediate_size=r.integer("intermediate_size"),
        vocab_size=r.integer("vocab_size"),
        tie_embeddings=r.flag("tie_word_embeddings", default=False),
        mlp_kind="plain",
        attention_bias=bias,
        attention_out_bias=bias,
        mlp_bias=True,
        norm_kind="layernorm",
        norms_per_layer=2,
        fused_qkv=True,
        hidden_act=r.text("hidden_act", default="gelu"),
        # apply_rotary_pos_emb rotates the first rotary_pct of each head, cats the rest back
        rotary_cat=True,
        parallel_residual=r.flag("use_parallel_residual", default=True),
        attention_dropout=r.probability("attention_dropout"),
        residual_dropout=hidden_dropout,
        embedding_dropout=hidden_dropout,
        names=_names(
            qkv="query_key_value",
            o="dense",
            fc_in="dense_h_to_4h",
            fc_out="dense_4h_to_h",
            embed="embed_in",
            lm_head="embed_out",
        ),
    )


def _opt(r: _Reader) -> dict[str, Any]:
    # modeling_opt.py OPTDecoder: embed_tokens (V x word_embed_proj_dim); embed_positions =
    # OPTLearnedPositionalEmbedding(max_position_embeddings + 2, h) (offset 2, a fairseq
    # legacy); project_in / project_out = Linear(bias=False) when word_embed_proj_dim != h;
    # final_layer_norm only when do_layer_norm_before and not _remove_final_layer_norm
    # (OPT-350m has none). Layers: q/k/v/out_proj and fc1/fc2 with bias=enable_bias,
    # self_attn_layer_norm and final_layer_norm (LayerNorm, no parameters at all when
    # layer_norm_elementwise_affine is false). lm_head tied (PretrainedConfig default).
    hidden = r.integer("hidden_size")
    heads, _ = r.heads(("num_attention_heads",), None)
    proj = r.integer("word_embed_proj_dim", default=hidden)
    bias = r.flag("enable_bias", default=True)
    affine = r.flag("layer_norm_elementwise_affine", default=True)
    final_norm = r.flag("do_layer_norm_before", default=True) and not r.flag(
        "_remove_final_layer_norm", default=False
    )
    return dict(
        hidden_size=hidden,
        num_layers=r.integer("num_hidden_layers"),
        num_heads=heads,
        head_dim=r.head_dim(hidden, heads, key=None),
        intermediate_size=r.integer("ffn_dim"),
        vocab_size=r.integer("vocab_size"),
        tie_embeddings=r.flag("tie_word_embeddings", default=True),
        mlp_kind="plain",
        attention_bias=bias,
        attention_out_bias=bias,
        mlp_bias=bias,
        norm_kind="layernorm",
        norms_per_layer=2 if affine else 0,
        final_norm=final_norm and affine,
        position_embeddings=r.integer("max_position_embeddings") + 2,
        embed_proj_dim=proj if proj != hidden else 0,
        # configuration_opt.py: activation_function "relu", dropout 0.1 (OPTDecoderLayer:
        # after self-attention and after fc2; OPTDecoder applies none to the embeddings),
        # attention_dropout 0.0
        hidden_act=r.text("activation_function", default="relu"),
        rotary=False,
        attention_dropout=r.probability("attention_dropout"),
        residual_dropout=r.probability("dropout", default=0.1),
        names=_names(o="out_proj"),
    )


def _falcon(r: _Reader) -> dict[str, Any]:
    # modeling_falcon.py FalconAttention: query_key_value out = (2 kv + a) d with
    # new_decoder_architecture, h + 2d with multi_query (one kv head), else 3h; dense; all
    # with bias=config.bias (default False). FalconMLP: dense_h_to_4h (ffn_hidden_size, default
    # 4h), dense_4h_to_h. FalconDecoderLayer: num_ln_in_parallel_attn defaults to 2 with
    # new_decoder_architecture. ln_f; lm_head tied (PretrainedConfig default).
    # attribute_map: num_hidden_layers -> n_layer, num_attention_heads -> n_head.
    hidden = r.integer("hidden_size")
    new_arch = r.flag("new_decoder_architecture", default=False)
    multi_query = r.flag("multi_query", default=True)
    heads = r.integer("num_attention_heads", "n_head")
    if new_arch:
        heads, kv = r.heads(("num_attention_heads", "n_head"), ("num_kv_heads", "n_head_kv"))
    else:
        kv = 1 if multi_query else heads
    parallel = r.flag("parallel_attn", default=True)
    ln_parallel = r.opt_int("num_ln_in_parallel_attn") or (2 if new_arch else 1)
    # not parallel_attn: input_layernorm + post_attention_layernorm; parallel: ln_attn + ln_mlp
    # when num_ln_in_parallel_attn == 2, else input_layernorm alone (Falcon-7B).
    norms = 2 if not parallel or ln_parallel == 2 else 1
    bias = r.flag("bias", default=False)
    # configuration_falcon.py: activation "gelu", hidden_dropout and attention_dropout 0.0,
    # alibi False (rotary otherwise); FalconAttention's eager path softmaxes in the
    # activation dtype; parallel_attn feeds attention and MLP the same input
    hidden_dropout = r.probability("hidden_dropout")
    return dict(
        hidden_size=hidden,
        num_layers=r.integer("num_hidden_layers", "n_layer"),
        num_heads=heads,
        num_kv_heads=kv,
        head_dim=r.head_dim(hidden, heads, key=None),
        intermediate_size=r.integer("ffn_hidden_size", default=4 * hidden),
        vocab_size=r.integer("vocab_size"),
        tie_embeddings=r.flag("tie_word_embeddings", default=True),
        mlp_kind="plain",
        attention_bias=bias,
        attention_out_bias=bias,
        mlp_bias=bias,
        norm_kind="layernorm",
        norms_per_layer=norms,
        fused_qkv=True,
        hidden_act=r.text("activation", default="gelu"),
        rotary=not r.flag("alibi", default=False),
        parallel_residual=parallel,
        attention_dropout=r.probability("attention_dropout"),
        residual_dropout=hidden_dropout,
        eager_softmax_fp32=False,
        names=_names(
            qkv="query_key_value",
            o="dense",
            fc_in="dense_h_to_4h",
            fc_out="dense_4h_to_h",
            embed="word_embeddings",
        ),
    )


FAMILIES: dict[str, Callable[[_Reader], dict[str, Any]]] = {
    "llama": _llama,
    "mistral": _mistral,
    "mistral3": _mistral3,
    "mixtral": _mixtral,
    "gpt_oss": _gpt_oss,
    "qwen2": _qwen2,
    "qwen2_moe": _qwen2_moe,
    "qwen3": _qwen3,
    "qwen3_moe": _qwen3_moe,
    "qwen3_next": _qwen3_next,
    "qwen3_5": _qwen3_5,
    "qwen3_5_text": _qwen3_5_text,
    "qwen3_5_moe": _qwen3_5_moe,
    "qwen3_5_moe_text": _qwen3_5_moe_text,
    "gemma": _gemma,
    "gemma2": _gemma2,
    "gemma3_text": _gemma3_text,
    "gemma3": _gemma3,
    "olmo2": _olmo2,
    "deepseek_v2": _deepseek_v2,
    "phi": _phi,
    "phi3": _phi3,
    "stablelm": _stablelm,
    "gpt2": _gpt2,
    "gpt_neox": _gpt_neox,
    "opt": _opt,
    "falcon": _falcon,
}
"""Supported `model_type` values and their readers."""


# Methods whose training keeps 16-bit weights: transformers 5.24 quantizer_mxfp4.py
# is_trainable is False, and fine-tuning loads gpt-oss with Mxfp4Config(dequantize=True),
# which dequantizes the experts to bf16 on load (integrations/mxfp4.py).
_DEQUANTIZED_FOR_TRAINING = ("mxfp4",)


def _stored_quantization(r: _Reader) -> StoredQuantization | None:
    """The storage of a pre-quantized checkpoint from its `quantization_config`, with the
    defaults of transformers 5.24 utils/quantization_config.py (BitsAndBytesConfig,
    GPTQConfig, AwqConfig, FineGrainedFP8Config); None for 16-bit weights. A method memtui
    cannot size is a one-line error, never read as 16-bit."""
    if r.config.get("quantization_config") is None:
        return None
    q = r.nested("quantization_config", r.model_type, {})
    method = q.text("quant_method", default="")
    if method in _DEQUANTIZED_FOR_TRAINING:
        return None
    skip = q.names("modules_to_not_convert")
    if method == "bitsandbytes":
        four, eight = q.flag("load_in_4bit", default=False), q.flag("load_in_8bit", default=False)
        if four == eight:
            raise q.error("load_in_4bit", "and load_in_8bit: exactly one must be true")
        return StoredQuantization(
            method=QuantMethod.bnb_4bit if four else QuantMethod.bnb_8bit,
            bits=4 if four else 8,
            double_quant=four and q.flag("bnb_4bit_use_double_quant", default=False),
            skip=skip + q.names("llm_int8_skip_modules"),
        )
    if method in ("gptq", "awq"):
        bits = q.integer("bits", "w_bit", default=4)
        if bits not in (2, 3, 4, 8):
            raise q.error("bits", f"must be 2, 3, 4 or 8, got {bits}")
        group = q.integer("group_size", "q_group_size", default=128, minimum=-1)
        if group == 0:
            raise q.error("group_size", "must be -1 (one group per row) or at least 1, got 0")
        return StoredQuantization(
            method=QuantMethod(method),
            bits=bits,
            group_size=max(group, 0),
            skip=skip,
            only=q.names("modules_in_block_to_quantize"),
        )
    if method == "fp8":
        block = q.config.get("weight_block_size", [128, 128])
        if block is not None and not (
            isinstance(block, list)
            and len(block) == 2
            and all(isinstance(b, int) and not isinstance(b, bool) and b > 0 for b in block)
        ):
            raise q.error("weight_block_size", f"must be two positive integers, got {block!r}")
        return StoredQuantization(
            method=QuantMethod.fp8, bits=8, block=tuple(block or (0, 0)), skip=skip
        )
    raise q.error(
        "quant_method",
        f"is {method!r}: a pre-quantized checkpoint memtui cannot size (it sizes "
        "bitsandbytes, gptq, awq, fp8, and mxfp4 dequantized for training)",
    )


def architecture_from_config(config: dict[str, Any], source: str = "config.json") -> Architecture:
    """The Architecture of a Hugging Face config.json dict; `source` names it in errors.

    Raises ModelConfigError (one line: the file, the field, what is wrong) for an unknown
    model_type, a missing or wrongly typed field, or numbers that cannot form a model.
    """
    if not isinstance(config, dict):
        raise ModelConfigError(f"{source}: expected a JSON object, got {_describe(config)}")
    model_type = config.get("model_type")
    if model_type is None:
        raise ModelConfigError(f"{source}: field 'model_type' is missing")
    if not isinstance(model_type, str):
        raise ModelConfigError(
            f"{source}: field 'model_type' must be a string, got {_describe(model_type)}"
        )
    reader = FAMILIES.get(model_type)
    if reader is None:
        raise ModelConfigError(
            f"{source}: field 'model_type' is {model_type!r}, which memtui cannot read "
            f"(supported: {', '.join(sorted(FAMILIES))})"
        )
    r = _Reader(config, source, model_type)
    fields = reader(r)
    fields["quantized"] = _stored_quantization(r)
    try:
        return Architecture(model_type=model_type, **fields)
    except ValidationError as err:  # numbers valid one by one but not together
        first = err.errors()[0]
        where = ".".join(str(p) for p in first["loc"]) or "config"
        raise ModelConfigError(
            f"{source}: {where}: {first['msg']} (model_type {model_type})"
        ) from None
