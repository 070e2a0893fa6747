"""The estimator under hostile and extreme input: inputs that overflowed or were silently wrong, and
the figures no test checked (TP validity and traffic, HSDP across nodes, seconds per step, QLoRA's
gather, paged 8-bit and Lion state, the overhead flags, each lever's saving against a re-run).

Every expected value is hand arithmetic from a config or a published layout, written out as
a number; none is computed with the estimator's own functions or constants."""

from __future__ import annotations

import contextlib
import io
import json
import math
import re

import pytest
from pydantic import ValidationError

from memtui.cli import main
from memtui.estimator import (
    Hardware,
    Method,
    ModelSpec,
    Optimizer,
    OverheadSettings,
    Plan,
    Strategy,
    estimate,
)
from memtui.estimator.architecture import Architecture
from memtui.estimator.catalog import CATALOG, find
from memtui.estimator.configs import ModelConfigError
from memtui.estimator.model_source import load_model
from memtui.estimator.state import optimizer_state_bytes, trainable_tensors
from memtui.estimator.units import format_count, parse_count, parse_size

LLAMA2_7B = load_model("meta-llama/Llama-2-7b-hf")
GPT2 = load_model("openai-community/gpt2")
GB = 10**9


def quiet(**update: object) -> Plan:
    """Llama-2-7B, bf16-mixed AdamW, without the runtime overhead, `update` applied."""
    fields: dict[str, object] = {"model": LLAMA2_7B, "overhead": OverheadSettings(enabled=False)}
    return Plan(**{**fields, **update})  # type: ignore[arg-type]


# -- units ------------------------------------------------------------------------------


@pytest.mark.parametrize("text", ["1e999", "1e400B", "9e308T"])
def test_a_count_past_float_range_is_too_large_not_an_overflow(text: str) -> None:
    with pytest.raises(ValueError, match="too large"):
        parse_count(text)


@pytest.mark.parametrize("text", ["1e999GB", "1e300GB", "1e999"])
def test_a_size_past_float_range_is_too_large_not_an_overflow(text: str) -> None:
    with pytest.raises(ValueError, match="too large"):
        parse_size(text)


@pytest.mark.parametrize(("parse", "text"), [(parse_count, "-7B"), (parse_size, "-80GB")])
def test_a_negative_value_is_said_to_be_negative(parse, text: str) -> None:
    with pytest.raises(ValueError, match="is negative"):
        parse(text)


@pytest.mark.parametrize(
    ("n", "shown"),
    [
        (999_885_952, "1B"),  # 0.999886 billion to 3 significant digits is 1.00 billion
        (999_500, "1M"),
        (999_999_999_999, "1T"),
        (999_949_999, "1B"),
        (998_000_000, "998M"),
        (6_738_415_616, "6.74B"),
        (124_439_808, "124M"),
        (999, "999"),
    ],
)
def test_format_count_rolls_over_to_the_next_unit(n: int, shown: str) -> None:
    assert format_count(n) == shown


# -- upper bounds ---------------------------------------------------------------------


def test_parameters_are_bounded_well_above_any_real_model() -> None:
    assert ModelSpec.from_parameters(10**14).parameters == 10**14  # 100T: accepted
    with pytest.raises(ValidationError, match="above 1e\\+14"):
        ModelSpec.from_parameters(10**30)


def test_a_config_with_an_absurd_hidden_size_names_its_file(tmp_path) -> None:
    config = dict(CATALOG["meta-llama/Llama-2-7b-hf"].config)
    # a multiple of its 32 heads (passes the shape checks) below the reader's 2^53 bound on a
    # config integer: the parameter bound is what refuses it
    config["hidden_size"] = 32 * 10**9
    path = tmp_path / "config.json"
    path.write_text(json.dumps(config))
    with pytest.raises(ModelConfigError, match=f"{path}: parameters: .* above 1e\\+14"):
        load_model(str(path))


