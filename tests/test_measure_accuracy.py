"""The estimator against real PyTorch training steps on CPU (issue 5's CI gate).

Every configuration builds a small model with random weights, runs one training step and
measures it per storage (`memtui.measure`): static terms must match to the byte; activations,
logits and the step's peak within 5 percent. Skipped when torch is not installed; CI installs
torch==2.13.0 (CPU), transformers and peft. The whole grid takes well under a minute on 2 cores.
"""

from __future__ import annotations

import pytest

pytest.importorskip("torch")
pytest.importorskip("transformers")
pytest.importorskip("peft")

from memtui.measure import measure
from memtui.measure.grid import gpt2, llama, plan_for

TOLERANCE = 0.05
STATIC = ("weights", "gradients", "master_weights", "optimizer_states", "static")
WITHIN = ("activations", "logits", "step_temporaries", "peak")


GRID = [
    # (id, config, plan fields)
    ("llama-sdpa", llama(), {}),
    ("llama-eager", llama(), {"attention": "eager"}),
    ("llama-mha-eager-b1", llama(kv=8), {"attention": "eager", "micro_batch": 1}),
    ("llama-mqa-sdpa", llama(kv=1), {"seq_len": 512, "micro_batch": 1}),
    ("llama-full-ckpt", llama(), {"checkpointing": "full"}),
    ("llama-full-ckpt-eager", llama(), {"checkpointing": "full", "attention": "eager"}),
    ("llama-selective-eager", llama(), {"checkpointing": "selective", "attention": "eager"}),
    ("llama-long-eager", llama(vocab=1024), {"attention": "eager", "seq_len": 1024,
                                             "micro_batch": 1}),
    ("llama-bf16", llama(), {"precision": "bf16", "optimizer_state_dtype": "bf16"}),
    ("llama-fp32", llama(), {"precision": "fp32"}),
    ("llama-sgd-momentum", llama(), {"optimizer": "sgd-momentum"}),
    ("llama-sgd-fp32", llama(), {"optimizer": "sgd", "precision": "fp32"}),
    ("llama-adafactor", llama(), {"optimizer": "adafactor"}),
    ("llama-adafactor-bf16", llama(), {"optimizer": "adafactor", "precision": "bf16"}),
    ("llama-lora-all", llama(), {"method": "lora", "lora_rank": 8}),
    ("llama-lora-attention", llama(), {"method": "lora", "lora_targets": ("attention",)}),
    ("llama-lora-full-ckpt", llama(), {"method": "lora", "checkpointing": "full"}),
    ("llama-tied-big-vocab", llama(vocab=16384, tie=True), {"micro_batch": 1}),
    ("mistral", llama(model_type="mistral"), {}),
    ("qwen2-bias", llama(model_type="qwen2"), {"attention": "eager"}),
    ("gpt2-eager", gpt2(), {"attention": "eager"}),
    ("gpt2-sdpa", gpt2(), {}),
    ("gpt2-full-ckpt", gpt2(), {"checkpointing": "full"}),
]  # fmt: skip


@pytest.mark.parametrize(("config", "fields"), [g[1:] for g in GRID], ids=[g[0] for g in GRID])
def test_estimate_matches_a_real_step(config, fields):
    result = measure("test", plan_for(config, fields), fake=False, config=config)
    rows = {row.key: row for row in result.rows}
    for key in STATIC:
        assert rows[key].predicted == rows[key].measured, (key, rows[key])
    for key in WITHIN:
        assert abs(rows[key].error) <= TOLERANCE, (key, rows[key])


@pytest.mark.parametrize(
    "fields",
    [{"attention": "eager"}, {"method": "lora", "checkpointing": "full"}],
    ids=["eager", "lora-full-ckpt"],
)
def test_fake_tensor_mode_measures_the_same_bytes_as_a_real_step(fields):
    config, plan = llama(), plan_for(llama(), fields)
    real = measure("test", plan, fake=False, config=config).measurement
    fake = measure("test", plan, fake=True, config=config).measurement
    assert (fake.static, fake.saved_activations, fake.logits) == (
        real.static,
        real.saved_activations,
        real.logits,
    )
    assert fake.peak == real.peak
