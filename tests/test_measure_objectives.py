"""Real TRL 1.16 DPOTrainer, RewardTrainer and GRPOTrainer steps on CPU against the
estimator's objective books (`memtui measure --stack trainer --objective dpo|reward|grpo`):
memtui/measure/grid.py's OBJECTIVE_GRID rows marked for CI (a 2-layer Llama of hidden 256,
vocabulary 4096, random weights; DPO and reward: 2 examples a micro-batch of 256 tokens,
chosen and rejected, DPO full with a reference copy and LoRA with the adapter-disabled base;
GRPO: 2 completions of 32 tokens per 32-token prompt from Transformers' generate; LoRA
DPO with full gradient checkpointing too, and reward modelling with LoRA)."""

from __future__ import annotations

import functools
import sys

import pytest

from memtui.measure import Result, measure
from memtui.measure.grid import OBJECTIVE_GRID

CI = [row for row in OBJECTIVE_GRID if row.ci]
DPO = [row.name for row in CI if row.plan.objective.value == "dpo"]


@functools.cache
def _measured(name: str) -> Result:
    row = next(r for r in OBJECTIVE_GRID if r.name == name)
    return measure(row.name, row.plan, config=row.config)


@pytest.mark.parametrize("name", DPO)
def test_dpo_step_static_terms_and_reference_are_exact(name: str) -> None:
    result = _measured(name)
    rows = {row.key.value: row for row in result.rows}
    for key in ("weights", "gradients", "optimizer_states", "static", "reference_model"):
        assert rows[key].predicted == rows[key].measured, key
    # a full fine-tune keeps a copy; LoRA's reference is the base with the adapter disabled
    assert (rows["reference_model"].measured > 0) is (result.plan.method.value == "full")


@pytest.mark.parametrize("name", DPO)
def test_dpo_activations_log_probs_and_head_within_3_percent(name: str) -> None:
    rows = {row.key.value: row for row in _measured(name).rows}
    for key in ("activations", "log_probs", "logits"):
        assert rows[key].measured > 0, key
        assert abs(rows[key].error) < 0.03, rows[key]
    # the reference's weights are loaded before the step: nothing it holds outlives it
    assert not any("outlived" in note for note in _measured(name).notes)


def test_cpu_only_fold_temporaries_are_apart_and_out_of_the_peak() -> None:
    result = _measured(DPO[0])
    rows = {row.key.value: row for row in result.rows}
    fold = rows["cpu_fold"]
    assert fold.predicted == 0 and fold.measured > 0
    m = result.measurement
    assert m.peak == m.static + m.forward_backward_peak - m.cpu_fold
    assert abs(rows["peak"].error) < 0.03, rows["peak"]


@pytest.mark.parametrize("name", ["reward full", "reward LoRA", "grpo full generate"])
def test_reward_and_grpo_steps_within_3_percent(name: str) -> None:
    """RewardTrainer's sequence-classification model (no lm_head: its weights are the
    backbone and a 1 x h score head, which PEFT's all-linear adapts too) and GRPOTrainer's
    training step on buffered completions from Transformers' generate, against their
    estimates."""
    result = _measured(name)
    rows = {row.key.value: row for row in result.rows}
    for key in ("weights", "gradients", "optimizer_states", "static", "reference_model"):
        assert rows[key].predicted == rows[key].measured, key
    for key in ("activations", "log_probs", "logits"):
        if rows[key].measured or rows[key].predicted:
            assert abs(rows[key].error) < 0.03, rows[key]
    # the budget sums its terms where the step's peak holds the larger of two moments: over,
    # never under
    assert 0 <= rows["peak"].error < 0.08, rows["peak"]


def test_the_cuda_check_rows_name_real_plans_and_runners(monkeypatch: pytest.MonkeyPatch) -> None:
    """benchmarks/cuda_check.py runs on a GPU session only; what a CPU can check is that
    every row's flags make a plan and name a runner (the TRL rows with the fused head TRL
    runs)."""
    import importlib.util
    from pathlib import Path

    path = Path(__file__).resolve().parent.parent / "benchmarks" / "cuda_check.py"
    spec = importlib.util.spec_from_file_location("cuda_check", path)
    assert spec is not None and spec.loader is not None
    check = importlib.util.module_from_spec(spec)
    monkeypatch.setitem(sys.modules, "cuda_check", check)  # its dataclasses look it up
    monkeypatch.setattr(sys, "path", list(sys.path))  # it prepends the repository root
    spec.loader.exec_module(check)
    trl = [row for row in check.GRID if row.runner.startswith("trl-")]
    assert {check.plan_of(row.flags).objective.value for row in trl} == {"dpo", "grpo"}
    for row in check.GRID:
        plan = check.plan_of(row.flags)
        assert row.runner in check.RUNNERS, row.name
        if row in trl:
            assert plan.loss.value == "fused", row.name
