"""config.json files as Hugging Face publishes them -> exact parameter counts, and errors."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

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
