"""Export (`memtui export --format F`): every format round-trips (importing the exported file
gives the same plan), the files pass their tools' own validation where the library checks
them on CPU (accelerate's launch path, Transformers' DeepSpeed integration + DeepSpeed's
config parser, HfArgumentParser), and files are written atomically, never over an existing
one without --force."""

from __future__ import annotations

import json
import types
from pathlib import Path
from typing import Any

import pytest

from memtui.cli import build_parser, main
from memtui.commands.plan_flags import plan_and_import
from memtui.estimator import Plan
from memtui.estimator.model_source import load_model
from memtui.plans.facts import ConfigError
from memtui.plans.formats import FORMATS

_MODELS: dict[str, Any] = {}


def plan(model: str = "meta-llama/Llama-3.1-8B", **changes: Any) -> Plan:
    if model not in _MODELS:
        _MODELS[model] = load_model(model)
    return Plan(model=_MODELS[model]).evolve(**changes)


ROUND_TRIPS: dict[str, list[Plan]] = {
    "deepspeed": [
        plan(stack="deepspeed", strategy="zero3", offload="params", micro_batch=2, grad_accum=8),
        plan(stack="deepspeed", strategy="zero2", offload="optimizer", optimizer="adamw8bit",
             hardware={"gpus_per_node": 4, "nodes": 2}, deepspeed={"overlap_comm": True,
             "reduce_bucket_size": 200_000_000}),
        plan(stack="deepspeed", strategy="zero1", optimizer="lion",
             deepspeed={"grad_accum_fp32": True}, micro_batch=4, grad_accum=2),
        plan(stack="deepspeed", strategy="zero3", deepspeed={"prefetch_bucket_size": 1000,
             "persistence_threshold": 10, "max_live_parameters": 10**8, "sub_group_size": 10**8}),
    ],
    "accelerate": [
        plan(stack="fsdp2", strategy="fsdp", offload="params", checkpointing="full",
             activation_offload=True),
        plan(stack="fsdp2", strategy="hsdp", hardware={"gpus_per_node": 8, "nodes": 2}),
        plan(stack="fsdp2", strategy="fsdp-shard-grad-op", precision="bf16"),
        plan(stack="fsdp1", strategy="hsdp", hardware={"nodes": 4}),
        plan(stack="fsdp1", strategy="fsdp-shard-grad-op", precision="fp32"),
        plan(stack="trainer", strategy="ddp", precision="bf16-autocast"),
        plan(stack="trainer", strategy="ddp", precision="bf16", hardware={"gpus_per_node": 1}),
        plan(stack="deepspeed", strategy="zero3", offload="params", grad_accum=4,
             hardware={"nodes": 2}),
    ],
    "trainer-args": [
        plan(stack="trainer", strategy="ddp", precision="bf16", optimizer_kernel="foreach"),
        plan(stack="trainer", strategy="ddp", precision="bf16-autocast", micro_batch=4,
             grad_accum=8, checkpointing="full", optimizer="paged-adamw8bit", seq_len=2048),
        plan(model="mistralai/Mistral-7B-v0.1", stack="trainer", strategy="ddp",
             precision="bf16", method="qlora", lora_rank=32, lora_dropout=0.05,
             qlora_double_quant=False, modules_to_save=("lm_head",), loss="fused"),
        plan(stack="trainer", strategy="ddp", precision="fp32", method="lora",
             lora_targets=("q_proj", "v_proj"), optimizer="sgd-momentum", attention="eager",
             checkpointing="full", activation_offload=True),
        plan(stack="fsdp2", strategy="fsdp-shard-grad-op", optimizer="adafactor"),
        plan(stack="fsdp1", strategy="fsdp", precision="bf16"),
        plan(stack="deepspeed", strategy="zero3", offload="optimizer", micro_batch=2),
    ],
    "axolotl": [
        plan(model="meta-llama/Llama-3.2-1B", stack="trainer", strategy="ddp", precision="bf16",
             method="qlora", lora_rank=32, lora_dropout=0.05, optimizer="adamw8bit",
             checkpointing="full", seq_len=2048, micro_batch=2, grad_accum=4),
        plan(stack="deepspeed", strategy="zero3", method="lora", lora_rank=16,
             modules_to_save=("embed_tokens", "lm_head"), optimizer="paged-adamw8bit",
             checkpointing="full", activation_offload=True),
        plan(stack="fsdp1", strategy="fsdp-shard-grad-op", loss="fused"),
        plan(stack="fsdp2", strategy="hsdp", hardware={"nodes": 2}, precision="bf16",
             attention="eager"),
        plan(stack="trainer", strategy="ddp", precision="fp32", optimizer="lion"),
    ],
    "torchtune": [
        plan(stack="torchtune", strategy="fsdp", precision="bf16", optimizer_kernel="foreach"),
        plan(stack="torchtune", strategy="ddp", hardware={"gpus_per_node": 1}, precision="bf16",
             method="qlora", lora_rank=8, lora_targets=("q_proj", "v_proj", "o_proj",
             "gate_proj", "up_proj", "down_proj"), loss="chunked", checkpointing="full",
             micro_batch=2, grad_accum=8),
        plan(stack="torchtune", strategy="fsdp", precision="bf16", optimizer="paged-adamw8bit",
             optimizer_in_backward=True, checkpointing="full", activation_offload=True,
             seq_len=8192),
        plan(model="meta-llama/Llama-2-7b-hf", stack="torchtune", strategy="fsdp",
             method="lora", lora_targets=("all-linear", "lm_head"), precision="fp32",
             offload="params", loss="full", lora_dropout=0.05),
        plan(model="Qwen/Qwen2.5-7B", stack="torchtune", strategy="fsdp", precision="bf16",
             method="lora", lora_targets=("attention",), optimizer="sgd-momentum"),
    ],
}  # fmt: skip


