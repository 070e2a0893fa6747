"""Qwen3-Next and Qwen3.5: Gated DeltaNet (linear attention) layers beside gated attention.

Parameter counts are checked against the real modules transformers builds on the meta device
and against the checkpoint's stored total; LoRA targets against PEFT itself; the delta rule's
FLOPs against torch's FLOP counter; activations against real training steps on CPU
(`memtui.measure`, transformers' torch path of the gated delta rule: no flash-linear-attention
here). Configs and their provenance: tests/hybrid_configs.py.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

import pytest
from hybrid_configs import (
    QWEN3_5_27B,
    QWEN3_5_35B_A3B,
    QWEN3_NEXT_80B_A3B_INSTRUCT,
    QWEN3_NEXT_80B_STORED,
)

from memtui.estimator.architecture import DELTA_RULE_CHUNK
from memtui.estimator.configs import ModelConfigError, architecture_from_config

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")


def _meta_causal_lm(config: dict[str, Any]) -> Any:
    """The model AutoModelForCausalLM builds for `config`, on the meta device."""
    kind = transformers.CONFIG_MAPPING[config["model_type"]]
    built = kind(**{k: v for k, v in config.items() if k not in ("model_type", "architectures")})
    with torch.device("meta"):
        return transformers.AutoModelForCausalLM.from_config(built)


def _parameters(model: Any) -> int:
    return sum(p.numel() for p in model.parameters())


def test_qwen3_next_80b_counts_as_transformers_builds_it_and_as_its_checkpoint_stores() -> None:
    arch = architecture_from_config(QWEN3_NEXT_80B_A3B_INSTRUCT)
    model = _meta_causal_lm(QWEN3_NEXT_80B_A3B_INSTRUCT)
    assert arch.parameter_count == _parameters(model) == 79_674_391_296
    # the largest decoder layer is the FSDP unit: a Gated DeltaNet layer with its MoE block
    assert arch.layer_parameters == max(_parameters(layer) for layer in model.model.layers)
    assert (arch.linear_attention_layers, arch.full_attention_layers) == (36, 12)
    # the checkpoint also stores its multi-token-prediction layer, which transformers skips
    # on load (Qwen3NextPreTrainedModel._keys_to_ignore_on_load_unexpected ^mtp.*): one
    # gated-attention layer with an MoE block, fc (2h -> h) and five norms, as the report lists
    h, e, f = 2048, 512, 512
    mtp = (
        2 * h * h + 5 * h  # fc, input/post-attention/final/pre-fc norms
        + 3 * e * f * h + e * h + 3 * f * h + h  # experts, router, shared expert and gate
        + h * 8192 + 2 * h * 512 + 4096 * h + 2 * 256  # q (gated), k, v, o, q/k norms
    )  # fmt: skip
    assert arch.parameter_count + mtp == QWEN3_NEXT_80B_STORED
    # the catalog entry: the real config's keys, the same count, the mtp layer named
    from memtui.estimator.catalog import CATALOG

    entry = CATALOG["Qwen/Qwen3-Next-80B-A3B-Instruct"]
    assert all(QWEN3_NEXT_80B_A3B_INSTRUCT[k] == v for k, v in entry.config.items())
    assert entry.architecture == arch and entry.published_parameters == arch.parameter_count
    assert entry.published_total == QWEN3_NEXT_80B_STORED
    assert dict(entry.beyond_parameters) == {
        "mtp.* multi-token-prediction layer, stored but skipped on load": mtp
    }
    # the model card: "80B total parameters, only 3B active" (transformers
    # docs/source/en/model_doc/qwen3_next.md)
    assert 79.5e9 < arch.parameter_count < 80.5e9


def test_gated_delta_net_tensors_have_the_real_shapes() -> None:
    arch = architecture_from_config(QWEN3_NEXT_80B_A3B_INSTRUCT)
    model = _meta_causal_lm(QWEN3_NEXT_80B_A3B_INSTRUCT)
    real = {n: tuple(p.shape) for n, p in model.model.layers[0].named_parameters()}
    assert real["linear_attn.conv1d.weight"] == (8192, 1, 4)
    shapes = {t.name: t.shape for t in arch.tensors}
    assert shapes["conv1d.weight"] == real["linear_attn.conv1d.weight"]
    assert shapes["dt_bias"] == real["linear_attn.dt_bias"] == (32,)
    assert shapes["A_log"] == real["linear_attn.A_log"] == (32,)
    assert shapes["linear_attn.norm.weight"] == real["linear_attn.norm.weight"] == (128,)
    linears = {lin.name: (lin.d_out, lin.d_in, lin.count) for lin in arch.linear_layers}
    assert linears["in_proj_qkvz"] == (*real["linear_attn.in_proj_qkvz.weight"], 36)
    assert linears["in_proj_ba"] == (*real["linear_attn.in_proj_ba.weight"], 36)
    assert linears["out_proj"] == (*real["linear_attn.out_proj.weight"], 36)
    full = {n: tuple(p.shape) for n, p in model.model.layers[3].named_parameters()}
    # the gated attention's q_proj holds the query and its output gate
    assert linears["q_proj"] == (*full["self_attn.q_proj.weight"], 12) == (8192, 2048, 12)


@pytest.mark.parametrize("config", [QWEN3_5_27B, QWEN3_5_35B_A3B], ids=["27b", "35b-a3b"])
def test_qwen3_5_counts_its_text_decoder_as_transformers_builds_it(config: dict) -> None:
    # AutoModelForCausalLM builds Qwen3_5ForCausalLM / Qwen3_5MoeForCausalLM from the text
    # config: the vision tower stays on disk (_keys_to_ignore_on_load_unexpected)
    arch = architecture_from_config(config)
    model = _meta_causal_lm(config)
    assert type(model).__name__.endswith("ForCausalLM")
    assert arch.parameter_count == _parameters(model)
    assert arch.layer_parameters == max(_parameters(layer) for layer in model.model.layers)
    assert arch.linear_attention_layers == 3 * arch.num_layers // 4


def test_qwen3_5_27b_is_the_published_27b() -> None:
    # model card: Qwen3.5-27B, 27B parameters with its vision encoder; the text decoder
    # a text fine-tune loads is 26.9B
    arch = architecture_from_config(QWEN3_5_27B)
    assert arch.parameter_count == 26_895_998_464
    vision = transformers.Qwen3_5Config(
        **{k: v for k, v in QWEN3_5_27B.items() if k != "model_type"}
    )
    with torch.device("meta"):
        whole = transformers.Qwen3_5ForConditionalGeneration(vision)
    assert 27.0e9 < _parameters(whole) < 27.5e9


def test_layer_types_are_read_or_refused() -> None:
    text = dict(QWEN3_5_27B["text_config"])
    del text["layer_types"]
    by_interval = architecture_from_config({**text, "full_attention_interval": 2})
    assert by_interval.linear_attention_layers == 32
    listed = architecture_from_config({**text, "layer_types": ["full_attention"] * 64})
    assert listed.linear_attention_layers == 0
    assert listed.parameter_count == _parameters(
        _meta_causal_lm({**text, "layer_types": ["full_attention"] * 64})
    )
    with pytest.raises(ModelConfigError, match="layer_types' has 3 entries for 64 layers"):
        architecture_from_config({**text, "layer_types": ["full_attention"] * 3})
    with pytest.raises(ModelConfigError, match="'sliding_attention'"):
        architecture_from_config({**text, "layer_types": ["sliding_attention"] * 64})
    tied = {**QWEN3_5_27B, "tie_word_embeddings": True}
    with pytest.raises(ModelConfigError, match="tie_word_embeddings"):
        architecture_from_config(tied)


# Tiny configs: four layers, three Gated DeltaNet and one gated attention.
_TINY = {
    "hidden_size": 256, "intermediate_size": 688, "num_attention_heads": 8,
    "num_key_value_heads": 4, "num_hidden_layers": 4, "vocab_size": 4096,
    "tie_word_embeddings": False, "rms_norm_eps": 1e-5, "head_dim": 32,
    "linear_num_key_heads": 4, "linear_num_value_heads": 8, "linear_key_head_dim": 32,
    "linear_value_head_dim": 32, "linear_conv_kernel_dim": 4,
}  # fmt: skip
_MOE = {"num_experts": 8, "num_experts_per_tok": 2, "moe_intermediate_size": 128,
        "shared_expert_intermediate_size": 128}  # fmt: skip
TINY_NEXT = {**_TINY, **_MOE, "model_type": "qwen3_next"}
TINY_35 = {**_TINY, "model_type": "qwen3_5_text"}
TINY_35_MOE = {**_TINY, **_MOE, "model_type": "qwen3_5_moe_text"}


@pytest.mark.parametrize("config", [TINY_NEXT, TINY_35, TINY_35_MOE], ids=["next", "3.5", "moe"])
def test_all_linear_adapts_what_peft_adapts(config: dict) -> None:
    peft = pytest.importorskip("peft")
    built = transformers.CONFIG_MAPPING[config["model_type"]](
        **{k: v for k, v in config.items() if k != "model_type"}
    )
    model = transformers.AutoModelForCausalLM.from_config(built)
    adapted = peft.get_peft_model(model, peft.LoraConfig(r=8, target_modules="all-linear"))
    lora = sum(p.numel() for n, p in adapted.named_parameters() if "lora_" in n)
    arch = architecture_from_config(config)
    layers = arch.lora_layers(("all-linear",))
    assert sum(8 * (lin.d_in + lin.d_out) * lin.count for lin in layers) == lora
    # PEFT's resolved module names, beside the ones memtui hands it (memtui measure)
    resolved = set(adapted.peft_config["default"].target_modules)
    parameters = set(adapted.peft_config["default"].target_parameters or ())
    ours = Counter(lin.name for lin in layers)
    assert {"in_proj_qkvz", "in_proj_qkv"} & resolved and "conv1d" not in resolved
    if config is TINY_NEXT:
        # Qwen3-Next: gate_proj/up_proj/down_proj/gate go to the stacked experts and router
        assert parameters == {"gate.weight", "gate_up_proj", "down_proj"}
        assert resolved == set(ours) - {"gate", "gate_proj", "up_proj", "down_proj"}
    else:
        assert not parameters and resolved == set(ours)


def test_delta_rule_flops_match_torch_s_counter() -> None:
    from torch.utils.flop_counter import FlopCounterMode
    from transformers.models.qwen3_next.modeling_qwen3_next import torch_chunk_gated_delta_rule

    arch = architecture_from_config(TINY_NEXT)
    b, s = 2, 256
    hk, hv = arch.linear_key_heads, arch.linear_value_heads
    dk, dv = arch.linear_key_head_dim, arch.linear_value_head_dim
    q, k = torch.randn(b, s, hk, dk), torch.randn(b, s, hk, dk)
    v, g, beta = torch.randn(b, s, hv, dv), -torch.rand(b, s, hv), torch.rand(b, s, hv)
    with FlopCounterMode(display=False) as counter:
        torch_chunk_gated_delta_rule(q, k, v, g, beta, use_qk_l2norm_in_kernel=True)
    # the counter sees the batched matmuls; the two triangular solves (C^2 dv and C^2 dk a
    # chunk and head) it does not count
    c = DELTA_RULE_CHUNK
    solves = b * (s // c) * hv * c * c * (dk + dv)
    assert b * s * arch.delta_rule_flops == counter.get_total_flops() + solves


def test_step_time_has_no_quadratic_term_for_linear_layers() -> None:
    from memtui.estimator import Plan, estimate
    from memtui.estimator.plan import ModelSpec

    hybrid = architecture_from_config(QWEN3_5_27B)
    full = architecture_from_config({**QWEN3_5_27B["text_config"],
                                     "layer_types": ["full_attention"] * 64})  # fmt: skip

    def attention_flops(arch: Any, seq: int) -> float:
        plan = Plan(model=ModelSpec.from_architecture("q", arch), seq_len=seq, micro_batch=1)
        step = estimate(plan).step_time
        assert step is not None
        return step.model_flops

    # doubling the sequence adds s^2 work only in the 16 attention layers
    grow_hybrid = attention_flops(hybrid, 8192) - 2 * attention_flops(hybrid, 4096)
    grow_full = attention_flops(full, 8192) - 2 * attention_flops(full, 4096)
    assert grow_hybrid == pytest.approx(grow_full / 4, rel=1e-6)


# (a real CPU step each, 256 tokens: four chunks of the delta rule)
MEASURED = [
    ("next", TINY_NEXT, {"seq_len": 128}),
    ("next-lora-experts", TINY_NEXT, {"method": "lora", "lora_rank": 8, "seq_len": 128}),
    ("3.5-lora", TINY_35, {"method": "lora", "lora_rank": 8, "seq_len": 128}),
    ("3.5-full-ckpt", TINY_35, {"checkpointing": "full", "seq_len": 128}),
]


@pytest.mark.parametrize(
    ("config", "fields"), [m[1:] for m in MEASURED], ids=[m[0] for m in MEASURED]
)
def test_activations_match_a_real_step(config: dict, fields: dict) -> None:
    # transformers' torch path of the gated delta rule and the conv (no flash-linear-attention
    # or causal-conv1d installed): the path the estimate sizes
    pytest.importorskip("peft")
    from memtui.measure import measure
    from memtui.measure.grid import plan_for

    result = measure("test", plan_for(config, fields), fake=False, config=config)
    rows = {row.key: row for row in result.rows}
    for key in ("weights", "gradients", "optimizer_states"):
        assert rows[key].predicted == rows[key].measured, (key, rows[key])
    for key in ("activations", "peak"):
        assert abs(rows[key].error) <= 0.03, (key, rows[key])


def test_the_delta_rule_path_sized_is_an_assumption() -> None:
    from memtui.estimator import Plan, estimate
    from memtui.estimator.plan import ModelSpec

    arch = architecture_from_config(QWEN3_5_27B)
    report = estimate(Plan(model=ModelSpec.from_architecture("Qwen/Qwen3.5-27B", arch)))
    (line,) = [a for a in report.assumptions if "Gated DeltaNet" in a]
    assert "48 Gated DeltaNet layers" in line and "flash-linear-attention" in line