@pytest.mark.parametrize(
    "hardware",
    [{"gpu_memory": 2**51}, {"gpus_per_node": 8}],
    ids=["gpu-memory", "control"],
)
def test_gpu_memory_is_bounded(hardware: dict) -> None:
    if "gpu_memory" in hardware:
        with pytest.raises(ValidationError, match="1 PiB"):
            Hardware(**hardware)
    else:
        Hardware(**hardware)


# -- tensor parallelism ---------------------------------------------------------------


@pytest.mark.parametrize(
    ("model", "gpus", "tp", "refused"),
    [
        (GPT2, 8, 8, "attention heads (12)"),  # GPT-2: n_head 12
        (GPT2, 12, 12, None),
        (GPT2, 8, 4, None),
        (LLAMA2_7B, 64, 64, "attention heads (32)"),
        (LLAMA2_7B, 8, 8, None),
        (load_model("meta-llama/Llama-3.1-8B"), 16, 16, "KV heads (8)"),  # 32 heads, 8 KV
        (ModelSpec.from_parameters(7 * 10**9), 8, 8, None),  # a bare count: heads assumed
    ],
)
def test_tp_must_give_each_rank_whole_heads(model, gpus, tp, refused) -> None:
    def make() -> Plan:
        return Plan(model=model, hardware=Hardware(gpus_per_node=gpus), tp=tp)

    if refused:
        message = f"tp ({tp}) must divide the model's {refused}"
        with pytest.raises(ValidationError, match=re.escape(message)):
            make()
    else:
        assert make().tp == tp


def test_tp_communication_is_two_all_reduces_each_way_per_layer() -> None:
    # Llama-2-7B: 32 layers, h = 4096; b = 1, s = 4096, bf16: one b s h buffer is
    # 4096 * 4096 * 2 = 33,554,432 B. Megatron-LM: 2 all-reduces in forward, 2 in backward per
    # layer (Shoeybi et al. 2019, Fig. 4); a ring all-reduce over t = 2 sends 2 (t-1)/t = 1
    # buffer per GPU. 32 * 4 * 33,554,432 = 4,294,967,296 B.
    tp2 = estimate(quiet(tp=2, strategy=Strategy.fsdp)).communication
    assert tp2.tensor_parallel_bytes == 4_294_967_296
    # full recomputation repeats the forward's 2 (Korthikanti et al. 2022): 32 * 6 buffers
    full = estimate(quiet(tp=2, checkpointing="full")).communication
    assert full.tensor_parallel_bytes == 6_442_450_944
    # t = 4: 2 * 3/4 = 1.5 buffers per all-reduce; 2 micro-batches per step double it
    tp4 = estimate(quiet(tp=4, grad_accum=2)).communication
    assert tp4.tensor_parallel_bytes == 2 * 32 * 4 * 1.5 * 33_554_432
    # ... and it is part of the traffic: FSDP over the 4 data-parallel ranks alone is
    # 3/4 (2 * 13.48 GB / 2 + 13.48 GB / 2) = 15.16 GB (weights and gradients split by tp 2)
    weights = 2 * 6_738_415_616 // 2
    assert tp2.bytes_per_gpu_per_step == 3 / 4 * (2 * weights + weights) + 4_294_967_296
    assert estimate(quiet()).communication.tensor_parallel_bytes == 0


# -- communication ---------------------------------------------------------------------


def test_seconds_per_step_is_bytes_over_the_link() -> None:
    # the 13B analysis (docs/references.md): 13B, bf16 gradients 26 GB, DDP over 4 GPUs:
    # 2 * 3/4 * 26 GB = 39 GB per GPU, on NVLink 4's 450 GB/s per direction: 39 / 450 s.
    plan = Plan(
        model=ModelSpec.from_parameters(13 * 10**9),
        hardware=Hardware(gpus_per_node=4, gpu_memory=80 * GB),
        strategy=Strategy.ddp,
    )
    c = estimate(plan).communication
    assert c.bytes_per_gpu_per_step == 39 * GB
    assert c.seconds_per_step == pytest.approx(39 / 450)


