"""run_trainer leaves os.environ as it found it (TrainingArguments and accelerate write
process-wide variables: transformers 4.48 TrainingArguments.__post_init__ sets
ACCELERATE_MIXED_PRECISION, which leaked autocast into later fp32 rows of the grid)."""

from __future__ import annotations

import os

import pytest

from memtui.measure.trainer import _environment_restored


def test_variables_written_in_the_block_are_undone(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ACCELERATE_USE_FSDP", "false")
    monkeypatch.delenv("ACCELERATE_MIXED_PRECISION", raising=False)
    before = dict(os.environ)
    with _environment_restored():
        os.environ["ACCELERATE_MIXED_PRECISION"] = "bf16"
        os.environ["ACCELERATE_USE_FSDP"] = "true"
    assert dict(os.environ) == before


def test_real_training_arguments_leave_the_environment() -> None:
    transformers = pytest.importorskip("transformers")
    before = dict(os.environ)
    with _environment_restored():
        transformers.TrainingArguments(
            output_dir="/tmp/defgrid-args", bf16=True, use_cpu=True, report_to="none"
        )
    assert dict(os.environ) == before