def reimport(path: Path, base: Plan | None) -> Plan:
    args = build_parser().parse_args(["estimate", "--from", str(path)])
    return plan_and_import(args, base)[0]


def written(tmp_path: Path, fmt: str, p: Plan, index: int = 0) -> Path:
    path = tmp_path / f"exported-{index}{FORMATS[fmt].suffix}"
    path.write_text(FORMATS[fmt].export(p))
    return path


CASES = [(fmt, i) for fmt, plans in ROUND_TRIPS.items() for i in range(len(plans))]


@pytest.mark.parametrize(("fmt", "index"), CASES)
def test_import_of_export_is_the_same_plan(tmp_path: Path, fmt: str, index: int) -> None:
    original = ROUND_TRIPS[fmt][index]
    path = written(tmp_path, fmt, original, index)
    assert reimport(path, original) == original


# what each format carries on its own, over memtui's defaults (the rest is the launch's)
CARRIED = {
    "deepspeed": ("stack", "strategy", "offload", "precision", "micro_batch", "grad_accum"),
    # (the dtype the script loads the model in is not an accelerate setting)
    "accelerate": ("stack", "strategy", "offload", "checkpointing", "hardware"),
    "trainer-args": ("stack", "model", "method", "precision", "micro_batch", "grad_accum",
                     "seq_len", "checkpointing", "optimizer", "lora_rank", "lora_targets"),
    "axolotl": ("stack", "model", "method", "micro_batch", "grad_accum", "seq_len",
                "checkpointing", "optimizer", "lora_rank", "offload"),
    "torchtune": ("stack", "model", "method", "precision", "micro_batch", "grad_accum",
                  "seq_len", "optimizer", "checkpointing", "loss", "lora_targets"),
}  # fmt: skip


@pytest.mark.parametrize(("fmt", "index"), CASES)
def test_a_format_alone_carries_its_fields(tmp_path: Path, fmt: str, index: int) -> None:
    original = ROUND_TRIPS[fmt][index]
    path = written(tmp_path, fmt, original, index)
    got = reimport(path, None)
    for field in CARRIED[fmt]:
        if field == "hardware":
            assert got.hardware.gpus == original.hardware.gpus
        else:
            assert getattr(got, field) == getattr(original, field), field


def test_a_stack_a_format_cannot_launch_is_one_line() -> None:
    with pytest.raises(ConfigError, match="stack is fsdp2"):
        FORMATS["deepspeed"].export(plan(stack="fsdp2"))
    with pytest.raises(ConfigError, match="no builder for"):
        FORMATS["torchtune"].export(
            plan(model="openai-community/gpt2", stack="torchtune", precision="bf16")
        )
    with pytest.raises(ConfigError, match="bf16-autocast"):
        FORMATS["axolotl"].export(plan(stack="trainer", strategy="ddp", precision="bf16-autocast"))


# -- the tools' own validation ----------------------------------------------------------------


