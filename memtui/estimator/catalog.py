"""Popular open models, keyed by Hugging Face repo id, with their published parameter counts.

Each entry keeps the subset of the model's real `config.json` that decides its tensors and
builds its Architecture through `configs.architecture_from_config`, the same path a user's own
config.json takes; `tests/test_catalog.py` checks every computed count against the published
total. Published totals come from the Hugging Face safetensors metadata ("safetensors total"),
the model card, or the paper named in `source`; for tied embeddings they count the shared
matrix once, as `sum(p.numel() for p in model.parameters())` does.

A hub total counts the tensors a checkpoint stores, which is not always the model's unique
parameters: Qwen3-0.6B and 1.7B store their tied lm_head beside the embedding. Such an entry
keeps the hub figure in `published_total` and names each part of the difference with its size
(`beyond_parameters`); the tests check that they add up and recompute each part. (Gemma 3's
4B+ checkpoints count their SigLIP vision tower and projector, towers.py, and match the hub.)

Variant ids (-Instruct, -chat-hf, -it, -Base twins) whose config.json has the same tensors resolve
to their base entry (`aliases`): an explicit list per entry, each variant's config.json compared
with its base's, never a suffix stripped on the fly (a -Vision-Instruct or a fine-tune with a new
vocabulary must not resolve to a base it differs from).
"""

from __future__ import annotations

import difflib
from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

from memtui.estimator.architecture import Architecture
from memtui.estimator.configs import architecture_from_config

ST = "Hugging Face safetensors metadata"


@dataclass(frozen=True)
class CatalogEntry:
    """One model: its repo id, its config.json subset, and its published parameter count."""

    repo_id: str
    config: Mapping[str, Any] = field(repr=False)
    published_parameters: int
    source: str = ST
    """Where `published_parameters` comes from."""
    aliases: tuple[str, ...] = ()
    """Other repo ids with the same config.json tensors (instruction-tuned twins)."""
    published_total: int | None = None
    """The published figure itself when it counts more than the model's unique parameters
    (a stored copy of a tied lm_head, a vision tower); None when it is published_parameters."""
    beyond_parameters: tuple[tuple[str, int], ...] = ()
    """What published_total counts beyond published_parameters, each part named with its size:
    published_parameters + their sum == published_total."""

    @cached_property
    def architecture(self) -> Architecture:
        return architecture_from_config(dict(self.config), f"catalog:{self.repo_id}")

    @property
    def model_type(self) -> str:
        return str(self.config["model_type"])


def _llama(h: int, f: int, heads: int, layers: int, kv: int, vocab: int, **extra: Any) -> dict:
    return {
        "architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_act": "silu",
        "hidden_size": h, "intermediate_size": f, "num_attention_heads": heads,
        "num_hidden_layers": layers, "num_key_value_heads": kv, "vocab_size": vocab,
        "rms_norm_eps": 1e-05, "tie_word_embeddings": False, **extra,
    }  # fmt: skip


def _qwen2(h: int, f: int, heads: int, layers: int, kv: int, vocab: int, tie: bool) -> dict:
    return {
        "architectures": ["Qwen2ForCausalLM"], "model_type": "qwen2", "hidden_act": "silu",
        "hidden_size": h, "intermediate_size": f, "num_attention_heads": heads,
        "num_hidden_layers": layers, "num_key_value_heads": kv, "vocab_size": vocab,
        "max_position_embeddings": 32768, "rope_theta": 1000000.0, "sliding_window": 32768,
        "use_sliding_window": False, "tie_word_embeddings": tie,
    }  # fmt: skip


def _gemma(model_type: str, h: int, f: int, heads: int, layers: int, kv: int, hd: int) -> dict:
    # google/gemma-* config.json files carry no tie_word_embeddings (tied by default).
    arch = "GemmaForCausalLM" if model_type == "gemma" else "Gemma2ForCausalLM"
    return {
        "architectures": [arch], "model_type": model_type, "head_dim": hd,
        "hidden_size": h, "intermediate_size": f, "num_attention_heads": heads,
        "num_hidden_layers": layers, "num_key_value_heads": kv, "vocab_size": 256000,
        "max_position_embeddings": 8192, "rms_norm_eps": 1e-06,
    }  # fmt: skip


def _gpt2(n_embd: int, n_layer: int, n_head: int) -> dict:
    # openai-community/gpt2*: no n_inner (4h) and no tie_word_embeddings (tied) in the file.
    return {
        "architectures": ["GPT2LMHeadModel"], "model_type": "gpt2",
        "activation_function": "gelu_new", "n_ctx": 1024, "n_embd": n_embd, "n_head": n_head,
        "n_layer": n_layer, "n_positions": 1024, "vocab_size": 50257,
        "layer_norm_epsilon": 1e-05,
    }  # fmt: skip


def _opt(h: int, ffn: int, heads: int, layers: int, **extra: Any) -> dict:
    return {
        "architectures": ["OPTForCausalLM"], "model_type": "opt", "activation_function": "relu",
        "hidden_size": h, "ffn_dim": ffn, "num_attention_heads": heads,
        "num_hidden_layers": layers, "max_position_embeddings": 2048, "vocab_size": 50272,
        "do_layer_norm_before": True, "word_embed_proj_dim": h, **extra,
    }  # fmt: skip


def _neox(h: int, f: int, heads: int, layers: int, vocab: int) -> dict:
    return {
        "architectures": ["GPTNeoXForCausalLM"], "model_type": "gpt_neox",
        "hidden_size": h, "intermediate_size": f, "num_attention_heads": heads,
        "num_hidden_layers": layers, "vocab_size": vocab, "max_position_embeddings": 2048,
        "rotary_pct": 0.25, "use_parallel_residual": True, "tie_word_embeddings": False,
    }  # fmt: skip


