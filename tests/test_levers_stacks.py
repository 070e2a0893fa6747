"""The levers people pull now, each reached as a flag of `memtui estimate --json`: the lever
list's saving is the difference with a re-run that pulls it, and the term it acts on moves
the way and by the amount its library's source says (derived here, not read off memtui).

Llama-2-7B (config.json: hidden 4096, intermediate 11008, 32 layers, vocabulary 32000).
"""

from __future__ import annotations

import json
import math

import pytest

from memtui.cli import main
from memtui.ui.plan_edits import BY_KEY, step

H, INNER, LAYERS, VOCAB = 4096, 11008, 32, 32000
P = LAYERS * (4 * H * H + 3 * H * INNER + 2 * H) + 2 * VOCAB * H + H
MODEL = ["--model", "meta-llama/Llama-2-7b-hf"]


def run(capsys: pytest.CaptureFixture[str], *flags: str) -> dict:
    assert main(["estimate", *MODEL, *flags, "--json"]) == 0
    return json.loads(capsys.readouterr().out)


def lever(report: dict, name: str) -> dict:
    found = [lv for lv in report["levers"] if lv["name"].startswith(name)]
    assert len(found) == 1, [lv["name"] for lv in report["levers"]]
    return found[0]


def pulled(capsys, base: list[str], name: str, flags: list[str]) -> tuple[dict, dict, int]:
    """(the plan's report, the report with the lever's flags, the lever's saving), checking
    the saving is the re-run's difference."""
    before = run(capsys, *base)
    after = run(capsys, *base, *flags)
    saving = lever(before, name)
    assert not saving["applied"]
    assert saving["saves_bytes"] == before["per_gpu"]["total"] - after["per_gpu"]["total"]
    return before, after, saving["saves_bytes"]


TRAINER_LORA = ["--stack", "trainer", "--precision", "bf16", "--gpus", "1", "--method", "lora",
                "--seq-len", "2048", "--micro-batch", "2"]  # fmt: skip
TORCHTUNE = ["--stack", "torchtune", "--precision", "bf16", "--gpus", "1", "--strategy", "ddp",
             "--seq-len", "2048", "--micro-batch", "2", "--checkpointing", "full"]  # fmt: skip


def test_fused_linear_cross_entropy_never_holds_the_logits(capsys):
    # transformers' ForCausalLMLoss upcasts the logits (logits.float()): at least 4 bytes per
    # logit, b s V. Liger's LigerFusedLinearCrossEntropyLoss (ops/fused_linear_cross_entropy.py)
    # computes the logits a chunk of about b s H / V tokens at a time and keeps grad_input
    # (b s H, bf16): of the order of b s H, never b s V
    tokens = 2048 * 2
    before, after, saves = pulled(capsys, TRAINER_LORA, "Fused linear", ["--loss", "fused"])
    assert before["per_gpu"]["logits"] >= 4 * tokens * VOCAB
    assert after["per_gpu"]["logits"] <= 16 * tokens * H
    assert saves > 0


def test_chunked_cross_entropy_upcasts_one_chunk_at_a_time(capsys):
    # torchtune CEWithChunkedOutputLoss (8 chunks): the fp32 log-probs of every chunk
    # (4 B per logit) + one chunk's fp32 and bf16 gradients (4 + 4 + 2 B per logit / 8)
    tokens = 2048 * 2
    before, after, saves = pulled(
        capsys, [*TORCHTUNE, "--loss", "full"], "Chunked", ["--loss", "chunked"]
    )
    assert after["per_gpu"]["logits"] == 4 * tokens * VOCAB + 10 * math.ceil(tokens * VOCAB / 8)
    assert after["per_gpu"]["logits"] < before["per_gpu"]["logits"]
    assert saves > 0


def test_optimizer_in_backward_keeps_one_gradient_at_a_time(capsys):
    # torchtune training/memory.py register_optim_in_bwd_hooks: each parameter is stepped and
    # its gradient freed in its hook; the largest (embedding / lm_head, V x H, bf16) remains
    before, after, _ = pulled(
        capsys, TORCHTUNE, "Optimizer step in backward", ["--optimizer-in-backward"]
    )
    assert before["per_gpu"]["gradients"] == 2 * P
    assert after["per_gpu"]["gradients"] == 2 * VOCAB * H
    assert after["plan"]["optimizer_in_backward"] is True


def test_activation_offloading_moves_layer_inputs_to_pinned_cpu_ram(capsys):
    # torchtune training/_activation_offloading.py OffloadActivations: under activation
    # checkpointing each layer's saved input (b s H, bf16) goes to pinned host memory
    before, after, saves = pulled(
        capsys, TORCHTUNE, "Activation offloading", ["--activation-offload"]
    )
    assert after["cpu_ram_per_gpu"] - before["cpu_ram_per_gpu"] == LAYERS * 2 * 2048 * H * 2
    assert after["per_gpu"]["activations"] < before["per_gpu"]["activations"]
    assert saves > 0


