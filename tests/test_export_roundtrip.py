"""`memtui export --from FILE`: the user's own config, edited (memtui/plans/roundtrip.py).

On every file of the corpus (tests/plans_configs, walked whole, so the configs copied from
upstream repositories are included as they are added): an export with no change is the file
byte for byte; a changed plan changes only the keys of what it changed (both files parsed and
compared), reads back as the plan exported, and still passes the tools' own validation
(DeepSpeed's config parser after Transformers' "auto" filling, HfArgumentParser, accelerate's
launch path). The command is run in process for the whole corpus and as the installed command
(`python -m memtui`, tests/cli_helpers.py) for its output streams and its file rules.
"""

from __future__ import annotations

import difflib
import json
import os
import re
import types
from pathlib import Path
from typing import Any

import pytest
import yaml
from cli_helpers import memtui

from memtui.cli import build_parser, main
from memtui.commands.plan_flags import plan_and_import
from memtui.estimator import Plan
from memtui.plans.roundtrip import Origin, config_file, edit

CONFIGS = Path(__file__).parent / "plans_configs"
NOT_CONFIGS = {"README.md", "SOURCES.toml", "expected.toml"}
"""The corpus's own documentation and expectations, by name."""
MODELS = "checkpoints"
"""The model folders the configs name (config.json of a model, no job config)."""


def corpus() -> list[Path]:
    return sorted(
        p
        for p in CONFIGS.rglob("*")
        if p.is_file()
        and p.name not in NOT_CONFIGS
        and p.suffix != ".md"
        and MODELS not in p.relative_to(CONFIGS).parts[:1]
    )


CORPUS = corpus()
IDS = [str(p.relative_to(CONFIGS)) for p in CORPUS]


def test_the_corpus_is_walked_whole() -> None:
    # every format folder is in, so a folder added later (upstream/) is in the same way
    folders = {p.relative_to(CONFIGS).parts[0] for p in CORPUS}
    assert {"accelerate", "axolotl", "deepspeed", "llamafactory", "torchtune", "trainer"} <= folders
    assert len(CORPUS) >= 28


