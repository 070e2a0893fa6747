"""The training objectives' books (memtui/estimator/objectives.py) against TRL 1.16's trainers
and vLLM's memory rule, through the API, the phases, the levers and `memtui estimate --json`."""

from __future__ import annotations

import json
import math
import subprocess
import sys

import pytest

from memtui.errors import PlanError
from memtui.estimator import (
    Hardware,
    LossKind,
    Method,
    OverheadSettings,
    Plan,
    Precision,
    StackName,
    Strategy,
    TermKind,
    breakdown,
    estimate,
)
from memtui.estimator.choices import Objective, RefModel, VllmMode
from memtui.estimator.model_source import load_model

LLAMA2_7B = load_model("meta-llama/Llama-2-7b-hf")
# meta-llama/Llama-2-7b-hf config.json (as tests/test_stacks_books.py counts it)
H, INNER, LAYERS, VOCAB = 4096, 11008, 32, 32000
P = LAYERS * (4 * H * H + 3 * H * INNER + 2 * H) + 2 * VOCAB * H + H
CARD = 81559 * 2**20  # the default H100 80GB


def plan(**update: object) -> Plan:
    fields: dict[str, object] = {
        "model": LLAMA2_7B,
        "hardware": Hardware(gpus_per_node=1),
        "overhead": OverheadSettings(enabled=False),
        "stack": StackName.trainer,
        "precision": Precision.bf16,
        "strategy": Strategy.ddp,
        "seq_len": 1024,
        "micro_batch": 1,
        **update,
    }
    return Plan(**fields)  # type: ignore[arg-type]


def terms(p: Plan) -> dict[TermKind, int]:
    return dict(breakdown(p).terms)


OBJECTIVE_KINDS = (
    TermKind.reference_model,
    TermKind.value_model,
    TermKind.reward_model,
    TermKind.log_probs,
    TermKind.generator,
)


def test_sft_holds_no_objective_term_and_no_generation_phase() -> None:
    p = plan()
    assert all(terms(p)[k] == 0 for k in OBJECTIVE_KINDS)
    assert [ph.name for ph in estimate(p).phases] == [
        "training step",
        "model loading",
        "checkpoint saving",
    ]


def test_dpo_full_keeps_a_reference_copy_and_runs_chosen_and_rejected() -> None:
    dpo = terms(plan(objective=Objective.dpo, micro_batch=2, loss=LossKind.fused))
    # DPOTrainer loads the reference in the policy's dtype (bf16: 2 bytes a parameter)
    assert dpo[TermKind.reference_model] == 2 * P
    # DataCollatorForPreference: [chosen; rejected], 2b sequences through the same layers,
    # and the label mask TRL's fused head keeps (trainer/utils.py _fused_forward: 1 byte a
    # token); its copy of the hidden states is the lm_head input a full fine-tune keeps
    sft = terms(plan(micro_batch=4))
    assert dpo[TermKind.activations] == sft[TermKind.activations] + 4 * 1024
    # per token of the s - 1 the fused head scores (DPOTrainer.__init__ outputs=): the
    # policy's fp32 log_probs, entropy and mean_logits, the entropy metric's fp32 product and
    # the reference copy's fp32 log_probs, 2b x (s - 1) each
    assert dpo[TermKind.log_probs] == 4 * 1023 * (3 * 4 + 4 + 4)
    lora = terms(plan(objective=Objective.dpo, micro_batch=2, method=Method.lora))
    # the adapter-disabled reference is the same patched model: the policy's three outputs
    assert lora[TermKind.log_probs] == 4 * 1023 * (3 * 4 + 4 + 3 * 4)
    # TRL's fused LM head (kernels/chunked_logprob.py): the fp32 gradient of the hidden
    # states and the bf16 copy of it the backward returns, one bf16 tile of min(n, 4096) x
    # 32768 (TRL's chunk, whatever the vocabulary), per-token log_z and log-probs, and the
    # lm_head's fp32 gradient accumulator with the bf16 copy the backward returns; never the
    # b x s x V logits (the hidden states and labels it keeps are activations; measured:
    # tests/test_measure_objectives.py)
    n = 4 * 1023
    fused = 2 * n * H + 4 * n * H + 2 * min(n, 4096) * 32768 + 8 * n + (4 + 2) * VOCAB * H
    assert dpo[TermKind.logits] == fused < terms(plan(micro_batch=4))[TermKind.logits]
    # with the full loss (LLaMA-Factory's concatenated_forward): the whole logits of 2b rows
    full = terms(plan(objective=Objective.dpo, micro_batch=2))
    assert full[TermKind.logits] == terms(plan(micro_batch=4))[TermKind.logits]


