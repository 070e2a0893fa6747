"""FSDP1 (accelerate + Trainer) under LoRA and QLoRA: what the gathered units weigh and what
the backward holds when transformers checkpoints around each FSDP unit.

Expectations are derived here from the sources named beside them (Llama-2's config.json, the
CPU replay recorded in memtui/estimator/stacks/fsdp1.py) and from fms-acceleration's published
A100 figures (scripts/benchmarks/refs/a100_80gb.csv), never from memtui's constants.
"""

from __future__ import annotations

import pytest

from memtui.cli import build_parser
from memtui.commands.plan_flags import plan_from_args
from memtui.estimator import (
    Checkpointing,
    Hardware,
    Method,
    OverheadSettings,
    Plan,
    Precision,
    StackName,
    Strategy,
    estimate,
)
from memtui.estimator.model_source import load_model
from memtui.estimator.stacks.fsdp1 import FSDP1, packed_layer_bytes, retained_grads
from memtui.estimator.stacks.fsdp2 import unit_buffers
from memtui.estimator.versions import PackageVersion, Versions

LLAMA2_7B = load_model("meta-llama/Llama-2-7b-hf")
# meta-llama/Llama-2-7b-hf config.json
H, INNER, LAYERS, VOCAB = 4096, 11008, 32, 32000
LINEARS = 4 * H * H + 3 * H * INNER  # q, k, v, o; gate, up, down
LAYER = LINEARS + 2 * H  # and the two RMSNorm weights
ROOT = 2 * VOCAB * H + H  # embed_tokens, lm_head, the final norm
S, B = 4096, 4


def plan(transformers: str | None = "4.44.2", **update: object) -> Plan:
    versions = Versions(
        transformers=None
        if transformers is None
        else PackageVersion(version=transformers, source="a test")
    )
    fields: dict[str, object] = {
        "model": LLAMA2_7B,
        "hardware": Hardware(gpus_per_node=2),
        "overhead": OverheadSettings(enabled=False),
        "stack": StackName.fsdp1,
        "strategy": Strategy.fsdp,
        "method": Method.lora,
        "precision": Precision.bf16_mixed,
        "checkpointing": Checkpointing.full,
        "seq_len": S,
        "micro_batch": B,
        "versions": versions,
        **update,
    }
    return Plan(**fields)  # type: ignore[arg-type]


def held(p: Plan) -> int:
    return retained_grads(p, FSDP1.setup(p))


def test_the_reshard_only_hooks_hold_one_hidden_state_per_layer_before_transformers_4_52() -> None:
    # the CPU replay: L x b x s x h in the compute dtype (bf16) above the same step whose
    # checkpoint runs inside the unit
    expected = LAYERS * B * S * H * 2
    assert held(plan("4.44.2")) == expected
    assert held(plan("4.51.3")) == expected  # LlamaModel.forward still checkpoints the unit
    assert held(plan("4.39.3", method=Method.qlora)) == expected
    # 4.52 checkpoints inside the layer's own call (GradientCheckpointingLayer)
    assert held(plan("4.52.1")) == 0
    assert held(plan(None)) == 0  # not given: the release the stacks were read from


@pytest.mark.parametrize(
    "update",
    [
        {"method": Method.full},  # every unit trains: no reshard-only hook
        {"hardware": Hardware(gpus_per_node=1)},  # one process: accelerate runs no FSDP
        {"checkpointing": Checkpointing.none},  # nothing recomputed around the unit
    ],
)
def test_no_hook_holds_anything_outside_that_setting(update: dict[str, object]) -> None:
    assert held(plan("4.44.2", **update)) == 0


def test_the_held_gradients_raise_the_peak_only_under_the_old_placement() -> None:
    old, new = estimate(plan("4.51.3")).budget, estimate(plan("4.52.1")).budget
    # no other rule of the model's code changes between these two releases
    extra = old.allocated - new.allocated
    assert 0 < extra <= LAYERS * B * S * H * 2


def test_a_qlora_unit_gathers_its_4_bit_codes() -> None:
    p = plan("4.44.2", method=Method.qlora)
    # bitsandbytes Params4bit packs 4 bits a weight into the quant_storage dtype; the norms
    # stay bf16 (transformers' get_keys_to_not_convert)
    expected = 2 * (LAYER - LINEARS) + LINEARS / 2
    assert packed_layer_bytes(p) == pytest.approx(expected, rel=1e-3)
    assert packed_layer_bytes(plan("4.44.2")) is None  # LoRA: the bf16 weights themselves
    state = FSDP1.static_state(p, Strategy.fsdp)
    packed, _ = unit_buffers(p, Strategy.fsdp, state, 2, 2, packed_layer_bytes(p))
    whole, _ = unit_buffers(p, Strategy.fsdp, state, 2, 2)
    # two layers in flight, each 2 B a weight less for the quantized linears' 3.5 B saved
    assert whole - packed == pytest.approx(2 * (2 * LINEARS - LINEARS / 2), rel=1e-3)


FMS = (
    "--stack fsdp1 --gpus 2 --strategy fsdp --model meta-llama/Llama-2-70b-hf "
    "--precision bf16-mixed --attention flash --checkpointing full --seq-len 4096 "
    "--gpu-memory a100-80gb --optimizer adamw --optimizer-kernel foreach --torch-version 2.4.0 "
    "--transformers-version 4.43.3 --peft-version 0.12.0 --accelerate-version 0.33.0 "
    "--trl-version 0.9.6 --bitsandbytes-version 0.43.2 --method qlora --lora-rank 16 "
    "--lora-targets q_proj,k_proj,v_proj,o_proj --lora-dropout 0.1 --no-kbit-upcast"
)


@pytest.mark.parametrize(
    ("micro_batch", "measured"),
    # fms-acceleration scripts/benchmarks/refs/a100_80gb.csv @b6c1455bf, accelerated-peft-bnb
    # NousResearch/Llama-2-70b-hf, num_gpus 2: mem_peak_torch_mem_alloc_in_bytes
    [(2, 46685150208), (4, 72626134016)],
)
def test_the_published_70b_fsdp_qlora_peaks_are_not_under_predicted(
    micro_batch: int, measured: int
) -> None:
    flags = f"{FMS} --micro-batch {micro_batch}"
    p = plan_from_args(build_parser().parse_args(["estimate", *flags.split()]))
    allocated = estimate(p).budget.allocated
    assert measured <= allocated <= 1.1 * measured