_L3 = {"max_position_embeddings": 8192, "rope_theta": 500000.0}
_L31 = {"max_position_embeddings": 131072, "rope_theta": 500000.0,
        "rope_scaling": {"factor": 8.0, "rope_type": "llama3"}}  # fmt: skip
_MISTRAL = {
    "architectures": ["MistralForCausalLM"], "model_type": "mistral", "hidden_size": 4096,
    "intermediate_size": 14336, "num_attention_heads": 32, "num_hidden_layers": 32,
    "num_key_value_heads": 8, "max_position_embeddings": 32768, "rms_norm_eps": 1e-05,
    "tie_word_embeddings": False,
}  # fmt: skip
_PHI3 = {"architectures": ["Phi3ForCausalLM"], "model_type": "phi3", "vocab_size": 32064,
         "max_position_embeddings": 4096, "tie_word_embeddings": False}  # fmt: skip
_PYTHIA = "Biderman et al. 2023, Pythia, Table 1"

_ENTRIES: tuple[tuple[str, dict, int, str], ...] = (
    # Llama 2 (Touvron et al. 2023): 7B and 13B are anchors of
    # docs/architecture.md, "Reference results".
    ("meta-llama/Llama-2-7b-hf", _llama(4096, 11008, 32, 32, 32, 32000), 6_738_415_616, ST),
    ("meta-llama/Llama-2-13b-hf", _llama(5120, 13824, 40, 40, 40, 32000), 13_015_864_320, ST),
    ("meta-llama/Llama-2-70b-hf", _llama(8192, 28672, 64, 80, 8, 32000), 68_976_648_192, ST),
    # Llama 3 / 3.1 share shapes; 3.1 only changes RoPE scaling (no parameters).
    (
        "meta-llama/Meta-Llama-3-8B",
        _llama(4096, 14336, 32, 32, 8, 128256, **_L3),
        8_030_261_248,
        ST,
    ),
    (
        "meta-llama/Meta-Llama-3-70B",
        _llama(8192, 28672, 64, 80, 8, 128256, **_L3),
        70_553_706_496,
        ST,
    ),
    ("meta-llama/Llama-3.1-8B", _llama(4096, 14336, 32, 32, 8, 128256, **_L31), 8_030_261_248, ST),
    (
        "meta-llama/Llama-3.1-70B",
        _llama(8192, 28672, 64, 80, 8, 128256, **_L31),
        70_553_706_496,
        ST,
    ),
    (
        "meta-llama/Llama-3.1-405B",
        _llama(16384, 53248, 128, 126, 8, 128256, **_L31),
        405_853_388_800,
        ST,
    ),
    (
        "meta-llama/Llama-3.2-1B",
        _llama(2048, 8192, 32, 16, 8, 128256, head_dim=64, tie_word_embeddings=True),
        1_235_814_400,
        ST,
    ),
    (
        "meta-llama/Llama-3.2-3B",
        _llama(3072, 8192, 24, 28, 8, 128256, head_dim=128, tie_word_embeddings=True),
        3_212_749_824,
        ST,
    ),
    # Mistral 7B (Jiang et al. 2023); v0.3 extends the vocabulary to 32768.
    (
        "mistralai/Mistral-7B-v0.1",
        {**_MISTRAL, "vocab_size": 32000, "sliding_window": 4096},
        7_241_732_096,
        ST,
    ),
    (
        "mistralai/Mistral-7B-v0.3",
        {**_MISTRAL, "vocab_size": 32768, "rope_theta": 1000000.0},
        7_248_023_552,
        ST,
    ),
    # Mixtral (Jiang et al. 2024): 8 experts, top-2, in every layer.
    (
        "mistralai/Mixtral-8x7B-v0.1",
        {
            **_MISTRAL,
            "architectures": ["MixtralForCausalLM"],
            "model_type": "mixtral",
            "vocab_size": 32000,
            "num_local_experts": 8,
            "num_experts_per_tok": 2,
            "router_aux_loss_coef": 0.02,
            "rope_theta": 1000000.0,
        },
        46_702_792_704,
        ST,
    ),
    (
        "mistralai/Mixtral-8x22B-v0.1",
        {
            "architectures": ["MixtralForCausalLM"],
            "model_type": "mixtral",
            "hidden_size": 6144,
            "intermediate_size": 16384,
            "num_attention_heads": 48,
            "num_hidden_layers": 56,
            "num_key_value_heads": 8,
            "vocab_size": 32000,
            "num_local_experts": 8,
            "num_experts_per_tok": 2,
            "max_position_embeddings": 65536,
            "tie_word_embeddings": False,
        },
        140_620_634_112,
        ST,
    ),
    # Qwen2.5 (Qwen team 2024): 0.5B-3B tie their embeddings.
    ("Qwen/Qwen2.5-0.5B", _qwen2(896, 4864, 14, 24, 2, 151936, True), 494_032_768, ST),
    ("Qwen/Qwen2.5-1.5B", _qwen2(1536, 8960, 12, 28, 2, 151936, True), 1_543_714_304, ST),
    ("Qwen/Qwen2.5-3B", _qwen2(2048, 11008, 16, 36, 2, 151936, True), 3_085_938_688, ST),
    ("Qwen/Qwen2.5-7B", _qwen2(3584, 18944, 28, 28, 4, 152064, False), 7_615_616_512, ST),
    ("Qwen/Qwen2.5-14B", _qwen2(5120, 13824, 40, 48, 8, 152064, False), 14_770_033_664, ST),
    ("Qwen/Qwen2.5-32B", _qwen2(5120, 27648, 40, 64, 8, 152064, False), 32_763_876_352, ST),
    ("Qwen/Qwen2.5-72B", _qwen2(8192, 29568, 64, 80, 8, 152064, False), 72_706_203_648, ST),
    (
        "Qwen/Qwen1.5-MoE-A2.7B",
        {
            "architectures": ["Qwen2MoeForCausalLM"],
            "model_type": "qwen2_moe",
            "hidden_size": 2048,
            "intermediate_size": 5632,
            "num_attention_heads": 16,
            "num_hidden_layers": 24,
            "num_key_value_heads": 16,
            "vocab_size": 151936,
            "decoder_sparse_step": 1,
            "moe_intermediate_size": 1408,
            "shared_expert_intermediate_size": 5632,
            "num_experts_per_tok": 4,
            "num_experts": 60,
            "norm_topk_prob": False,
            "tie_word_embeddings": False,
        },
        14_315_784_192,
        ST,
    ),
    (
        "Qwen/Qwen3-8B",
        {
            "architectures": ["Qwen3ForCausalLM"],
            "model_type": "qwen3",
            "hidden_size": 4096,
            "intermediate_size": 12288,
            "num_attention_heads": 32,
            "num_hidden_layers": 36,
            "num_key_value_heads": 8,
            "head_dim": 128,
            "vocab_size": 151936,
            "attention_bias": False,
            "max_position_embeddings": 40960,
            "tie_word_embeddings": False,
        },
        8_190_735_360,
        ST,
    ),
    # Gemma (Gemma team 2024): head_dim 256, tied embeddings; Gemma 2 adds two norms/layer.
    ("google/gemma-2b", _gemma("gemma", 2048, 16384, 8, 18, 1, 256), 2_506_172_416, ST),
    ("google/gemma-7b", _gemma("gemma", 3072, 24576, 16, 28, 16, 256), 8_537_680_896, ST),
    ("google/gemma-2-2b", _gemma("gemma2", 2304, 9216, 8, 26, 4, 256), 2_614_341_888, ST),
    ("google/gemma-2-9b", _gemma("gemma2", 3584, 14336, 16, 42, 8, 256), 9_241_705_984, ST),
    ("google/gemma-2-27b", _gemma("gemma2", 4608, 36864, 32, 46, 16, 128), 27_227_128_320, ST),
    # Phi-3 (Abdin et al. 2024): fused qkv_proj and gate_up_proj.
    (
        "microsoft/Phi-3-mini-4k-instruct",
        {
            **_PHI3,
            "hidden_size": 3072,
            "intermediate_size": 8192,
            "num_attention_heads": 32,
            "num_hidden_layers": 32,
            "num_key_value_heads": 32,
        },
        3_821_079_552,
        ST,
    ),
    (
        "microsoft/Phi-3-medium-4k-instruct",
        {
            **_PHI3,
            "hidden_size": 5120,
            "intermediate_size": 17920,
            "num_attention_heads": 40,
            "num_hidden_layers": 40,
            "num_key_value_heads": 10,
        },
        13_960_238_080,
        ST,
    ),
    # GPT-2 (Radford et al. 2019), counts as GPT2LMHeadModel reports them.
    ("openai-community/gpt2", _gpt2(768, 12, 12), 124_439_808, ST),
    ("openai-community/gpt2-medium", _gpt2(1024, 24, 16), 354_823_168, ST),
    ("openai-community/gpt2-large", _gpt2(1280, 36, 20), 774_030_080, ST),
    ("openai-community/gpt2-xl", _gpt2(1600, 48, 25), 1_557_611_200, ST),
    # OPT (Zhang et al. 2022): learned positions with offset 2; 350m projects 512 <-> 1024
    # and normalizes after each block (no final norm).
    ("facebook/opt-125m", _opt(768, 3072, 12, 12), 125_239_296, ST),
    (
        "facebook/opt-350m",
        _opt(1024, 4096, 16, 24, word_embed_proj_dim=512, do_layer_norm_before=False),
        331_196_416,
        ST,
    ),
    ("facebook/opt-1.3b", _opt(2048, 8192, 32, 24), 1_315_758_080, ST),
    # Falcon-7B (Almazrouei et al. 2023): multi-query attention, parallel attention/MLP.
    (
        "tiiuae/falcon-7b",
        {
            "architectures": ["FalconForCausalLM"],
            "model_type": "falcon",
            "hidden_size": 4544,
            "num_attention_heads": 71,
            "num_hidden_layers": 32,
            "vocab_size": 65024,
            "multi_query": True,
            "new_decoder_architecture": False,
            "parallel_attn": True,
            "bias": False,
            "alibi": False,
        },
        6_921_720_704,
        "model card / DESIGN issue anchor",
    ),
    # GPT-NeoX (Black et al. 2022) and Pythia (Biderman et al. 2023), untied embed_out.
    ("EleutherAI/pythia-160m", _neox(768, 3072, 12, 12, 50304), 162_322_944, _PYTHIA),
    ("EleutherAI/pythia-410m", _neox(1024, 4096, 16, 24, 50304), 405_334_016, _PYTHIA),
    ("EleutherAI/pythia-1b", _neox(2048, 8192, 8, 16, 50304), 1_011_781_632, _PYTHIA),
    ("EleutherAI/pythia-6.9b", _neox(4096, 16384, 32, 32, 50432), 6_857_302_016, _PYTHIA),
    ("EleutherAI/pythia-12b", _neox(5120, 20480, 40, 36, 50688), 11_846_072_320, _PYTHIA),
    (
        "EleutherAI/gpt-neox-20b",
        _neox(6144, 24576, 64, 44, 50432),
        20_554_567_680,
        "EleutherAI/gpt-neox-20b model card",
    ),
)

