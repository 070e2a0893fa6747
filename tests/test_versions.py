"""The frameworks' versions and the training loop as part of the plan: the flags and the
installed packages that give them, and each stack's books following the code of the version
(every figure derived here from the frameworks' source, named beside it).

The model is Llama-2-7B (its shape from config.json), the runtime overhead off.
"""

from __future__ import annotations

import json
import subprocess
import sys
from importlib import metadata

import pytest

from memtui.estimator import (
    Checkpointing,
    Hardware,
    Method,
    OverheadSettings,
    Plan,
    Precision,
    StackName,
    Strategy,
    TermKind,
    breakdown,
)
from memtui.estimator.model_source import load_model
from memtui.estimator.versions import PackageVersion

LLAMA2_7B = load_model("meta-llama/Llama-2-7b-hf")
H, LAYERS, VOCAB = 4096, 32, 32000  # config.json
S, B = 1024, 2


def plan(**update: object) -> Plan:
    fields: dict[str, object] = {
        "model": LLAMA2_7B,
        "hardware": Hardware(gpus_per_node=1),
        "overhead": OverheadSettings(enabled=False),
        "seq_len": S,
        "micro_batch": B,
        "stack": StackName.trainer,
        "strategy": Strategy.ddp,
        "precision": Precision.bf16,
        "method": Method.lora,
        **update,
    }
    return Plan(**fields)  # type: ignore[arg-type]


def transformers(version: str) -> dict[str, object]:
    return {"transformers": PackageVersion(version=version, source="a test")}


def per_logit(p: Plan) -> float:
    return breakdown(p).terms[TermKind.logits] / (S * B * VOCAB)


def memtui(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "memtui", "estimate", "--params", "1B", "--gpus", "1", *args],
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_versions_given_by_flag_are_in_the_json_with_where_they_came_from():
    out = memtui("--transformers-version", "4.48.1", "--peft-version", "0.13", "--json")
    assert out.returncode == 0, out.stderr
    doc = json.loads(out.stdout)
    assert doc["versions"]["transformers"] == {
        "version": "4.48.1",
        "source": "flag --transformers-version",
    }
    assert doc["versions"]["peft"]["version"] == "0.13"
    # not given: the release the stacks' books were read from, said so
    assert doc["versions"]["torch"]["version"] == "2.13"
    assert doc["versions"]["torch"]["source"].startswith("not given")
    assert doc["plan"]["versions"]["transformers"]["version"] == "4.48.1"


def test_installed_versions_are_read_from_the_distributions_metadata():
    out = memtui("--installed-versions", "--peft-version", "0.10.0", "--json")
    assert out.returncode == 0, out.stderr
    versions = json.loads(out.stdout)["versions"]
    assert versions["torch"] == {
        "version": metadata.version("torch"),
        "source": "installed here (importlib.metadata)",
    }
    assert versions["peft"]["source"] == "flag --peft-version"  # a flag wins


def test_a_version_that_is_not_one_is_a_one_line_error():
    out = memtui("--torch-version", "latest")
    assert out.returncode == 2
    assert "'latest' is not a version" in out.stderr
    assert "Traceback" not in out.stderr


def test_the_text_report_says_which_versions_it_assumed():
    out = memtui("--transformers-version", "4.39.3")
    assert out.returncode == 0, out.stderr
    assert "transformers 4.39.3 (flag --transformers-version)" in " ".join(out.stdout.split())


def test_the_loss_buffers_follow_the_transformers_version():
    # 4.49+ loss/loss_utils.py ForCausalLMLoss: the model's bf16 logits, their fp32 upcast and
    # the fp32 log-probs at the forward (10 B); at the backward the log-probs, nll_loss's and
    # log_softmax's fp32 gradients (12 B): the backward decides
    assert per_logit(plan()) == per_logit(plan(versions=transformers("4.49.0"))) == 12
    # 4.46.0-4.48.3 ForCausalLMLoss: logits.float(), then logits[..., :-1, :].contiguous():
    # bf16 logits + upcast + shifted copy + log-probs at nll_loss_forward, 2 + 4 + 4 + 4
    assert per_logit(plan(versions=transformers("4.48.1"))) == 14
    # up to 4.45 LlamaForCausalLM.forward upcasts (logits = logits.float()) and copies the
    # shift itself: 4 + 4 + 4 at the forward, 12 at the backward (the Trainer drops the output)
    assert per_logit(plan(versions=transformers("4.39.3"))) == 12