@pytest.mark.parametrize("index", range(len(ROUND_TRIPS["accelerate"])))
def test_accelerate_launch_accepts_the_exported_config(
    tmp_path: Path, index: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """accelerate's own launch path: load the file, validate it as `accelerate launch` does,
    build the workers' environment and the plugin each worker builds from it."""
    pytest.importorskip("accelerate")
    from accelerate.commands.config.config_args import load_config_from_file
    from accelerate.commands.launch import _validate_launch_command, launch_command_parser
    from accelerate.utils.launch import prepare_deepspeed_cmd_env, prepare_multi_gpu_env

    original = ROUND_TRIPS["accelerate"][index]
    path = written(tmp_path, "accelerate", original, index)
    config = load_config_from_file(str(path))
    assert config.num_processes == original.hardware.gpus
    args = launch_command_parser().parse_args(["--config_file", str(path), "train.py"])
    args, defaults, _ = _validate_launch_command(args)
    if original.stack.value == "deepspeed":
        # accelerate's launch_command does this before preparing the DeepSpeed launch
        fields = [*defaults.deepspeed_config, "mixed_precision"]
        args.deepspeed_fields_from_accelerate_config = ",".join(fields)
        _, env = prepare_deepspeed_cmd_env(args)
    else:
        env = prepare_multi_gpu_env(args)
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    # FSDP1's sync_module_states (which cpu_ram_efficient_loading turns on) asks the current
    # GPU for its index: there is none here
    monkeypatch.setenv("FSDP_SYNC_MODULE_STATES", "false")
    monkeypatch.setenv("FSDP_CPU_RAM_EFFICIENT_LOADING", "false")
    if original.stack.value.startswith("fsdp"):
        from accelerate.utils import FullyShardedDataParallelPlugin

        fsdp = FullyShardedDataParallelPlugin()
        assert fsdp.fsdp_version == (2 if original.stack.value == "fsdp2" else 1)
        assert bool(fsdp.activation_checkpointing) == (original.checkpointing.value == "full")
    elif original.stack.value == "deepspeed":
        from accelerate.utils import DeepSpeedPlugin

        ds = DeepSpeedPlugin()
        assert ds.zero_stage == int(original.strategy.value[-1])
        assert ds.gradient_accumulation_steps == original.grad_accum


@pytest.mark.parametrize("index", range(len(ROUND_TRIPS["deepspeed"])))
def test_deepspeed_parses_the_exported_config(
    tmp_path: Path, index: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Transformers fills the "auto" values from the Trainer's arguments and the model's
    hidden size (HfTrainerDeepSpeedConfig), then DeepSpeed's own DeepSpeedConfig parses it
    and checks the batch against the data-parallel size."""
    pytest.importorskip("deepspeed")
    import deepspeed.runtime.config as ds_config
    from transformers import TrainingArguments
    from transformers.integrations.deepspeed import HfTrainerDeepSpeedConfig

    original = ROUND_TRIPS["deepspeed"][index]
    path = written(tmp_path, "deepspeed", original, index)

    class Args(TrainingArguments):
        @property
        def world_size(self) -> int:  # the job's, not this process's
            return original.data_parallel

    args = Args(
        output_dir=str(tmp_path / "out"),
        per_device_train_batch_size=original.micro_batch,
        gradient_accumulation_steps=original.grad_accum,
        bf16=True,
        use_cpu=True,
    )
    hf = HfTrainerDeepSpeedConfig(str(path))
    hf.trainer_config_process(args)  # raises on any value that mismatches the Trainer's
    hidden = original.model.architecture.hidden_size
    hf.trainer_config_finalize(args, types.SimpleNamespace(
        config=types.SimpleNamespace(hidden_size=hidden)), 100)  # fmt: skip

    class DataParallel:  # DeepSpeed's mpu interface: only the data-parallel size is asked
        def get_data_parallel_world_size(self) -> int:
            return original.data_parallel

    monkeypatch.setattr(ds_config.dist, "get_rank", lambda: 0)  # no process group here
    parsed = ds_config.DeepSpeedConfig(hf.config, mpu=DataParallel())
    assert parsed.zero_optimization_stage == int(original.strategy.value[-1])
    assert parsed.train_batch_size == (
        original.micro_batch * original.grad_accum * original.data_parallel
    )
    assert parsed.bfloat16_config.enabled
    zero = parsed.zero_config
    assert (zero.offload_optimizer is not None) == (original.offload.value != "none")
    assert zero.reduce_bucket_size == (original.deepspeed.reduce_bucket_size or hidden**2)


@pytest.mark.parametrize("index", range(len(ROUND_TRIPS["trainer-args"])))
def test_transformers_parses_the_exported_trainer_arguments(tmp_path: Path, index: int) -> None:
    """HfArgumentParser builds TrainingArguments from the file (the script's own model
    arguments are the extra keys; DeepSpeed's block is checked by the test above)."""
    pytest.importorskip("transformers")
    from transformers import HfArgumentParser, TrainingArguments

    original = ROUND_TRIPS["trainer-args"][index]
    data = json.loads(FORMATS["trainer-args"].export(original))
    data.pop("deepspeed", None)  # initialising DeepSpeed needs a process group
    (parsed,) = HfArgumentParser(TrainingArguments).parse_dict(
        {**data, "output_dir": str(tmp_path), "use_cpu": True}, allow_extra_keys=True
    )
    assert parsed.per_device_train_batch_size == original.micro_batch
    assert parsed.gradient_accumulation_steps == original.grad_accum
    assert bool(parsed.fsdp) == original.stack.value.startswith("fsdp")


def test_every_transformers_optimizer_name_is_mapped() -> None:
    """Each OptimizerNames value of the installed Transformers has a memtui optimizer (or a
    reason memtui cannot size it)."""
    pytest.importorskip("transformers")
    from transformers.training_args import OptimizerNames

    from memtui.plans.trainer_args import OPTIM

    assert {o.value for o in OptimizerNames} <= set(OPTIM)


# -- the command ------------------------------------------------------------------------------


def test_export_writes_a_new_file_and_refuses_to_overwrite(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    target = tmp_path / "ds.json"
    argv = ["export", "--format", "deepspeed", "--stack", "deepspeed", "--strategy", "zero3",
            "-o", str(target)]  # fmt: skip
    assert main(argv) == 0
    first = target.read_text()
    assert json.loads(first)["zero_optimization"]["stage"] == 3
    assert sorted(p.name for p in tmp_path.iterdir()) == ["ds.json"]  # no temporary left
    capsys.readouterr()
    assert main([*argv[:-2], "--micro-batch", "4", "-o", str(target)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "already exists" in err and "--force" in err
    assert target.read_text() == first  # untouched
    assert main([*argv[:-2], "--micro-batch", "4", "-o", str(target), "--force"]) == 0
    assert json.loads(target.read_text())["train_micro_batch_size_per_gpu"] == 4


def test_export_to_stdout_and_from_files(tmp_path: Path, capsys, monkeypatch) -> None:
    monkeypatch.chdir(Path(__file__).parent / "plans_configs")
    assert main(["export", "--format", "accelerate", "--from", "deepspeed/zero3_offload.json"]) == 0
    text = capsys.readouterr().out
    assert "distributed_type: DEEPSPEED" in text
    assert "offload_param_device: cpu" in text


def test_export_of_a_stack_the_format_cannot_launch_exits_2(capsys) -> None:
    assert main(["export", "--format", "torchtune", "--stack", "deepspeed"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "torchtune" in err


def test_the_cli_offers_every_export_format_and_only_those() -> None:
    # `memtui export --format` names the registry's formats without importing the codecs; a
    # format the registry writes but the CLI does not offer (or the other way) must fail here
    from memtui.estimator.choices import StackName

    exporting = tuple(f.name for f in FORMATS.exporting)
    assert tuple(export_choices()) == exporting
    assert set(exporting) == {"deepspeed", "accelerate", "trainer-args", "axolotl", "torchtune"}
    assert all(f.suffix.startswith(".") for f in FORMATS.exporting)
    launched = {stack.value: getattr(FORMATS.launched_with(stack), "name", None)
                for stack in StackName}  # fmt: skip
    assert launched == {
        "generic": None, "trainer": "trainer-args", "deepspeed": "deepspeed",
        "fsdp2": "accelerate", "fsdp1": "accelerate", "torchtune": "torchtune", "litgpt": None,
    }  # fmt: skip
    for stack in StackName:
        fmt = FORMATS.launched_with(stack)
        assert fmt is None or fmt.exports, (stack, fmt)


def export_choices() -> list[str]:
    """The choices of `memtui export --format`, as the CLI's parser holds them."""
    import argparse

    (sub,) = (a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction))
    (fmt,) = (a for a in sub.choices["export"]._actions if a.dest == "format")
    return list(fmt.choices or ())