# --- families people fine-tune now -------------------------------------------------------
# Configs copied from each repository's config.json (counts cross-checked by building each config
# with transformers 5.24 on the meta device). The published figures are second-hand copies of the
# Hugging Face hub API's safetensors.total, named by where they were found:
_KNOWN = (
    "HF hub API safetensors.total of 2026-09-25, as copied in a public KNOWN_MODELS dict "
    "(code search index id 71142266638)"
)
_HFAPI = (
    "HF model API safetensors.total fetched 2026-10-01, as copied in a public HF_API dict "
    "(code search index id 71571056092)"
)
_KVFIT = "HF safetensors total as recorded in debaditc/kvfit src/kvfit/data/models.json @bd4ccabf"
_TWIN = "; the figure is the instruction-tuned twin's (same config tensors)"


def _qwen3(h: int, f: int, heads: int, layers: int, kv: int, tie: bool, **extra: Any) -> dict:
    return {
        "architectures": ["Qwen3ForCausalLM"], "model_type": "qwen3", "head_dim": 128,
        "hidden_size": h, "intermediate_size": f, "num_attention_heads": heads,
        "num_hidden_layers": layers, "num_key_value_heads": kv, "vocab_size": 151936,
        "attention_bias": False, "rms_norm_eps": 1e-06, "tie_word_embeddings": tie, **extra,
    }  # fmt: skip


