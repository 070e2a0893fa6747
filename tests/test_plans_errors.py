"""A malformed or contradictory config is one line naming the file and key, exit 2: one test
per kind of fault, through the real CLI's entry point."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from memtui.cli import main


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str]:
    code = main(["estimate", *argv])
    err = capsys.readouterr().err
    return code, err


def write(tmp_path: Path, name: str, text: str | dict) -> str:
    path = tmp_path / name
    path.write_text(text if isinstance(text, str) else json.dumps(text))
    return str(path)


def one_line_error(code: int, err: str, *parts: str) -> None:
    assert code == 2
    assert err.count("\n") == 1, err  # exactly one line
    assert err.startswith("memtui estimate: error: ")
    for part in parts:
        assert part in err, (part, err)


DS = {
    "train_micro_batch_size_per_gpu": 4,
    "gradient_accumulation_steps": 8,
    "bf16": {"enabled": True},
}


def test_train_batch_size_that_is_not_micro_x_accum_x_gpus(tmp_path, capsys):
    path = write(
        tmp_path, "ds.json", {**DS, "train_batch_size": 100, "zero_optimization": {"stage": 2}}
    )
    one_line_error(*run(capsys, "--from", path), "ds.json:train_batch_size", "100")


def test_train_batch_size_that_disagrees_with_the_gpu_count(tmp_path, capsys):
    write(tmp_path, "ds.json", {**DS, "train_batch_size": 64, "zero_optimization": {"stage": 2}})
    acc = write(tmp_path, "acc.yaml", "distributed_type: DEEPSPEED\nnum_processes: 4\n"
                "deepspeed_config:\n  deepspeed_config_file: ds.json\n")  # fmt: skip
    one_line_error(*run(capsys, "--from", acc), "train_batch_size 64", "4 GPUs")


def test_unknown_zero_stage(tmp_path, capsys):
    path = write(tmp_path, "ds.json", {**DS, "zero_optimization": {"stage": 4}})
    one_line_error(*run(capsys, "--from", path), "ds.json: zero_optimization.stage", "4")


def test_yaml_that_is_not_a_mapping(tmp_path, capsys):
    path = write(tmp_path, "axolotl.yml", "- base_model: x\n- micro_batch_size: 2\n")
    one_line_error(*run(capsys, "--from", path), "axolotl.yml", "mapping", "list")


def test_yaml_that_does_not_parse(tmp_path, capsys):
    path = write(tmp_path, "bad.yaml", "distributed_type: FSDP\nfsdp_config: [unclosed\n")
    one_line_error(*run(capsys, "--from", path), "bad.yaml: not valid YAML", "line")


def test_json_that_does_not_parse(tmp_path, capsys):
    path = write(tmp_path, "ds.json", '{"zero_optimization": {"stage": 3},}')
    one_line_error(*run(capsys, "--from", path), "ds.json: not valid JSON", "line 1")


def test_files_that_contradict_each_other(tmp_path, capsys):
    ds = write(tmp_path, "ds.json", {**DS, "zero_optimization": {"stage": 3}})
    args = write(tmp_path, "args.json", {"output_dir": "o", "per_device_train_batch_size": 2})
    one_line_error(*run(capsys, "--from", args, ds), "ds.json:train_micro_batch_size_per_gpu",
                   "args.json:per_device_train_batch_size", "contradict")  # fmt: skip


def test_a_config_memtui_does_not_know(tmp_path, capsys):
    path = write(tmp_path, "other.yaml", "name: my-run\nsteps: 10\n")
    one_line_error(*run(capsys, "--from", path), "other.yaml: not a config memtui reads", "name")


def test_a_value_of_the_wrong_type(tmp_path, capsys):
    path = write(tmp_path, "ax.yml", "base_model: gpt2\nmicro_batch_size: two\n")
    one_line_error(*run(capsys, "--from", path), "ax.yml: micro_batch_size", "'two'")


def test_bf16_and_fp16_both_enabled(tmp_path, capsys):
    ds = {**DS, "fp16": {"enabled": True}, "zero_optimization": {"stage": 1}}
    path = write(tmp_path, "ds.json", ds)
    one_line_error(*run(capsys, "--from", path), "ds.json: bf16.enabled", "both")


def test_unknown_sharding_strategy(tmp_path, capsys):
    path = write(tmp_path, "acc.yaml", "distributed_type: FSDP\nfsdp_config:\n"
                 "  fsdp_sharding_strategy: SHARD_EVERYTHING\n")  # fmt: skip
    one_line_error(*run(capsys, "--from", path), "fsdp_config.fsdp_sharding_strategy",
                   "SHARD_EVERYTHING")  # fmt: skip


def test_an_optimizer_memtui_cannot_size(tmp_path, capsys):
    path = write(tmp_path, "args.json", {"output_dir": "o", "optim": "ademamix"})
    one_line_error(*run(capsys, "--from", path), "args.json:optim", "ademamix", "--optimizer")


def test_a_missing_file(tmp_path, capsys):
    one_line_error(*run(capsys, "--from", str(tmp_path / "nope.json")), "nope.json: no such file")


def test_a_file_it_names_is_missing(tmp_path, capsys):
    path = write(tmp_path, "acc.yaml", "distributed_type: DEEPSPEED\ndeepspeed_config:\n"
                 "  deepspeed_config_file: missing_ds.json\n")  # fmt: skip
    one_line_error(*run(capsys, "--from", path), "missing_ds.json", "deepspeed_config_file",
                   "no such file")  # fmt: skip


def test_a_pickle_is_never_loaded(tmp_path, capsys):
    path = tmp_path / "training_args.bin"
    path.write_bytes(b"PK\x03\x04 torch.save archive")
    one_line_error(*run(capsys, "--from", str(path)), "training_args.bin", "never unpickles")


def test_a_torchtune_builder_with_no_model(tmp_path, capsys):
    path = write(tmp_path, "tt.yaml", "model:\n  _component_: torchtune.models.x.lora_x_1b\n")
    one_line_error(*run(capsys, "--from", path), "tt.yaml: model._component_", "x_1b")


def test_a_model_the_files_name_that_cannot_be_found(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "empty-cache"))
    path = write(tmp_path, "ax.yml", "base_model: nobody/no-such-model\n")
    one_line_error(*run(capsys, "--from", path), "ax.yml:base_model", "no-such-model")


def test_a_script_without_a_launch(tmp_path, capsys):
    path = write(tmp_path, "run.sh", "#!/bin/sh\necho hello\nls -l\n")
    one_line_error(*run(capsys, "--from", path), "run.sh: no training launch found")


def test_a_launch_script_that_does_not_split(tmp_path, capsys):
    path = write(tmp_path, "run.sh", "torchrun train.py --output_dir 'unclosed\n")
    one_line_error(*run(capsys, "--from", path), "run.sh: line 1")


def test_settings_a_stack_cannot_run_name_the_files(tmp_path, capsys):
    # ZeRO-2 with a parameter offload flag: the plan is invalid, said with the file
    path = write(tmp_path, "ds.json", {**DS, "zero_optimization": {"stage": 2}})
    one_line_error(*run(capsys, "--from", path, "--offload", "params"), "ds.json", "offload")