def test_a_loop_that_keeps_the_output_holds_its_logits_through_backward():
    # accelerate's nlp_example.py keeps `outputs` until after backward and the step: before
    # 4.46 the output holds the fp32 logits (4 B beside the loss's 12), since then bf16 (2)
    old = transformers("4.39.3")
    assert per_logit(plan(versions=old, loop="accelerate")) == 16
    assert per_logit(plan(versions=old, loop="custom", loop_keeps_output=True)) == 16
    assert per_logit(plan(versions=old, loop="custom", loop_keeps_output=False)) == 12
    assert per_logit(plan(loop="accelerate")) == 14
    # Trainer.training_step: compute_loss returns the loss alone, the outputs are dropped
    assert per_logit(plan(versions=old, loop="trainer")) == 12


def test_a_loop_the_stack_cannot_run_is_refused():
    with pytest.raises(ValueError, match="torchtune stack runs torchtune loop, not accelerate"):
        plan(stack=StackName.torchtune, loop="accelerate")


@pytest.mark.parametrize("stack", [StackName.fsdp1, StackName.fsdp2, StackName.generic])
def test_the_kbit_upcast_makes_the_checkpointed_stream_fp32_in_every_stack(stack):
    # PEFT prepare_model_for_kbit_training casts the non-quantized parameters (embeddings,
    # norms) to fp32 and bitsandbytes' Linear4bit returns its input's dtype: every
    # checkpointed layer input is fp32, 2 bytes per element more than bf16
    def delta(checkpointing: Checkpointing) -> int:
        fields = {
            "stack": stack,
            "strategy": Strategy.fsdp,
            "precision": Precision.bf16_mixed,
            "hardware": Hardware(gpus_per_node=2),
            "method": Method.qlora,
            "checkpointing": checkpointing,
        }
        up, no = (
            breakdown(plan(**fields, qlora_upcast=u)).terms[TermKind.activations]
            for u in (True, False)
        )
        return up - no

    assert delta(Checkpointing.full) - delta(Checkpointing.none) == LAYERS * B * S * H * 2


def test_gradients_are_counted_whole_even_where_the_loop_clears_them_between_steps():
    # zero_grad(set_to_none=True) (torch optim/optimizer.py, default since 2.0) frees them
    # after each step, but backward builds them while the loss's buffers and the activations
    # are still alive, lm_head's and the last layers' first: a real Trainer step on CPU peaks
    # 11% above "the loss's moment without gradients" (tests/test_measure_stacks.py), so the
    # books keep every gradient at the peak, one micro-batch per step or several
    full = {"method": Method.full}
    for p in (plan(**full), plan(**full, grad_accum=2)):
        b = breakdown(p)
        assert b.terms[TermKind.gradients] == b.state.gradients > 0


def test_fsdp1_no_shard_keeps_the_whole_fp32_model_and_casts_one_unit_at_a_time():
    # torch distributed/fsdp/_flat_param.py: NO_SHARD shards nothing (uses_sharded_strategy
    # False); accelerate upcasts trainable parameters to fp32, so weights, gradients (cast back
    # to the param dtype) and AdamW's moments are whole fp32; the unit's bf16 _mp_shard is its
    # unsharded parameter, made at unshard and freed at reshard like FULL_SHARD's gathers
    p = plan(
        stack=StackName.fsdp1,
        strategy=Strategy.ddp,
        precision=Precision.bf16_mixed,
        method=Method.full,
        hardware=Hardware(gpus_per_node=4),
        grad_accum=2,
    )
    s = breakdown(p).state
    params = LLAMA2_7B.parameters
    assert (s.weights, s.gradients, s.master_weights, s.optimizer_states) == (
        4 * params,
        4 * params,
        0,
        8 * params,
    )
    full_shard = breakdown(p.evolve(strategy=Strategy.fsdp)).transient
    assert breakdown(p).transient.backward == full_shard.backward