def _qwen3_moe(h: int, f: int, fe: int, heads: int, layers: int) -> dict:
    return {
        **_qwen3(h, f, heads, layers, 4, False), "architectures": ["Qwen3MoeForCausalLM"],
        "model_type": "qwen3_moe", "decoder_sparse_step": 1, "mlp_only_layers": [],
        "moe_intermediate_size": fe, "norm_topk_prob": True, "num_experts": 128,
        "num_experts_per_tok": 8,
    }  # fmt: skip


def _olmo2(h: int, f: int, heads: int, layers: int) -> dict:
    return {
        "architectures": ["Olmo2ForCausalLM"], "model_type": "olmo2", "hidden_act": "silu",
        "hidden_size": h, "intermediate_size": f, "num_attention_heads": heads,
        "num_hidden_layers": layers, "num_key_value_heads": heads, "vocab_size": 100352,
        "rms_norm_eps": 1e-06, "tie_word_embeddings": False,
    }  # fmt: skip


def _phi(h: int, layers: int, rotary: float) -> dict:
    return {
        "architectures": ["PhiForCausalLM"], "model_type": "phi", "hidden_act": "gelu_new",
        "hidden_size": h, "intermediate_size": 4 * h, "num_attention_heads": 32,
        "num_hidden_layers": layers, "num_key_value_heads": 32, "vocab_size": 51200,
        "layer_norm_eps": 1e-05, "partial_rotary_factor": rotary, "qk_layernorm": False,
        "tie_word_embeddings": False,
    }  # fmt: skip


def _mistral_128(f: int) -> dict:
    # Mistral Nemo and Small 3: head_dim 128 although hidden / heads is 160.
    return {
        **_MISTRAL, "head_dim": 128, "hidden_size": 5120, "intermediate_size": f,
        "num_hidden_layers": 40, "vocab_size": 131072,
    }  # fmt: skip


def _gemma3(h: int, f: int, heads: int, layers: int, kv: int, hd: int, scalar: int) -> dict:
    # A Gemma3ForConditionalGeneration config: the text decoder in text_config, whose
    # vocab_size is left to Gemma3TextConfig's 262,208 in the hub files; a SigLIP vision tower.
    return {
        "architectures": ["Gemma3ForConditionalGeneration"], "model_type": "gemma3",
        "mm_tokens_per_image": 256,
        "text_config": {
            "model_type": "gemma3_text", "head_dim": hd, "hidden_size": h,
            "intermediate_size": f, "num_attention_heads": heads, "num_hidden_layers": layers,
            "num_key_value_heads": kv, "query_pre_attn_scalar": scalar, "sliding_window": 1024,
            "sliding_window_pattern": 6, "vocab_size": 262208,
        },
        "vision_config": dict(GEMMA3_VISION),
    }  # fmt: skip


GEMMA3_VISION = {
    "model_type": "siglip_vision_model", "hidden_size": 1152, "image_size": 896,
    "intermediate_size": 4304, "num_attention_heads": 16, "num_channels": 3,
    "num_hidden_layers": 27, "patch_size": 14, "vision_use_head": False,
}  # fmt: skip
"""The SigLIP vision tower of every Gemma 3 4B/12B/27B (their config.json vision_config)."""


def _gemma3_entry(size: str, total: int, *shape: int) -> CatalogEntry:
    """google/gemma-3-{size}-pt: the text decoder, the SigLIP vision tower and the projector
    Gemma3ForConditionalGeneration holds, together the hub total of the -it twin."""
    return CatalogEntry(
        f"google/gemma-3-{size}-pt",
        _gemma3(*shape),
        total,
        f"the HF safetensors total of google/gemma-3-{size}-it ({_KVFIT}): the text decoder "
        "(text vocab_size 262,208, Gemma3TextConfig's default, which the hub config leaves "
        "to it), the SigLIP vision tower and the multimodal projector",
        aliases=(f"google/gemma-3-{size}-it",),
    )


