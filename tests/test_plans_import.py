"""Importing a job's own config files (`--from FILE...`): real example configs, written from each
tool's documented format (tests/plans_configs/), import to the plans a user would expect.

Sources of the formats: DeepSpeed's config-json docs and deepspeed/runtime/zero/config.py
(0.19), Transformers' DeepSpeed integration (integrations/deepspeed.py) and TrainingArguments
(training_args.py, 5.24), accelerate's config files (commands/config/config_args.py,
utils/dataclasses.py, 1.15), axolotl's config schema (utils/schemas/), LLaMA-Factory's hparams
(src/llamafactory/hparams/) and torchtune's recipe configs (recipes/configs/).
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

import pytest

from memtui.cli import build_parser
from memtui.commands.plan_flags import plan_and_import
from memtui.estimator import Plan
from memtui.plans.imports import Imported

CONFIGS = Path(__file__).resolve().parent / "plans_configs"


def imported(*argv: str, base: Plan | None = None) -> tuple[Plan, Imported]:
    """The plan of `memtui estimate ARGV` run in tests/plans_configs/."""
    args: argparse.Namespace = build_parser().parse_args(["estimate", *argv])
    plan, found = plan_and_import(args, base)
    assert found is not None
    return plan, found


def value(plan: Plan, dotted: str) -> Any:
    node: Any = plan
    for part in dotted.split("."):
        node = getattr(node, part)
    return getattr(node, "value", node)


@pytest.fixture(autouse=True)
def _in_configs(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(CONFIGS)


EXPECTED: dict[str, dict[str, Any]] = {
    # -- DeepSpeed ------------------------------------------------------------------------
    # Transformers' ZeRO-2 example: every batch key "auto" (kept without the Trainer's
    # arguments), bf16/fp16 "auto", CPU optimizer offload, explicit buckets
    "deepspeed/zero2_auto.json": {
        "stack": "deepspeed",
        "strategy": "zero2",
        "offload": "optimizer",
        "precision": "bf16-mixed",
        "optimizer": "adamw",
        "micro_batch": 1,
        "grad_accum": 1,
        "deepspeed.reduce_bucket_size": 200_000_000,
        "deepspeed.overlap_comm": True,
    },
    # ZeRO-3 offloading both, hidden-size buckets "auto", 256 = 4 x 8 x 8 GPUs
    "deepspeed/zero3_offload.json": {
        "stack": "deepspeed",
        "strategy": "zero3",
        "offload": "params",
        "micro_batch": 4,
        "grad_accum": 8,
        "hardware.gpus": 8,
        "deepspeed.reduce_bucket_size": None,
        "deepspeed.prefetch_bucket_size": None,
        "deepspeed.persistence_threshold": None,
        "deepspeed.max_live_parameters": 10**9,
        "deepspeed.sub_group_size": 10**9,
    },
    # the deprecated keys: "bfloat16", "cpu_offload"; accumulation from the global batch
    "deepspeed/legacy_keys.json": {
        "stack": "deepspeed",
        "strategy": "zero2",
        "offload": "optimizer",
        "precision": "bf16-mixed",
        "micro_batch": 2,
        "grad_accum": 2,
        "deepspeed.overlap_comm": False,
        "deepspeed.reduce_bucket_size": 500_000_000,
    },
    # axolotl's zero3_bf16.json: sizes of 0 are the smallest memtui counts
    "deepspeed/zero3_zero_sizes.json": {
        "strategy": "zero3",
        "deepspeed.max_live_parameters": 1,
        "deepspeed.sub_group_size": 1,
    },
    # Lion from DeepSpeed's own optimizers, fp16 counted as bf16, fp32 gradient accumulation
    "deepspeed/zero1_lion_fp16.json": {
        "stack": "deepspeed",
        "strategy": "zero1",
        "optimizer": "lion",
        "micro_batch": 8,
        "grad_accum": 2,
        "deepspeed.grad_accum_fp32": True,
        "precision": "bf16-mixed",
    },
    # -- accelerate -----------------------------------------------------------------------
    # FSDP1 by default, the integer sharding strategy 1 = FULL_SHARD, parameter offload
    "accelerate/fsdp1_integer_strategy.yaml": {
        "stack": "fsdp1",
        "strategy": "fsdp",
        "offload": "params",
        "precision": "bf16-mixed",
        "hardware.gpus_per_node": 8,
        "hardware.nodes": 1,
    },
    "accelerate/fsdp1_shard_grad_op.yaml": {
        "stack": "fsdp1",
        "strategy": "fsdp-shard-grad-op",
        "checkpointing": "full",
        "precision": "fp32",
        "hardware.gpus_per_node": 8,
        "hardware.nodes": 2,
    },
    # FSDP2: reshard_after_forward false is SHARD_GRAD_OP
    "accelerate/fsdp2.yaml": {
        "stack": "fsdp2",
        "strategy": "fsdp-shard-grad-op",
        "checkpointing": "full",
        "precision": "bf16-mixed",
        "hardware.gpus_per_node": 4,
    },
    # HSDP through the parallelism config: shard inside 8, replicate across 2
    "accelerate/fsdp2_hsdp.yaml": {
        "stack": "fsdp2",
        "strategy": "hsdp",
        "hardware.gpus_per_node": 8,
        "hardware.nodes": 2,
    },
    "accelerate/deepspeed_plugin.yaml": {
        "stack": "deepspeed",
        "strategy": "zero3",
        "offload": "params",
        "grad_accum": 4,
        "hardware.gpus_per_node": 8,
        "hardware.nodes": 2,
        "precision": "bf16-mixed",
    },
    # deepspeed_config_file: the JSON beside it is read too
    "accelerate/deepspeed_file.yaml": {
        "stack": "deepspeed",
        "strategy": "zero3",
        "offload": "params",
        "micro_batch": 4,
        "grad_accum": 8,
        "hardware.gpus": 8,
    },
    # the old top-level `fp16: true`; DDP is the Trainer's stack
    "accelerate/multi_gpu_fp16_legacy.yaml": {
        "stack": "trainer",
        "strategy": "ddp",
        "precision": "bf16-autocast",
        "hardware.gpus_per_node": 2,
    },
    # -- Transformers' Trainer ------------------------------------------------------------
    # a saved TrainingArguments: bf16 without a load dtype is fp32 weights under autocast
    "trainer/training_args.json": {
        "stack": "trainer",
        "strategy": "ddp",
        "micro_batch": 4,
        "grad_accum": 8,
        "checkpointing": "full",
        "optimizer": "paged-adamw8bit",
        "precision": "bf16-autocast",
    },
    # a launch script: torchrun's GPUs, run_clm's arguments fill DeepSpeed's "auto"
    "trainer/launch_deepspeed.sh": {
        "optimizer_kernel": "auto",  # --optim adamw_torch_fused: the stacks' default
        "stack": "deepspeed",
        "strategy": "zero2",
        "offload": "optimizer",
        "micro_batch": 2,
        "grad_accum": 16,
        "seq_len": 2048,
        "checkpointing": "full",
        "hardware.gpus_per_node": 4,
        "hardware.nodes": 1,
        "model.name": "meta-llama/Llama-3.1-8B",
    },
    # TRL's YAML: QLoRA on a bf16-loaded model
    "trainer/sft_qlora.yaml": {
        "optimizer_kernel": "foreach",  # optim: adamw_torch (torch's foreach step)
        "stack": "trainer",
        "method": "qlora",
        "lora_rank": 32,
        "lora_dropout": 0.05,
        "lora_targets": ("all-linear",),
        "precision": "bf16",
        "seq_len": 2048,
        "micro_batch": 8,
        "qlora_double_quant": True,
        "model.name": "mistralai/Mistral-7B-v0.1",
    },
    # the deprecated `fsdp` string with offload, FSDP1 named in fsdp_config
    "trainer/fsdp_legacy.json": {
        "optimizer_kernel": "foreach",
        "stack": "fsdp1",
        "strategy": "fsdp",
        "offload": "params",
        "precision": "bf16-mixed",
        "seq_len": 4096,
        "model.name": "meta-llama/Llama-2-13b-hf",
    },
    # -- axolotl --------------------------------------------------------------------------
    "axolotl/qlora-1b.yml": {
        "stack": "trainer",
        "method": "qlora",
        "lora_rank": 32,
        "optimizer": "adamw8bit",
        "precision": "bf16",
        "micro_batch": 2,
        "grad_accum": 4,
        "seq_len": 2048,
        "checkpointing": "full",
        "model.name": "meta-llama/Llama-3.2-1B",
        "lora_targets": (
            "gate_proj",
            "down_proj",
            "up_proj",
            "q_proj",
            "v_proj",
            "k_proj",
            "o_proj",
        ),
    },
    # FSDP1 with the deprecated `fsdp` list and fsdp_-prefixed keys; Liger's fused loss
    "axolotl/fft-8b-fsdp1.yml": {
        "stack": "fsdp1",
        "strategy": "fsdp",
        "offload": "params",
        "method": "full",
        "loss": "fused",
        "precision": "bf16-mixed",
        "seq_len": 4096,
    },
    # the deprecated global batch_size, a DeepSpeed JSON by path, offloaded checkpointing
    "axolotl/lora-deepspeed.yml": {
        "stack": "deepspeed",
        "strategy": "zero3",
        "method": "lora",
        "grad_accum": 8,
        "micro_batch": 4,
        "optimizer": "paged-adamw8bit",
        "activation_offload": True,
        "modules_to_save": ("embed_tokens", "lm_head"),
    },
    "axolotl/fsdp2-qlora.yml": {
        "stack": "fsdp2",
        "strategy": "fsdp",
        "method": "qlora",
        "offload": "params",
        "model.name": "meta-llama/Llama-3.1-70B",
    },
    # -- LLaMA-Factory --------------------------------------------------------------------
    "llamafactory/llama3_full_sft_ds3.yaml": {
        "stack": "deepspeed",
        "strategy": "zero3",
        "method": "full",
        "checkpointing": "full",
        "micro_batch": 4,
        "grad_accum": 8,
        "seq_len": 2048,
        "model.name": "meta-llama/Meta-Llama-3-8B",
    },
    "llamafactory/qwen_lora_sft.yaml": {
        "stack": "trainer",
        "method": "lora",
        "lora_rank": 8,
        "lora_targets": ("all-linear",),
        "loss": "fused",
        "precision": "bf16",
        "seq_len": 4096,
    },
    "llamafactory/llama2_qlora.yaml": {
        "stack": "trainer",
        "method": "qlora",
        "qlora_double_quant": False,
        "lora_targets": ("q_proj", "v_proj"),
        "modules_to_save": ("lm_head",),
        "checkpointing": "none",
        "attention": "eager",
        "optimizer": "paged-adamw",
    },
    "llamafactory/pure_bf16_full.yaml": {
        "stack": "trainer",
        "method": "full",
        "precision": "bf16",
        "optimizer": "adafactor",
        "activation_offload": True,
        "seq_len": 8192,
    },
    # -- torchtune ------------------------------------------------------------------------
    "torchtune/llama3_1_8B_qlora_single_device.yaml": {
        "stack": "torchtune",
        "method": "qlora",
        "lora_rank": 8,
        "precision": "bf16",
        "loss": "chunked",
        "micro_batch": 2,
        "grad_accum": 8,
        "checkpointing": "full",
        "model.name": "meta-llama/Llama-3.1-8B",
        "optimizer_kernel": "auto",  # fused: True, torchtune's default
        "lora_targets": ("q_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"),
    },
    "torchtune/llama3_1_8B_full.yaml": {
        "stack": "torchtune",
        "method": "full",
        "optimizer": "paged-adamw8bit",
        "optimizer_in_backward": True,
        "activation_offload": True,
        "seq_len": 8192,
    },
    "torchtune/llama2_7B_lora.yaml": {
        "optimizer_kernel": "foreach",  # torch.optim.AdamW without fused: True
        "stack": "torchtune",
        "method": "lora",
        "lora_targets": ("all-linear", "lm_head"),
        "precision": "fp32",
        "offload": "params",
        "loss": "full",
    },
    # a builder memtui has no catalog entry for: the checkpointer's config.json
    "torchtune/qwen2_5_lora_custom.yaml": {
        "stack": "torchtune",
        "method": "lora",
        "lora_targets": ("q_proj", "v_proj"),
        "micro_batch": 8,
        "seq_len": 1024,
    },
}


@pytest.mark.parametrize("path", list(EXPECTED))
def test_example_config_imports_to_the_expected_plan(path: str) -> None:
    plan, found = imported("--from", path)
    for field, expected in EXPECTED[path].items():
        assert value(plan, field) == expected, (field, found.provenance)
    # every field the file decided names the file and key it came from
    assert found.provenance
    assert all(p.source for p in found.provenance)


def test_a_builder_outside_the_catalog_reads_the_checkpointer_config() -> None:
    from memtui.estimator.model_source import load_model

    plan, found = imported("--from", "torchtune/qwen2_5_lora_custom.yaml")
    assert plan.model == load_model(str(CONFIGS / "checkpoints" / "tiny-llama")).model_copy(
        update={"name": plan.model.name}
    )
    assert any("checkpointer.checkpoint_dir" in p.source for p in found.provenance)


def test_flags_win_over_the_files() -> None:
    plan, _ = imported(
        "--from", "deepspeed/zero3_offload.json", "--offload", "none", "--micro-batch", "1",
        "--gpus", "8",
    )  # fmt: skip
    assert plan.offload.value == "none"
    assert plan.micro_batch == 1
    assert plan.strategy.value == "zero3"  # the file's, where no flag says otherwise


def test_a_flag_replaces_an_optimizer_memtui_cannot_size() -> None:
    path = CONFIGS.parent / "plans_configs" / "trainer" / "training_args.json"
    text = path.read_text().replace("paged_adamw_8bit", "ademamix")
    other = Path("/tmp") / f"memtui-ademamix-{id(text)}.json"
    other.write_text(text)
    try:
        plan, _ = imported("--from", str(other), "--optimizer", "adamw")
        assert plan.optimizer.value == "adamw"
    finally:
        other.unlink()


def test_several_files_merge_and_the_trainer_fills_deepspeeds_auto() -> None:
    plan, found = imported("--from", "trainer/training_args.json", "deepspeed/zero2_auto.json")
    assert (plan.stack.value, plan.strategy.value, plan.micro_batch, plan.grad_accum) == (
        "deepspeed", "zero2", 4, 8,
    )  # fmt: skip
    sources = {p.field: p.source for p in found.provenance}
    assert "training_args.json:per_device_train_batch_size" in sources["micro_batch"]
    assert "zero2_auto.json:zero_optimization.stage" in sources["strategy"]


def test_what_had_to_be_assumed_is_said() -> None:
    _, found = imported("--from", "deepspeed/zero2_auto.json")
    said = " ".join(found.assumptions)
    assert "train_micro_batch_size_per_gpu is 'auto'" in said
    assert "name no model" in said
    _, found = imported("--from", "trainer/training_args.json")
    assert any("loaded in" in a for a in found.assumptions)  # the load dtype was not given


def test_a_saved_plan_is_the_base_the_files_go_over(tmp_path: Path) -> None:
    from memtui.estimator.model_source import load_model

    base = Plan(model=load_model("Qwen/Qwen2.5-7B")).evolve(seq_len=1234)
    plan, _ = imported("--from", "deepspeed/zero3_offload.json", base=base)
    assert plan.model.name == "Qwen/Qwen2.5-7B"  # the JSON names no model
    assert plan.seq_len == 1234
    assert plan.strategy.value == "zero3"


def test_estimate_prints_where_each_field_came_from() -> None:
    import subprocess
    import sys

    out = subprocess.run(
        [sys.executable, "-m", "memtui", "estimate", "--from", "accelerate/deepspeed_file.yaml"],
        capture_output=True, text=True, cwd=CONFIGS, check=True,
    )  # fmt: skip
    assert "From accelerate/deepspeed_file.yaml" in out.stdout
    assert "zero3_offload.json" in out.stdout
    assert "zero_optimization.stage" in out.stdout
    assert "assumed:" in out.stdout


def test_estimate_json_carries_the_provenance() -> None:
    import json
    import subprocess
    import sys

    out = subprocess.run(
        [sys.executable, "-m", "memtui", "estimate", "--json", "--from", "axolotl/qlora-1b.yml"],
        capture_output=True, text=True, cwd=CONFIGS, check=True,
    )  # fmt: skip
    doc = json.loads(out.stdout)
    fields = {p["field"]: p for p in doc["provenance"]}
    assert fields["method"] == {
        "field": "method",
        "value": "qlora",
        "source": "axolotl/qlora-1b.yml:adapter",
    }
    assert any("bf16: auto" in a for a in doc["assumptions"])
    assert doc["plan"]["method"] == "qlora"


def _loaded(code: str) -> list[str]:
    import subprocess
    import sys

    probe = f"{code}\nprint(sorted(m for m in {HEAVY!r} if m in sys.modules))\n"
    out = subprocess.run([sys.executable, "-c", f"import sys\n{probe}"], capture_output=True,
                         text=True, check=True, cwd=CONFIGS)  # fmt: skip
    return eval(out.stdout.strip())  # a list literal printed by the probe


HEAVY = ("yaml", "psutil", "textual", "rich", "pynvml", "memtui.telemetry", "memtui.ui")


def test_estimate_json_from_json_files_imports_no_yaml() -> None:
    run = (
        "import io, contextlib\nfrom memtui.cli import main\n"
        "with contextlib.redirect_stdout(io.StringIO()):\n"
        "    main(['estimate', '--json', '--gpus', '8', '--from', 'deepspeed/zero3_offload.json',"
        " 'trainer/training_args.json'])"
    )
    assert _loaded(run) == []
    # files that give no GPU count: NVML counts this node's GPUs, and nothing else is loaded
    assert _loaded(run.replace("'--gpus', '8', ", "")) == ["memtui.telemetry", "pynvml"]


def test_estimate_json_without_from_imports_none_of_the_codecs() -> None:
    run = (
        "import io, contextlib\nfrom memtui.cli import main\n"
        "with contextlib.redirect_stdout(io.StringIO()):\n"
        "    main(['estimate', '--json', '--params', '7B'])\n"
        "assert 'memtui.plans.registry' not in sys.modules"
    )
    assert _loaded(run) == []


def test_the_plans_layer_loads_no_ui_and_reads_processes_only_when_asked() -> None:
    assert _loaded("import memtui.plans.registry, memtui.plans.attach") == []


def test_the_model_a_config_names_goes_through_the_model_loader(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """base_model / model_name_or_path: a folder relative to the launch, or a repo id in the
    offline Hugging Face cache (huggingface_hub's models--org--name/snapshots layout)."""
    tiny = (CONFIGS / "checkpoints" / "tiny-llama" / "config.json").read_text()
    cache = tmp_path / "hub"
    snapshot = cache / "models--acme--tiny" / "snapshots" / "0123abcd"
    snapshot.mkdir(parents=True)
    (snapshot / "config.json").write_text(tiny)
    (cache / "models--acme--tiny" / "refs").mkdir()
    (cache / "models--acme--tiny" / "refs" / "main").write_text("0123abcd")
    monkeypatch.setenv("HF_HUB_CACHE", str(cache))
    folder = tmp_path / "ax.yml"
    folder.write_text("base_model: checkpoints/tiny-llama\nmicro_batch_size: 1\n")
    cached = tmp_path / "lf.yaml"
    cached.write_text("model_name_or_path: acme/tiny\nstage: sft\nfinetuning_type: full\n")
    by_folder, _ = imported("--from", str(folder))
    by_cache, found = imported("--from", str(cached))
    assert by_folder.model.parameters == by_cache.model.parameters
    assert by_folder.model.architecture.hidden_size == 512
    assert by_cache.model.name == "acme/tiny"
    assert any(p.field == "model" and "model_name_or_path" in p.source for p in found.provenance)