def run(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    code = main(argv)
    out, err = capsys.readouterr()
    return code, out, err


@pytest.mark.parametrize("path", CORPUS, ids=IDS)
def test_an_export_with_no_change_is_the_file_byte_for_byte(
    path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(CONFIGS)
    shown = str(path.relative_to(CONFIGS))
    code, out, err = run(["export", "--from", shown], capsys)
    if code == 0:
        assert out.encode("utf-8") == path.read_bytes()
        assert err == f"{shown}: unchanged (the plan is the file's own)\n"
        return
    # no edit: one line, and only where there is nothing to edit: a file the import itself
    # refuses, or a launch script (no config of its own: the format must be named)
    assert code == 2 and err.count("\n") == 1, err
    estimated, _, _ = run(["estimate", "--from", shown], capsys)
    if estimated == 0:
        assert config_file([shown], None, CONFIGS) is None
        assert "give --format" in err


# -- a changed plan ---------------------------------------------------------------------------

CHECKPOINTING = {
    "gradient_checkpointing", "gradient_checkpointing_kwargs", "enable_activation_checkpointing",
    "fsdp_activation_checkpointing", "activation_checkpointing",
    "activation_checkpointing_kwargs"}  # fmt: skip
CHANGES: dict[str, tuple[list[str], set[str]]] = {
    # flags: the key names the change may touch (a block's name where a block comes or goes)
    "micro-batch": (["--micro-batch", "3"], {
        "train_micro_batch_size_per_gpu", "train_batch_size", "per_device_train_batch_size",
        "micro_batch_size", "batch_size"}),
    "checkpointing": (["--checkpointing", "full"], CHECKPOINTING),
    "no-checkpointing": (["--checkpointing", "none"], CHECKPOINTING),
    "zero2": (["--strategy", "zero2", "--offload", "none"], {
        "stage", "zero_stage", "offload_optimizer", "offload_param", "cpu_offload",
        "cpu_offload_param", "offload_optimizer_device", "offload_param_device"}),
    "no-offload": (["--offload", "none"], {
        "offload_optimizer", "offload_param", "cpu_offload", "cpu_offload_param",
        "offload_params", "fsdp_offload_params", "fsdp_cpu_offload", "offload_optimizer_device",
        "offload_param_device"}),
    "lora-rank": (["--lora-rank", "24"], {"lora_r", "lora_rank", "r"}),
    "fp32": (["--precision", "fp32"], {
        "bf16", "fp16", "dtype", "mixed_precision", "torch_dtype", "bfloat16"}),
}  # fmt: skip

MUST_EDIT = {
    # (file, change): edits the corpus files must take (the rest may be refused in one line)
    ("deepspeed/legacy_keys.json", "micro-batch"), ("deepspeed/legacy_keys.json", "no-offload"),
    ("deepspeed/zero1_lion_fp16.json", "zero2"), ("deepspeed/zero3_offload.json", "no-offload"),
    ("deepspeed/zero3_offload.json", "micro-batch"), ("deepspeed/zero2_auto.json", "no-offload"),
    ("deepspeed/zero3_zero_sizes.json", "zero2"),
    ("accelerate/deepspeed_plugin.yaml", "no-offload"), ("accelerate/fsdp2.yaml", "fp32"),
    ("accelerate/fsdp1_integer_strategy.yaml", "checkpointing"),
    ("accelerate/fsdp2_hsdp.yaml", "checkpointing"),
    ("axolotl/fft-8b-fsdp1.yml", "micro-batch"), ("axolotl/fft-8b-fsdp1.yml", "no-offload"),
    ("axolotl/fsdp2-qlora.yml", "lora-rank"), ("axolotl/qlora-1b.yml", "lora-rank"),
    ("axolotl/fsdp2-qlora.yml", "fp32"), ("axolotl/lora-deepspeed.yml", "lora-rank"),
    ("torchtune/llama2_7B_lora.yaml", "checkpointing"),
    ("torchtune/llama2_7B_lora.yaml", "lora-rank"), ("torchtune/llama2_7B_lora.yaml", "no-offload"),
    ("torchtune/llama3_1_8B_full.yaml", "fp32"), ("torchtune/llama3_1_8B_full.yaml", "micro-batch"),
    ("torchtune/llama3_1_8B_qlora_single_device.yaml", "no-checkpointing"),
    ("trainer/fsdp_legacy.json", "checkpointing"), ("trainer/fsdp_legacy.json", "fp32"),
    ("trainer/training_args.json", "micro-batch"), ("trainer/training_args.json", "fp32"),
    ("trainer/sft_qlora.yaml", "lora-rank"), ("trainer/sft_qlora.yaml", "micro-batch"),
}  # fmt: skip


def parsed(path: Path, text: str) -> Any:
    return json.loads(text) if path.suffix == ".json" else yaml.safe_load(text)


def changed_keys(before: Any, after: Any, at: tuple[str, ...] = ()) -> set[tuple[str, ...]]:
    """The key paths whose values differ (a block that comes or goes: its own path)."""
    if isinstance(before, dict) and isinstance(after, dict):
        found: set[tuple[str, ...]] = set()
        for key in {*before, *after}:
            if key not in before or key not in after:
                found.add((*at, str(key)))
            else:
                found |= changed_keys(before[key], after[key], (*at, str(key)))
        return found
    return set() if before == after else {at}


def line_keys(text: str) -> list[set[str] | None]:
    """Per line of a YAML text: its key and the keys of the blocks it lies in (None for a
    comment line, an empty set for a blank one)."""
    stack: list[tuple[int, str]] = []
    out: list[set[str] | None] = []
    for line in text.splitlines():
        body = line.strip()
        if not body:
            out.append(set())
            continue
        if body.startswith("#"):
            out.append(None)
            continue
        indent = len(line) - len(line.lstrip(" "))
        while stack and stack[-1][0] >= indent:
            stack.pop()
        key = body.lstrip("- ").split(":", 1)[0].strip("\"' ") if ":" in body else ""
        out.append({k for _, k in stack} | ({key} if key else set()))
        if key:
            stack.append((indent, key))
    return out


def lines_outside(before: str, after: str, allowed: set[str]) -> list[str]:
    """The lines a YAML edit removed or added that belong to no key in `allowed`."""
    old, new = before.splitlines(), after.splitlines()
    keys_old, keys_new = line_keys(before), line_keys(after)
    stray: list[str] = []
    matcher = difflib.SequenceMatcher(a=old, b=new, autojunk=False)
    for tag, i1, i2, j1, j2 in matcher.get_opcodes():
        if tag == "equal":
            continue
        for lines, keys, lo, hi, sign in (
            (old, keys_old, i1, i2, "-"),
            (new, keys_new, j1, j2, "+"),
        ):
            for i in range(lo, hi):
                names = keys[i]
                if names is None or (lines[i].strip() and not names & allowed):
                    stray.append(f"{sign}{lines[i]}")
    return stray


def plan_of(argv: list[str]) -> Plan:
    """The plan `memtui estimate ARGV` plans (in the corpus folder)."""
    return plan_and_import(build_parser().parse_args(["estimate", *argv]))[0]


EDITS = [
    (path, change)
    for path in CORPUS
    if path.suffix in (".json", ".yaml", ".yml")
    for change in CHANGES
]


@pytest.mark.parametrize(
    ("path", "change"), EDITS, ids=[f"{p.relative_to(CONFIGS)}-{c}" for p, c in EDITS]
)
def test_a_changed_plan_changes_only_its_keys(
    path: Path,
    change: str,
    tmp_path: Path,
    request: pytest.FixtureRequest,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.chdir(CONFIGS)
    shown = str(path.relative_to(CONFIGS))
    flags, allowed = CHANGES[change]
    code, out, err = run(["export", "--from", shown, *flags], capsys)
    if code != 0:
        assert (shown, change) not in MUST_EDIT, err
        assert code == 2 and err.count("\n") == 1, err  # refused in one line
        return
    before, after = parsed(path, path.read_text()), parsed(path, out)
    touched = changed_keys(before, after)
    assert all(key[-1] in allowed for key in touched), (touched, err)
    if path.suffix != ".json":  # and in the text too: no other line respelled or moved
        assert not lines_outside(path.read_text(), out, allowed), err
    if (shown, change) in MUST_EDIT:
        assert touched and out != path.read_text()
    # beside the original, where the files it names by relative path are (a DeepSpeed JSON,
    # ../deepspeed_config_templates/...); removed when the test ends
    edited = path.with_name(f".edited-{os.getpid()}-{path.name}")
    edited.write_text(out)
    request.addfinalizer(lambda: edited.unlink(missing_ok=True))
    assert config_file([str(edited)], None, CONFIGS) is not None
    fmt = config_file([shown], None, CONFIGS).fmt  # type: ignore[union-attr]
    wanted = plan_of(["--from", shown, *flags])
    if wanted == plan_of(["--from", shown]):  # the file says it already
        assert out == path.read_text()
        return
    assert fmt.exports  # a format memtui does not write is edited only when unchanged
    fresh = tmp_path / f"fresh{fmt.suffix}"
    fresh.write_text(fmt.export(wanted))
    # read back (in the corpus folder, where the files it names are): every field the change
    # left alone as the file said it, every field it changed as the plan exported, unless a
    # fresh config of the format cannot say it either, or the file leaves it "auto"
    original, got = plan_of(["--from", shown]), plan_of(["--from", str(edited)])
    fresh_got = plan_of(["--from", str(fresh)])
    for name in Plan.model_fields:
        want, have = getattr(wanted, name), getattr(got, name)
        if want == getattr(original, name) or want == have:
            assert have == want, name
        else:
            assert getattr(fresh_got, name) != want or '"auto"' in err, name


def test_an_edit_keeps_what_a_fresh_export_loses(tmp_path: Path) -> None:
    """The wrong exports a fresh file made of users' configs: each kept by the edit."""
    axolotl = tmp_path / "lora.yml"
    axolotl.write_text(
        "base_model: meta-llama/Llama-3.1-8B  # the model\n"
        "datasets:\n  - path: tatsu-lab/alpaca\n    type: alpaca\n"
        "adapter: lora\nlora_r: 16\nlora_alpha: 64\nlora_target_linear: true\n"
        "attn_implementation: flash_attention_2\nsequence_len: 2048\nmicro_batch_size: 2\n"
        "gradient_accumulation_steps: 4\nbf16: true\n"
    )
    got = edited(axolotl, "--lora-rank", "32")
    assert got["datasets"] == [{"path": "tatsu-lab/alpaca", "type": "alpaca"}]
    assert got["attn_implementation"] == "flash_attention_2"
    assert (got["lora_r"], got["lora_alpha"]) == (32, 64)
    assert "# the model" in export_text(axolotl, "--lora-rank", "32")

    ds = tmp_path / "ds.json"
    ds.write_text(
        '{\n    "fp16": {"enabled": "auto", "loss_scale": 0},\n'
        '    "optimizer": {"type": "AdamW", "params": {"lr": "auto"}},\n'
        '    "scheduler": {"type": "WarmupLR", "params": {"warmup_num_steps": "auto"}},\n'
        '    "zero_optimization": {"stage": 2, "reduce_bucket_size": 5e8},\n'
        '    "train_micro_batch_size_per_gpu": "auto",\n    "train_batch_size": "auto"\n}\n'
    )
    got = edited(ds, "--strategy", "zero3")
    assert got["zero_optimization"]["stage"] == 3
    assert got["fp16"] == {"enabled": "auto", "loss_scale": 0}
    assert got["train_micro_batch_size_per_gpu"] == got["train_batch_size"] == "auto"
    assert got["optimizer"]["type"] == "AdamW" and got["scheduler"]["type"] == "WarmupLR"
    assert "5e8" in export_text(ds, "--strategy", "zero3")  # its own spelling, untouched

    tune = tmp_path / "tune.yaml"
    tune.write_text(
        "model:\n  _component_: torchtune.models.llama3_1.lora_llama3_1_8b\n"
        "  lora_attn_modules: ['q_proj', 'v_proj']\n  lora_rank: 8\n  lora_alpha: 16\n"
        "  use_dora: True\n"
        "optimizer:\n  _component_: torch.optim.AdamW\n  lr: 2e-5\n"
        "loss:\n  _component_: torchtune.modules.loss.LinearCrossEntropyLoss\n"
        "batch_size: 2\ndtype: bf16\nenable_activation_checkpointing: True\n"
    )
    got = edited(tune, "--micro-batch", "4")
    assert got["batch_size"] == 4
    assert got["model"]["use_dora"] is True
    assert "\n  lr: 2e-5\n" in export_text(tune, "--micro-batch", "4")
    assert got["loss"]["_component_"] == "torchtune.modules.loss.LinearCrossEntropyLoss"

    single = tmp_path / "single.yaml"
    single.write_text("compute_environment: LOCAL_MACHINE\ndistributed_type: 'NO'\n"
                      "mixed_precision: bf16\nnum_processes: 1\nuse_cpu: false\n")  # fmt: skip
    got = edited(single, "--precision", "fp32")
    assert (got["distributed_type"], got["num_processes"]) == ("NO", 1)
    assert got["mixed_precision"] == "no"

    hsdp = CONFIGS / "accelerate" / "fsdp2_hsdp.yaml"
    exported = tmp_path / "hsdp.yaml"
    exported.write_text(export_text(hsdp, "--checkpointing", "full"))
    assert plan_of(["--from", str(exported)]).strategy.value == "hsdp"


def export_text(path: Path, *flags: str) -> str:
    """`memtui export --from PATH FLAGS` as the installed command writes it."""
    done = memtui("export", "--from", str(path), *flags, cwd=CONFIGS)
    assert done.returncode == 0, done.stderr
    return done.stdout


def edited(path: Path, *flags: str) -> Any:
    return parsed(path, export_text(path, *flags))


# -- the tools' own validation of an edit -----------------------------------------------------

DEEPSPEED_EDITS = [
    (p, c)
    for p, c in sorted(MUST_EDIT)
    if p.startswith("deepspeed/") and c in ("micro-batch", "zero2", "no-offload")
]


@pytest.mark.parametrize(("shown", "change"), DEEPSPEED_EDITS)
def test_deepspeed_parses_an_edited_config(
    shown: str, change: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Transformers fills the "auto" values from the Trainer's arguments
    (HfTrainerDeepSpeedConfig), then DeepSpeed's DeepSpeedConfig parses the edit and checks
    the batch against the data-parallel size, as tests/test_plans_export.py does for a
    fresh export."""
    pytest.importorskip("deepspeed")
    import deepspeed.runtime.config as ds_config
    from transformers import TrainingArguments
    from transformers.integrations.deepspeed import HfTrainerDeepSpeedConfig

    monkeypatch.chdir(CONFIGS)
    flags = CHANGES[change][0]
    plan = plan_of(["--from", shown, *flags])
    path = tmp_path / "ds.json"
    path.write_text(export_text(CONFIGS / shown, *flags))

    class Args(TrainingArguments):
        @property
        def world_size(self) -> int:  # the job's, not this process's
            return plan.data_parallel

    # the Trainer's arguments as the job gives them: the values the file states itself
    # (Transformers refuses a DeepSpeed value that differs from the Trainer's)
    config = json.loads(path.read_text())
    fp16 = (config.get("fp16") or {}).get("enabled") is True
    params = (config.get("optimizer") or {}).get("params") or {}
    betas = params.get("betas", [0.9, 0.999])
    args = Args(output_dir=str(tmp_path / "out"), per_device_train_batch_size=plan.micro_batch,
                gradient_accumulation_steps=plan.grad_accum, use_cpu=True, fp16=fp16,
                bf16=not fp16, learning_rate=params.get("lr", 5e-5), adam_beta1=betas[0],
                adam_beta2=betas[1])  # fmt: skip
    hf = HfTrainerDeepSpeedConfig(str(path))
    hf.trainer_config_process(args)
    hidden = plan.model.architecture.hidden_size
    hf.trainer_config_finalize(args, types.SimpleNamespace(
        config=types.SimpleNamespace(hidden_size=hidden)), 100)  # fmt: skip

    class DataParallel:
        def get_data_parallel_world_size(self) -> int:
            return plan.data_parallel

    monkeypatch.setattr(ds_config.dist, "get_rank", lambda: 0)  # no process group here
    parsed_config = ds_config.DeepSpeedConfig(hf.config, mpu=DataParallel())
    assert parsed_config.zero_optimization_stage == int(plan.strategy.value[-1])
    assert parsed_config.train_micro_batch_size_per_gpu == plan.micro_batch
    assert (parsed_config.zero_config.offload_optimizer is not None) == (
        plan.offload.value != "none"
    )


@pytest.mark.parametrize(
    ("shown", "change"), sorted(c for c in MUST_EDIT if c[0].startswith("trainer/"))
)
def test_transformers_parses_edited_trainer_arguments(
    shown: str, change: str, tmp_path: Path
) -> None:
    pytest.importorskip("transformers")
    from transformers import HfArgumentParser, TrainingArguments

    flags = CHANGES[change][0]
    data = edited(CONFIGS / shown, *flags)
    data.pop("deepspeed", None)  # initialising DeepSpeed needs a process group
    (args,) = HfArgumentParser(TrainingArguments).parse_dict(
        {**data, "output_dir": str(tmp_path), "use_cpu": True}, allow_extra_keys=True
    )
    plan = plan_of(["--from", str(CONFIGS / shown), *flags])
    assert args.per_device_train_batch_size == plan.micro_batch
    assert bool(args.gradient_checkpointing) == (plan.checkpointing.value == "full")
    assert bool(args.bf16) == plan.precision.value.startswith("bf16")


@pytest.mark.parametrize(
    ("shown", "change"), sorted(c for c in MUST_EDIT if c[0].startswith("accelerate/"))
)
def test_accelerate_launch_accepts_an_edited_config(
    shown: str, change: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """accelerate's own launch path: load the edit, validate it as `accelerate launch` does."""
    pytest.importorskip("accelerate")
    from accelerate.commands.config.config_args import load_config_from_file
    from accelerate.commands.launch import _validate_launch_command, launch_command_parser

    monkeypatch.chdir(CONFIGS)
    flags = CHANGES[change][0]
    path = tmp_path / "accelerate.yaml"
    path.write_text(export_text(CONFIGS / shown, *flags))
    plan = plan_of(["--from", shown, *flags])
    config = load_config_from_file(str(path))
    assert config.num_processes == plan.hardware.gpus
    assert config.mixed_precision == ("no" if plan.precision.value == "fp32" else "bf16")
    args = launch_command_parser().parse_args(["--config_file", str(path), "train.py"])
    _validate_launch_command(args)


# -- the command: streams and files -----------------------------------------------------------


def test_the_diff_goes_to_stderr_and_the_file_to_stdout(tmp_path: Path) -> None:
    ds = CONFIGS / "deepspeed" / "zero3_offload.json"
    done = memtui("export", "--from", str(ds), "--micro-batch", "2", cwd=CONFIGS)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["train_micro_batch_size_per_gpu"] == 2
    assert done.stderr.startswith(f"--- {ds}\n+++ (stdout)\n@@ ")
    assert '-  "train_micro_batch_size_per_gpu": 4\n' in done.stderr
    assert '+  "train_micro_batch_size_per_gpu": 2\n' in done.stderr


def test_the_input_is_written_only_when_asked(tmp_path: Path) -> None:
    ds = tmp_path / "ds.json"
    original = (CONFIGS / "deepspeed" / "zero3_offload.json").read_text()
    ds.write_text(original)
    ds.chmod(0o640)
    done = memtui("export", "--from", str(ds), "--micro-batch", "2", "-o", str(ds), "--force")
    assert done.returncode == 2 and done.stderr.count("\n") == 1
    assert "--in-place" in done.stderr and ds.read_text() == original

    other = tmp_path / "other.json"
    other.write_text("{}")
    done = memtui("export", "--from", str(ds), "--micro-batch", "2", "-o", str(other))
    assert done.returncode == 2 and "--force" in done.stderr and other.read_text() == "{}"
    done = memtui("export", "--from", str(ds), "--micro-batch", "2", "-o", str(other), "--force")
    assert done.returncode == 0 and json.loads(other.read_text())["train_batch_size"] == 128

    done = memtui("export", "--from", str(ds), "--micro-batch", "2", "--in-place")
    assert done.returncode == 0, done.stderr
    assert done.stdout == f"wrote {ds.resolve()} (deepspeed config for the deepspeed stack)\n"
    assert done.stderr.startswith(f"--- {ds}\n+++ {ds}\n")
    text = ds.read_text()
    assert text == original.replace('"train_micro_batch_size_per_gpu": 4', (
        '"train_micro_batch_size_per_gpu": 2')).replace("256", "128")  # fmt: skip
    assert ds.stat().st_mode & 0o777 == 0o640  # the file's own mode
    assert sorted(p.name for p in tmp_path.iterdir()) == ["ds.json", "other.json"]

    done = memtui("export", "--from", str(ds), "--fresh", "--format", "deepspeed")
    assert done.returncode == 0 and "stage3_max_reuse_distance" not in done.stdout  # memtui's


def test_without_a_config_to_edit_the_format_is_asked_for() -> None:
    done = memtui("export", "--stack", "deepspeed")
    assert done.returncode == 2 and done.stderr.count("\n") == 1
    assert "give --format" in done.stderr


def test_the_file_s_control_characters_never_reach_the_terminal(tmp_path: Path) -> None:
    ds = tmp_path / "ds.json"
    ds.write_text('{"zero_optimization": {"stage": 2}, "bf16": {"enabled": true}, '
                  '"train_micro_batch_size_per_gpu": 4, "note": "\x9b31m\x85"}\n')  # fmt: skip
    done = memtui("export", "--from", str(ds), "--micro-batch", "2", "--format", "deepspeed")
    assert done.returncode == 0, done.stderr
    assert "\x9b" not in done.stderr and "\\x9b31m" in done.stderr
    assert "\x9b31m" in done.stdout  # the file itself keeps its bytes


def test_json_keeps_its_own_layout(tmp_path: Path) -> None:
    """New keys in the object's own indentation (inline stays inline), removed ones with
    their comma, everything else byte for byte."""
    ds = tmp_path / "ds.json"
    ds.write_text(
        '{\n\t"zero_optimization": {"stage": 2},\n\t"train_micro_batch_size_per_gpu": 1e0,\n'
        '\t"gradient_accumulation_steps": 1, "bf16": {"enabled": true}\n}\n'
    )
    text = export_text(ds, "--offload", "optimizer")
    assert text == (
        '{\n\t"zero_optimization": {"stage": 2, "offload_optimizer": {"device": "cpu", '
        '"pin_memory": true}},\n\t"train_micro_batch_size_per_gpu": 1e0,\n'
        '\t"gradient_accumulation_steps": 1, "bf16": {"enabled": true}\n}\n'
    )
    ds.write_text(text)
    assert export_text(ds, "--offload", "none") == (
        '{\n\t"zero_optimization": {"stage": 2},\n\t"train_micro_batch_size_per_gpu": 1e0,\n'
        '\t"gradient_accumulation_steps": 1, "bf16": {"enabled": true}\n}\n'
    )
    ds.write_text('{\n  "bf16": {"enabled": true},\n  "zero_optimization": {\n    "stage": 2,\n'
                  '    "offload_optimizer": {}\n  }\n}\n')  # fmt: skip
    assert export_text(ds, "--offload", "optimizer") == (
        '{\n  "bf16": {"enabled": true},\n  "zero_optimization": {\n    "stage": 2,\n'
        '    "offload_optimizer": {\n      "device": "cpu"\n    }\n  }\n}\n'
    )


# -- the dashboard's export key ---------------------------------------------------------------


def test_the_dashboard_export_key_edits_the_file_the_plan_came_from(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from memtui.ui.alerts import Notice
    from memtui.ui.job_keys import Export, export_of, write_export

    monkeypatch.chdir(CONFIGS)
    shown = "axolotl/qlora-1b.yml"
    file = config_file([shown], None, CONFIGS)
    assert file is not None
    origin = Origin(file, plan_of(["--from", shown]))
    plan = origin.plan.evolve(micro_batch=4)
    export = export_of(plan, origin)
    assert isinstance(export, Export) and export.suffix == ".yml"
    assert export.text == edit(origin, plan).text
    assert yaml.safe_load(export.text)["datasets"] == yaml.safe_load(file.text)["datasets"]
    posted: list[Any] = []
    write_export(posted.append, export, tmp_path)
    (message,) = posted
    assert Path(message.path).read_text() == export.text and message.path.suffix == ".yml"
    # a plan the file's format cannot say: one line, nothing written
    refused = export_of(origin.plan.evolve(stack="torchtune", strategy="fsdp"), origin)
    assert isinstance(refused, Notice) and refused.severity == "error"
    assert os.listdir(tmp_path) == [message.path.name]


async def test_the_e_key_writes_the_from_config_edited(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The real dashboard (Pilot) built from `memtui dashboard --from FILE`: a micro-batch
    step, then `e` writes FILE with that one change, beside the save file."""
    from ui_helpers import screen_of, wait_for

    from memtui.commands.dashboard import build

    monkeypatch.chdir(CONFIGS)
    shown = "deepspeed/zero3_offload.json"
    argv = ["dashboard", "--demo", "--from", shown, "--save", str(tmp_path / "plan.toml")]
    app = build(build_parser().parse_args(argv))
    async with app.run_test(size=(160, 40)) as pilot:
        screen = screen_of(app)
        assert screen.plan.micro_batch == 4
        await pilot.press("plus")
        await wait_for(pilot, lambda: screen.plan.micro_batch == 5)
        await pilot.press("e")
        written = tmp_path / "memtui-deepspeed.json"
        await wait_for(pilot, written.exists)
    original = (CONFIGS / shown).read_text()
    assert written.read_text() == original.replace(
        '"train_micro_batch_size_per_gpu": 4', '"train_micro_batch_size_per_gpu": 5'
    ).replace('"train_batch_size": 256', '"train_batch_size": 320')


def test_a_config_another_one_names_is_edited_by_its_format(tmp_path: Path) -> None:
    # axolotl's `deepspeed: deepspeed/zero3_zero_sizes.json`: the ZeRO stage is that file's
    axolotl = CONFIGS / "axolotl" / "lora-deepspeed.yml"
    done = memtui("export", "--from", str(axolotl), "--strategy", "zero2", cwd=CONFIGS)
    assert done.returncode == 2 and done.stderr.count("\n") == 1
    assert "deepspeed/zero3_zero_sizes.json" in done.stderr and "--format" in done.stderr
    done = memtui("export", "--from", str(axolotl), "--strategy", "zero2", "--format",
                  "deepspeed", cwd=CONFIGS)  # fmt: skip
    assert done.returncode == 0, done.stderr
    named = (CONFIGS / "deepspeed" / "zero3_zero_sizes.json").read_text()
    assert done.stdout == named.replace('"stage": 3', '"stage": 2')
    assert done.stderr.startswith("--- deepspeed/zero3_zero_sizes.json\n")


def test_what_the_file_cannot_say_is_named_not_dropped(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    # a DeepSpeed JSON has no key for the method or the LoRA rank (the training script sets
    # them): the edit says so instead of calling the plan the file's own
    monkeypatch.chdir(CONFIGS)
    shown = "deepspeed/zero3_offload.json"
    code, out, err = run(["export", "--from", shown, "--method", "lora", "--lora-rank", "64"],
                         capsys)  # fmt: skip
    assert code == 0 and out.encode("utf-8") == (CONFIGS / shown).read_bytes()
    assert "not written, no key of this DeepSpeed JSON config says it: method lora, " in err
    assert "lora_rank 64" in err
    assert f"{shown}: unchanged (nothing the plan changed is a key of it)" in err
    # what it can say is written and named nowhere as missing
    code, out, err = run(["export", "--from", shown, "--micro-batch", "3"], capsys)
    assert code == 0 and "not written" not in err and '"train_micro_batch_size_per_gpu": 3' in out
    # half and half: the micro-batch written, the method named
    code, out, err = run(["export", "--from", shown, "--micro-batch", "3", "--method", "lora"],
                         capsys)  # fmt: skip
    assert code == 0 and '"train_micro_batch_size_per_gpu": 3' in out
    assert "says it: method lora (set it" in err


# -- launch lines and shell scripts (memtui/plans/launch_edit.py) -----------------------------

# every launch line and script of the upstream corpus, run from the folder its repository's
# README launches it from, with the flags tests/test_upstream_launch.py gives it (--model for
# ids that cannot be resolved offline); and the launch scripts of the examples above
from test_upstream_launch import CASES as UPSTREAM_CASES  # noqa: E402
from test_upstream_launch import UPSTREAM  # noqa: E402

CONFIG_SUFFIXES = (".json", ".yaml", ".yml", ".toml", ".txt", ".lock")


def is_launch(path: Path) -> bool:
    return path.suffix not in CONFIG_SUFFIXES and path.name not in NOT_CONFIGS


LAUNCHES: list[tuple[Path, str, tuple[str, ...], str | None]] = [
    # (the folder it is launched from, the file, the flags, the import's refusal)
    *((UPSTREAM / c.cwd, c.path, c.flags, c.error) for c in UPSTREAM_CASES
      if is_launch(Path(c.path))),
    *((CONFIGS, str(p.relative_to(CONFIGS)), (), None) for p in CORPUS
      if is_launch(p) and UPSTREAM not in p.parents),
]  # fmt: skip
LAUNCH_IDS = [str((cwd / path).relative_to(CONFIGS)) for cwd, path, _, _ in LAUNCHES]


def test_every_launch_file_of_the_corpus_is_exported() -> None:
    launch_files = {p for p in CORPUS if is_launch(p) and "locks" not in p.parts}
    assert launch_files == {cwd / path for cwd, path, _, _ in LAUNCHES}
    assert len(launch_files) >= 60


def run_in(
    cwd: Path, argv: list[str], monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str],
    tmp_path: Path,
) -> tuple[int, str, str]:  # fmt: skip
    """`memtui ARGV` in `cwd`, as tests/test_upstream_launch.py estimates the corpus: no
    accelerate default config, no GPU counted."""
    monkeypatch.chdir(cwd)
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf"))
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")
    return run(argv, capsys)


@pytest.mark.parametrize(("cwd", "path", "flags", "error"), LAUNCHES, ids=LAUNCH_IDS)
def test_a_launch_exported_with_no_change_is_the_file_byte_for_byte(
    cwd: Path, path: str, flags: tuple[str, ...], error: str | None,
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, tmp_path: Path,
) -> None:  # fmt: skip
    code, out, err = run_in(cwd, ["export", "--from", path, *flags], monkeypatch, capsys, tmp_path)
    if error is not None:  # the import refuses it: so does the export, in the same one line
        assert code == 2 and err.count("\n") == 1 and error in err, err
        return
    assert code == 0, err
    assert out.encode("utf-8") == (cwd / path).read_bytes()
    assert err == f"{path}: unchanged (the plan is the file's own)\n"


def _or(change: str, *more: str) -> set[str]:
    return CHANGES[change][1] | set(more)


LAUNCH_CHANGES: dict[str, tuple[list[str], set[str]]] = {
    # the config keys of CHANGES, as arguments, and the spellings of the launch dialects:
    # DeepSpeed-Chat's main.py (--offload, --lora_dim), the launchers' process counts
    **{name: (flags, _or(name)) for name, (flags, _) in CHANGES.items()},
    "zero2": (CHANGES["zero2"][0], _or("zero2", "offload")),
    "no-offload": (CHANGES["no-offload"][0], _or("no-offload", "offload")),
    "lora-rank": (CHANGES["lora-rank"][0], _or("lora-rank", "lora_dim")),
    "gpus": (["--gpus", "2"], {"nproc_per_node", "nproc-per-node", "num_processes", "num_gpus"}),
}
LAUNCH_MUST_EDIT = {
    # (file, change): edits the launch corpus must take (the rest may be refused in one line,
    # or name what the command line cannot say)
    *(("upstream/trl/lines/cli_sft.cmd", c) for c in (
        "micro-batch", "no-checkpointing", "fp32", "gpus")),
    *(("upstream/trl/lines/sft_lora.cmd", c) for c in ("micro-batch", "lora-rank", "fp32")),
    *(("upstream/peft/examples/sft/run_peft.sh", c) for c in (
        "micro-batch", "lora-rank", "fp32", "no-checkpointing")),
    ("upstream/peft/examples/sft/run_peft_multigpu.sh", "gpus"),
    *(("upstream/deepspeed_chat/step1_supervised_finetuning/training_scripts/llama2/"
       "run_llama2_7b_lora.sh", c) for c in (
        "micro-batch", "lora-rank", "zero2", "no-checkpointing", "gpus")),
    ("upstream/deepspeed_chat/step1_supervised_finetuning/training_scripts/opt/single_node/"
     "run_1.3b.sh", "checkpointing"),
    ("upstream/deepspeed_chat/step2_dpo_finetuning/training_scripts/llama2/run_llama2_7b.sh",
     "no-offload"),
    *(("upstream/alignment_handbook/lines/smollm2_sft.cmd", c) for c in ("micro-batch", "gpus")),
    *(("trainer/launch_deepspeed.sh", c) for c in ("micro-batch", "no-checkpointing", "gpus")),
    # a config's key the line overrides is changed there; another is added as an override
    *(("upstream/torchtune/lines/readme_overrides.cmd", c) for c in (
        "micro-batch", "no-checkpointing", "lora-rank", "fp32")),
    *(("upstream/torchtune/lines/readme_qlora_3b.cmd", c) for c in (
        "micro-batch", "lora-rank", "fp32")),
    *(("upstream/llamafactory/lines/readme_overrides.cmd", c) for c in (
        "micro-batch", "lora-rank")),
    *(("upstream/axolotl/lines/cli_overrides.cmd", c) for c in ("micro-batch", "lora-rank")),
}  # fmt: skip
LAUNCH_EDITS = [
    pytest.param(*launch, change, id=f"{shown}-{change}")
    for shown, launch in zip(LAUNCH_IDS, LAUNCHES, strict=True)
    if launch[3] is None
    for change in LAUNCH_CHANGES
]


def commands(text: str) -> list[list[str]]:
    """The script's commands as the shell splits them (continuations joined)."""
    import shlex

    return [shlex.split(line, comments=True) for line in text.replace("\\\n", " ").splitlines()]


def arguments(tokens: list[str]) -> dict[str, list[str]]:
    """A command's `--flag` arguments with the words after each (`--flag=value` split), up
    to a shell operator (`&> training.log`); a config override `key.path=value` (`tune run`,
    `llamafactory-cli`) by its last key, and axolotl's `--micro-batch-size` as
    `micro_batch_size`."""
    found: dict[str, list[str]] = {}
    name = None
    program = next((t for t in tokens if "=" not in t), "")  # after `VAR=value` assignments
    for token in tokens:
        if token.strip("0123456789") and not token.strip("0123456789<>|&;()-"):
            break
        if token.startswith("--"):
            name, eq, value = token[2:].partition("=")
            if program == "axolotl":
                name = name.replace("-", "_")
            found[name] = [value] if eq else []
        elif OVERRIDE.match(token) and program in ("tune", "llamafactory-cli"):
            key, _, value = token.partition("=")
            name = None
            found[key.rsplit(".", 1)[-1]] = [value]
        elif name is not None:
            found[name].append(token)
    return found


OVERRIDE = re.compile(r"[A-Za-z_][\w.]*=")


@pytest.mark.parametrize(("cwd", "path", "flags", "error", "change"), LAUNCH_EDITS)
def test_a_changed_plan_changes_only_its_arguments_of_the_launch(
    cwd: Path, path: str, flags: tuple[str, ...], error: None, change: str,
    request: pytest.FixtureRequest, capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path,
) -> None:  # fmt: skip
    shown = str((cwd / path).relative_to(CONFIGS))
    changed, allowed = LAUNCH_CHANGES[change]
    code, out, err = run_in(cwd, ["export", "--from", path, *flags, *changed], monkeypatch,
                            capsys, tmp_path)  # fmt: skip
    if code != 0:
        assert (shown, change) not in LAUNCH_MUST_EDIT, err
        assert code == 2 and err.count("\n") == 1, err  # refused in one line
        return
    original = (cwd / path).read_text()
    if (shown, change) in LAUNCH_MUST_EDIT:
        assert out != original, err
    # every other command, comment and export line as it was; in the launch command only
    # the arguments of the change
    before, after = commands(original), commands(out)
    assert len(before) == len(after)
    differ = [i for i, (a, b) in enumerate(zip(before, after, strict=True)) if a != b]
    assert len(differ) <= 1, differ
    assert [ln for ln in original.splitlines() if ln.lstrip().startswith("#")] == [
        ln for ln in out.splitlines() if ln.lstrip().startswith("#")]  # fmt: skip
    for i in differ:
        was, now = arguments(before[i]), arguments(after[i])
        touched = {k for k in {*was, *now} if was.get(k) != now.get(k)}
        assert touched <= allowed, (touched, err)
        assert before[i][:1] == after[i][:1]  # the same command
    # read back beside the original, from the launch folder: every field the change left
    # alone as the file said it, every field it changed as the plan, or named as not written
    edited = (cwd / path).with_name(f".edited-{os.getpid()}-{Path(path).name}")
    edited.write_text(out)
    request.addfinalizer(lambda: edited.unlink(missing_ok=True))
    written = str(edited.relative_to(cwd))
    wanted = plan_of([*flags, "--from", path, *changed])
    had, got = plan_of([*flags, "--from", path]), plan_of([*flags, "--from", written])
    not_written = next((ln for ln in err.splitlines() if "not written" in ln), "")
    for name in Plan.model_fields:
        want, have = getattr(wanted, name), getattr(got, name)
        if want == getattr(had, name):
            assert have == want, name
        elif have != want:
            assert name in not_written, (name, err)


#: `accelerate launch` options on a `trl` command line: TRL's CLI hands them to accelerate
#: (trl 1.16 cli/commands/training.py), they are not the script's
TRL_LAUNCH_OPTIONS = ("--num_processes", "--config_file", "--accelerate_config")


def _script_args(tokens: list[str]) -> tuple[str, list[str]] | None:
    """The training script of a launch command and its own arguments (None for
    DeepSpeed-Chat's main.py, whose argparse is not HfArgumentParser's)."""
    for i, token in enumerate(tokens):
        if token.endswith(".py"):
            return None if Path(token).name == "main.py" else (token, tokens[i + 1 :])
        if i and tokens[i - 1] == "trl":
            args = tokens[i + 1 :]
            for option in TRL_LAUNCH_OPTIONS:
                while option in args:
                    del args[args.index(option) : args.index(option) + 2]
            return token, args
    return None


#: Launch lines whose edits are their config's overrides, not a Trainer script's arguments
OVERRIDE_LINES = ("upstream/torchtune/", "upstream/llamafactory/", "upstream/axolotl/")


@pytest.mark.parametrize(
    ("shown", "change"),
    sorted(c for c in LAUNCH_MUST_EDIT
           if "deepspeed_chat" not in c[0] and not c[0].startswith(OVERRIDE_LINES)),
)  # fmt: skip
def test_hfargumentparser_parses_an_edited_launch_line(
    shown: str, change: str, capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path,
) -> None:  # fmt: skip
    """The edited line's script arguments through HfArgumentParser with TRL's SFTConfig and
    ModelConfig (what `trl sft`, TRL's scripts and PEFT's examples/sft/train.py parse), or
    TrainingArguments for Transformers' examples (run_clm.py): the edit adds no argument
    they do not know, and the values it wrote parse as the plan's."""
    pytest.importorskip("trl")
    from transformers import HfArgumentParser, TrainingArguments
    from trl import ModelConfig, SFTConfig

    (cwd, path, flags, _) = next(x for x, i in zip(LAUNCHES, LAUNCH_IDS, strict=True) if i == shown)
    changed = LAUNCH_CHANGES[change][0]
    code, out, err = run_in(cwd, ["export", "--from", path, *flags, *changed], monkeypatch,
                            capsys, tmp_path)  # fmt: skip
    assert code == 0, err
    wanted = plan_of([*flags, "--from", path, *changed])

    def parse(text: str) -> tuple[Any, list[str]]:
        ((script, args),) = [found for c in commands(text) if (found := _script_args(c))]
        if "--deepspeed" in args:  # initialising DeepSpeed needs a process group
            del args[args.index("--deepspeed") : args.index("--deepspeed") + 2]
        classes = (TrainingArguments,) if Path(script).name.startswith("run_") else (
            SFTConfig, ModelConfig)  # fmt: skip
        config, *_, rest = HfArgumentParser(classes).parse_args_into_dataclasses(
            args=[*args, "--output_dir", str(tmp_path), "--use_cpu", "True"],
            return_remaining_strings=True)  # fmt: skip
        return config, [t for t in rest if t.startswith("--")]

    config, rest = parse(out)
    assert set(rest) <= set(parse((cwd / path).read_text())[1])
    line = " ".join(c for cmd in commands(out) for c in cmd)
    if "--per_device_train_batch_size" in line:
        assert config.per_device_train_batch_size == wanted.micro_batch
    if "--gradient_checkpointing" in line:
        assert bool(config.gradient_checkpointing) == (wanted.checkpointing.value == "full")
    if "--bf16" in line:
        assert bool(config.bf16) == wanted.precision.value.startswith("bf16")


SCRIPT = """#!/bin/bash
# fine-tune (the comment stays)
export NCCL_DEBUG=WARN
MODEL=meta-llama/Llama-3.1-8B
torchrun --nproc_per_node=4 train.py \\
    --model_name_or_path $MODEL \\
    --per_device_train_batch_size=4 \\
    --gradient_checkpointing True \\
    --bf16 True \\
    --output_dir "out dir" \\
    2>&1 | tee log.txt
echo done --per_device_train_batch_size 4
"""


def export_in(folder: Path, *argv: str) -> tuple[int, str, str]:
    """`memtui export ARGV` as the installed command runs it in `folder` (no GPU here)."""
    env = {**os.environ, "CUDA_VISIBLE_DEVICES": "", "HF_HOME": str(folder / "hf")}
    import subprocess
    import sys

    from cli_helpers import ROOT

    env["PYTHONPATH"] = str(ROOT)
    done = subprocess.run([sys.executable, "-m", "memtui", "export", *argv], cwd=folder,
                          capture_output=True, text=True, env=env, timeout=120)  # fmt: skip
    return done.returncode, done.stdout, done.stderr


def test_a_launch_edit_keeps_the_script_s_own_spelling_and_lines(tmp_path: Path) -> None:
    script = tmp_path / "train.sh"
    script.write_text(SCRIPT)
    code, out, err = export_in(tmp_path, "--from", "train.sh", "--micro-batch", "2",
                               "--checkpointing", "none", "--gpus", "2")  # fmt: skip
    assert code == 0, err
    assert out == SCRIPT.replace("--nproc_per_node=4", "--nproc_per_node=2").replace(
        "--per_device_train_batch_size=4", "--per_device_train_batch_size=2").replace(
        "--gradient_checkpointing True", "--gradient_checkpointing False")  # fmt: skip
    assert err.startswith("--- train.sh\n+++ (stdout)\n")
    # a missing argument: at the end of the command's arguments, on a line of its own in the
    # lines' indentation, before the pipe; the variable and the quoted value as they were
    code, out, err = export_in(tmp_path, "--from", "train.sh", "--grad-accum", "4")
    assert code == 0, err
    assert out == SCRIPT.replace('"out dir" \\\n', (
        '"out dir" \\\n    --gradient_accumulation_steps 4 \\\n'))  # fmt: skip
    # on one line, an argument added stays on it; the launcher's count goes among its options
    line = tmp_path / "launch.cmd"
    line.write_text("accelerate launch train.py --model_name_or_path meta-llama/Llama-3.1-8B "
                    "--per_device_train_batch_size 4\n")  # fmt: skip
    code, out, err = export_in(tmp_path, "--from", "launch.cmd", "--grad-accum", "2", "--gpus",
                               "4")  # fmt: skip
    assert code == 0, err
    assert out == ("accelerate launch --num_processes 4 train.py --model_name_or_path "
                   "meta-llama/Llama-3.1-8B --per_device_train_batch_size 4 "
                   "--gradient_accumulation_steps 2\n")  # fmt: skip
    # what no argument of the line says is named, not guessed: Transformers'
    # TrainingArguments has no sequence length (the script's own arguments do)
    code, out, err = export_in(tmp_path, "--from", "launch.cmd", "--seq-len", "1024")
    assert code == 0 and out == line.read_text()
    assert "not written, no key of this launch script says it: seq_len 1024" in err


def test_a_bare_flag_of_its_own_script_goes_with_its_line(tmp_path: Path) -> None:
    # DeepSpeed-Chat's main.py: `--gradient_checkpointing` is argparse store_true (no value)
    script = tmp_path / "run.sh"
    script.write_text("deepspeed --num_gpus 2 main.py \\\n  --model_name_or_path "
                      "meta-llama/Llama-3.1-8B \\\n  --zero_stage 2 \\\n"
                      "  --gradient_checkpointing\n")  # fmt: skip
    code, out, err = export_in(tmp_path, "--from", "run.sh", "--checkpointing", "none")
    assert code == 0, err
    assert out == ("deepspeed --num_gpus 2 main.py \\\n  --model_name_or_path "
                   "meta-llama/Llama-3.1-8B \\\n  --zero_stage 2\n")  # fmt: skip
    script.write_text(out)  # and back: the flag bare, at the end, in the lines' style
    code, back, err = export_in(tmp_path, "--from", "run.sh", "--checkpointing", "full")
    assert code == 0, err
    assert back == out.replace(
        "--zero_stage 2\n", "--zero_stage 2 \\\n  --gradient_checkpointing\n")  # fmt: skip


def test_a_new_value_is_shell_quoted() -> None:
    """Whatever a value holds, it is one word of the command: never a second command."""
    import shlex

    from memtui.plans.launch_edit import LaunchFile, _Command

    text = "torchrun train.py --output_dir out --per_device_train_batch_size 4\n"
    command = _Command(LaunchFile(Path("run.sh"), "run.sh", text, Path.cwd()), 1, frozenset())
    command.set("--output_dir", "x; rm -rf ~ $(id) `id`", launcher=False)
    command.set("--lr_scheduler_type", "a'b", launcher=False)
    assert shlex.split(command.text) == [
        "torchrun", "train.py", "--output_dir", "x; rm -rf ~ $(id) `id`",
        "--per_device_train_batch_size", "4", "--lr_scheduler_type", "a'b"]  # fmt: skip


def test_a_change_another_file_holds_is_named_with_the_format_that_edits_it() -> None:
    shown = "trainer/launch_deepspeed.sh"
    done = memtui("export", "--from", shown, "--strategy", "zero3", cwd=CONFIGS)
    assert done.returncode == 0, done.stderr
    assert done.stdout == (CONFIGS / shown).read_text()
    assert (f"{shown}: strategy is zero_optimization.stage of deepspeed/zero2_auto.json, not "
            f"of the command line: `memtui export --from {shown} --format deepspeed` edits it"
            ) in done.stderr  # fmt: skip
    done = memtui("export", "--from", shown, "--strategy", "zero3", "--format", "deepspeed",
                  cwd=CONFIGS)  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["zero_optimization"]["stage"] == 3
    assert done.stderr.startswith("--- deepspeed/zero2_auto.json\n")


def test_a_launch_script_is_written_where_asked(tmp_path: Path) -> None:
    script = tmp_path / "train.sh"
    script.write_text(SCRIPT)
    script.chmod(0o750)
    code, out, err = export_in(tmp_path, "--from", "train.sh", "--micro-batch", "2", "-o",
                               "train2.sh")  # fmt: skip
    assert code == 0, err
    assert out == f"wrote {tmp_path / 'train2.sh'} (launch script for the trainer stack)\n"
    assert "--per_device_train_batch_size=2" in (tmp_path / "train2.sh").read_text()
    assert script.read_text() == SCRIPT
    code, out, err = export_in(tmp_path, "--from", "train.sh", "--micro-batch", "2", "--in-place")
    assert code == 0, err
    assert script.read_text() == (tmp_path / "train2.sh").read_text()
    assert script.stat().st_mode & 0o777 == 0o750