_LM_HEAD_STORED = (
    "the unique parameters: the hub safetensors total ({total:,}, {known}) counts the "
    "lm_head.weight the checkpoint stores although tie_word_embeddings is true "
    "(151,936 x {h:,}), which the model ties to the embedding"
)

_NEW_ENTRIES: tuple[CatalogEntry, ...] = (
    CatalogEntry(
        "meta-llama/Llama-3.3-70B-Instruct",
        _llama(8192, 28672, 64, 80, 8, 128256, **_L31),
        70_553_706_496,
        f"{_KNOWN}; the same in {_KVFIT}",
    ),
    CatalogEntry(
        "codellama/CodeLlama-7b-hf",
        _llama(4096, 11008, 32, 32, 32, 32016),  # Llama 2 + 16 infilling tokens
        6_738_546_688,
        "Together AI catalog 'togethercomputer/CodeLlama-7b' and GGUF general.parameter_count "
        "(code search index ids 4120541175, 14596936751)",
        aliases=("meta-llama/CodeLlama-7b-hf",),
    ),
    CatalogEntry(
        "TinyLlama/TinyLlama-1.1B-intermediate-step-1431k-3T",
        _llama(2048, 5632, 32, 22, 4, 32000),
        1_100_048_384,
        "safetensors metadata {'F32': 1100048384} of the base checkpoint and sum(p.numel()) "
        "after from_pretrained, as quoted in public code (index ids 71366605573, 59208154669)",
        aliases=("TinyLlama/TinyLlama-1.1B-Chat-v1.0",),
    ),
    # SmolLM2 (Allal et al. 2025): tied embeddings, the Llama architecture.
    CatalogEntry(
        "HuggingFaceTB/SmolLM2-135M",
        _llama(576, 1536, 9, 30, 3, 49152, tie_word_embeddings=True),
        134_515_008,
        _KNOWN + _TWIN,
        aliases=("HuggingFaceTB/SmolLM2-135M-Instruct",),
    ),
    CatalogEntry(
        "HuggingFaceTB/SmolLM2-360M",
        _llama(960, 2560, 15, 32, 5, 49152, tie_word_embeddings=True),
        361_821_120,
        _KNOWN + _TWIN,
        aliases=("HuggingFaceTB/SmolLM2-360M-Instruct",),
    ),
    CatalogEntry(
        "HuggingFaceTB/SmolLM2-1.7B",
        _llama(2048, 8192, 32, 24, 32, 49152, tie_word_embeddings=True),
        1_711_376_384,
        _KNOWN + _TWIN,
        aliases=("HuggingFaceTB/SmolLM2-1.7B-Instruct",),
    ),
    # Mistral Nemo (2407) and Mistral Small 3 (2501).
    CatalogEntry(
        "mistralai/Mistral-Nemo-Base-2407",
        _mistral_128(14336),
        12_247_782_400,
        _KVFIT + _TWIN,
        aliases=("mistralai/Mistral-Nemo-Instruct-2407",),
    ),
    CatalogEntry(
        "mistralai/Mistral-Small-24B-Base-2501",
        _mistral_128(32768),
        23_572_403_200,
        "Fireworks model catalog 'Mistral Small 24B Instruct 2501' paramCount (code search "
        "index id 66729435508) and keras-hub's presets of the same 24B text architecture "
        "(index ids 55107988649, 45328956238)" + _TWIN,
        aliases=("mistralai/Mistral-Small-24B-Instruct-2501",),
    ),
    # Qwen3 (Qwen team 2025): q_norm / k_norm per head; 0.6B-4B tie their embeddings.
    CatalogEntry(
        "Qwen/Qwen3-0.6B",
        _qwen3(1024, 3072, 16, 28, 8, True),
        596_049_920,
        _LM_HEAD_STORED.format(total=751_632_384, known=_KNOWN, h=1024),
        published_total=751_632_384,
        beyond_parameters=(("lm_head.weight stored beside the tied embedding", 151936 * 1024),),
    ),
    CatalogEntry(
        "Qwen/Qwen3-1.7B",
        _qwen3(2048, 6144, 16, 28, 8, True),
        1_720_574_976,
        _LM_HEAD_STORED.format(total=2_031_739_904, known=_KNOWN, h=2048),
        published_total=2_031_739_904,
        beyond_parameters=(("lm_head.weight stored beside the tied embedding", 151936 * 2048),),
    ),
    CatalogEntry(
        "Qwen/Qwen3-4B",
        _qwen3(2560, 9728, 32, 36, 8, True),
        4_022_468_096,
        _KNOWN + " (this checkpoint stores no separate lm_head)",
    ),
    CatalogEntry(
        "Qwen/Qwen3-14B",
        _qwen3(5120, 17408, 40, 40, 8, False),
        14_768_307_200,
        "keras-hub qwen3_14b_en preset params, Fireworks catalog paramCount, and "
        "parameter_count=14768307200 in a public run log of Qwen/Qwen3-14B (code search "
        "index ids 766509503, 66729435508, 62477325160)",
    ),
    CatalogEntry(
        "Qwen/Qwen3-32B",
        _qwen3(5120, 25600, 64, 64, 8, False),
        32_762_123_264,
        f"{_KNOWN}; the same in {_KVFIT}",
    ),
    # Qwen3-MoE: every layer sparse, 128 experts, top-8, no shared expert.
    CatalogEntry(
        "Qwen/Qwen3-30B-A3B",
        _qwen3_moe(2048, 6144, 768, 32, 48),
        30_532_122_624,
        _KVFIT,
        aliases=("Qwen/Qwen3-30B-A3B-Base",),
    ),
    CatalogEntry(
        "Qwen/Qwen3-235B-A22B",
        _qwen3_moe(4096, 12288, 1536, 64, 94),
        235_093_634_560,
        _KVFIT,
    ),
    # Qwen3-Next: 36 Gated DeltaNet + 12 gated-attention layers, 512 experts, top-10, a
    # shared expert (configs.py _qwen3_next). The config's tensor keys, verbatim from a model
    # report that prints its config.json beside the checkpoint's 41 safetensors files (code
    # search index id 62751147890): 81,324,862,720 stored, the mtp.* layer among them.
    CatalogEntry(
        "Qwen/Qwen3-Next-80B-A3B-Instruct",
        {
            "architectures": ["Qwen3NextForCausalLM"],
            "model_type": "qwen3_next",
            "decoder_sparse_step": 1,
            "full_attention_interval": 4,
            "head_dim": 256,
            "hidden_act": "silu",
            "hidden_size": 2048,
            "intermediate_size": 5120,
            "linear_conv_kernel_dim": 4,
            "linear_key_head_dim": 128,
            "linear_num_key_heads": 16,
            "linear_num_value_heads": 32,
            "linear_value_head_dim": 128,
            "mlp_only_layers": [],
            "moe_intermediate_size": 512,
            "num_attention_heads": 16,
            "num_experts": 512,
            "num_experts_per_tok": 10,
            "num_hidden_layers": 48,
            "num_key_value_heads": 2,
            "shared_expert_intermediate_size": 512,
            "tie_word_embeddings": False,
            "vocab_size": 151936,
        },
        79_674_391_296,
        "the checkpoint's safetensors total in a model report (code search index id "
        "62751147890) less its multi-token-prediction layer; model card: 80B total, 3B active",
        published_total=81_324_862_720,
        beyond_parameters=(
            ("mtp.* multi-token-prediction layer, stored but skipped on load", 1_650_471_424),
        ),
    ),
    # Gemma 3 (Gemma team 2025): 1B is text only; 4B-27B carry a SigLIP vision tower.
    CatalogEntry(
        "google/gemma-3-1b-pt",
        {
            "architectures": ["Gemma3ForCausalLM"],
            "model_type": "gemma3_text",
            "attention_bias": False,
            "head_dim": 256,
            "hidden_activation": "gelu_pytorch_tanh",
            "hidden_size": 1152,
            "intermediate_size": 6912,
            "num_attention_heads": 4,
            "num_hidden_layers": 26,
            "num_key_value_heads": 1,
            "query_pre_attn_scalar": 256,
            "rms_norm_eps": 1e-06,
            "sliding_window_pattern": 6,
            "vocab_size": 262144,
        },
        999_885_952,
        "keras-hub gemma3_presets.py @00d9f10a gemma3_1b params (text-only); the HF -it "
        "twin's " + _KNOWN,
        aliases=("google/gemma-3-1b-it",),
    ),
    # (size, text decoder, hub total; h, f, heads, layers, kv heads, head_dim, query scalar)
    _gemma3_entry("4b", 4_300_079_472, 2560, 10240, 8, 34, 4, 256, 256),
    _gemma3_entry("12b", 12_187_325_040, 3840, 15360, 16, 48, 8, 256, 256),
    _gemma3_entry("27b", 27_432_406_640, 5376, 21504, 32, 62, 16, 128, 168),
    # Phi-4 (Abdin et al. 2024) and Phi-4-mini: the phi3 architecture; mini ties embeddings.
    CatalogEntry(
        "microsoft/phi-4",
        {
            **_PHI3,
            "hidden_size": 5120,
            "intermediate_size": 17920,
            "num_attention_heads": 40,
            "num_hidden_layers": 40,
            "num_key_value_heads": 10,
            "vocab_size": 100352,
        },
        14_659_507_200,
        f"{_KNOWN}; the same in {_KVFIT}",
    ),
    CatalogEntry(
        "microsoft/Phi-4-mini-instruct",
        {
            **_PHI3,
            "hidden_size": 3072,
            "intermediate_size": 8192,
            "num_attention_heads": 24,
            "num_hidden_layers": 32,
            "num_key_value_heads": 8,
            "vocab_size": 200064,
            "partial_rotary_factor": 0.75,
            "tie_word_embeddings": True,
        },
        3_836_021_760,
        _KNOWN,
    ),
    # Phi-1.5 and Phi-2 (Li et al. 2023; Javaheripi et al. 2023): one LayerNorm, parallel
    # attention and MLP, biases everywhere including the lm_head.
    CatalogEntry(
        "microsoft/phi-1_5",
        _phi(2048, 24, 0.5),
        1_418_270_720,
        "HF hub metadata 'safetensors_total_params: 1418270720' of microsoft/phi-1_5, as quoted "
        "in public code (code search index ids 70228203983, 70407034430)",
    ),
    CatalogEntry(
        "microsoft/phi-2",
        _phi(2560, 32, 0.4),
        2_779_683_840,
        "HF hub API fixture of microsoft/phi-2, safetensors parameters F16 2779683840 (code "
        "search index id 48474337912)",
    ),
    # OLMo 2 (OLMo team 2024): post-norms, full-width q/k norms.
    CatalogEntry(
        "allenai/OLMo-2-1124-7B",
        _olmo2(4096, 11008, 32, 32),
        7_298_617_344,
        f"{_HFAPI} (revision 7df9a825); the -Instruct twin's is the same in {_KNOWN}",
        aliases=("allenai/OLMo-2-1124-7B-Instruct",),
    ),
    CatalogEntry(
        "allenai/OLMo-2-1124-13B",
        _olmo2(5120, 13824, 40, 40),
        13_716_198_400,
        f"{_HFAPI} (revision 3fefddc1)",
        aliases=("allenai/OLMo-2-1124-13B-Instruct",),
    ),
    # DeepSeek-V2-Lite (DeepSeek-AI 2024): multi-head latent attention without a q LoRA,
    # layer 0 dense, then 64 routed (top-6) and 2 shared experts per layer.
    CatalogEntry(
        "deepseek-ai/DeepSeek-V2-Lite",
        {
            "architectures": ["DeepseekV2ForCausalLM"],
            "model_type": "deepseek_v2",
            "attention_bias": False,
            "first_k_dense_replace": 1,
            "hidden_act": "silu",
            "hidden_size": 2048,
            "intermediate_size": 10944,
            "kv_lora_rank": 512,
            "moe_intermediate_size": 1408,
            "moe_layer_freq": 1,
            "n_routed_experts": 64,
            "n_shared_experts": 2,
            "norm_topk_prob": False,
            "num_attention_heads": 16,
            "num_experts_per_tok": 6,
            "num_hidden_layers": 27,
            "num_key_value_heads": 16,
            "q_lora_rank": None,
            "qk_nope_head_dim": 128,
            "qk_rope_head_dim": 64,
            "rms_norm_eps": 1e-06,
            "tie_word_embeddings": False,
            "v_head_dim": 128,
            "vocab_size": 102400,
        },
        15_706_484_224,
        "the DeepSeek-V2-Lite chat demo's banner 'with 15706484224 (2.7B effect.) parameters' "
        "and a public table of base and -Chat (code search index ids 41727181442, "
        "69468411049); config from maxtext's copy of its config.json (q_lora_rank null)",
        aliases=("deepseek-ai/DeepSeek-V2-Lite-Chat",),
    ),
    # StableLM: 3B-4E1T (stablelm), and the GPT-NeoX Alpha 3B.
    CatalogEntry(
        "stabilityai/stablelm-3b-4e1t",
        {
            "architectures": ["StableLmForCausalLM"],
            "model_type": "stablelm",
            "hidden_act": "silu",
            "hidden_size": 2560,
            "intermediate_size": 6912,
            "layer_norm_eps": 1e-05,
            "num_attention_heads": 32,
            "num_hidden_layers": 32,
            "num_key_value_heads": 32,
            "partial_rotary_factor": 0.25,
            "tie_word_embeddings": False,
            "use_qkv_bias": False,
            "vocab_size": 50304,
        },
        2_795_443_200,
        "model card table (Parameters 2,795,443,200), https://huggingface.co/stabilityai/"
        "stablelm-3b-4e1t",
    ),
    CatalogEntry(
        "stabilityai/stablelm-base-alpha-3b",
        _neox(4096, 16384, 32, 16, 50688),
        3_637_321_728,
        "mlverse minhub's test of https://huggingface.co/stabilityai/stablelm-base-alpha-3b, "
        "expect_equal(n_par, 3637321728) (code search index id 31752229958)",
        aliases=("stabilityai/stablelm-tuned-alpha-3b",),
    ),
)