def test_8bit_adamw_and_its_paged_variant(capsys):
    # bitsandbytes optim/optimizer.py Optimizer2State.init_state (8-bit, block-wise): two
    # uint8 states and an fp32 absmax per block of 256 elements; tensors under 4096 elements
    # keep 32-bit state (none in Llama-2-7B: the smallest are the 4096-element norms). Every
    # Llama tensor divides by 256: 2 (P + 4 P / 256) bytes. torch's AdamW over bf16
    # parameters (Trainer, loaded in bf16): 2 bf16 moments, 4 P bytes
    base = ["--stack", "trainer", "--precision", "bf16", "--gpus", "1", "--seq-len", "512"]
    before, after, _ = pulled(capsys, base, "8-bit AdamW", ["--optimizer", "adamw8bit"])
    assert before["per_gpu"]["optimizer_states"] == 4 * P
    state8 = 2 * (P + 4 * P // 256)
    assert after["per_gpu"]["optimizer_states"] == state8
    # paged (cudaMallocManaged, bitsandbytes paged optimizers): the same bytes outside
    # torch's caching allocator: max_memory_allocated no longer counts them, nvidia-smi does
    paged = run(capsys, *base, "--optimizer", "paged-adamw8bit")
    assert paged["per_gpu"]["optimizer_states"] == state8
    assert after["per_gpu"]["allocated"] - paged["per_gpu"]["allocated"] == state8
    assert paged["per_gpu"]["total"] - paged["per_gpu"]["reserved"] > state8


def test_expandable_segments_cut_the_allocators_reserve(capsys):
    base = ["--stack", "fsdp2", "--gpus", "8", "--seq-len", "2048"]
    before, after, saves = pulled(capsys, base, "expandable_segments", ["--expandable-segments"])
    for report, setting in ((before, "fragmentation"), (after, "expandable_fragmentation")):
        per_gpu = report["per_gpu"]
        fraction = report["plan"]["overhead"][setting]
        assert per_gpu["reserved"] - per_gpu["allocated"] == round(fraction * per_gpu["allocated"])
    assert after["plan"]["expandable_segments"] is True
    assert saves > 0


def test_lora_on_lm_head_and_embeddings_add_their_adapters(capsys):
    # PEFT LoRA on lm_head (Linear H -> V) and embed_tokens (Embedding V -> H): r (H + V)
    # parameters each (tuners/lora/layer.py Linear, Embedding)
    flags = ["--stack", "trainer", "--precision", "bf16", "--gpus", "1", "--method", "lora"]
    plain = run(capsys, *flags)["parameters"]["trainable"]
    head = run(capsys, *flags, "--lora-targets", "all-linear,lm_head")["parameters"]["trainable"]
    both = run(capsys, *flags, "--lora-targets", "all-linear,embed_tokens,lm_head")
    assert head - plain == 16 * (H + VOCAB)
    assert both["parameters"]["trainable"] - head == 16 * (VOCAB + H)


def test_modules_to_save_trains_a_full_copy_and_its_lever_swaps_it_for_adapters(capsys):
    # PEFT ModulesToSaveWrapper: a full trainable copy of lm_head, V H parameters; the lever
    # puts LoRA on lm_head instead (its re-run: those flags)
    flags = ["--stack", "trainer", "--precision", "bf16", "--gpus", "1", "--method", "lora"]
    plain = run(capsys, *flags)["parameters"]["trainable"]
    before, after, saves = pulled(
        capsys,
        [*flags, "--modules-to-save", "lm_head"],
        "LoRA on lm_head instead",
        ["--modules-to-save", "", "--lora-targets", "all-linear,lm_head"],
    )
    assert before["parameters"]["trainable"] - plain == VOCAB * H
    assert after["parameters"]["trainable"] - plain == 16 * (H + VOCAB)
    assert saves > 0


@pytest.mark.parametrize(
    ("key", "field", "value"),
    [
        ("loss", "loss", "fused"),
        ("optimizer_in_backward", "optimizer_in_backward", True),
        ("activation_offload", "activation_offload", True),
        ("optimizer", "optimizer", "paged-adamw8bit"),
        ("expandable_segments", "expandable_segments", True),
        ("lora_targets", "lora_targets", ("all-linear", "lm_head")),
        ("lora_targets", "lora_targets", ("all-linear", "embed_tokens", "lm_head")),
        ("modules_to_save", "modules_to_save", ("lm_head",)),
    ],
)
def test_every_lever_is_a_dashboard_setting_that_reaches_its_value(key, field, value):
    from memtui.estimator import Plan
    from memtui.estimator.model_source import load_model

    plan = Plan(model=load_model("meta-llama/Llama-2-7b-hf"), method="lora")
    seen = []
    for _ in range(12):  # every row cycles through its values
        plan = step(plan, key, +1)
        now = getattr(plan, field)
        seen.append(getattr(now, "value", now))
    assert value in seen, (BY_KEY[key].label, seen)
