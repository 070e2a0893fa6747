"""Real config.json files of the hybrid linear-attention Qwen models, with where each comes from.

QWEN3_NEXT_80B_A3B_INSTRUCT is Qwen/Qwen3-Next-80B-A3B-Instruct's config.json, copied verbatim
from a model report that prints the file ("原始 config.json") beside the checkpoint's
safetensors inventory (code search index file id 62751147890; the index names no repository).
The same report lists the checkpoint's 41 safetensors files: 81,324,862,720 parameters stored,
the multi-token-prediction layer (`mtp.*`, whose tensors it lists) among them.

QWEN3_5_27B is Qwen/Qwen3.5-27B's config.json as far as its tensors go, assembled from
upstream files that quote it: the text decoder's sizes from radixark/miles
scripts/models/qwen3.5-27B.sh @51b148c7c09036d7ea32eb8f77c3c56b4e32983f (64 layers, hidden
5120, FFN 17408, 24 heads, 4 query groups of 256, vocabulary 248320, untied, gated attention;
the same in THUDM/slime scripts/models/qwen3.5-27B.sh), the Gated DeltaNet's heads (16 key and
48 value heads of 128, kernel 4) and the vision_config from the text_config and vision_config
that three independent files check a real Qwen3.5-27B checkpoint against (code search index
ids 71571235723, 57980773438, 67487971817). QWEN3_5_35B_A3B likewise (ids 65784375222,
57982277923: 40 layers, hidden 2048, 16 heads, 2 key/value heads, 256 experts, top 8,
moe_intermediate_size 512, shared expert 512, linear heads 16 and 32 of 128).
"""

from __future__ import annotations

from typing import Any

QWEN3_NEXT_80B_A3B_INSTRUCT: dict[str, Any] = {
    "architectures": ["Qwen3NextForCausalLM"],
    "attention_dropout": 0.0,
    "bos_token_id": 151643,
    "decoder_sparse_step": 1,
    "eos_token_id": 151645,
    "full_attention_interval": 4,
    "head_dim": 256,
    "hidden_act": "silu",
    "hidden_size": 2048,
    "initializer_range": 0.02,
    "intermediate_size": 5120,
    "linear_conv_kernel_dim": 4,
    "linear_key_head_dim": 128,
    "linear_num_key_heads": 16,
    "linear_num_value_heads": 32,
    "linear_value_head_dim": 128,
    "max_position_embeddings": 262144,
    "mlp_only_layers": [],
    "model_type": "qwen3_next",
    "moe_intermediate_size": 512,
    "norm_topk_prob": True,
    "num_attention_heads": 16,
    "num_experts": 512,
    "num_experts_per_tok": 10,
    "num_hidden_layers": 48,
    "num_key_value_heads": 2,
    "output_router_logits": False,
    "partial_rotary_factor": 0.25,
    "rms_norm_eps": 1e-06,
    "rope_scaling": None,
    "rope_theta": 10000000,
    "router_aux_loss_coef": 0.001,
    "shared_expert_intermediate_size": 512,
    "tie_word_embeddings": False,
    "torch_dtype": "bfloat16",
    "transformers_version": "4.57.0.dev0",
    "use_cache": True,
    "use_sliding_window": False,
    "vocab_size": 151936,
}
QWEN3_NEXT_80B_STORED = 81_324_862_720
"""Parameters in the checkpoint's safetensors files (the report above), mtp.* included."""

_VISION = {
    "depth": 27,
    "hidden_act": "gelu_pytorch_tanh",
    "hidden_size": 1152,
    "in_channels": 3,
    "intermediate_size": 4304,
    "model_type": "qwen3_5_vision",
    "num_heads": 16,
    "num_position_embeddings": 2304,
    "out_hidden_size": 5120,
    "patch_size": 16,
    "spatial_merge_size": 2,
    "temporal_patch_size": 2,
}
_ROPE = {
    "mrope_interleaved": True,
    "mrope_section": [11, 11, 10],
    "partial_rotary_factor": 0.25,
    "rope_theta": 10000000,
    "rope_type": "default",
}
QWEN3_5_27B: dict[str, Any] = {
    "architectures": ["Qwen3_5ForConditionalGeneration"],
    "model_type": "qwen3_5",
    "tie_word_embeddings": False,
    "text_config": {
        "model_type": "qwen3_5_text",
        "attention_bias": False,
        "full_attention_interval": 4,
        "head_dim": 256,
        "hidden_act": "silu",
        "hidden_size": 5120,
        "intermediate_size": 17408,
        "layer_types": (["linear_attention"] * 3 + ["full_attention"]) * 16,
        "linear_conv_kernel_dim": 4,
        "linear_key_head_dim": 128,
        "linear_num_key_heads": 16,
        "linear_num_value_heads": 48,
        "linear_value_head_dim": 128,
        "num_attention_heads": 24,
        "num_hidden_layers": 64,
        "num_key_value_heads": 4,
        "rms_norm_eps": 1e-06,
        "rope_parameters": _ROPE,
        "tie_word_embeddings": False,
        "vocab_size": 248320,
    },
    "vision_config": _VISION,
}
QWEN3_5_35B_A3B: dict[str, Any] = {
    "architectures": ["Qwen3_5MoeForConditionalGeneration"],
    "model_type": "qwen3_5_moe",
    "tie_word_embeddings": False,
    "text_config": {
        "model_type": "qwen3_5_moe_text",
        "attention_bias": False,
        "full_attention_interval": 4,
        "head_dim": 256,
        "hidden_act": "silu",
        "hidden_size": 2048,
        "linear_conv_kernel_dim": 4,
        "linear_key_head_dim": 128,
        "linear_num_key_heads": 16,
        "linear_num_value_heads": 32,
        "linear_value_head_dim": 128,
        "moe_intermediate_size": 512,
        "num_attention_heads": 16,
        "num_experts": 256,
        "num_experts_per_tok": 8,
        "num_hidden_layers": 40,
        "num_key_value_heads": 2,
        "rms_norm_eps": 1e-06,
        "rope_parameters": _ROPE,
        "shared_expert_intermediate_size": 512,
        "tie_word_embeddings": False,
        "vocab_size": 248320,
    },
    "vision_config": {**_VISION, "model_type": "qwen3_5_moe_vision", "out_hidden_size": 2048},
}