# Variant ids of the entries above whose config.json tensors were compared with the base's:
# the Instruct/chat twins share the base's config and the same hub safetensors total.
_ALIASES: dict[str, tuple[str, ...]] = {
    "meta-llama/Llama-2-7b-hf": ("meta-llama/Llama-2-7b-chat-hf",),
    "meta-llama/Meta-Llama-3-8B": ("meta-llama/Meta-Llama-3-8B-Instruct",),
    "meta-llama/Llama-3.1-8B": ("meta-llama/Llama-3.1-8B-Instruct",),
    "meta-llama/Llama-3.2-1B": ("meta-llama/Llama-3.2-1B-Instruct",),
    "meta-llama/Llama-3.2-3B": ("meta-llama/Llama-3.2-3B-Instruct",),
}


def _in_order(first: list[CatalogEntry], more: tuple[CatalogEntry, ...]) -> list[CatalogEntry]:
    """`first`, each of `more` placed after the last entry of its organisation (the repo id
    before the slash), so that a listing stays grouped by family; new organisations last."""
    ordered = list(first)
    for entry in more:
        org = entry.repo_id.split("/", 1)[0]
        same = [i for i, e in enumerate(ordered) if e.repo_id.split("/", 1)[0] == org]
        ordered.insert(same[-1] + 1 if same else len(ordered), entry)
    return ordered


