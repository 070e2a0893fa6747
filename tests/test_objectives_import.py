"""Objectives read from real upstream configs (tests/plans_configs/upstream/, each file's
first line names its repository, path and commit) and written back by each codec."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

UPSTREAM = Path(__file__).parent / "plans_configs" / "upstream"


def estimate(*flags: str) -> dict:
    out = subprocess.run(
        [sys.executable, "-m", "memtui", "estimate", *flags, "--json"],
        capture_output=True,
        text=True,
    )
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout)


def sources(data: dict) -> dict[str, str]:
    return {p["field"]: p["source"] for p in data["provenance"]}


def test_axolotl_kto_example_is_kto_with_its_beta() -> None:
    data = estimate("--from", str(UPSTREAM / "axolotl_qlora-1b-kto.yaml"))
    assert data["plan"]["objective"] == "kto"
    assert data["plan"]["beta"] == 0.5
    assert data["plan"]["method"] == "qlora"
    assert sources(data)["objective"].endswith("axolotl_qlora-1b-kto.yaml:rl")
    assert data["per_gpu"]["reference_model"] == 0  # the QLoRA base, adapter disabled


def test_axolotl_reward_model_example_scores_without_vocabulary_logits() -> None:
    data = estimate("--from", str(UPSTREAM / "axolotl_gemma2_reward-model.yaml"))
    assert data["plan"]["objective"] == "reward"
    # b = 2 micro-batch x chosen and rejected, s = 2048 bf16 scores (the score head's
    # b x s x 1 output, measured: tests/test_measure_objectives.py)
    assert data["per_gpu"]["logits"] == 2 * 4 * 2048


def test_llamafactory_dpo_and_reward_examples() -> None:
    model = ("--model", "Qwen/Qwen3-4B")  # the example's Instruct-2507 is not in the catalog
    dpo = estimate("--from", str(UPSTREAM / "llamafactory_qwen3_lora_dpo.yaml"), *model)
    assert (dpo["plan"]["objective"], dpo["plan"]["beta"]) == ("dpo", 0.1)
    assert sources(dpo)["objective"].endswith(":pref_loss")
    assert dpo["per_gpu"]["reference_model"] == 0  # create_ref_model: None under LoRA
    rm = estimate("--from", str(UPSTREAM / "llamafactory_qwen3_lora_reward.yaml"), *model)
    assert rm["plan"]["objective"] == "reward"


def test_llamafactory_full_dpo_keeps_a_copy_and_ppo_is_refused(tmp_path: Path) -> None:
    text = (UPSTREAM / "llamafactory_qwen3_lora_dpo.yaml").read_text()
    full = tmp_path / "full_dpo.yaml"
    full.write_text(text.replace("finetuning_type: lora", "finetuning_type: full"))
    data = estimate("--from", str(full), "--model", "Qwen/Qwen3-4B", "--gpus", "1")
    assert data["per_gpu"]["reference_model"] > 0
    ppo = tmp_path / "ppo.yaml"
    ppo.write_text(text.replace("stage: dpo", "stage: ppo"))
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "memtui",
            "estimate",
            "--from",
            str(ppo),
            "--model",
            "Qwen/Qwen3-4B",
        ],
        capture_output=True,
        text=True,
    )
    assert out.returncode != 0 and "PPO" in out.stderr and len(out.stderr.splitlines()) == 1


@pytest.mark.parametrize(
    ("name", "method", "reference"),
    [("torchtune_8B_full_dpo.yaml", "full", True), ("torchtune_8B_lora_dpo.yaml", "lora", False)],
)
def test_torchtune_dpo_recipes_are_read(name: str, method: str, reference: bool) -> None:
    data = estimate("--from", str(UPSTREAM / name), "--gpus", "4", "--seq-len", "1024")
    assert data["plan"]["objective"] == "dpo"
    assert data["plan"]["method"] == method
    assert (data["per_gpu"]["reference_model"] > 0) is reference
    assert sources(data)["objective"].endswith(":loss._component_")


def test_trl_config_keys_name_the_trainer(tmp_path: Path) -> None:
    base = {"output_dir": "out", "per_device_train_batch_size": 2, "model_name_or_path": "gpt2"}
    cases: list[tuple[dict[str, object], str]] = [
        ({"loss_type": ["ipo"], "beta": 0.2}, "ipo"),
        ({"precompute_ref_log_probs": True}, "dpo"),
        ({"loss_type": "nll"}, "sft"),  # SFTConfig's own loss_type
        ({"desirable_weight": 1.0}, "kto"),
        ({"center_rewards_coefficient": 0.01}, "reward"),
        ({"num_generations": 2, "use_vllm": True, "vllm_gpu_memory_utilization": 0.5}, "grpo"),
    ]
    for extra, objective in cases:
        path = tmp_path / "args.json"
        path.write_text(json.dumps({**base, **extra}))
        data = estimate("--from", str(path), "--gpus", "1")
        assert data["plan"]["objective"] == objective, extra
    assert data["plan"]["vllm_mode"] == "colocate"  # GRPOConfig.vllm_mode's default
    assert data["per_gpu"]["generator"] == round(0.5 * data["capacity"])


@pytest.mark.parametrize(
    ("fmt", "suffix", "flags"),
    [
        ("axolotl", ".yaml", ("--objective", "kto", "--beta", "0.3")),
        (
            "axolotl",
            ".yaml",
            (
                "--objective",
                "grpo",
                "--vllm-mode",
                "colocate",
                "--vllm-gpu-memory-utilization",
                "0.4",
                "--num-generations",
                "1",
                "--vllm-sleep-mode",
            ),
        ),
        ("axolotl", ".yaml", ("--objective", "reward")),
        ("trainer-args", ".json", ("--objective", "ipo", "--precompute-ref-log-probs")),
        ("trainer-args", ".json", ("--objective", "grpo", "--num-generations", "1")),
        ("torchtune", ".yaml", ("--objective", "dpo", "--beta", "0.05", "--gpus", "2")),
    ],
)
def test_export_round_trip(tmp_path: Path, fmt: str, suffix: str, flags: tuple[str, ...]) -> None:
    stack = "torchtune" if fmt == "torchtune" else "trainer"
    common = ("--model", "meta-llama/Llama-3.2-1B", "--stack", stack, "--precision", "bf16")
    gpus = () if "--gpus" in flags else ("--gpus", "1")
    path = tmp_path / f"job{suffix}"
    subprocess.run(
        [sys.executable, "-m", "memtui", "export", "--format", fmt, *common, *gpus, *flags,
         "-o", str(path)],
        check=True,
        capture_output=True,
    )  # fmt: skip
    written = estimate(*common, *gpus, *flags)["plan"]
    read = estimate("--from", str(path), "--model", "meta-llama/Llama-3.2-1B", *gpus)["plan"]
    for field in ("objective", "beta", "precompute_ref_log_probs", "num_generations",
                  "vllm_mode", "vllm_gpu_memory_utilization", "vllm_sleep_mode"):  # fmt: skip
        assert read[field] == written[field], field


def test_an_objective_a_format_cannot_say_is_refused() -> None:
    out = subprocess.run(
        [sys.executable, "-m", "memtui", "export", "--format", "trainer-args", "--model",
         "meta-llama/Llama-3.2-1B", "--stack", "trainer", "--objective", "ppo"],
        capture_output=True,
        text=True,
    )  # fmt: skip
    assert out.returncode != 0 and "ppo" in out.stderr
