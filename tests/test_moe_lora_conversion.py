"""LoRA on the MoE families whose experts transformers 5 stacks into nn.Parameters: memtui's
adapter count against PEFT's own get_peft_model on tiny models of each family (PEFT 0.21
utils/transformers_weight_conversion.py _convert_peft_config_moe moves the expert names onto
the stacked parameters for mixtral, qwen3_moe and deepseek_v2; not for qwen2_moe), and the
version rules (`memtui.estimator.architecture.expert_adapters`)."""

from __future__ import annotations

import pytest

from memtui.errors import PlanError
from memtui.estimator.architecture import ExpertAdapters, expert_adapters
from memtui.estimator.configs import architecture_from_config
from memtui.estimator.versions import PackageVersion, Versions

transformers = pytest.importorskip("transformers")
peft = pytest.importorskip("peft")

_BASE = {"hidden_size": 64, "intermediate_size": 96, "num_attention_heads": 4,
         "num_key_value_heads": 4, "num_hidden_layers": 2, "vocab_size": 256,
         "tie_word_embeddings": False, "head_dim": 16}  # fmt: skip
TINY = {
    "mixtral": {**_BASE, "num_local_experts": 4, "num_experts_per_tok": 2},
    "qwen2_moe": {**_BASE, "num_experts": 4, "num_experts_per_tok": 2,
                  "moe_intermediate_size": 32, "shared_expert_intermediate_size": 48},
    # layer 0 dense: its gate_proj/up_proj/down_proj modules lose their adapters
    "qwen3_moe": {**_BASE, "num_experts": 4, "num_experts_per_tok": 2,
                  "moe_intermediate_size": 32, "mlp_only_layers": [0]},
    "deepseek_v2": {**_BASE, "n_routed_experts": 4, "num_experts_per_tok": 2,
                    "moe_intermediate_size": 32, "n_shared_experts": 1,
                    "first_k_dense_replace": 1, "q_lora_rank": None, "kv_lora_rank": 16,
                    "qk_nope_head_dim": 16, "qk_rope_head_dim": 8, "v_head_dim": 16},
}  # fmt: skip
_EXPERTS = {"mixtral": ["w1", "w3", "w2"]}
_R = 4


def _peft_count(model_type: str, targets: str | list[str]) -> int:
    built = transformers.CONFIG_MAPPING[model_type](**TINY[model_type])
    model = transformers.AutoModelForCausalLM.from_config(built)
    adapted = peft.get_peft_model(model, peft.LoraConfig(r=_R, target_modules=targets))
    return sum(p.numel() for n, p in adapted.named_parameters() if "lora_" in n)


def _memtui_count(model_type: str, targets: tuple[str, ...], adapters: ExpertAdapters) -> int:
    arch = architecture_from_config({**TINY[model_type], "model_type": model_type})
    layers = arch.lora_layers(targets, adapters)
    return sum(_R * (lin.d_in + lin.d_out) * lin.count for lin in layers)


@pytest.mark.parametrize("model_type", list(TINY))
def test_adapter_parameters_equal_peft_s(model_type: str) -> None:
    experts = _EXPERTS.get(model_type, ["gate_proj", "up_proj", "down_proj"])
    for targets in ("all-linear", experts, ["o_proj"]):
        names = (targets,) if isinstance(targets, str) else tuple(targets)
        ours = _memtui_count(model_type, names, ExpertAdapters.converted)
        assert ours == _peft_count(model_type, targets), (model_type, targets)


def test_converted_counts_are_the_stacked_experts_not_the_modules() -> None:
    # qwen3_moe, names gate_proj/up_proj/down_proj: one MoE layer of E = 4 experts, h 64,
    # f 32: gate_up_proj at rank 2r (2r E (h + 2f)) and down_proj (r E (f + h)); the dense
    # layer's modules of those names get nothing
    h, f, e = 64, 32, 4
    expected = 2 * _R * e * (h + 2 * f) + _R * e * (f + h)
    names = ("gate_proj", "up_proj", "down_proj")
    assert _memtui_count("qwen3_moe", names, ExpertAdapters.converted) == expected == 5632
    # transformers 4: every expert's nn.Linear and the dense layer's are adapted at rank r
    per_module = 2 * _R * (h + f) * e + _R * (f + h) * e + _R * (3 * 96 + 3 * 64)
    assert _memtui_count("qwen3_moe", names, ExpertAdapters.modules) == per_module
    # PEFT refuses one of the fused pair alone, and so does memtui
    with pytest.raises(PlanError, match="'gate_proj' needs 'up_proj'"):
        _memtui_count("qwen3_moe", ("gate_proj", "down_proj"), ExpertAdapters.converted)
    with pytest.raises(ValueError, match="without also targeting up_proj"):
        _peft_count("qwen3_moe", ["gate_proj", "down_proj"])


def test_what_the_versions_reach() -> None:
    def of(**given: str) -> Versions:
        return Versions(**{p: PackageVersion(version=v, source="flag") for p, v in given.items()})

    assert expert_adapters(Versions()) is ExpertAdapters.converted
    assert expert_adapters(of(transformers="4.57.1", peft="0.21.0")) is ExpertAdapters.modules
    assert expert_adapters(of(transformers="5.0.0", peft="0.18.1")) is ExpertAdapters.unreached
    assert expert_adapters(of(peft="0.19.1")) is ExpertAdapters.named
    assert expert_adapters(of(peft="0.20.0")) is ExpertAdapters.converted
    arch = architecture_from_config({**TINY["mixtral"], "model_type": "mixtral"})
    # PEFT 0.19 turns the string into a set of its characters before all-linear expands
    with pytest.raises(PlanError, match=r"PEFT 0\.19 cannot apply 'all-linear'"):
        arch.lora_layers(("all-linear",), ExpertAdapters.named)
    # PEFT before 0.19 on transformers 5: the names reach no expert and no router
    with pytest.raises(PlanError, match="'w1' matches no module"):
        arch.lora_layers(("w1",), ExpertAdapters.unreached)
    unreached = {lin.name for lin in arch.lora_layers(("all-linear",), ExpertAdapters.unreached)}
    assert unreached == {"q_proj", "k_proj", "v_proj", "o_proj"}