def test_hsdp_across_nodes_shards_inside_and_all_reduces_across() -> None:
    # PyTorch HSDP (HYBRID_SHARD): all-gather twice and reduce-scatter inside a node of 8,
    # then the gradient shard (1/8) all-reduced with its replica on the other node.
    # 8B parameters in bf16: weights and gradients 16 GB each.
    # inside: 7/8 * (2 * 16 + 16) GB = 42 GB; across: 2 * 1/2 * 16/8 GB = 2 GB.
    plan = Plan(
        model=ModelSpec.from_parameters(8 * 10**9),
        hardware=Hardware(gpus_per_node=8, nodes=2),
        strategy=Strategy.hsdp,
    )
    c = estimate(plan).communication
    assert c.bytes_per_gpu_per_step == 44 * GB
    assert c.seconds_per_step == pytest.approx(42 / 450 + 2 / 50)  # NVLink 450, IB 50 GB/s


def test_zero3_across_nodes_sends_most_of_its_bytes_inside_the_node() -> None:
    # 8B parameters in bf16 (weights and gradients 16 GB each), ZeRO-3 over 2 nodes x 8:
    # every GPU sends 15/16 (2 x 16 + 16) GB = 45 GB per step. A ring over 16 GPUs has 16
    # links of which 2 (one per node) cross nodes, and NCCL spreads its channels over the
    # node's NICs: 1/8 of each GPU's bytes go over InfiniBand (5.625 GB at 50 GB/s), 7/8
    # over NVLink (39.375 GB at 450 GB/s). Before, all 45 GB were counted across: 0.9 s.
    plan = Plan(
        model=ModelSpec.from_parameters(8 * 10**9),
        hardware=Hardware(gpus_per_node=8, nodes=2),
        strategy=Strategy.zero3,
    )
    c = estimate(plan).communication
    assert c.bytes_per_gpu_per_step == 45 * GB
    assert c.seconds_per_step == pytest.approx(39.375 / 450 + 5.625 / 50)
    assert "GB per GPU per step (inside and across)" in c.detail


def test_zero3_gathers_the_nf4_base_under_qlora() -> None:
    # Llama-2-7B QLoRA, r = 16 on all linears: 39,976,960 adapter parameters (PEFT).
    # The NF4 base (bitsandbytes, blocksize 64, double quant: 8-bit absmax, one fp32 per 256
    # blocks): 6,476,005,376 linear weights -> 3,238,002,688 B of codes + 101,187,584 B of
    # absmax + 395,264 * 4 B = 3,340,771,328 B; the other 262,410,240 parameters upcast to
    # fp32 (PEFT's prepare_model_for_kbit_training): 1,049,640,960 B. Gathered: that base
    # and the bf16 adapter (79,953,920 B) forward and backward, adapter gradients
    # reduce-scattered: 7/8 * (2 * 4,470,366,208 + 79,953,920) over 8 GPUs.
    plan = quiet(method=Method.qlora, strategy=Strategy.zero3)
    c = estimate(plan).communication
    assert c.bytes_per_gpu_per_step == 7 * (2 * 4_470_366_208 + 79_953_920) // 8


# -- optimizers ------------------------------------------------------------------------

TINY = Architecture(
    hidden_size=64, num_layers=1, num_heads=4, intermediate_size=128, vocab_size=100
)
"""One Llama-style layer: q, k, v, o 64x64; gate, up 128x64; down 64x128; three RMSNorm
weights of 64; embeddings and lm_head 100x64 (untied)."""


def test_eight_bit_state_keeps_tensors_under_4096_in_fp32() -> None:
    # bitsandbytes Optimizer2State.init_state: p.numel() < min_8bit_size (4096) keeps two
    # fp32 moments; otherwise two uint8 moments and one fp32 absmax per 256-element block each.
    # norms 3 x 64 (fp32): 3 * 64 * 8 = 1,536
    # q, k, v, o (4096 = not under 4096): 4 * (2 * 4096 + 2 * 16 * 4) = 33,280
    # gate, up, down (8192): 3 * (2 * 8192 + 2 * 32 * 4) = 49,920
    # embed, lm_head (6400: 25 blocks): 2 * (2 * 6400 + 2 * 25 * 4) = 26,000
    plan = Plan(model=ModelSpec.from_architecture("tiny", TINY), optimizer=Optimizer.adamw8bit)
    assert optimizer_state_bytes(plan, trainable_tensors(plan)) == 110_736


