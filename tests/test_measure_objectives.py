"""A real TRL 1.16 DPOTrainer step on CPU against the estimator's objective books
(`memtui measure --stack trainer --objective dpo`): memtui/measure/grid.py's OBJECTIVE_GRID
rows marked for CI (a 2-layer Llama of hidden 256, vocabulary 4096, random weights, 2
examples a micro-batch of 256 tokens, chosen and rejected; full with a reference copy, LoRA
with the adapter-disabled base as reference). `python benchmarks/accuracy.py` is not needed:
the whole grid is rerun with the loop in this file's `_measured` over OBJECTIVE_GRID."""

from __future__ import annotations

import functools

import pytest

from memtui.measure import Result, measure
from memtui.measure.grid import OBJECTIVE_GRID

CI = [row for row in OBJECTIVE_GRID if row.ci]


@functools.cache
def _measured(name: str) -> Result:
    row = next(r for r in OBJECTIVE_GRID if r.name == name)
    return measure(row.name, row.plan, config=row.config)


@pytest.mark.parametrize("name", [row.name for row in CI])
def test_dpo_step_static_terms_and_reference_are_exact(name: str) -> None:
    result = _measured(name)
    rows = {row.key.value: row for row in result.rows}
    for key in ("weights", "gradients", "optimizer_states", "static", "reference_model"):
        assert rows[key].predicted == rows[key].measured, key
    # a full fine-tune keeps a copy; LoRA's reference is the base with the adapter disabled
    assert (rows["reference_model"].measured > 0) is (result.plan.method.value == "full")


@pytest.mark.parametrize("name", [row.name for row in CI])
def test_dpo_activations_log_probs_and_head_within_3_percent(name: str) -> None:
    rows = {row.key.value: row for row in _measured(name).rows}
    for key in ("activations", "log_probs", "logits"):
        assert rows[key].measured > 0, key
        assert abs(rows[key].error) < 0.03, rows[key]
    # the reference's weights are loaded before the step: nothing it holds outlives it
    assert not any("outlived" in note for note in _measured(name).notes)


def test_cpu_only_fold_temporaries_are_apart_and_out_of_the_peak() -> None:
    result = _measured(CI[0].name)
    rows = {row.key.value: row for row in result.rows}
    fold = rows["cpu_fold"]
    assert fold.predicted == 0 and fold.measured > 0
    m = result.measurement
    assert m.peak == m.static + m.forward_backward_peak - m.cpu_fold
    assert abs(rows["peak"].error) < 0.03, rows["peak"]


@pytest.mark.parametrize("name", ["reward full", "grpo full generate"])
def test_reward_and_grpo_steps_within_3_percent(name: str) -> None:
    """RewardTrainer's sequence-classification model (no lm_head: its weights are the
    backbone and a 1 x h score head) and GRPOTrainer's training step on buffered completions
    from Transformers' generate, against their estimates."""
    result = _measured(name)
    rows = {row.key.value: row for row in result.rows}
    for key in ("weights", "gradients", "optimizer_states", "static", "reference_model"):
        assert rows[key].predicted == rows[key].measured, key
    for key in ("activations", "log_probs", "logits"):
        if rows[key].measured or rows[key].predicted:
            assert abs(rows[key].error) < 0.03, rows[key]
    assert abs(rows["peak"].error) < 0.03, rows["peak"]