CATALOG: dict[str, CatalogEntry] = {
    entry.repo_id: entry
    for entry in _in_order(
        [
            CatalogEntry(repo, config, count, source, aliases=_ALIASES.get(repo, ()))
            for repo, config, count, source in _ENTRIES
        ],
        _NEW_ENTRIES,
    )
}
"""Every catalog model by its Hugging Face repo id, grouped by organisation."""

_IDS: dict[str, tuple[str, CatalogEntry]] = {
    name.lower(): (name, entry)
    for entry in CATALOG.values()
    for name in (entry.repo_id, *entry.aliases)
}
"""Every repo id and alias, lower-cased -> (its catalog spelling, its entry)."""

# Re-uploads of a catalogued repo under another organisation, ungated, whose config.json is the
# original's (NousResearch's copies of Meta's Llama checkpoints, which axolotl's examples
# train; unsloth's 16-bit copies): resolved to the original's entry under their own name, and
# not listed by `memtui models`. Quantized re-uploads are not here: their quantization_config
# decides their size, so they resolve from their own config.json (the cache or the Hub).
_MIRRORS: dict[str, str] = {
    "NousResearch/Llama-2-7b-hf": "meta-llama/Llama-2-7b-hf",
    "NousResearch/Llama-2-7b-chat-hf": "meta-llama/Llama-2-7b-chat-hf",
    "NousResearch/Llama-2-13b-hf": "meta-llama/Llama-2-13b-hf",
    "NousResearch/Llama-2-70b-hf": "meta-llama/Llama-2-70b-hf",
    "NousResearch/Meta-Llama-3-8B": "meta-llama/Meta-Llama-3-8B",
    "NousResearch/Meta-Llama-3-8B-Instruct": "meta-llama/Meta-Llama-3-8B-Instruct",
    "NousResearch/Meta-Llama-3-70B": "meta-llama/Meta-Llama-3-70B",
    "NousResearch/Meta-Llama-3.1-8B": "meta-llama/Llama-3.1-8B",
    "NousResearch/Meta-Llama-3.1-8B-Instruct": "meta-llama/Llama-3.1-8B-Instruct",
    "NousResearch/Llama-3.2-1B": "meta-llama/Llama-3.2-1B",
    "unsloth/Llama-3.2-1B": "meta-llama/Llama-3.2-1B",
    "unsloth/Llama-3.2-1B-Instruct": "meta-llama/Llama-3.2-1B-Instruct",
    "unsloth/Llama-3.2-3B": "meta-llama/Llama-3.2-3B",
    "unsloth/Llama-3.2-3B-Instruct": "meta-llama/Llama-3.2-3B-Instruct",
    "unsloth/Meta-Llama-3.1-8B": "meta-llama/Llama-3.1-8B",
    "unsloth/Meta-Llama-3.1-8B-Instruct": "meta-llama/Llama-3.1-8B-Instruct",
}
_IDS.update({m.lower(): (m, _IDS[base.lower()][1]) for m, base in _MIRRORS.items()})
_MIRROR_KEYS = frozenset(m.lower() for m in _MIRRORS)