def test_the_reference_is_sharded_like_the_weights() -> None:
    p = plan(
        objective=Objective.dpo,
        stack=StackName.generic,
        precision=Precision.bf16_mixed,
        strategy=Strategy.zero3,
        hardware=Hardware(gpus_per_node=8),
    )
    assert terms(p)[TermKind.reference_model] == round(2 * P / 8)
    assert terms(p.evolve(strategy=Strategy.zero2))[TermKind.reference_model] == 2 * P


def test_lora_dpo_uses_the_adapter_disabled_base_unless_told_to_copy() -> None:
    lora = plan(objective=Objective.dpo, method=Method.lora)
    assert terms(lora)[TermKind.reference_model] == 0  # use_adapter(model, None)
    copy = lora.evolve(ref_model=RefModel.copy)
    assert terms(copy)[TermKind.reference_model] == 2 * P
    lever = next(v for v in estimate(copy).levers if v.name.startswith("Reference: the adapter"))
    # the copy's weights, less what the adapter-disabled reference's head returns beyond a
    # copy's log_probs (the patched policy's entropy and mean_logits: 8 bytes a token of the
    # 2 x 1023 it scores)
    assert lever.saves_bytes == 2 * P - 8 * 2 * 1023


def test_precomputed_log_probs_drop_the_reference_and_are_a_lever() -> None:
    dpo = plan(objective=Objective.dpo)
    lever = next(v for v in estimate(dpo).levers if v.name == "Precomputed reference log-probs")
    pre = dpo.evolve(precompute_ref_log_probs=True)
    assert terms(pre)[TermKind.reference_model] == 0
    assert lever.saves_bytes == breakdown(dpo).total - breakdown(pre).total > 2 * P


def test_reference_free_preference_losses_keep_no_reference() -> None:
    for objective in (Objective.orpo, Objective.simpo, Objective.cpo):
        t = terms(plan(objective=objective))
        assert t[TermKind.reference_model] == 0
        assert t[TermKind.activations] == terms(plan(micro_batch=2))[TermKind.activations]


def test_reward_model_scores_sequences_without_vocabulary_logits() -> None:
    reward = plan(objective=Objective.reward, micro_batch=2)
    t = terms(reward)
    # b x s x 1 bf16 scores for chosen and rejected (LlamaForSequenceClassification.score)
    assert t[TermKind.logits] == 2 * 1 * 4 * 1024
    assert t[TermKind.reference_model] == 0
    # AutoModelForSequenceClassification: the backbone and a 1 x h score head, no lm_head
    # (measured exact: tests/test_measure_objectives.py)
    assert breakdown(reward).state.weights == 2 * (P - VOCAB * H + H)


def test_all_linear_lora_adapts_the_reward_models_score_head() -> None:
    """PEFT's all-linear leaves out only the output embeddings, which a sequence-
    classification model has none of (peft tuners_utils _maybe_include_all_linear_layers):
    the 1 x h score head gets an adapter, r x h and 1 x r (measured exact:
    tests/test_measure_objectives.py 'reward LoRA')."""
    lora = {"method": Method.lora, "lora_targets": ("all-linear",), "micro_batch": 2}
    reward = breakdown(plan(objective=Objective.reward, **lora)).state
    sft = breakdown(plan(**lora)).state
    r = plan(**lora).lora_rank
    assert reward.trainable - sft.trainable == r * (H + 1)
    named = {"method": Method.lora, "lora_targets": ("q_proj", "v_proj"), "micro_batch": 2}
    assert (
        breakdown(plan(objective=Objective.reward, **named)).state.trainable
        == breakdown(plan(**named)).state.trainable
    )


def test_grpo_keeps_a_reference_only_when_beta_is_not_zero() -> None:
    grpo = plan(objective=Objective.grpo, num_generations=1)
    assert terms(grpo)[TermKind.reference_model] == 0  # GRPOConfig.beta 0.0 (TRL 1.16)
    assert terms(grpo.evolve(beta=0.04))[TermKind.reference_model] == 2 * P
    assert terms(grpo.evolve(beta=0.04, method=Method.lora))[TermKind.reference_model] == 0


