"""config.json files as Hugging Face publishes them -> exact parameter counts, and errors."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from memtui.estimator.architecture import ExpertAdapters
from memtui.estimator.configs import ModelConfigError, architecture_from_config
from memtui.estimator.model_source import load_model

# Real config.json files (the keys their repos carry, trimmed of tokenizer/generation noise
# only where it does not matter), with the published total parameter count of that model.
LLAMA_2_7B = {
    "_name_or_path": "meta-llama/Llama-2-7b-hf", "architectures": ["LlamaForCausalLM"],
    "bos_token_id": 1, "eos_token_id": 2, "hidden_act": "silu", "hidden_size": 4096,
    "initializer_range": 0.02, "intermediate_size": 11008, "max_position_embeddings": 4096,
    "model_type": "llama", "num_attention_heads": 32, "num_hidden_layers": 32,
    "num_key_value_heads": 32, "pretraining_tp": 1, "rms_norm_eps": 1e-05,
    "rope_scaling": None, "tie_word_embeddings": False, "torch_dtype": "float16",
    "transformers_version": "4.31.0.dev0", "use_cache": True, "vocab_size": 32000,
}  # fmt: skip
LLAMA_32_1B = {
    "architectures": ["LlamaForCausalLM"], "attention_bias": False, "attention_dropout": 0.0,
    "bos_token_id": 128000, "eos_token_id": 128001, "head_dim": 64, "hidden_act": "silu",
    "hidden_size": 2048, "initializer_range": 0.02, "intermediate_size": 8192,
    "max_position_embeddings": 131072, "mlp_bias": False, "model_type": "llama",
    "num_attention_heads": 32, "num_hidden_layers": 16, "num_key_value_heads": 8,
    "pretraining_tp": 1, "rms_norm_eps": 1e-05,
    "rope_scaling": {"factor": 32.0, "high_freq_factor": 4.0, "low_freq_factor": 1.0,
                     "original_max_position_embeddings": 8192, "rope_type": "llama3"},
    "rope_theta": 500000.0, "tie_word_embeddings": True, "torch_dtype": "bfloat16",
    "transformers_version": "4.45.0.dev0", "use_cache": True, "vocab_size": 128256,
}  # fmt: skip
MISTRAL_7B = {
    "architectures": ["MistralForCausalLM"], "bos_token_id": 1, "eos_token_id": 2,
    "hidden_act": "silu", "hidden_size": 4096, "initializer_range": 0.02,
    "intermediate_size": 14336, "max_position_embeddings": 32768, "model_type": "mistral",
    "num_attention_heads": 32, "num_hidden_layers": 32, "num_key_value_heads": 8,
    "rms_norm_eps": 1e-05, "rope_theta": 10000.0, "sliding_window": 4096,
    "tie_word_embeddings": False, "torch_dtype": "bfloat16", "transformers_version": "4.34.0",
    "use_cache": True, "vocab_size": 32000,
}  # fmt: skip
MIXTRAL_8X7B = {
    "architectures": ["MixtralForCausalLM"], "attention_dropout": 0.0, "bos_token_id": 1,
    "eos_token_id": 2, "hidden_act": "silu", "hidden_size": 4096, "initializer_range": 0.02,
    "intermediate_size": 14336, "max_position_embeddings": 32768, "model_type": "mixtral",
    "num_attention_heads": 32, "num_experts_per_tok": 2, "num_hidden_layers": 32,
    "num_key_value_heads": 8, "num_local_experts": 8, "output_router_logits": False,
    "rms_norm_eps": 1e-05, "rope_theta": 1000000.0, "router_aux_loss_coef": 0.02,
    "sliding_window": None, "tie_word_embeddings": False, "torch_dtype": "bfloat16",
    "transformers_version": "4.36.0.dev0", "use_cache": True, "vocab_size": 32000,
}  # fmt: skip
QWEN25_05B = {
    "architectures": ["Qwen2ForCausalLM"], "attention_dropout": 0.0,
    "bos_token_id": 151643, "eos_token_id": 151643, "hidden_act": "silu", "hidden_size": 896,
    "initializer_range": 0.02, "intermediate_size": 4864, "max_position_embeddings": 32768,
    "max_window_layers": 24, "model_type": "qwen2", "num_attention_heads": 14,
    "num_hidden_layers": 24, "num_key_value_heads": 2, "rms_norm_eps": 1e-06,
    "rope_theta": 1000000.0, "sliding_window": 32768, "tie_word_embeddings": True,
    "torch_dtype": "bfloat16", "transformers_version": "4.40.1", "use_cache": True,
    "use_mrope": False, "use_sliding_window": False, "vocab_size": 151936,
}  # fmt: skip
QWEN15_MOE = {
    "architectures": ["Qwen2MoeForCausalLM"], "attention_dropout": 0.0,
    "bos_token_id": 151643, "decoder_sparse_step": 1, "eos_token_id": 151643,
    "hidden_act": "silu", "hidden_size": 2048, "initializer_range": 0.02,
    "intermediate_size": 5632, "max_position_embeddings": 8192, "max_window_layers": 21,
    "model_type": "qwen2_moe", "moe_intermediate_size": 1408, "norm_topk_prob": False,
    "num_attention_heads": 16, "num_experts": 60, "num_experts_per_tok": 4,
    "num_hidden_layers": 24, "num_key_value_heads": 16, "output_router_logits": False,
    "rms_norm_eps": 1e-06, "rope_theta": 1000000.0, "router_aux_loss_coef": 0.001,
    "shared_expert_intermediate_size": 5632, "sliding_window": 32768,
    "tie_word_embeddings": False, "torch_dtype": "bfloat16", "transformers_version": "4.40.0.dev0",
    "use_cache": True, "use_sliding_window": False, "vocab_size": 151936,
}  # fmt: skip
QWEN3_8B = {
    "architectures": ["Qwen3ForCausalLM"], "attention_bias": False, "attention_dropout": 0.0,
    "bos_token_id": 151643, "eos_token_id": 151645, "head_dim": 128, "hidden_act": "silu",
    "hidden_size": 4096, "initializer_range": 0.02, "intermediate_size": 12288,
    "max_position_embeddings": 40960, "max_window_layers": 36, "model_type": "qwen3",
    "num_attention_heads": 32, "num_hidden_layers": 36, "num_key_value_heads": 8,
    "rms_norm_eps": 1e-06, "rope_scaling": None, "rope_theta": 1000000,
    "sliding_window": None, "tie_word_embeddings": False, "torch_dtype": "bfloat16",
    "transformers_version": "4.51.0", "use_cache": True, "use_sliding_window": False,
    "vocab_size": 151936,
}  # fmt: skip
GEMMA_7B = {  # no tie_word_embeddings key: Gemma ties by default
    "architectures": ["GemmaForCausalLM"], "attention_bias": False, "attention_dropout": 0.0,
    "bos_token_id": 2, "eos_token_id": 1, "head_dim": 256, "hidden_act": "gelu",
    "hidden_size": 3072, "initializer_range": 0.02, "intermediate_size": 24576,
    "max_position_embeddings": 8192, "model_type": "gemma", "num_attention_heads": 16,
    "num_hidden_layers": 28, "num_key_value_heads": 16, "pad_token_id": 0,
    "rms_norm_eps": 1e-06, "rope_scaling": None, "rope_theta": 10000.0,
    "torch_dtype": "bfloat16", "transformers_version": "4.38.0.dev0", "use_cache": True,
    "vocab_size": 256000,
}  # fmt: skip
GEMMA2_9B = {
    "architectures": ["Gemma2ForCausalLM"], "attention_bias": False, "attention_dropout": 0.0,
    "attn_logit_softcapping": 50.0, "bos_token_id": 2, "cache_implementation": "hybrid",
    "eos_token_id": 1, "final_logit_softcapping": 30.0, "head_dim": 256,
    "hidden_act": "gelu_pytorch_tanh", "hidden_activation": "gelu_pytorch_tanh",
    "hidden_size": 3584, "initializer_range": 0.02, "intermediate_size": 14336,
    "max_position_embeddings": 8192, "model_type": "gemma2", "num_attention_heads": 16,
    "num_hidden_layers": 42, "num_key_value_heads": 8, "pad_token_id": 0,
    "query_pre_attn_scalar": 256, "rms_norm_eps": 1e-06, "rope_theta": 10000.0,
    "sliding_window": 4096, "sliding_window_size": 4096, "torch_dtype": "float32",
    "transformers_version": "4.42.0.dev0", "use_cache": True, "vocab_size": 256000,
}  # fmt: skip
PHI3_MINI = {
    "_name_or_path": "Phi-3-mini-4k-instruct", "architectures": ["Phi3ForCausalLM"],
    "attention_bias": False, "attention_dropout": 0.0,
    "auto_map": {"AutoConfig": "configuration_phi3.Phi3Config",
                 "AutoModelForCausalLM": "modeling_phi3.Phi3ForCausalLM"},
    "bos_token_id": 1, "embd_pdrop": 0.0, "eos_token_id": 32000, "hidden_act": "silu",
    "hidden_size": 3072, "initializer_range": 0.02, "intermediate_size": 8192,
    "max_position_embeddings": 4096, "model_type": "phi3", "num_attention_heads": 32,
    "num_hidden_layers": 32, "num_key_value_heads": 32, "original_max_position_embeddings": 4096,
    "pad_token_id": 32000, "resid_pdrop": 0.0, "rms_norm_eps": 1e-05, "rope_scaling": None,
    "rope_theta": 10000.0, "sliding_window": 2047, "tie_word_embeddings": False,
    "torch_dtype": "bfloat16", "transformers_version": "4.40.2", "use_cache": True,
    "attention_bias_unused": None, "vocab_size": 32064,
}  # fmt: skip
GPT2 = {  # no n_inner (4h) and no tie_word_embeddings (tied)
    "activation_function": "gelu_new", "architectures": ["GPT2LMHeadModel"],
    "attn_pdrop": 0.1, "bos_token_id": 50256, "embd_pdrop": 0.1, "eos_token_id": 50256,
    "initializer_range": 0.02, "layer_norm_epsilon": 1e-05, "model_type": "gpt2",
    "n_ctx": 1024, "n_embd": 768, "n_head": 12, "n_layer": 12, "n_positions": 1024,
    "resid_pdrop": 0.1, "summary_activation": None, "summary_first_dropout": 0.1,
    "summary_proj_to_labels": True, "summary_type": "cls_index", "summary_use_proj": True,
    "task_specific_params": {"text-generation": {"do_sample": True, "max_length": 50}},
    "vocab_size": 50257,
}  # fmt: skip
PYTHIA_160M = {
    "architectures": ["GPTNeoXForCausalLM"], "bos_token_id": 0, "eos_token_id": 0,
    "hidden_act": "gelu", "hidden_size": 768, "initializer_range": 0.02,
    "intermediate_size": 3072, "layer_norm_eps": 1e-05, "max_position_embeddings": 2048,
    "model_type": "gpt_neox", "num_attention_heads": 12, "num_hidden_layers": 12,
    "rotary_emb_base": 10000, "rotary_pct": 0.25, "tie_word_embeddings": False,
    "torch_dtype": "float16", "transformers_version": "4.24.0", "use_cache": True,
    "use_parallel_residual": True, "vocab_size": 50304,
}  # fmt: skip
OPT_350M = {  # word_embed_proj_dim 512 != hidden 1024; post-norm, so no final norm
    "_name_or_path": "facebook/opt-350m", "_remove_final_layer_norm": False,
    "activation_dropout": 0.0, "activation_function": "relu", "architectures": ["OPTForCausalLM"],
    "attention_dropout": 0.0, "bos_token_id": 2, "do_layer_norm_before": False,
    "dropout": 0.1, "eos_token_id": 2, "ffn_dim": 4096, "hidden_size": 1024,
    "init_std": 0.02, "layerdrop": 0.0, "max_position_embeddings": 2048, "model_type": "opt",
    "num_attention_heads": 16, "num_hidden_layers": 24, "pad_token_id": 1,
    "prefix": "</s>", "torch_dtype": "float16", "transformers_version": "4.20.0.dev0",
    "use_cache": True, "vocab_size": 50272, "word_embed_proj_dim": 512,
}  # fmt: skip
OPT_125M = {**OPT_350M, "_name_or_path": "facebook/opt-125m", "do_layer_norm_before": True,
            "ffn_dim": 3072, "hidden_size": 768, "num_attention_heads": 12,
            "num_hidden_layers": 12, "word_embed_proj_dim": 768}  # fmt: skip
FALCON_7B = {
    "alibi": False, "apply_residual_connection_post_layernorm": False,
    "architectures": ["FalconForCausalLM"], "attention_dropout": 0.0, "bias": False,
    "bos_token_id": 11, "eos_token_id": 11, "hidden_dropout": 0.0, "hidden_size": 4544,
    "initializer_range": 0.02, "layer_norm_epsilon": 1e-05, "model_type": "falcon",
    "multi_query": True, "new_decoder_architecture": False, "num_attention_heads": 71,
    "num_hidden_layers": 32, "parallel_attn": True, "torch_dtype": "bfloat16",
    "transformers_version": "4.27.4", "use_cache": True, "vocab_size": 65024,
}  # fmt: skip
FALCON_40B = {
    **FALCON_7B,
    "hidden_size": 8192,
    "new_decoder_architecture": True,
    "num_attention_heads": 128,
    "num_hidden_layers": 60,
    "num_kv_heads": 8,
}

# The families people fine-tune now: the keys of their repositories' config.json (the catalog
# entries cite each), with the usual non-tensor keys around them.
QWEN3_30B_A3B = {
    "architectures": ["Qwen3MoeForCausalLM"], "attention_bias": False, "attention_dropout": 0.0,
    "bos_token_id": 151643, "decoder_sparse_step": 1, "eos_token_id": 151645, "head_dim": 128,
    "hidden_act": "silu", "hidden_size": 2048, "intermediate_size": 6144,
    "max_position_embeddings": 40960, "mlp_only_layers": [], "model_type": "qwen3_moe",
    "moe_intermediate_size": 768, "norm_topk_prob": True, "num_attention_heads": 32,
    "num_experts": 128, "num_experts_per_tok": 8, "num_hidden_layers": 48,
    "num_key_value_heads": 4, "output_router_logits": False, "rms_norm_eps": 1e-06,
    "rope_theta": 1000000.0, "router_aux_loss_coef": 0.001, "tie_word_embeddings": False,
    "torch_dtype": "bfloat16", "use_cache": True, "vocab_size": 151936,
}  # fmt: skip
GEMMA3_1B = {
    "architectures": ["Gemma3ForCausalLM"], "attention_bias": False, "attention_dropout": 0.0,
    "attn_logit_softcapping": None, "bos_token_id": 2, "eos_token_id": [1, 106],
    "final_logit_softcapping": None, "head_dim": 256, "hidden_activation": "gelu_pytorch_tanh",
    "hidden_size": 1152, "initializer_range": 0.02, "intermediate_size": 6912,
    "max_position_embeddings": 32768, "model_type": "gemma3_text", "num_attention_heads": 4,
    "num_hidden_layers": 26, "num_key_value_heads": 1, "pad_token_id": 0,
    "query_pre_attn_scalar": 256, "rms_norm_eps": 1e-06, "rope_local_base_freq": 10000,
    "rope_scaling": None, "rope_theta": 1000000, "sliding_window": 512,
    "sliding_window_pattern": 6, "torch_dtype": "bfloat16", "vocab_size": 262144,
}  # fmt: skip
GEMMA3_4B = {  # text_config without vocab_size: Gemma3TextConfig's 262,208 applies
    "architectures": ["Gemma3ForConditionalGeneration"], "boi_token_index": 255999,
    "eoi_token_index": 256000, "image_token_index": 262144, "mm_tokens_per_image": 256,
    "model_type": "gemma3",
    "text_config": {"head_dim": 256, "hidden_size": 2560, "intermediate_size": 10240,
                    "model_type": "gemma3_text", "num_attention_heads": 8,
                    "num_hidden_layers": 34, "num_key_value_heads": 4,
                    "query_pre_attn_scalar": 256, "rope_scaling": {"factor": 8.0,
                    "rope_type": "linear"}, "sliding_window": 1024},
    "torch_dtype": "bfloat16",
    "vision_config": {"hidden_size": 1152, "image_size": 896, "intermediate_size": 4304,
                      "model_type": "siglip_vision_model", "num_attention_heads": 16,
                      "num_hidden_layers": 27, "patch_size": 14, "vision_use_head": False},
}  # fmt: skip
OLMO2_7B = {
    "architectures": ["Olmo2ForCausalLM"], "attention_bias": False, "attention_dropout": 0.0,
    "eos_token_id": 100257, "hidden_act": "silu", "hidden_size": 4096,
    "initializer_range": 0.02, "intermediate_size": 11008, "max_position_embeddings": 4096,
    "model_type": "olmo2", "num_attention_heads": 32, "num_hidden_layers": 32,
    "num_key_value_heads": 32, "pad_token_id": 100277, "rms_norm_eps": 1e-06,
    "rope_scaling": None, "rope_theta": 500000, "tie_word_embeddings": False,
    "torch_dtype": "float32", "use_cache": True, "vocab_size": 100352,
}  # fmt: skip
DEEPSEEK_V2_LITE = {
    "architectures": ["DeepseekV2ForCausalLM"], "attention_bias": False,
    "attention_dropout": 0.0, "aux_loss_alpha": 0.001, "bos_token_id": 100000,
    "eos_token_id": 100001, "first_k_dense_replace": 1, "hidden_act": "silu",
    "hidden_size": 2048, "initializer_range": 0.02, "intermediate_size": 10944,
    "kv_lora_rank": 512, "max_position_embeddings": 163840, "model_type": "deepseek_v2",
    "moe_intermediate_size": 1408, "moe_layer_freq": 1, "n_group": 1, "n_routed_experts": 64,
    "n_shared_experts": 2, "norm_topk_prob": False, "num_attention_heads": 16,
    "num_experts_per_tok": 6, "num_hidden_layers": 27, "num_key_value_heads": 16,
    "q_lora_rank": None, "qk_nope_head_dim": 128, "qk_rope_head_dim": 64,
    "rms_norm_eps": 1e-06, "routed_scaling_factor": 1.0, "scoring_func": "softmax",
    "tie_word_embeddings": False, "topk_group": 1, "topk_method": "greedy",
    "torch_dtype": "bfloat16", "use_cache": True, "v_head_dim": 128, "vocab_size": 102400,
}  # fmt: skip
PHI_2 = {
    "architectures": ["PhiForCausalLM"], "attention_dropout": 0.0, "bos_token_id": 50256,
    "embd_pdrop": 0.0, "eos_token_id": 50256, "hidden_act": "gelu_new", "hidden_size": 2560,
    "initializer_range": 0.02, "intermediate_size": 10240, "layer_norm_eps": 1e-05,
    "max_position_embeddings": 2048, "model_type": "phi", "num_attention_heads": 32,
    "num_hidden_layers": 32, "num_key_value_heads": 32, "partial_rotary_factor": 0.4,
    "qk_layernorm": False, "resid_pdrop": 0.1, "rope_scaling": None, "rope_theta": 10000.0,
    "tie_word_embeddings": False, "torch_dtype": "float16", "use_cache": True,
    "vocab_size": 51200,
}  # fmt: skip
STABLELM_3B = {
    "architectures": ["StableLmForCausalLM"], "bos_token_id": 0, "eos_token_id": 0,
    "hidden_act": "silu", "hidden_dropout": 0.0, "hidden_size": 2560,
    "initializer_range": 0.02, "intermediate_size": 6912, "layer_norm_eps": 1e-05,
    "max_position_embeddings": 4096, "model_type": "stablelm", "num_attention_heads": 32,
    "num_hidden_layers": 32, "num_key_value_heads": 32, "partial_rotary_factor": 0.25,
    "rope_theta": 10000, "tie_word_embeddings": False, "torch_dtype": "bfloat16",
    "use_cache": True, "use_qkv_bias": False, "vocab_size": 50304,
}  # fmt: skip

# Published totals (Hugging Face safetensors metadata, model cards, Pythia paper Table 1).
REAL: dict[str, tuple[dict[str, Any], int]] = {
    "llama": (LLAMA_2_7B, 6_738_415_616),
    "llama-3.2-1b": (LLAMA_32_1B, 1_235_814_400),
    "mistral": (MISTRAL_7B, 7_241_732_096),
    "mixtral": (MIXTRAL_8X7B, 46_702_792_704),
    "qwen2": (QWEN25_05B, 494_032_768),
    "qwen2_moe": (QWEN15_MOE, 14_315_784_192),
    "qwen3": (QWEN3_8B, 8_190_735_360),
    "gemma": (GEMMA_7B, 8_537_680_896),
    "gemma2": (GEMMA2_9B, 9_241_705_984),
    "phi3": (PHI3_MINI, 3_821_079_552),
    "gpt2": (GPT2, 124_439_808),
    "gpt_neox": (PYTHIA_160M, 162_322_944),
    "opt-350m": (OPT_350M, 331_196_416),
    "opt-125m": (OPT_125M, 125_239_296),
    "falcon": (FALCON_7B, 6_921_720_704),
    # (catalog.py cites each figure; Gemma 3 4B: the text decoder's share of the hub
    # total 4,300,079,472, less its SigLIP tower and projector)
    "qwen3_moe": (QWEN3_30B_A3B, 30_532_122_624),
    "gemma3_text": (GEMMA3_1B, 999_885_952),
    "gemma3": (GEMMA3_4B, 4_300_079_472),  # the hub total: decoder, SigLIP tower, projector
    "olmo2": (OLMO2_7B, 7_298_617_344),
    "deepseek_v2": (DEEPSEEK_V2_LITE, 15_706_484_224),
    "phi": (PHI_2, 2_779_683_840),
    "stablelm": (STABLELM_3B, 2_795_443_200),
}


def write(folder: Path, config: Any, name: str = "config.json") -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / name
    path.write_text(config if isinstance(config, str) else json.dumps(config, indent=2))
    return path


@pytest.mark.parametrize("key", sorted(REAL))
def test_real_config_file_and_folder(tmp_path: Path, key: str) -> None:
    config, published = REAL[key]
    path = write(tmp_path / key, config)
    from_file = load_model(str(path))
    from_folder = load_model(str(path.parent))
    assert from_file.parameters == published
    assert from_folder.parameters == published
    assert from_file.architecture == from_folder.architecture
    assert from_file.architecture.model_type == config["model_type"]
    assert not from_file.architecture.assumed


def test_falcon_new_decoder_architecture() -> None:
    # Falcon-40B layout: qkv (2*8 + 128) * 64 wide, ln_attn + ln_mlp (LayerNorm, w + b), 4h MLP,
    # ln_f, tied lm_head (modeling_falcon.py).
    h, layers, vocab, qkv = 8192, 60, 65024, (2 * 8 + 128) * 64
    per_layer = h * qkv + h * h + 2 * h * 4 * h + 2 * 2 * h
    arch = architecture_from_config(FALCON_40B)
    assert arch.parameter_count == layers * per_layer + vocab * h + 2 * h
    assert arch.kv_heads == 8 and arch.norms_per_layer == 2
    # Not parallel: input_layernorm + post_attention_layernorm (2), whatever the arch.
    serial = architecture_from_config({**FALCON_7B, "parallel_attn": False})
    assert serial.norms_per_layer == 2
    assert architecture_from_config(FALCON_7B).norms_per_layer == 1
    # multi_query off: full 3h query_key_value.
    mha = architecture_from_config({**FALCON_7B, "multi_query": False})
    assert mha.kv_heads == 71
    assert mha.parameter_count - architecture_from_config(FALCON_7B).parameter_count == (
        32 * 4544 * (3 * 4544 - (4544 + 2 * 64))
    )


def test_qwen2_moe_sparse_step_and_mlp_only_layers() -> None:
    base = architecture_from_config(QWEN15_MOE)
    h, f = 2048, 5632
    # A sparse layer's MLP side: router (60 x h), 60 experts of 3 * h * 1408, shared expert of
    # 3 * h * 5632 and its gate (h); a dense layer has one Qwen2MoeMLP of 3 * h * 5632.
    sparse_mlp = 60 * h + 60 * 3 * h * 1408 + 3 * h * f + h
    dense_mlp = 3 * h * f
    step2 = architecture_from_config({**QWEN15_MOE, "decoder_sparse_step": 2})
    assert step2.moe_layer_count == 12
    assert base.parameter_count - step2.parameter_count == 12 * (sparse_mlp - dense_mlp)
    only = architecture_from_config({**QWEN15_MOE, "mlp_only_layers": [0, 5, 23, 99]})
    assert only.moe_layer_count == 21
    assert base.parameter_count - only.parameter_count == 3 * (sparse_mlp - dense_mlp)
    assert base.experts_per_token == 4 and base.expert_width == 1408


@pytest.mark.parametrize("key", ["num_hidden_layers", "hidden_size"])
def test_a_size_past_any_model_is_refused_before_the_layers_are_walked(key: str) -> None:
    # 2^200 layers: the MoE reader walks the layers one by one (it would never end); a size
    # past 2^53 is no real model's (and its digits are never printed)
    huge = 2**200
    with pytest.raises(ModelConfigError, match=f"'{key}' must be at most .*201-bit number"):
        architecture_from_config({**QWEN15_MOE, key: huge})


def test_module_names_follow_each_family() -> None:
    def names(config: dict[str, Any]) -> set[str]:
        return {lin.name for lin in architecture_from_config(config).linear_layers}

    assert names(GPT2) == {"c_attn", "c_proj", "c_fc"}
    assert names(FALCON_7B) == {"query_key_value", "dense", "dense_h_to_4h", "dense_4h_to_h"}
    assert names(PYTHIA_160M) == names(FALCON_7B)
    assert {"w1", "w2", "w3", "gate"} <= names(MIXTRAL_8X7B)
    assert {"qkv_proj", "gate_up_proj", "o_proj", "down_proj"} == names(PHI3_MINI)
    assert {"out_proj", "fc1", "fc2", "project_in", "project_out"} <= names(OPT_350M)
    assert "shared_expert_gate" in names(QWEN15_MOE)


def test_bias_and_tie_flags() -> None:
    qwen = architecture_from_config(QWEN25_05B)
    assert qwen.attention_bias and not qwen.attention_out_bias and qwen.tie_embeddings
    assert architecture_from_config(GEMMA_7B).tie_embeddings  # default when the key is absent
    assert architecture_from_config(GPT2).tie_embeddings
    assert not architecture_from_config(PYTHIA_160M).tie_embeddings
    # Llama's attention_bias covers o_proj too; GPT-NeoX's attention_bias switches both off.
    llama_bias = architecture_from_config({**LLAMA_2_7B, "attention_bias": True})
    assert llama_bias.parameter_count - 6_738_415_616 == 32 * 4 * 4096
    neox = architecture_from_config({**PYTHIA_160M, "attention_bias": False})
    assert 162_322_944 - neox.parameter_count == 12 * (3 * 768 + 768)
    # An untied Gemma gains a second V x h matrix.
    untied = architecture_from_config({**GEMMA_7B, "tie_word_embeddings": False})
    assert untied.parameter_count - 8_537_680_896 == 256000 * 3072


def test_hf_cache_by_repo_id(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    hub = tmp_path / "hub"
    repo = hub / "models--acme--tiny-llama"
    write(repo / "refs", "0123abcd", name="main")
    write(repo / "snapshots" / "0123abcd", LLAMA_2_7B)
    monkeypatch.setenv("HF_HUB_CACHE", str(hub))
    spec = load_model("acme/tiny-llama")
    assert spec.parameters == 6_738_415_616
    assert spec.name == "acme/tiny-llama"
    # HF_HOME/hub is used when HF_HUB_CACHE is unset.
    monkeypatch.delenv("HF_HUB_CACHE")
    monkeypatch.delenv("HUGGINGFACE_HUB_CACHE", raising=False)
    monkeypatch.setenv("HF_HOME", str(tmp_path))
    assert load_model("acme/tiny-llama").parameters == 6_738_415_616
    # Missing from that cache: one line naming what was tried, including the cache folder.
    with pytest.raises(ModelConfigError) as err:
        load_model("acme/absent")
    message = str(err.value)
    assert "\n" not in message and "acme/absent" in message and str(hub) in message


def test_hf_cache_snapshot_without_refs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    hub = tmp_path / "hub"
    write(hub / "models--acme--gpt" / "snapshots" / "feed", GPT2)
    monkeypatch.setenv("HF_HUB_CACHE", str(hub))
    assert load_model("acme/gpt").parameters == 124_439_808


def test_catalog_id_wins_without_files() -> None:
    assert load_model("gpt2").parameters == 124_439_808
    assert load_model("meta-llama/Llama-2-7b-hf").name == "meta-llama/Llama-2-7b-hf"


def _drop(config: dict[str, Any], key: str) -> dict[str, Any]:
    return {k: v for k, v in config.items() if k != key}


BAD: dict[str, tuple[Any, str]] = {
    "missing hidden_size": (_drop(LLAMA_2_7B, "hidden_size"), "'hidden_size' is missing"),
    "string hidden_size": ({**LLAMA_2_7B, "hidden_size": "4096"}, "'hidden_size' must be"),
    "float layers": ({**MISTRAL_7B, "num_hidden_layers": 32.0}, "'num_hidden_layers' must be"),
    "bool vocab": ({**QWEN25_05B, "vocab_size": True}, "'vocab_size' must be"),
    "zero heads": ({**GEMMA_7B, "num_attention_heads": 0}, "'num_attention_heads' must be"),
    "null vocab": ({**GPT2, "vocab_size": None}, "'vocab_size' must be"),
    "string tie": ({**GPT2, "tie_word_embeddings": "yes"}, "'tie_word_embeddings' must be"),
    "kv not dividing": ({**MISTRAL_7B, "num_key_value_heads": 5}, "'num_key_value_heads'"),
    "missing experts": (_drop(MIXTRAL_8X7B, "num_local_experts"), "'num_local_experts'"),
    "top-k above experts": ({**MIXTRAL_8X7B, "num_experts_per_tok": 9}, "'num_experts_per_tok'"),
    "mlp_only_layers": ({**QWEN15_MOE, "mlp_only_layers": "0,1"}, "'mlp_only_layers'"),
    "missing ffn_dim": (_drop(OPT_125M, "ffn_dim"), "'ffn_dim' is missing"),
    "falcon n_head": (_drop(FALCON_7B, "num_attention_heads"), "'num_attention_heads'"),
    # the newer families: one malformed field each, named in the message
    "qwen3_moe experts": (_drop(QWEN3_30B_A3B, "num_experts"), "'num_experts' is missing"),
    "qwen3_moe top-k": ({**QWEN3_30B_A3B, "num_experts_per_tok": 129}, "'num_experts_per_tok'"),
    "gemma3 text_config": (_drop(GEMMA3_4B, "text_config"), "'text_config' is missing"),
    "gemma3 text_config list": ({**GEMMA3_4B, "text_config": [1]}, "'text_config' must be"),
    "gemma3 nested field": (
        {**GEMMA3_4B, "text_config": {**GEMMA3_4B["text_config"], "hidden_size": "2560"}},
        "'text_config.hidden_size' must be an integer",
    ),
    "gemma3 nested type": (
        {**GEMMA3_4B, "text_config": {**GEMMA3_4B["text_config"], "model_type": "llama"}},
        "'text_config.model_type' is 'llama', expected 'gemma3_text'",
    ),
    "gemma3_text heads": ({**GEMMA3_1B, "num_attention_heads": 0}, "'num_attention_heads'"),
    "olmo2 layers": (_drop(OLMO2_7B, "num_hidden_layers"), "'num_hidden_layers' is missing"),
    "deepseek kv rank": ({**DEEPSEEK_V2_LITE, "kv_lora_rank": 0}, "'kv_lora_rank' must be"),
    "deepseek q rank": ({**DEEPSEEK_V2_LITE, "q_lora_rank": "1536"}, "'q_lora_rank' must be"),
    "deepseek freq": ({**DEEPSEEK_V2_LITE, "moe_layer_freq": 2}, "'moe_layer_freq' is 2"),
    "deepseek kv heads": (
        {**DEEPSEEK_V2_LITE, "num_key_value_heads": 8},
        "'num_key_value_heads' must equal num_attention_heads (16)",
    ),
    "deepseek mlp bias": ({**DEEPSEEK_V2_LITE, "mlp_bias": True}, "'mlp_bias' is true"),
    "deepseek top-k": (_drop(DEEPSEEK_V2_LITE, "num_experts_per_tok"), "'num_experts_per_tok'"),
    "phi qk_layernorm": ({**PHI_2, "qk_layernorm": True}, "'qk_layernorm' is true"),
    "phi dropout": ({**PHI_2, "resid_pdrop": 1.5}, "'resid_pdrop' must be at least 0"),
    "stablelm qk_layernorm": ({**STABLELM_3B, "qk_layernorm": True}, "'qk_layernorm' is true"),
    "stablelm heads": (
        {**STABLELM_3B, "num_attention_heads": 7, "num_key_value_heads": 7},
        "'hidden_size' (2560) is not a multiple of the head count (7)",
    ),
    "stablelm bias": ({**STABLELM_3B, "use_qkv_bias": "no"}, "'use_qkv_bias' must be"),
    "unknown type": ({**LLAMA_2_7B, "model_type": "t5"}, "'model_type' is 't5'"),
    "no type": (_drop(LLAMA_2_7B, "model_type"), "'model_type' is missing"),
    "type not str": ({**LLAMA_2_7B, "model_type": 7}, "'model_type' must be a string"),
    "bad json": ('{"model_type": "llama", "hidden_size": 4096,', "not valid JSON"),
    "top-level list": ("[1, 2]", "expected a JSON object"),
    "empty file": ("", "not valid JSON"),
}


@pytest.mark.parametrize("case", sorted(BAD))
def test_malformed_config_is_one_line_error(tmp_path: Path, case: str) -> None:
    content, expected = BAD[case]
    path = write(tmp_path / "m", content)
    with pytest.raises(ModelConfigError) as err:
        load_model(str(path))
    message = str(err.value)
    assert "\n" not in message
    assert message.startswith(f"{path}:")
    assert expected in message
    assert isinstance(err.value, ValueError)


def test_folder_without_config_and_missing_path(tmp_path: Path) -> None:
    with pytest.raises(ModelConfigError, match=r"has no config\.json"):
        load_model(str(tmp_path))
    with pytest.raises(ModelConfigError, match="not found") as err:
        load_model(str(tmp_path / "nope.json"))
    assert "\n" not in str(err.value)


def test_unreadable_file(tmp_path: Path) -> None:
    path = write(tmp_path / "u", b"\xff\xfe\x00garbage".decode("latin-1"))
    path.write_bytes(b"\xff\xfe\x00garbage")
    with pytest.raises(ModelConfigError, match="not a UTF-8"):
        load_model(str(path))


def test_error_names_source_and_type() -> None:
    with pytest.raises(ModelConfigError) as err:
        architecture_from_config(_drop(LLAMA_2_7B, "hidden_size"), "x/config.json")
    assert str(err.value) == "x/config.json: field 'hidden_size' is missing (model_type llama)"


# --- the newer families' structures ----------------------------------------------------------


def test_deepseek_v2_q_lora_rank_null_absent_and_set() -> None:
    # null: a plain q_proj (h -> 16 x 192); absent: DeepseekV2Config's default 1536, which adds
    # q_a_proj (h x 1536), q_a_layernorm (1536) and q_b_proj (1536 x 3072) instead
    lite = architecture_from_config(DEEPSEEK_V2_LITE)
    absent = architecture_from_config(_drop(DEEPSEEK_V2_LITE, "q_lora_rank"))
    h, q, r, n = 2048, 16 * 192, 1536, 27
    assert absent.parameter_count - lite.parameter_count == n * (h * r + r + r * q - h * q)
    assert absent.parameter_count - lite.parameter_count == 42_508_800  # the research's figure
    assert absent.q_lora_rank == 1536 and lite.q_lora_rank == 0
    names = {lin.name for lin in absent.linear_layers}
    assert {"q_a_proj", "q_b_proj"} <= names and "q_proj" not in names


def test_deepseek_v2_latent_attention_and_experts() -> None:
    arch = architecture_from_config(DEEPSEEK_V2_LITE)
    assert (arch.dim_head, arch.v_dim, arch.qk_rope_head_dim) == (192, 128, 64)
    assert arch.q_width == 16 * 192 and arch.attention_out_width == 16 * 128
    assert arch.kv_b_width == 16 * (128 + 128)
    shapes = {lin.name: (lin.d_in, lin.d_out, lin.count) for lin in arch.linear_layers}
    assert shapes["kv_a_proj_with_mqa"] == (2048, 512 + 64, 27)
    assert shapes["kv_b_proj"] == (512, 4096, 27)
    assert shapes["o_proj"] == (2048, 2048, 27)
    # layer 0 dense (first_k_dense_replace 1); 26 MoE layers of 64 experts (top-6) and an
    # ungated shared MLP of 2 x 1408, the router kept in fp32
    assert arch.moe_layer_count == 26 and arch.num_experts == 64 and arch.experts_per_token == 6
    assert arch.shared_expert_intermediate_size == 2816 and not arch.shared_expert_gate
    assert arch.router_fp32 and arch.rotary_cat
    assert "shared_expert_gate" not in shapes
    all_dense = architecture_from_config({**DEEPSEEK_V2_LITE, "first_k_dense_replace": 27})
    assert all_dense.moe_layer_count == 0 and all_dense.num_experts == 0
    moe_mlp = 64 * 2048 + 64 * 3 * 2048 * 1408 + 3 * 2048 * 2816
    assert arch.parameter_count - all_dense.parameter_count == 26 * (moe_mlp - 3 * 2048 * 10944)


def test_olmo2_post_norms_and_full_width_qk_norms() -> None:
    arch = architecture_from_config(OLMO2_7B)
    assert arch.norm_position == "post" and not arch.leading_norm
    assert arch.qk_norm == "full" and arch.norm_output_fp32
    norms = {t.name: (t.shape, t.count) for t in arch.tensors if t.group == "norm"}
    assert norms["q_norm"] == ((4096,), 32) and norms["k_norm"] == ((4096,), 32)
    # OLMo 2 32B's GQA: k_norm spans the 8 key heads only (research: 32,234,279,936)
    gqa = architecture_from_config(
        {**OLMO2_7B, "hidden_size": 5120, "intermediate_size": 27648, "num_attention_heads": 40,
         "num_hidden_layers": 64, "num_key_value_heads": 8}
    )  # fmt: skip
    norms = {t.name: t.shape for t in gqa.tensors if t.group == "norm"}
    assert norms["q_norm"] == (5120,) and norms["k_norm"] == (1024,)
    assert gqa.parameter_count == 32_234_279_936


def test_phi_one_norm_parallel_block_and_lm_head_bias() -> None:
    arch = architecture_from_config(PHI_2)
    assert arch.norms_per_layer == 1 and arch.parallel_residual and arch.norm_kind == "layernorm"
    assert arch.lm_head_bias and arch.hidden_act == "gelu_new" and arch.rotary_cat
    head = {t.name: t.shape for t in arch.tensors if t.group == "head"}
    assert head == {"lm_head": (51200, 2560), "lm_head.bias": (51200,)}
    # tied: the lm_head weight goes, its bias stays (PhiForCausalLM ties the weight only)
    tied = architecture_from_config({**PHI_2, "tie_word_embeddings": True})
    assert arch.parameter_count - tied.parameter_count == 51200 * 2560
    # dropout probabilities as PhiDecoderLayer / PhiModel / eager attention apply them
    drop = architecture_from_config({**PHI_2, "embd_pdrop": 0.2, "attention_dropout": 0.05})
    assert (drop.residual_dropout, drop.embedding_dropout, drop.attention_dropout) == (
        0.1,
        0.2,
        0.05,
    )
    assert drop.attention_output_dropout


def test_stablelm_bias_parallel_and_mlp_only_dropout() -> None:
    arch = architecture_from_config(STABLELM_3B)
    assert arch.norms_per_layer == 2 and not arch.parallel_residual
    assert not arch.attention_bias and not arch.attention_out_bias and arch.mlp_kind == "gated"
    biased = architecture_from_config({**STABLELM_3B, "use_qkv_bias": True})
    assert biased.parameter_count - arch.parameter_count == 32 * 3 * 2560  # q, k, v; not o
    parallel = architecture_from_config({**STABLELM_3B, "use_parallel_residual": True})
    assert parallel.norms_per_layer == 1 and parallel.parallel_residual
    assert arch.parameter_count - parallel.parameter_count == 32 * 2 * 2560
    dropped = architecture_from_config({**STABLELM_3B, "hidden_dropout": 0.1})
    assert dropped.residual_dropout == 0.1 and not dropped.attention_output_dropout


def test_gemma3_text_and_multimodal() -> None:
    text = architecture_from_config(GEMMA3_1B)
    assert text.qk_norm == "per_head" and text.norms_per_layer == 4 and text.tie_embeddings
    assert text.hidden_act == "gelu_pytorch_tanh" and text.norm_output_fp32
    assert (text.attn_softcap, text.logit_softcap) == (0.0, 0.0)  # None: Gemma 3 has none
    mm = architecture_from_config(GEMMA3_4B)
    assert mm.model_type == "gemma3" and mm.vocab_size == 262_208
    assert (mm.hidden_size, mm.num_layers, mm.kv_heads, mm.dim_head) == (2560, 34, 4, 256)
    # the class defaults fill what the nested config leaves out
    bare = {**GEMMA3_4B, "text_config": {"model_type": "gemma3_text"}}
    default = architecture_from_config(bare)
    assert (default.hidden_size, default.num_layers, default.num_heads) == (2304, 26, 8)
    # Gemma3ForConditionalGeneration's lm_head follows the top-level tie flag
    untied = architecture_from_config({**GEMMA3_4B, "tie_word_embeddings": False})
    assert untied.parameter_count - mm.parameter_count == 262_208 * 2560


def test_gemma_activations_read_from_the_key_their_mlp_uses() -> None:
    assert architecture_from_config(GEMMA_7B).hidden_act == "gelu_pytorch_tanh"  # "gelu"
    gemma2 = {**GEMMA2_9B, "hidden_act": "silu", "hidden_activation": "gelu_new"}
    assert architecture_from_config(gemma2).hidden_act == "gelu_new"


def test_qwen3_moe_sparse_layers_without_shared_expert() -> None:
    arch = architecture_from_config(QWEN3_30B_A3B)
    assert arch.moe_layer_count == 48 and arch.expert_width == 768
    assert arch.qk_norm == "per_head" and arch.shared_expert_intermediate_size == 0
    sparse = 128 * 2048 + 128 * 3 * 2048 * 768
    dense = 3 * 2048 * 6144
    step = architecture_from_config({**QWEN3_30B_A3B, "mlp_only_layers": [0, 1]})
    assert step.moe_layer_count == 46
    assert arch.parameter_count - step.parameter_count == 2 * (sparse - dense)


@pytest.mark.parametrize(
    ("config", "expected"),
    [
        (PHI_2, {"q_proj", "k_proj", "v_proj", "dense", "fc1", "fc2"}),
        (
            STABLELM_3B,
            {"q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"},
        ),
        (OLMO2_7B, {"q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"}),
        (GEMMA3_4B, {"q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"}),
        (
            QWEN3_30B_A3B,
            {"q_proj", "k_proj", "v_proj", "o_proj", "gate", "gate_proj", "up_proj", "down_proj"},
        ),
        (
            DEEPSEEK_V2_LITE,
            {
                "q_proj",
                "kv_a_proj_with_mqa",
                "kv_b_proj",
                "o_proj",
                "gate",
                "gate_proj",
                "up_proj",
                "down_proj",
            },
        ),
        (
            {**DEEPSEEK_V2_LITE, "q_lora_rank": 1536},
            {
                "q_a_proj",
                "q_b_proj",
                "kv_a_proj_with_mqa",
                "kv_b_proj",
                "o_proj",
                "gate",
                "gate_proj",
                "up_proj",
                "down_proj",
            },
        ),
    ],
    ids=["phi", "stablelm", "olmo2", "gemma3", "qwen3_moe", "deepseek_v2", "deepseek_v2-q-lora"],
)
def test_lora_target_names_per_family(config: dict[str, Any], expected: set[str]) -> None:
    """The leaf module names PEFT matches (modeling_*.py), for all-linear and by name. For
    the MoE experts and router these are the transformers-4 names (gate, gate_proj, up_proj,
    down_proj) that PEFT 0.21 maps onto transformers 5's stacked expert parameters and router
    weight (peft/utils/transformers_weight_conversion.py _MOE_TARGET_MODULE_MAPPING)."""
    arch = architecture_from_config(config)
    assert {lin.name for lin in arch.lora_layers(("all-linear",))} == expected
    # one name alone, as transformers 4's per-expert modules take it (on transformers 5
    # PEFT refuses gate_proj without up_proj: tests/test_moe_lora_conversion.py)
    for name in expected:
        assert {lin.name for lin in arch.lora_layers((name,), ExpertAdapters.modules)} == {name}
    attention = {lin.name for lin in arch.lora_layers(("attention",))}
    assert attention == expected - {"fc1", "fc2", "gate", "gate_proj", "up_proj", "down_proj"}
    with pytest.raises(ValueError, match="matches no module"):
        arch.lora_layers(("c_attn",))
    # the output layer only when named (PEFT adapts it only then)
    assert {lin.name for lin in arch.lora_layers(("lm_head",))} == {"lm_head"}


# Families read against transformers 5.24 itself: the config its own class writes
# (to_dict, what save_pretrained stores) and the real model built from it on the meta device
# (shapes and dtypes, no memory), whose parameters memtui must count exactly.
def _real_parameters(model: Any) -> int:
    return sum(p.numel() for p in model.parameters())


def test_gpt_oss_20b_counts_as_transformers_builds_it() -> None:
    import torch
    from transformers import GptOssConfig, GptOssForCausalLM

    config = GptOssConfig(num_hidden_layers=24, num_local_experts=32)  # gpt-oss-20b's shape
    with torch.device("meta"):
        model = GptOssForCausalLM(config)
    arch = architecture_from_config(config.to_dict())
    assert arch.parameter_count == _real_parameters(model) == 20_914_757_184
    # the experts and router are parameters PEFT's target_modules never reach
    assert {lin.name for lin in arch.lora_layers(("all-linear",))} == {
        "q_proj",
        "k_proj",
        "v_proj",
        "o_proj",
    }
    with pytest.raises(ValueError, match="matches no module"):
        arch.lora_layers(("gate_up_proj",))
    # the real config.json spells top-k experts_per_token
    renamed = {k: v for k, v in config.to_dict().items() if k != "num_experts_per_tok"}
    assert architecture_from_config({**renamed, "experts_per_token": 4}) == arch


def test_mistral3_reads_its_text_config_and_ties_as_transformers_does() -> None:
    import torch
    from transformers import Mistral3Config, Mistral3ForConditionalGeneration

    config = Mistral3Config()  # Mistral Small 3.1's text and vision shapes
    with torch.device("meta"):
        model = Mistral3ForConditionalGeneration(config)
    vision = _real_parameters(model.model.vision_tower) + _real_parameters(
        model.model.multi_modal_projector
    )
    arch = architecture_from_config(config.to_dict())
    assert arch.parameter_count == _real_parameters(model)
    assert arch.tower is not None and arch.tower.parameters == vision
    assert (arch.hidden_size, arch.num_layers, arch.dim_head) == (5120, 40, 128)
    # an untied checkpoint says so at the top level; text_config's own key does not decide
    untied = {**config.to_dict(), "tie_word_embeddings": False}
    assert architecture_from_config(untied).parameter_count == arch.parameter_count + 131072 * 5120
    with pytest.raises(ModelConfigError, match=r"text_config\.model_type"):
        architecture_from_config(
            {
                **config.to_dict(),
                "text_config": {**config.to_dict()["text_config"], "model_type": "llama"},
            }
        )


def _tower_modules(model: Any) -> list[Any]:
    return [model.model.vision_tower, model.model.multi_modal_projector]


def _linears(modules: list[Any]) -> tuple[int, set[str]]:
    """Elements of the nn.Linear weights of these modules (what bitsandbytes converts) and
    their leaf names (what PEFT's suffix match sees)."""
    import torch

    found = [(n, m) for mod in modules for n, m in mod.named_modules()
             if isinstance(m, torch.nn.Linear)]  # fmt: skip
    return sum(m.weight.numel() for _, m in found), {n.rsplit(".", 1)[-1] for n, _ in found}


@pytest.mark.parametrize(
    "variant",
    [{}, {"vision_use_head": True}, {"image_size": 224, "patch_size": 16, "num_channels": 1}],
    ids=["gemma3", "pooling-head", "small-image"],
)
def test_gemma3_vision_tower_counts_as_transformers_builds_it(variant: dict[str, Any]) -> None:
    import torch
    from transformers import Gemma3Config, Gemma3ForConditionalGeneration

    small = {**GEMMA3_4B, "text_config": {**GEMMA3_4B["text_config"], "num_hidden_layers": 2}}
    vision = {**GEMMA3_4B["vision_config"], "num_hidden_layers": 3, **variant}
    config = Gemma3Config(text_config=small["text_config"], vision_config=vision)
    with torch.device("meta"):
        model = Gemma3ForConditionalGeneration(config)
    arch = architecture_from_config(config.to_dict())
    assert arch.parameter_count == _real_parameters(model)
    assert arch.tower is not None
    assert arch.tower.parameters == sum(_real_parameters(m) for m in _tower_modules(model))
    weights, names = _linears(_tower_modules(model))
    assert arch.tower.linear_weights == weights
    assert {lin.name for lin in arch.tower.linears} == names
    # a config without vision_config is Gemma3Config's SiglipVisionConfig default
    bare = {k: v for k, v in config.to_dict().items() if k != "vision_config"}
    with torch.device("meta"):
        default = Gemma3ForConditionalGeneration(Gemma3Config.from_dict(bare))
    assert architecture_from_config(bare).parameter_count == _real_parameters(default)


@pytest.mark.parametrize(
    "variant",
    [{}, {"vision_feature_layer": [-1, -2], "multimodal_projector_bias": True,
          "spatial_merge_size": 1}],
    ids=["mistral3", "two-feature-layers"],
)  # fmt: skip
def test_mistral3_vision_tower_counts_as_transformers_builds_it(variant: dict[str, Any]) -> None:
    import torch
    from transformers import Mistral3Config, Mistral3ForConditionalGeneration

    base = Mistral3Config().to_dict()
    text = {**base["text_config"], "num_hidden_layers": 2}
    config = Mistral3Config(**{**base, "text_config": text, **variant})
    with torch.device("meta"):
        model = Mistral3ForConditionalGeneration(config)
    arch = architecture_from_config(config.to_dict())
    assert arch.parameter_count == _real_parameters(model)
    assert arch.tower is not None
    weights, names = _linears(_tower_modules(model))
    assert arch.tower.linear_weights == weights
    assert {lin.name for lin in arch.tower.linears} == names
    with pytest.raises(ModelConfigError, match="vision_feature_layer"):
        architecture_from_config({**config.to_dict(), "vision_feature_layer": "last"})


def test_a_multimodal_checkpoint_counts_its_vision_tower() -> None:
    # Gemma3ForConditionalGeneration holds a SigLIP tower and a projector beside the decoder:
    # weights under LoRA, weights + gradients + optimizer state under a full fine-tune, none
    # of its activations (text batches never run it), its linears in NF4 under QLoRA
    from memtui.estimator import Plan, estimate
    from memtui.estimator.choices import Method
    from memtui.estimator.plan import Hardware
    from memtui.estimator.state import nf4_bits_per_param

    arch = architecture_from_config(GEMMA3_4B)
    assert arch.tower is not None and not architecture_from_config(GEMMA3_1B).tower
    model = load_model("google/gemma-3-4b-it")
    full = estimate(Plan(model=model, method=Method.full))
    assert any("vision tower" in line and "trained" in line for line in full.assumptions)
    text_only = model.model_copy(
        update={"architecture": arch.model_copy(update={"tower": None}),
                "parameters": arch.parameter_count - arch.tower.parameters}
    )  # fmt: skip
    one = Hardware(gpus_per_node=1)  # nothing sharded
    lora = Plan(model=model, method=Method.lora, hardware=one)
    adapters = sum(lora.lora_rank * (t.d_in + t.d_out) * t.count
                   for t in arch.tower_lora_layers(lora.lora_targets))  # fmt: skip
    assert adapters > 0  # all-linear reaches the tower too (PEFT's suffix match)
    for method in (Method.lora, Method.qlora, Method.full):
        with_tower = estimate(Plan(model=model, method=method, hardware=one)).budget
        without = estimate(Plan(model=text_only, method=method, hardware=one)).budget
        assert with_tower.total > without.total
        assert with_tower.term("activations") == without.term("activations")
        grown = with_tower.term("weights") - without.term("weights") - 2 * adapters
        if method is Method.lora:  # the frozen bf16 weights
            assert grown == 2 * arch.tower.parameters
        if method is Method.qlora:  # NF4 linears (~4.127 bits), the rest fp32 after the upcast
            rest = arch.tower.parameters - arch.tower.linear_weights
            nf4 = arch.tower.linear_weights * nf4_bits_per_param(lora.qlora_double_quant) / 8
            assert abs(grown - (nf4 + 4 * rest)) <= 2  # rounding of the two totals