def lookup_id(repo_id: str) -> tuple[str, CatalogEntry] | None:
    """(The catalog's spelling of the id, its entry) for a repo id or an alias,
    case-insensitive; the name after the slash works if unique."""
    key = repo_id.strip().lower()
    if key in _IDS:
        return _IDS[key]
    # a mirror shares its original's name after the slash: only the original answers to it
    short = [
        found
        for name, found in _IDS.items()
        if name.split("/", 1)[-1] == key and name not in _MIRROR_KEYS
    ]
    return short[0] if len(short) == 1 else None


def lookup(repo_id: str) -> CatalogEntry | None:
    """The entry for a repo id or an alias (see `lookup_id`)."""
    found = lookup_id(repo_id)
    return found[1] if found else None


# Suffixes of instruction-tuned variants, only to word an error: lookup never strips them.
_VARIANT_SUFFIXES = ("-instruct", "-chat-hf", "-chat", "-it")


def base_of_variant(repo_id: str) -> str | None:
    """The catalog id that `repo_id` looks like a variant of, when `repo_id` itself is not in
    the catalog: a hint for the error message, not a resolution (its config may differ)."""
    if lookup(repo_id) is not None:
        return None
    text = repo_id.strip()
    for suffix in _VARIANT_SUFFIXES:
        if text.lower().endswith(suffix):
            found = lookup_id(text[: -len(suffix)])
            if found is not None:
                return found[0]
    return None


def _normal(text: str) -> str:
    return "".join(ch for ch in text.lower() if ch.isalnum())


def _word_starts(name: str) -> tuple[str, frozenset[int]]:
    """`name`'s letters and digits, lower-cased, and where in them a word starts: after
    punctuation, at a lower-to-upper case change (TinyLlama), between letters and digits
    (Qwen2, 1431k)."""
    chars: list[str] = []
    starts: set[int] = set()
    prev = ""
    for ch in name:
        if not ch.isalnum():
            prev = ""
            continue
        if not prev or (prev.islower() and ch.isupper()) or prev.isalpha() != ch.isalpha():
            starts.add(len(chars))
        chars.append(ch.lower())
        prev = ch
    return "".join(chars), frozenset(starts)


def _matches(words: list[str], name: str) -> bool:
    """Every word occurs in `name` starting where a word of it starts ('3.1' is in
    'Llama-3.1-8B' but not in '...-step-1431k-3T')."""
    text, starts = _word_starts(name)
    return all(any(text.startswith(w, i) for i in starts) for w in words)


def find(query: str) -> list[CatalogEntry]:
    """Entries matching a query, best first: entries whose id or alias holds every word of
    the query from a word start (ignoring case and punctuation, so 'llama3 8b' finds
    'Meta-Llama-3-8B'), then close fuzzy matches."""
    if not query.strip():
        return list(CATALOG.values())
    words = [_normal(w) for w in query.split() if _normal(w)]
    if not words:  # punctuation only ('!!!') names no model: no match, as 'zzzz' has none
        return []
    hits = [e for e in CATALOG.values() if any(_matches(words, n) for n in (e.repo_id, *e.aliases))]
    if hits:
        return hits  # catalog order: by family, then by size
    # No substring match: difflib's ratio (Ratcliff/Obershelp) against the name after the slash.
    names = {_normal(r.split("/", 1)[-1]): e for r, (_, e) in _IDS.items()}
    close = difflib.get_close_matches(_normal(query), list(names), n=8, cutoff=0.6)
    found = {id(names[n]): names[n] for n in close}  # an entry once, even if two names match
    return list(found.values())
