"""Estimator details with published anchors: LoRA adapter counts, QLoRA bytes, 8-bit rules,
units, and the activation formulas of Korthikanti et al. 2022."""

from __future__ import annotations

from dataclasses import fields

import pytest

from memtui.estimator import (
    Attention,
    Checkpointing,
    Hardware,
    Method,
    ModelSpec,
    Optimizer,
    OverheadSettings,
    Plan,
    Strategy,
    estimate,
)
from memtui.estimator.activations import Moment, MomentBytes, Setup, activation_bytes
from memtui.estimator.architecture import Architecture
from memtui.estimator.model_source import load_model
from memtui.estimator.state import (
    frozen_base_bytes,
    optimizer_state_bytes,
    static_state,
    trainable_tensors,
)
from memtui.estimator.units import ceil_div, format_bytes, parse_count, parse_size

LLAMA2_7B = load_model("meta-llama/Llama-2-7b-hf")


def plan(**update) -> Plan:
    return Plan(model=LLAMA2_7B, overhead=OverheadSettings(enabled=False), **update)


@pytest.mark.parametrize(
    ("rank", "targets", "trainable"),
    [
        # PEFT's print_trainable_parameters() for Llama-2-7B.
        (8, ("q_proj", "v_proj"), 4_194_304),
        (16, ("all-linear",), 39_976_960),
        (16, ("attention",), 16_777_216),
    ],
)
def test_lora_adapter_counts_match_peft(rank, targets, trainable):
    p = plan(method=Method.lora, lora_rank=rank, lora_targets=targets)
    assert sum(t.numel * t.count for t in trainable_tensors(p)) == trainable
    report = estimate(p)
    assert report.parameters.trainable == trainable
    assert report.parameters.total == LLAMA2_7B.parameters + trainable


def test_lora_state_is_base_weights_plus_adapter_state():
    p = plan(
        method=Method.lora,
        lora_rank=8,
        lora_targets=("q_proj", "v_proj"),
        strategy=Strategy.ddp,
        hardware=Hardware(gpus_per_node=1),
    )
    s = static_state(p)
    a = 4_194_304
    assert s.weights == 2 * LLAMA2_7B.parameters + 2 * a
    assert (s.gradients, s.master_weights, s.optimizer_states) == (2 * a, 4 * a, 8 * a)


def test_qlora_base_is_nf4_linear_weights_plus_fp32_rest():
    # Llama-2-7B by hand from its config: 32 layers x (4 x 4096^2 + 3 x 4096 x 11008) =
    # 6,476,005,376 linear weights, quantized by bitsandbytes in blocks of 64; embeddings and
    # lm_head (2 x 32000 x 4096) and 65 RMSNorms of 4096 = 262,410,240 stay unquantized.
    # Double quantization (Dettmers et al. 2023, sec. 3): 4-bit codes 3,238,002,688 B, an
    # 8-bit absmax per block 101,187,584 B, an fp32 constant per 256 blocks 1,581,056 B;
    # the rest upcast to fp32 by PEFT: 1,049,640,960 B.
    assert frozen_base_bytes(plan(method=Method.qlora)) == 4_390_412_288
    # Without double quantization the absmax is fp32 (0.5 bit per weight): 3,642,753,024 B;
    # without the upcast the rest stays bf16: 524,820,480 B.
    no_dq = plan(method=Method.qlora, qlora_double_quant=False, qlora_upcast=False)
    assert frozen_base_bytes(no_dq) == 4_167_573_504


def test_eight_bit_adamw_state_of_llama2_7b():
    # bitsandbytes AdamW8bit (Optimizer2State, block-wise): every Llama-2-7B tensor has at
    # least 4,096 elements (min_8bit_size; the RMSNorms have exactly 4096, quantized) and a
    # multiple of 256, so two uint8 moments and two fp32 absmax per 256 elements:
    # 2 x 6,738,415,616 + 2 x 4 x 26,321,936 = 13,687,406,720 B. Tensors under 4,096
    # elements keep fp32 state: test_estimator_hardening.py checks that branch.
    p = plan(optimizer=Optimizer.adamw8bit)
    assert optimizer_state_bytes(p, trainable_tensors(p)) == 13_687_406_720


def test_adafactor_factors_matrices():
    # Shazeer & Stern 2018; transformers' Adafactor (beta1=None): a matrix keeps its row and
    # column sums in fp32, a vector its full second moment. One tiny layer, by hand:
    # embed, lm_head 100 + 64 each; q, k, v, o 64 + 64; gate, up 128 + 64; down 64 + 128;
    # three norms of 64: 328 + 512 + 576 + 192 = 1,608 fp32 values.
    arch = Architecture(
        hidden_size=64, num_layers=1, num_heads=4, intermediate_size=128, vocab_size=100
    )
    p = Plan(model=ModelSpec.from_architecture("tiny", arch), optimizer=Optimizer.adafactor)
    assert optimizer_state_bytes(p, trainable_tensors(p)) == 4 * 1_608


