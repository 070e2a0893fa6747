"""Attach: real processes with each launcher's command line (tests/attach_harness.py) hold
memory on the fake NVML; `memtui watch --once --attach` and the dashboard's `j` key read the
job behind them and the plan it was launched with.

Launcher syntax sources: torch 2.13 distributed/run.py, accelerate 1.15 commands/launch.py,
DeepSpeed 0.19 launcher/runner.py, torchtune _cli/run.py, axolotl cli/main.py and
LLaMA-Factory cli.py (see memtui/plans/launchers.py).
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from attach_harness import direct, launchers
from fake_nvml.harness import GiB, gpu

from memtui.plans.launchers import recognise

CONFIGS = Path(__file__).resolve().parent / "plans_configs"


@pytest.fixture
def job_dir(tmp_path: Path) -> Path:
    """A launch folder holding the example configs (configs are named relative to it)."""
    folder = tmp_path / "job"
    shutil.copytree(CONFIGS, folder)
    direct(folder, "train.py")
    return folder


def attach_json(fake_nvml: Any) -> dict[str, Any]:
    out = subprocess.run(
        [sys.executable, "-m", "memtui", "watch", "--once", "--attach", "--json"],
        env=fake_nvml.env(), capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout)


def on_gpus(fake_nvml: Any, pids: list[int], invisible: list[int] = ()) -> None:  # type: ignore[assignment]
    """Each PID on its own GPU holding 20 GiB; `invisible` PIDs share the last GPU."""
    gpus = [gpu(i, used=21 * GiB, procs=[(pid, 20 * GiB)]) for i, pid in enumerate(pids)]
    if invisible:
        gpus.append(gpu(len(gpus), used=GiB, procs=[(pid, GiB // 2) for pid in invisible]))
    fake_nvml.write({"gpus": gpus})


LAUNCHES = {
    "torchrun": (
        ["torchrun", "--nproc_per_node", "2", "train.py", "--deepspeed",
         "deepspeed/zero2_auto.json", "--per_device_train_batch_size", "4", "--bf16",
         "--gradient_checkpointing", "--model_name_or_path", "meta-llama/Llama-3.1-8B"],
        2,
        {"stack": "deepspeed", "strategy": "zero2", "micro_batch": 4, "checkpointing": "full",
         "gpus_per_node": 2, "model": "meta-llama/Llama-3.1-8B"},
    ),
    "accelerate launch": (
        ["accelerate", "launch", "--config_file", "accelerate/fsdp2.yaml", "--num_processes", "2",
         "train.py", "--per_device_train_batch_size", "1", "--max_length", "2048"],
        2,
        {"stack": "fsdp2", "strategy": "fsdp-shard-grad-op", "micro_batch": 1, "seq_len": 2048,
         "gpus_per_node": 2, "checkpointing": "full"},
    ),
    "deepspeed": (
        ["deepspeed", "--num_gpus", "2", "train.py", "--deepspeed",
         "deepspeed/zero1_lion_fp16.json"],
        2,
        {"stack": "deepspeed", "strategy": "zero1", "optimizer": "lion", "micro_batch": 8,
         "gpus_per_node": 2},
    ),
    "tune run": (
        ["tune", "run", "lora_finetune_single_device", "--config",
         "torchtune/llama3_1_8B_qlora_single_device.yaml", "batch_size=4",
         "tokenizer.max_seq_len=2048"],
        0,
        {"stack": "torchtune", "method": "qlora", "strategy": "ddp", "micro_batch": 4,
         "seq_len": 2048, "gpus_per_node": 1},
    ),
    "axolotl train": (
        ["axolotl", "train", "axolotl/qlora-1b.yml", "--micro_batch_size", "4"],
        2,
        {"stack": "trainer", "method": "qlora", "micro_batch": 4, "gpus_per_node": 2,
         "model": "meta-llama/Llama-3.2-1B"},
    ),
    "llamafactory-cli train": (
        ["llamafactory-cli", "train", "llamafactory/qwen_lora_sft.yaml", "cutoff_len=1024"],
        0,
        {"stack": "trainer", "method": "lora", "seq_len": 1024, "gpus_per_node": 1,
         "model": "Qwen/Qwen2.5-7B"},
    ),
    "python": (
        [sys.executable, "train.py", "--per_device_train_batch_size", "2", "--bf16",
         "--torch_dtype", "bfloat16", "--gradient_checkpointing", "--optim", "adamw_8bit"],
        0,
        {"stack": "trainer", "precision": "bf16", "optimizer": "adamw8bit", "micro_batch": 2,
         "gpus_per_node": 1},
    ),
}  # fmt: skip


def check_plan(plan: dict[str, Any], expected: dict[str, Any]) -> None:
    for key, value in expected.items():
        if key == "gpus_per_node":
            assert plan["hardware"]["gpus_per_node"] == value
        elif key == "model":
            assert plan["model"]["name"] == value
        else:
            assert plan[key] == value, (key, plan[key])


@pytest.mark.parametrize("launcher", list(LAUNCHES))
def test_watch_attach_recognises_the_launch(
    launcher: str, job_dir: Path, tmp_path: Path, fake_nvml: Any
) -> None:
    argv, workers, expected = LAUNCHES[launcher]
    with launchers(tmp_path) as fakes:
        started = fakes.start(argv, job_dir, workers)
        on_gpus(fake_nvml, started.gpu_pids)
        doc = attach_json(fake_nvml)
    assert doc["notes"] == []
    (job,) = doc["jobs"]  # the workers of one launch are one job, across GPUs
    assert job["launcher"] == launcher
    assert job["pids"] == sorted(started.gpu_pids)
    assert job["gpus"] == [str(i) for i in range(len(started.gpu_pids))]
    assert job["cwd"] == str(job_dir)
    check_plan(job["plan"], expected)
    assert job["provenance"] and all(p["source"] for p in job["provenance"])
    assert job["used_bytes"] == {str(i): 20 * GiB for i in range(len(started.gpu_pids))}


def test_two_jobs_and_what_cannot_be_read(job_dir: Path, tmp_path: Path, fake_nvml: Any) -> None:
    """Jobs are grouped by their launch; a PID of another namespace and a process that is
    no training launch are said, not dropped."""
    with launchers(tmp_path) as fakes:
        first = fakes.start(LAUNCHES["torchrun"][0], job_dir, 2)
        second = fakes.start(LAUNCHES["llamafactory-cli train"][0], job_dir, 0)
        other = subprocess.Popen([sys.executable, "-c", "import sys; sys.stdin.read()"],
                                 stdin=subprocess.PIPE)  # fmt: skip
        try:
            on_gpus(fake_nvml, [*first.gpu_pids, *second.gpu_pids, other.pid],
                    invisible=[10_000_001])  # fmt: skip
            doc = attach_json(fake_nvml)
            text = subprocess.run(
                [sys.executable, "-m", "memtui", "watch", "--once", "--attach", "--unit", "gib"],
                env=fake_nvml.env(), capture_output=True, text=True, timeout=120,
            ).stdout  # fmt: skip
        finally:
            assert other.stdin is not None
            other.stdin.close()
            other.wait()
    assert [j["launcher"] for j in doc["jobs"]] == ["torchrun", "llamafactory-cli train"]
    assert doc["jobs"][0]["gpus"] == ["0", "1"]
    notes = " ".join(doc["notes"])
    assert "pid 10000001: not visible here (another PID namespace" in notes
    assert f"pid {other.pid}: python" in notes and "no launcher" in notes
    assert "job 1: torchrun train.py" in text and "job 2: llamafactory-cli train" in text
    assert "budget" in text and "GPU 0 uses 20.0 GiB" in text


def test_nothing_recognised_says_why(fake_nvml: Any) -> None:
    on_gpus(fake_nvml, [], invisible=[10_000_002, 10_000_003])
    out = subprocess.run(
        [sys.executable, "-m", "memtui", "watch", "--once", "--attach"],
        env=fake_nvml.env(), capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert out.returncode == 0
    assert "no training job recognised" in out.stdout
    assert "pid 10000002,10000003: not visible here (another PID namespace" in out.stdout


# -- recognition from command lines alone (pure) ----------------------------------------------


@pytest.mark.parametrize(
    ("argv", "launcher", "script", "settings"),
    [
        (["/venv/bin/python3", "/venv/bin/torchrun", "--standalone", "--nproc-per-node=8",
          "train.py"], "torchrun", "train.py",
         {"hardware.gpus_per_node": 8, "hardware.nodes": 1}),
        (["python", "-m", "torch.distributed.run", "--nnodes", "1:4", "--nproc_per_node", "gpu",
          "-m", "my.trainer"], "python -m torch.distributed.run", "my.trainer",
         {"hardware.nodes": 4}),
        (["deepspeed", "--include", "localhost:0,1,2,3", "--num_nodes", "2", "train.py"],
         "deepspeed", "train.py", {"hardware.gpus_per_node": 4, "hardware.nodes": 2}),
        (["python", "-u", "-m", "deepspeed.launcher.launch", "--world_info=e30=",
          "--node_rank=0", "train.py", "--local_rank=0"], "deepspeed", "train.py", {}),
        (["/usr/bin/python3", "-u", "/site-packages/llamafactory/launcher.py", "cfg.yaml"],
         "llamafactory-cli train", "cfg.yaml", {}),
        (["python", "/site-packages/recipes/full_finetune_distributed.py", "--config",
          "llama3_1/8B_full"], "tune run", "full_finetune_distributed", {}),
        (["python", "-m", "axolotl.cli.train", "cfg.yml"], "axolotl train", "cfg.yml", {}),
    ],
)  # fmt: skip
def test_launchers_and_their_workers_are_recognised(
    argv: list[str], launcher: str, script: str, settings: dict[str, int]
) -> None:
    launch = recognise(argv, Path("/work"))
    assert launch is not None
    assert (launch.launcher, launch.script) == (launcher, script)
    assert {k: v for k, (v, _) in launch.launcher_settings.items()} == settings


def test_relative_config_paths_resolve_against_the_process_folder() -> None:
    launch = recognise(
        ["accelerate", "launch", "--config_file", "cfg/acc.yaml", "--use_fsdp", "--fsdp_version",
         "2", "train.py", "--deepspeed_config", "../ds.json"], Path("/jobs/run1"),
    )  # fmt: skip
    assert launch is not None
    assert [str(c.path) for c in launch.configs] == ["/jobs/run1/cfg/acc.yaml", "/jobs/ds.json"]
    assert launch.accelerate_flags == {
        "distributed_type": "FSDP",
        "fsdp_config": {"fsdp_version": "2"},
    }


def test_accelerates_default_config_follows_the_process_environment(tmp_path: Path) -> None:
    config = tmp_path / "hf" / "accelerate" / "default_config.yaml"
    config.parent.mkdir(parents=True)
    config.write_text("distributed_type: MULTI_GPU\nnum_processes: 2\n")
    launch = recognise(
        ["accelerate", "launch", "train.py"], tmp_path, {"HF_HOME": str(tmp_path / "hf")}
    )
    assert launch is not None
    assert [c.path for c in launch.configs] == [config]


def test_no_launch_is_none() -> None:
    for argv in (["sleep", "10"], ["python", "-c", "pass"], ["bash", "run.sh"], []):
        assert recognise(argv, Path("/")) is None


def test_a_workers_accelerate_environment_is_its_config() -> None:
    """What accelerate launch puts in its workers' environment (utils/launch.py
    prepare_multi_gpu_env) reads back as the config file would."""
    from memtui.plans.accelerate_yaml import environment_config

    env = {
        "ACCELERATE_MIXED_PRECISION": "bf16", "ACCELERATE_USE_FSDP": "true", "FSDP_VERSION": "2",
        "FSDP_SHARDING_STRATEGY": "FULL_SHARD", "FSDP_RESHARD_AFTER_FORWARD": "true",
        "FSDP_OFFLOAD_PARAMS": "false", "FSDP_ACTIVATION_CHECKPOINTING": "true",
        "PARALLELISM_CONFIG_DP_REPLICATE_SIZE": "2", "PARALLELISM_CONFIG_DP_SHARD_SIZE": "8",
        "PARALLELISM_CONFIG_TP_SIZE": "1", "OTHER_SECRET": "x",
    }  # fmt: skip
    config = environment_config(env)
    assert config is not None
    assert config["distributed_type"] == "FSDP"
    assert config["fsdp_config"]["fsdp_version"] == "2"
    assert config["parallelism_config"]["parallelism_config_dp_shard_size"] == "8"
    assert environment_config({"PATH": "/bin"}) is None


def test_attach_on_a_source_that_is_not_live_nvml_reads_no_processes() -> None:
    # the demo node's PIDs are made up: attach must not look them up on this machine
    out = subprocess.run(
        [sys.executable, "-m", "memtui", "watch", "--demo", "--once", "--attach", "--json"],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert out.returncode == 0, out.stderr
    doc = json.loads(out.stdout)
    assert doc["jobs"] == []
    assert doc["notes"] == ["attach reads this machine's GPU processes (live NVML), not demo's"]