def test_grpo_trains_prompt_plus_completion_tokens() -> None:
    grpo = plan(
        objective=Objective.grpo,
        num_generations=1,
        max_prompt_length=256,
        max_completion_length=768,
    )
    assert terms(grpo)[TermKind.activations] == terms(plan())[TermKind.activations]


def test_colocated_vllm_takes_its_share_of_the_card() -> None:
    grpo = plan(objective=Objective.grpo, num_generations=1, vllm_mode=VllmMode.colocate)
    # GRPOConfig.vllm_gpu_memory_utilization 0.3 of the card, rounded up as vLLM requests it
    # (vllm/v1/worker/utils.py request_memory: math.ceil(total_memory x utilization))
    share = math.ceil(0.3 * CARD)
    assert terms(grpo)[TermKind.generator] == share
    report = estimate(grpo)
    generation = next(ph for ph in report.phases if ph.name == "generation")
    assert generation.gpu_bytes >= share + breakdown(grpo).state.total
    # asleep while the trainer steps, awake for the generation phase
    asleep = grpo.evolve(vllm_sleep_mode=True)
    assert terms(asleep)[TermKind.generator] == 0
    assert next(ph for ph in estimate(asleep).phases if ph.name == "generation").gpu_bytes == (
        generation.gpu_bytes
    )
    lever = next(v for v in report.levers if v.name == "vLLM sleep mode")
    assert lever.saves_bytes == share
    server = grpo.evolve(vllm_mode=VllmMode.server)
    assert terms(server)[TermKind.generator] == 0


def test_generate_without_vllm_holds_its_kv_cache_while_generating() -> None:
    grpo = plan(objective=Objective.grpo, num_generations=2, micro_batch=2, grad_accum=2)
    assert terms(grpo)[TermKind.generator] == 0
    generation = next(ph for ph in estimate(grpo).phases if ph.name == "generation")
    # per_device x steps_per_generation = 4 completions of 512 + 512 tokens; bf16 keys and
    # values of 32 layers x 4096 each, and the last position's fp32 logits
    kv = 2 * 4 * 1024 * LAYERS * 2 * H + 4 * 4 * VOCAB
    assert generation.gpu_bytes >= kv + breakdown(grpo).state.total
    assert kv > generation.gpu_bytes - breakdown(grpo).state.total - 2 * 2**30


def test_ppo_trains_a_value_model_beside_a_frozen_reward_model() -> None:
    ppo = plan(objective=Objective.ppo, num_generations=1)
    t = terms(ppo)
    assert t[TermKind.value_model] == breakdown(ppo).state.total
    assert t[TermKind.reward_model] == 2 * P
    assert t[TermKind.reference_model] == 2 * P


@pytest.mark.parametrize(
    ("update", "message"),
    [
        ({"objective": Objective.dpo, "ref_model": RefModel.adapter_disabled}, "needs LoRA"),
        ({"objective": Objective.orpo, "ref_model": RefModel.copy}, "keeps no reference"),
        ({"objective": Objective.grpo, "precompute_ref_log_probs": True}, "for offline objectives"),
        ({"objective": Objective.grpo, "num_generations": 3}, "divisible by num_generations"),
    ],
)
def test_objective_rules_are_one_line_errors(update: dict[str, object], message: str) -> None:
    with pytest.raises((PlanError, ValueError), match=message):
        plan(**update)


def test_objective_through_the_cli_json() -> None:
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "memtui",
            "estimate",
            "--model",
            "meta-llama/Llama-2-7b-hf",
            "--gpus",
            "1",
            "--stack",
            "trainer",
            "--precision",
            "bf16",
            "--objective",
            "grpo",
            "--beta",
            "0.04",
            "--vllm-mode",
            "colocate",
            "--vllm-gpu-memory-utilization",
            "0.4",
            "--num-generations",
            "1",
            "--json",
        ],
        capture_output=True,
        text=True,
        check=True,
    )
    data = json.loads(out.stdout)
    assert data["plan"]["objective"] == "grpo"
    assert data["plan"]["vllm_mode"] == "colocate"
    assert data["per_gpu"]["generator"] == round(0.4 * CARD)
    assert data["per_gpu"]["reference_model"] == 2 * P
    assert "generation" in [ph["name"] for ph in data["phases"]]