def test_korthikanti_gpt_layer_without_recompute_is_34_plus_5as_over_h():
    # GPT-3 175B-like layer: h = 12288, a = 96, s = 2048, b = 1, no tensor parallelism.
    # Korthikanti et al. Table 2: sbh(34 + 5as/h); measured on top of it (memtui measure):
    # 16 bytes per token for the fp32 mean and rstd of the two LayerNorms.
    h, a, s, b = 12288, 96, 2048, 1
    arch = Architecture(
        hidden_size=h,
        num_layers=1,
        num_heads=a,
        intermediate_size=4 * h,
        vocab_size=50257,
        mlp_kind="plain",
        norm_kind="layernorm",
        # Korthikanti's GPT layer: GeLU, learned positions, dropout 0.1 everywhere, softmax in
        # the activation dtype
        hidden_act="gelu",
        rotary=False,
        attention_dropout=0.1,
        residual_dropout=0.1,
        embedding_dropout=0.1,
        eager_softmax_fp32=False,
    )
    tail = (5 * h + 24) * s * b  # dropout mask, final norm, lm_head input, ids and labels

    def acts(attention: Attention, checkpointing: Checkpointing) -> int:
        # 16-bit activations throughout, as Korthikanti et al. count them
        return activation_bytes(arch, Setup(attention, checkpointing), s, b)

    eager = acts(Attention.eager, Checkpointing.none)
    assert eager - tail == s * b * (34 * h + 16) + 5 * a * s * s * b
    flash = acts(Attention.flash, Checkpointing.none)
    assert flash - tail == s * b * (34 * h + 16) + 4 * a * s * b  # + FlashAttention's fp32 LSE
    selective = acts(Attention.eager, Checkpointing.selective)
    # Selective keeps Korthikanti's 34sbh; with one layer, rebuilding its attention core in
    # backward can cost more than the loss buffers it outlives, so it is a lower bound here.
    assert s * b * (34 * h + 16) <= selective - tail < eager - tail


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("80GB", 80 * 10**9),
        ("80GiB", 80 * 2**30),
        ("81559MiB", 81559 * 2**20),
        ("1.5 TB", 1_500_000_000_000),
        ("123b", 123),
        ("0", 0),
    ],
)
def test_parse_size(text, expected):
    assert parse_size(text) == expected


@pytest.mark.parametrize(
    ("text", "expected"),
    [("13B", 13 * 10**9), ("13e9", 13 * 10**9), ("6.7b", 6_700_000_000), ("125M", 125 * 10**6)],
)
def test_parse_count(text, expected):
    assert parse_count(text) == expected


@pytest.mark.parametrize("bad", ["", "GB", "-5GB", "eighty", "80XB"])
def test_parse_size_rejects_with_a_hint(bad):
    with pytest.raises(ValueError, match=r"not a size|negative"):
        parse_size(bad)


@pytest.mark.parametrize(
    ("text", "said"),
    [
        ("24", "'24' has no unit; say 24GB (10^9 bytes), 24GiB (2^30 bytes) or 24b (bytes)"),
        ("80.5", "'80.5' has no unit; say 80.5GB"),
        ("24G", "'24G' is not a size; say 24GB (10^9 bytes) or 24GiB"),
        ("512 Mi", "'512 Mi' is not a size; say 512MB (10^6 bytes) or 512MiB"),
    ],
)
def test_a_size_without_a_unit_is_refused_never_read_as_bytes(text, said):
    with pytest.raises(ValueError) as err:
        parse_size(text)
    assert str(err.value).startswith(said)


@pytest.mark.parametrize(
    ("text", "key"),
    [("4090", "rtx4090"), ("RTX 4090", "rtx4090"), ("rtx-3090", "rtx3090"), ("A100 40GB",
     "a100-40gb"), ("h100", "h100-sxm"), ("H100_SXM", "h100-sxm")],
)  # fmt: skip
def test_cards_are_named_as_people_write_them(text, key):
    from memtui.estimator.hardware import GPUS, gpu_preset

    assert gpu_preset(text) is GPUS[key]


def test_format_bytes_says_its_unit():
    assert format_bytes(52 * 10**9) == "52.0 GB"
    assert format_bytes(2**30, "GiB", 2) == "1.00 GiB"


def test_ceil_div_rounds_up():
    assert [ceil_div(n, 4) for n in (0, 1, 4, 5, 8)] == [0, 1, 1, 2, 2]


def test_moment_bytes_has_one_field_per_moment_in_order():
    # buffers_beyond compares the moments in this order (the first of equal ones wins)
    assert [moment for moment, _ in MomentBytes().items()] == list(Moment)
    assert [f.name for f in fields(MomentBytes)] == [moment.name for moment in Moment]


def test_offload_moves_master_and_optimizer_state_to_cpu():
    p = plan(offload="optimizer", strategy=Strategy.zero3, hardware=Hardware(gpus_per_node=8))
    s = static_state(p)
    assert s.master_weights == s.optimizer_states == 0
    assert s.cpu_bytes == round((4 + 8 + 4) * LLAMA2_7B.parameters / 8)
    assert estimate(p).budget.cpu_ram == s.cpu_bytes


def test_tensor_parallel_divides_state_and_activations():
    base = plan(strategy=Strategy.ddp, hardware=Hardware(gpus_per_node=8))
    tp2 = base.model_copy(update={"tp": 2})
    assert static_state(tp2).total * 2 == pytest.approx(static_state(base).total, abs=4)
    assert estimate(tp2).budget.term("activations") < estimate(base).budget.term("activations")
