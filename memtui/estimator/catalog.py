"""Popular open models, keyed by Hugging Face repo id, with their published parameter counts.

Each entry keeps the subset of the model's real `config.json` that decides its tensors and
builds its Architecture through `configs.architecture_from_config`, the same path a user's own
config.json takes; `tests/test_catalog.py` checks every computed count against the published
total. Published totals come from the Hugging Face safetensors metadata ("safetensors total"),
the model card, or the paper named in `source`; for tied embeddings they count the shared
matrix once, as `sum(p.numel() for p in model.parameters())` does.
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
    # Llama 2 (Touvron et al. 2023): 7B and 13B are DESIGN.md section 5's anchors.
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

CATALOG: dict[str, CatalogEntry] = {
    repo: CatalogEntry(repo, config, count, source) for repo, config, count, source in _ENTRIES
}
"""Every catalog model by its Hugging Face repo id."""


def lookup(repo_id: str) -> CatalogEntry | None:
    """The entry for a repo id, case-insensitive; the name after the slash works if unique."""
    key = repo_id.strip().lower()
    exact = [e for r, e in CATALOG.items() if r.lower() == key]
    if exact:
        return exact[0]
    short = [e for r, e in CATALOG.items() if r.split("/", 1)[-1].lower() == key]
    return short[0] if len(short) == 1 else None


def _normal(text: str) -> str:
    return "".join(ch for ch in text.lower() if ch.isalnum())


def find(query: str) -> list[CatalogEntry]:
    """Entries matching a query, best first: substring matches (ignoring case and
    punctuation, so 'llama3 8b' finds 'Meta-Llama-3-8B'), then close fuzzy matches."""
    words = [_normal(w) for w in query.split() if _normal(w)]
    if not words:
        return list(CATALOG.values())
    hits = [e for e in CATALOG.values() if all(w in _normal(e.repo_id) for w in words)]
    if hits:
        return hits  # catalog order: by family, then by size
    # No substring match: difflib's ratio (Ratcliff/Obershelp) against the name after the slash.
    names = {_normal(r.split("/", 1)[-1]): e for r, e in CATALOG.items()}
    close = difflib.get_close_matches(_normal(query), list(names), n=8, cutoff=0.6)
    return [names[n] for n in close]
