"""torchtune 0.1.x (April 2024) as its published README runs ran it: the LoRA builders' dropout
and what it keeps without checkpointing (benchmarks/published.py's tt-readme-2404 rows)."""

from __future__ import annotations

from pathlib import Path

from benchmark_modules import load_benchmark

from memtui.commands.plan_flags import plan_and_import
from memtui.estimator import estimate
from memtui.estimator.plan import Plan
from memtui.estimator.terms import TermKind

ROOT = Path(__file__).resolve().parent.parent
FSDP_LORA = "tt-readme-2404-llama2-7b-lora-2x4090-fsdp"


published = load_benchmark("published")


def plan_of(flags: str) -> Plan:
    args = published.build_parser().parse_args(["estimate", *flags.split()])
    plan: Plan = published.plan_from_args(args)
    return plan


def activations(plan: Plan) -> int:
    terms = {t.key: t.bytes for t in estimate(plan).budget.terms}
    return terms[TermKind.activations]


def test_every_torchtune_01_adapter_run_drops_out_its_input_as_the_builder_did():
    # lora_llama2_7b(lora_dropout=0.05) in v0.1.0-v0.2.1 (0.0 from v0.3.0); the configs the
    # runs name leave it unset, so each of their plans must carry the builder's 0.05
    runs = [
        r
        for r in published.RUNS
        if "--torchtune-version 0.1" in r.flags and ("lora " in r.flags or "qlora " in r.flags)
    ]
    assert len(runs) >= 7
    for run in runs:
        assert plan_of(run.flags).lora_dropout == 0.05, run.id


def test_dropout_makes_each_adapted_projection_keep_its_own_dropped_input():
    # LoRALinear.forward (torchtune/modules/peft/lora.py v0.1.x): `self.lora_a(self.dropout(x))`
    # per projection: without dropout q's and v's lora_a share the normed input the layer
    # keeps (2 bytes per element); with it each keeps its dropped copy (2) and the dropout's
    # 1-byte mask: 2 x 3 - 2 = 4 bytes per hidden element per token per layer
    run = next(r for r in published.RUNS if r.id == FSDP_LORA)
    with_dropout = plan_of(run.flags)
    without = with_dropout.evolve(lora_dropout=0.0)
    arch = with_dropout.model.architecture
    tokens = with_dropout.micro_batch * with_dropout.seq_len
    expected = 4 * arch.hidden_size * tokens * arch.num_layers
    assert activations(with_dropout) - activations(without) == expected
    # and the plan is the README's: no checkpointing, two GPUs, batch 2 of at most 512 tokens
    assert with_dropout.checkpointing.value == "none"
    assert (with_dropout.hardware.gpus, with_dropout.micro_batch, with_dropout.seq_len) == (
        2,
        2,
        512,
    )


def test_a_config_without_lora_dropout_says_which_builder_default_it_took(tmp_path):
    # torchtune 0.1's recipes/configs/llama2/7B_lora.yaml (fef3ed10d) sets no lora_dropout:
    # the builder decides, 0.05 before v0.3.0 and 0.0 since; the file alone cannot say which
    config = tmp_path / "7B_lora.yaml"
    config.write_text(
        "model:\n"
        "  _component_: torchtune.models.llama2.lora_llama2_7b\n"
        "  lora_attn_modules: ['q_proj', 'v_proj']\n"
        "  lora_rank: 8\n"
        "batch_size: 2\n"
        "dtype: bf16\n",
        encoding="utf-8",
    )
    args = published.build_parser().parse_args(["estimate", "--from", str(config)])
    plan, found = plan_and_import(args, None)
    assert plan.lora_dropout == 0.0
    assert found is not None
    (said,) = [a for a in found.assumptions if "lora_dropout" in a]
    assert "0.05 before" in said and "--lora-dropout 0.05" in said
    origin = next(p for p in found.provenance if p.field == "lora_dropout")
    assert origin.source.endswith("model.lora_dropout (default)")
    # the flag wins over the builder's default
    args = published.build_parser().parse_args(
        ["estimate", "--from", str(config), "--lora-dropout", "0.05"]
    )
    assert plan_and_import(args, None)[0].lora_dropout == 0.05