def test_adafactor_keeps_row_and_column_sums_of_matrices() -> None:
    # transformers' Adafactor (beta1=None): fp32 exp_avg_sq_row + exp_avg_sq_col for a
    # matrix, a full exp_avg_sq for a vector. Rows + columns: embed, lm_head 164 each;
    # q, k, v, o 128 each; gate, up, down 192 each; norms 3 x 64.
    # 2 * 164 + 4 * 128 + 3 * 192 + 192 = 1,608 elements * 4 B
    plan = Plan(model=ModelSpec.from_architecture("tiny", TINY), optimizer=Optimizer.adafactor)
    assert optimizer_state_bytes(plan, trainable_tensors(plan)) == 6_432


@pytest.mark.parametrize("optimizer", [Optimizer.adamw8bit, Optimizer.paged_adamw8bit])
def test_paged_eight_bit_adamw_has_the_eight_bit_layout(optimizer: Optimizer) -> None:
    # Llama-2-7B: every tensor has a multiple of 256 elements and at least 4096, so the
    # state is 2 * (6,738,415,616 + 4 * 6,738,415,616 / 256) = 13,687,406,720 B. The paged
    # variant (bitsandbytes PagedAdamW8bit) keeps the same tensors in managed memory.
    plan = quiet(optimizer=optimizer, strategy=Strategy.ddp, hardware=Hardware(gpus_per_node=1))
    report = estimate(plan)
    assert report.budget.term("optimizer_states") == 13_687_406_720
    paged = any("managed memory" in line for line in report.assumptions)
    assert paged == (optimizer is Optimizer.paged_adamw8bit)


def test_lion_keeps_one_fp32_moment() -> None:
    # Lion (Chen et al. 2023) keeps only the momentum, beside fp32 master weights: 4 B/param
    plan = quiet(
        optimizer=Optimizer.lion, strategy=Strategy.ddp, hardware=Hardware(gpus_per_node=1)
    )
    assert estimate(plan).budget.term("optimizer_states") == 4 * 6_738_415_616


# -- LoRA fraction, catalog search -------------------------------------------------------


def test_a_lora_fraction_below_one_parameter_is_refused() -> None:
    bare = ModelSpec.from_parameters(7 * 10**9)
    with pytest.raises(ValidationError, match="not one adapter parameter"):
        Plan(model=bare, method=Method.lora, lora_fraction=1e-300)
    plan = Plan(model=bare, method=Method.lora, lora_fraction=1 / 7e9)
    assert estimate(plan).parameters.trainable == 1


def test_a_search_of_punctuation_matches_nothing() -> None:
    assert find("!!!") == []
    assert len(find("")) == len(find("   ")) == len(CATALOG)


# -- the CLI: overhead flags, offload params, levers against a re-run ------------------


def run_json(*flags: str) -> dict:
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        assert main(["estimate", *flags, "--json"]) == 0
    return json.loads(out.getvalue())


def runtime_lines(doc: dict) -> dict[str, int]:
    return {line["name"]: line["bytes"] for line in doc["runtime"]}


