"""A real TRL 1.16 DPOTrainer step on CPU against the estimator's objective books
(`memtui measure --stack trainer --objective dpo`): a tiny Llama (hidden 256, 4 layers,
vocabulary 1024, random weights), 2 examples a micro-batch of 128 tokens, chosen and rejected."""

from __future__ import annotations

import pytest

from memtui.estimator.choices import Method, Objective, Precision, StackName, Strategy
from memtui.estimator.configs import architecture_from_config
from memtui.estimator.plan import Hardware, ModelSpec, Plan
from memtui.measure import measure

CONFIG = {
    "model_type": "llama",
    "vocab_size": 1024,
    "hidden_size": 256,
    "intermediate_size": 512,
    "num_hidden_layers": 4,
    "num_attention_heads": 4,
    "num_key_value_heads": 2,
    "max_position_embeddings": 1024,
    "tie_word_embeddings": False,
    "rms_norm_eps": 1e-5,
}


def dpo_plan(method: Method) -> Plan:
    return Plan(
        model=ModelSpec.from_architecture("tiny-llama", architecture_from_config(CONFIG)),
        hardware=Hardware(gpus_per_node=1),
        stack=StackName.trainer,
        precision=Precision.bf16,
        strategy=Strategy.ddp,
        objective=Objective.dpo,
        method=method,
        seq_len=128,
        micro_batch=2,
    )


@pytest.mark.parametrize("method", [Method.full, Method.lora])
def test_dpo_step_static_terms_and_reference_are_exact(method: Method) -> None:
    result = measure("tiny-llama", dpo_plan(method), config=CONFIG)
    rows = {row.key.value: row for row in result.rows}
    for key in ("weights", "gradients", "optimizer_states", "static", "reference_model"):
        assert rows[key].predicted == rows[key].measured, key
    # a full fine-tune keeps a copy; LoRA's reference is the base with the adapter disabled
    assert (rows["reference_model"].measured > 0) is (method is Method.full)


def test_lora_dpo_activations_within_8_percent() -> None:
    result = measure("tiny-llama", dpo_plan(Method.lora), config=CONFIG)
    row = next(r for r in result.rows if r.key.value == "activations")
    assert abs(row.error) < 0.08, row
