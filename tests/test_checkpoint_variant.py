"""Full checkpointing's variant (`--checkpoint-variant`): torch.utils.checkpoint's reentrant
CheckpointFunction, the default of transformers' gradient_checkpointing_enable before 5.0
(read in 4.39.3, 4.48.3, 4.57.3 and 5.0.0), against the non-reentrant one; and the other rules
the 4.39.3 / 4.48.3 CPU grid found on its checkpointed rows (benchmarks/accuracy.py --stack
versions). Each figure is derived from the source named beside it, on the grid's tiny models
(memtui/measure/grid.py: hidden 256, a sequence of 256, a micro-batch of 2), whose real
Trainer steps tests/test_measure_stacks.py measures.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

import pytest

from memtui.cli import build_parser
from memtui.commands.plan_flags import plan_and_import
from memtui.estimator import Plan, TermKind, breakdown
from memtui.estimator.budget import estimate
from memtui.estimator.choices import CheckpointVariant, Loop, StackName
from memtui.estimator.stacks.hf_model import reentrant
from memtui.estimator.versions import PackageVersion, Versions
from memtui.measure.grid import CUSTOM, TRAINER, gpt2, llama, plan_for
from memtui.plans.trainer_args import export_args

H, S, B = 256, 256, 2  # the grid's hidden size, sequence and micro-batch


def at(transformers: str | None) -> Versions:
    given = PackageVersion(version=transformers, source="a test") if transformers else None
    return Versions(transformers=given)


def plan(config: dict[str, Any] | None = None, **fields: Any) -> Plan:
    base = {**TRAINER, "checkpointing": "full", "precision": "bf16", **fields}
    return plan_for(llama() if config is None else config, base)


def activations(p: Plan) -> int:
    return breakdown(p).terms[TermKind.activations]


@pytest.mark.parametrize(
    ("transformers", "expected"),
    [("4.39.3", True), ("4.48.3", True), ("4.57.3", True), ("5.0.0", False), (None, False)],
)
def test_the_trainer_checkpoints_reentrant_before_transformers_5(transformers, expected):
    # modeling_utils.py gradient_checkpointing_enable: {"use_reentrant": True} for None in
    # 4.48.3 and 4.57.3 (4.39.3's Trainer passes {}: torch's default, True), False in 5.0.0;
    # a version not given is the current release
    assert reentrant(plan(versions=at(transformers))) is expected


def test_a_hand_written_loop_calls_the_same_enable_but_the_textbook_step_does_not():
    old = at("4.48.3")
    assert reentrant(plan(**CUSTOM, checkpointing="full", versions=old))
    assert reentrant(plan(stack="generic", loop="accelerate", versions=old))
    textbook = plan(stack="generic", versions=old)
    assert textbook.loop is Loop.auto and textbook.stack is StackName.generic
    assert not reentrant(textbook)


def test_a_given_variant_wins_over_the_versions():
    assert not reentrant(plan(versions=at("4.48.3"), checkpoint_variant="non-reentrant"))
    assert reentrant(plan(versions=at("5.24"), checkpoint_variant="reentrant"))
    assert reentrant(plan(stack="generic", checkpoint_variant="reentrant"))


@pytest.mark.parametrize(("precision", "stream_bytes"), [("bf16-autocast", 4), ("bf16", 2)])
def test_the_reentrant_rebuild_holds_the_layer_output_through_its_backward(precision, stream_bytes):
    # torch/utils/checkpoint.py CheckpointFunction.backward: `outputs = ctx.run_function(...)`
    # stays referenced while torch.autograd.backward(outputs_with_grad, ...) runs: one
    # h-wide residual-stream tensor per token beside the rebuilt layer. A vocabulary of 1024
    # puts the peak at a layer's backward (the logits are smaller than the layer there).
    fields = {"precision": precision}
    small = llama(vocab=1024)
    rebuilt = activations(plan(small, checkpoint_variant="reentrant", **fields))
    plain = activations(plan(small, checkpoint_variant="non-reentrant", **fields))
    assert rebuilt - plain == S * B * H * stream_bytes


def test_the_variant_changes_nothing_when_the_loss_sets_the_peak():
    # V = 4096: the loss's buffers (12 B per logit) exceed any layer's backward
    assert activations(plan(checkpoint_variant="reentrant")) == activations(
        plan(checkpoint_variant="non-reentrant")
    )


def test_the_assumption_says_which_variant_and_why():
    notes = estimate(plan(versions=at("4.48.3"))).assumptions
    assert any("full checkpointing is reentrant" in n and "before transformers 5.0" in n
               for n in notes), notes  # fmt: skip
    notes = estimate(plan(checkpoint_variant="non-reentrant")).assumptions
    assert "full checkpointing is non-reentrant (as given)" in notes
    assert not any("reentrant" in n for n in estimate(plan(checkpointing="none")).assumptions)


def test_gpt2_builds_no_eager_causal_mask_before_4_52():
    # modeling_gpt2.py 4.51.0: eager_attention_forward masks with the registered `bias`
    # buffer, no mask is made; 4.52.0 GPT2Model.forward calls _update_causal_mask, a
    # (b, 1, s, s) mask in the model's dtype that every checkpointed layer keeps
    model = gpt2()
    before = activations(plan(model, attention="eager", versions=at("4.51.0")))
    after = activations(plan(model, attention="eager", versions=at("4.52.0")))
    assert after - before == B * S * S * 2


def imported(tmp_path: Path, name: str, text: str, *flags: str) -> Plan:
    path = tmp_path / name
    path.write_text(text)
    args: argparse.Namespace = build_parser().parse_args(
        ["estimate", "--from", str(path), "--gpus", "1", *flags]
    )
    found, _ = plan_and_import(args, None)
    return found


TRAINING_ARGS = {
    "output_dir": "out",
    "model_name_or_path": "meta-llama/Meta-Llama-3-8B",
    "per_device_train_batch_size": 1,
    "gradient_accumulation_steps": 1,
    "bf16": True,
    "gradient_checkpointing": True,
}


@pytest.mark.parametrize(
    ("kwargs", "expected"),
    [
        ({"use_reentrant": False}, CheckpointVariant.non_reentrant),
        ({"use_reentrant": True}, CheckpointVariant.reentrant),
        (None, CheckpointVariant.auto),  # the release's own default
    ],
)
def test_training_arguments_say_the_variant(tmp_path, kwargs, expected):
    args = dict(TRAINING_ARGS)
    if kwargs is not None:
        args["gradient_checkpointing_kwargs"] = kwargs
    found = imported(tmp_path, "args.json", json.dumps(args))
    assert found.checkpoint_variant is expected


def test_axolotl_hands_its_kwargs_to_the_trainer(tmp_path):
    text = (
        "base_model: meta-llama/Meta-Llama-3-8B\nsequence_len: 1024\nmicro_batch_size: 1\n"
        "bf16: true\ngradient_checkpointing: true\n"
        "gradient_checkpointing_kwargs:\n  use_reentrant: false\n"
    )
    found = imported(tmp_path, "axolotl.yaml", text)
    assert found.checkpoint_variant is CheckpointVariant.non_reentrant


@pytest.mark.parametrize(
    ("line", "expected"),
    [
        ("", CheckpointVariant.reentrant),
        ("use_reentrant_gc: false\n", CheckpointVariant.non_reentrant),
    ],
)
def test_llama_factory_checkpoints_reentrant_unless_told(tmp_path, line, expected):
    # hparams/model_args.py ModelArguments.use_reentrant_gc: default True
    text = (
        "model_name_or_path: meta-llama/Meta-Llama-3-8B\nstage: sft\ndo_train: true\n"
        "finetuning_type: lora\nper_device_train_batch_size: 1\ncutoff_len: 1024\nbf16: true\n"
        + line
    )
    assert imported(tmp_path, "lf.yaml", text).checkpoint_variant is expected


def test_the_trainer_arguments_export_writes_a_given_variant_only():
    given = plan(checkpoint_variant="reentrant")
    assert export_args(given)["gradient_checkpointing_kwargs"] == {"use_reentrant": True}
    assert "gradient_checkpointing_kwargs" not in export_args(plan())