def test_overhead_terms_are_on_by_default_and_each_flag_sets_its_own() -> None:
    base = ("--params", "1B", "--gpus", "2")
    default = run_json(*base)
    lines = runtime_lines(default)
    # PyTorch's cuBLAS workspace on Hopper: CUBLAS_WORKSPACE_CONFIG :4096:8 (32 MiB)
    assert lines["cuBLAS workspace"] == 4096 * 1024 * 8
    assert lines["CUDA context"] > 0 and lines["NCCL buffers"] > 0
    per_gpu = default["per_gpu"]
    assert lines["allocator reserve"] == round(0.10 * per_gpu["allocated"])  # --fragmentation
    assert per_gpu["total"] == (per_gpu["reserved"] + lines["CUDA context"] + lines["NCCL buffers"])
    changed = runtime_lines(
        run_json(
            *base, "--cuda-context", "300MB", "--nccl-buffers", "2GB", "--fragmentation", "0.25"
        )
    )
    assert (changed["CUDA context"], changed["NCCL buffers"]) == (300 * 10**6, 2 * GB)
    assert changed["allocator reserve"] == round(0.25 * per_gpu["allocated"])
    one_gpu = runtime_lines(run_json("--params", "1B", "--gpus", "1"))
    assert one_gpu.get("NCCL buffers", 0) == 0  # no communicator on one GPU
    none = run_json(*base, "--overhead", "none")
    assert none["runtime"] == [] and none["per_gpu"]["total"] == none["per_gpu"]["allocated"]


def test_offload_params_moves_the_whole_state_and_rules_out_unsharded_strategies() -> None:
    # ZeRO-Infinity / FSDP CPUOffload: parameters, gradients and optimizer state in CPU RAM;
    # 7B bf16-mixed AdamW: 16 B/param = 112 GB of pinned state over 8 GPUs of a node.
    doc = run_json("--params", "7B", "--strategy", "zero3", "--offload", "params",
                   "--overhead", "none", "--stack", "generic")  # fmt: skip
    assert doc["per_gpu"]["static"] == 0
    assert doc["cpu_ram_per_node"] >= 112 * GB
    rows = doc["strategies"]
    assert {name for name, row in rows.items() if not row["applicable"]} == {
        "ddp", "zero1", "zero2", "fsdp-shard-grad-op"
    }  # fmt: skip
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        main(["estimate", "--params", "7B", "--strategy", "zero3", "--offload", "params",
              "--stack", "generic"])  # fmt: skip
    table = out.getvalue()
    ddp_row = next(line for line in table.splitlines() if line.startswith("│ ddp "))
    assert "n/a" in ddp_row and "yes" not in ddp_row and "no" not in ddp_row.split("│")[5]
    assert "n/a (ddp, zero1, zero2, fsdp-shard-grad-op): parameter offload needs" in table


LEVER_FLAGS = {
    "Activation checkpointing (full)": ("--checkpointing", "full"),
    "Fused linear cross-entropy": ("--loss", "fused"),
    "Activation offloading": ("--activation-offload", "--checkpointing", "full"),
    "Sequence 4096 -> 2048 (or packing)": ("--seq-len", "2048"),
    "expandable_segments": ("--expandable-segments",),
    "Optimizer step in backward": ("--optimizer-in-backward",),
    "CPU offload of optimizer state": ("--offload", "optimizer"),
    "Shard further (zero3)": ("--strategy", "zero3"),
    "8-bit AdamW": ("--optimizer", "adamw8bit"),
    "LoRA": ("--method", "lora"),
    "QLoRA": ("--method", "qlora"),
    "Micro-batch 4 -> 2, accumulate x2": ("--micro-batch", "2", "--grad-accum", "2"),
}


def test_each_levers_saving_is_what_a_re_run_with_it_pulled_saves() -> None:
    base = ("--model", "meta-llama/Llama-3.2-1B", "--strategy", "zero2", "--micro-batch", "4",
            "--seq-len", "4096", "--attention", "flash", "--stack", "generic")  # fmt: skip
    doc = run_json(*base)
    before = doc["per_gpu"]["total"]
    pending = {lever["name"]: lever["saves_bytes"] for lever in doc["levers"]
               if not lever["applied"]}  # fmt: skip
    assert set(pending) == set(LEVER_FLAGS), set(pending) ^ set(LEVER_FLAGS)
    for name, flags in LEVER_FLAGS.items():
        after = run_json(*base, *flags)["per_gpu"]["total"]
        assert pending[name] == max(0, before - after), name
    assert math.isfinite(before)
