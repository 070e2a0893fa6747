"""Real launch lines and configs from the upstream repositories (tests/plans_configs/upstream/,
each file's repository, path and commit in its folder's SOURCES.toml) through `memtui
estimate --from FILE --json`, against plans written down from reading each file and the
tools' own defaults (never from memtui's output):

- TRL 1.16 (the same at trl f2cd577, 1.10.0.dev0): `_BaseConfig.gradient_checkpointing` True
  (trl/trainer/base_config.py:62), `bf16` = not fp16 (:68, :108), `max_length` 1024
  (sft_config.py:202, dpo_config.py:195, kto_config.py:166, reward_config.py:144,
  experimental/orpo/orpo_config.py:79, experimental/cpo/cpo_config.py:99), GRPO none
  (max_completion_length 512, grpo_config.py:494), ModelConfig `dtype` float32
  (model_config.py:89), `lora_r` 16 and `lora_dropout` 0.05 (model_config.py:107, :115);
  `trl CMD` runs `accelerate launch` (cli/commands/training.py).
- transformers 5.24 TrainingArguments: `per_device_train_batch_size` 8,
  `gradient_accumulation_steps` 1, `optim` adamw_torch_fused; the Trainer's bf16 sets the
  Accelerator's mixed precision over accelerate's (training_args.py:1614-1618).
- accelerate 1.15: `distributed_type: NO` is simple_launcher, one process (commands/launch.py
  launch_command); without a config or --num_processes every GPU (launch.py:1308-1324).
- DeepSpeed-Chat main.py (DeepSpeedExamples 45b4b71): per_device_train_batch_size 16 (:69),
  max_seq_len 512 (:81), dtype fp16 (:148), zero_stage 0 (:154), lora_dim 0 (:159).
- PEFT examples/sft (peft 5d602fd): train.py parses TRL's SFTConfig (:54); lora_r 64 (:29);
  the model loads in bnb_4bit_quant_storage_dtype when 4-bit and a float, else float32
  (utils.py:134).
- torchrun 2.13: --nproc-per-node defaults to 1 (distributed/run.py:433-437); deepspeed without
  --num_gpus uses every GPU (launcher/runner.py:467-472).

Where no file gives the GPU count and no GPU is visible (CUDA_VISIBLE_DEVICES="" here), the
count is memtui's 8, said in a "GPU count:" assumption. Models that cannot be resolved offline
are given with --model (a catalogued model of the same architecture) or --params.
"""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
from collections.abc import Mapping
from contextlib import redirect_stderr, redirect_stdout
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from cli_helpers import ROOT as REPO
from fake_nvml.harness import FakeNvml, gpu

from memtui.cli import main

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

UPSTREAM = Path(__file__).resolve().parent / "plans_configs" / "upstream"
GPUS_ASSUMED = "GPU count:"


@dataclass(frozen=True)
class Case:
    """One launch line or config and the plan its files and tools' defaults say."""

    cwd: str
    """The folder under upstream/ it is launched from (the repository's, as its README says)."""
    path: str
    """The file, relative to `cwd`."""
    plan: Mapping[str, Any] = field(default_factory=dict)
    """Expected plan fields (dotted for nested ones)."""
    flags: tuple[str, ...] = ()
    said: tuple[str, ...] = ()
    """Texts the assumptions must hold (the settings memtui does not size, named)."""
    reads: tuple[str, ...] = ()
    """Settings of the file that must be read (a provenance source) or named in an assumption."""
    error: str | None = None
    """A refusal: the one line must hold this."""

    @property
    def id(self) -> str:
        return f"{self.cwd}/{self.path}"


Q05 = ("--model", "Qwen/Qwen2.5-0.5B")  # Qwen2-0.5B(-Instruct), Qwen2.5-0.5B-Instruct: qwen2
MISTRAL = ("--model", "mistralai/Mistral-7B-v0.1")  # zephyr / constitutional-ai SFT models
TRL_SFT = {"stack": "trainer", "checkpointing": "full", "precision": "bf16-autocast"}
DEEPSPEED_AUTO = "train_micro_batch_size_per_gpu is 'auto'"


def _trl(**plan: Any) -> dict[str, Any]:
    return {**TRL_SFT, **plan}


CASES: list[Case] = [
    # -- TRL: accelerate configs (examples/accelerate_configs and the ones trl ships) -----------
    Case("trl", "examples/accelerate_configs/deepspeed_zero1.yaml",
         {"stack": "deepspeed", "strategy": "zero1", "hardware.gpus_per_node": 8,
          "hardware.nodes": 1, "precision": "bf16-mixed", "grad_accum": 1},
         reads=("zero_stage", "num_processes", "mixed_precision")),
    Case("trl", "examples/accelerate_configs/deepspeed_zero2.yaml",
         {"stack": "deepspeed", "strategy": "zero2", "hardware.gpus_per_node": 8,
          "offload": "none"}, reads=("zero_stage", "offload_optimizer_device")),
    Case("trl", "examples/accelerate_configs/deepspeed_zero3.yaml",
         {"stack": "deepspeed", "strategy": "zero3", "hardware.gpus_per_node": 8}),
    Case("trl", "examples/accelerate_configs/fsdp1.yaml",
         {"stack": "fsdp1", "hardware.gpus_per_node": 8, "precision": "bf16-mixed",
          "checkpointing": "none", "offload": "none"}),
    Case("trl", "examples/accelerate_configs/fsdp2.yaml",
         {"stack": "fsdp2", "hardware.gpus_per_node": 8, "precision": "bf16-mixed"}),
    Case("trl", "examples/accelerate_configs/multi_gpu.yaml",
         {"stack": "trainer", "strategy": "ddp", "hardware.gpus_per_node": 8,
          "precision": "bf16-autocast"}, said=("do not say which dtype",)),
    Case("trl", "examples/accelerate_configs/single_gpu.yaml",
         {"stack": "trainer", "hardware.gpus_per_node": 1, "hardware.nodes": 1}),
    Case("trl", "examples/accelerate_configs/alst_ulysses_4gpu.yaml",
         {"stack": "deepspeed", "strategy": "zero3", "hardware.gpus_per_node": 4},
         said=("parallelism_config_sp_size 2",)),
    Case("trl", "examples/accelerate_configs/context_parallel_2gpu.yaml",
         {"stack": "fsdp2", "hardware.gpus_per_node": 2, "checkpointing": "full"},
         said=("context parallel 2",)),
    Case("trl", "trl/accelerate_configs/zero1.yaml",
         {"stack": "deepspeed", "strategy": "zero1", "hardware.gpus_per_node": 8}),
    Case("trl", "trl/accelerate_configs/zero2.yaml",
         {"stack": "deepspeed", "strategy": "zero2", "hardware.gpus_per_node": 8}),
    Case("trl", "trl/accelerate_configs/zero3.yaml",
         {"stack": "deepspeed", "strategy": "zero3", "hardware.gpus_per_node": 8}),
    Case("trl", "trl/accelerate_configs/fsdp1.yaml",
         {"stack": "fsdp1", "hardware.gpus_per_node": 8}),
    Case("trl", "trl/accelerate_configs/fsdp2.yaml",
         {"stack": "fsdp2", "hardware.gpus_per_node": 8}),
    Case("trl", "trl/accelerate_configs/multi_gpu.yaml",
         {"stack": "trainer", "strategy": "ddp", "hardware.gpus_per_node": 8}),
    # distributed_type "NO" with num_processes 8: simple_launcher starts one process
    Case("trl", "trl/accelerate_configs/single_gpu.yaml",
         {"stack": "trainer", "hardware.gpus_per_node": 1},
         said=("num_processes 8 is not used",)),
    # -- TRL: launch lines of its scripts' docstrings, README and docs/source/clis.md -----------
    Case("trl", "lines/sft_full.cmd",
         _trl(method="full", micro_batch=2, grad_accum=8, seq_len=1024), Q05,
         said=(GPUS_ASSUMED,), reads=("max_length", "gradient_checkpointing", "bf16")),
    Case("trl", "lines/sft_lora.cmd",
         _trl(method="lora", lora_rank=32, lora_dropout=0.05, micro_batch=2, grad_accum=8,
              seq_len=1024), Q05, reads=("use_peft", "lora_r")),
    Case("trl", "lines/dpo_full.cmd", _trl(micro_batch=2, grad_accum=8, seq_len=1024), Q05),
    Case("trl", "lines/dpo_lora.cmd", _trl(method="lora", lora_rank=32, seq_len=1024), Q05),
    Case("trl", "lines/kto_full.cmd", _trl(micro_batch=16, grad_accum=1, seq_len=1024),
         ("--model", "Qwen/Qwen2.5-1.5B")),  # trl-lib/qwen1.5-1.8b-sft
    Case("trl", "lines/kto_qlora.cmd",
         {"method": "qlora", "lora_rank": 16, "lora_targets": ("all-linear",), "micro_batch": 8,
          "seq_len": 1024, "checkpointing": "full"}, ("--model", "Qwen/Qwen2.5-1.5B"),
         reads=("load_in_4bit", "lora_target_modules")),
    Case("trl", "lines/orpo_full.cmd", _trl(micro_batch=4, grad_accum=1, seq_len=1024)),
    Case("trl", "lines/orpo_peft.cmd",
         _trl(method="lora", lora_rank=16, micro_batch=4, optimizer="sgd-momentum"),
         said=("RMSprop",)),
    Case("trl", "lines/cpo_full.cmd", _trl(micro_batch=4, seq_len=1024)),
    Case("trl", "lines/cpo_qlora.cmd", _trl(method="lora", lora_rank=16, optimizer="sgd-momentum")),
    Case("trl", "lines/reward_full.cmd", _trl(micro_batch=8, seq_len=2048), Q05),
    Case("trl", "lines/reward_lora.cmd", _trl(method="lora", lora_rank=32, seq_len=2048), Q05),
    # openai/gpt-oss-20b: no catalog entry offline; ZeRO-3 over the config's 8 processes
    Case("trl", "lines/sft_gpt_oss.cmd",
         {"stack": "deepspeed", "strategy": "zero3", "hardware.gpus_per_node": 8,
          "micro_batch": 2, "seq_len": 4096, "checkpointing": "full", "attention": "flash"},
         ("--params", "21B")),
    # `--lora_target_modules "q_proj", "v_proj"`: the shell passes "q_proj," (with the comma)
    Case("trl", "lines/gspo.cmd", error="'q_proj,' matches no module"),
    Case("trl", "lines/readme_trl_sft.cmd", _trl(micro_batch=8, seq_len=1024),
         said=("GPU count: accelerate launch without a config",)),
    Case("trl", "lines/readme_trl_dpo.cmd", _trl(seq_len=1024), Q05),
    Case("trl", "lines/readme_trl_kto.cmd", _trl(seq_len=1024), Q05),
    Case("trl", "lines/cli_sft.cmd", _trl(seq_len=1024, micro_batch=8), said=(GPUS_ASSUMED,)),
    Case("trl", "lines/cli_dpo.cmd", _trl(seq_len=1024)),
    Case("trl", "lines/cli_reward.cmd", _trl(seq_len=1024)),
    Case("trl", "lines/cli_grpo.cmd", _trl(seq_len=4096),
         said=("completions of up to 512 tokens",)),
    Case("trl", "lines/cli_kto.cmd", _trl(seq_len=1024)),
    Case("trl", "lines/cli_sft_num_processes.cmd",
         _trl(seq_len=1024, **{"hardware.gpus_per_node": 4}), reads=("num_processes",)),
    Case("trl/clis_basic", "launch.cmd", _trl(seq_len=1024), said=(GPUS_ASSUMED,)),
    Case("trl/clis_basic", "sft_config.yaml", _trl(seq_len=1024),
         said=("without its launch line",)),
    Case("trl/clis_num_processes", "launch.cmd",
         _trl(seq_len=1024, **{"hardware.gpus_per_node": 4}), reads=("num_processes",)),
    Case("trl/clis_dpo", "launch.cmd", _trl(seq_len=1024)),
    # -- alignment-handbook: README lines, `scripts/X.py --config recipe.yaml` (TrlParser) --------
    Case("alignment_handbook", "lines/zephyr7b_sft_full.cmd",
         {"stack": "deepspeed", "strategy": "zero3", "hardware.gpus_per_node": 8,
          "micro_batch": 16, "grad_accum": 1, "seq_len": 2048, "checkpointing": "full",
          "precision": "bf16-mixed", "attention": "flash"},
         said=("max_seq_length: read as max_length",), reads=("per_device_train_batch_size",)),
    Case("alignment_handbook", "lines/zephyr7b_dpo_full.cmd",
         {"stack": "deepspeed", "micro_batch": 8, "grad_accum": 2, "seq_len": 1024,
          "optimizer_kernel": "foreach"}, MISTRAL),
    Case("alignment_handbook", "lines/zephyr7b_sft_qlora.cmd",
         {"stack": "trainer", "hardware.gpus_per_node": 1, "method": "qlora", "lora_rank": 16,
          "micro_batch": 4, "grad_accum": 2, "seq_len": 2048, "precision": "bf16"},
         reads=("load_in_4bit", "num_processes")),
    Case("alignment_handbook", "lines/gemma_sft.cmd",
         {"stack": "deepspeed", "micro_batch": 4, "grad_accum": 4, "seq_len": 2048}),
    Case("alignment_handbook", "lines/gemma_dpo.cmd",
         {"stack": "deepspeed", "micro_batch": 2, "grad_accum": 8, "seq_len": 1024},
         ("--model", "google/gemma-7b")),  # HuggingFaceH4/zephyr-7b-gemma-sft-v0.1
    Case("alignment_handbook", "lines/smollm_sft.cmd",
         {"stack": "deepspeed", "micro_batch": 4, "grad_accum": 4, "seq_len": 2048},
         ("--model", "HuggingFaceTB/SmolLM2-360M")),  # HuggingFaceTB/SmolLM-360M
    Case("alignment_handbook", "lines/smollm2_sft.cmd",
         {"stack": "deepspeed", "micro_batch": 4, "grad_accum": 4, "seq_len": 8192}),
    Case("alignment_handbook", "lines/smollm2_sft_smol.cmd",
         {"stack": "deepspeed", "micro_batch": 4, "seq_len": 8192}),
    Case("alignment_handbook", "lines/smollm2_dpo.cmd",
         {"stack": "deepspeed", "micro_batch": 2, "grad_accum": 8, "seq_len": 1024},
         ("--model", "HuggingFaceTB/SmolLM2-1.7B")),  # loubnabnl/smollm2-1.7B-sft
    Case("alignment_handbook", "lines/smollm2_dpo_smol.cmd",
         {"stack": "deepspeed", "micro_batch": 2, "seq_len": 1024},
         ("--model", "HuggingFaceTB/SmolLM2-360M")),  # loubnabnl/smollm2-360M-sft
    # the line's --gradient_accumulation_steps 16 replaces the recipe's 2 (TrlParser)
    Case("alignment_handbook", "lines/smollm3_mid.cmd",
         {"stack": "deepspeed", "micro_batch": 1, "grad_accum": 16, "seq_len": 32768,
          "loss": "fused"}, ("--params", "3B"), reads=("use_liger_kernel",)),
    Case("alignment_handbook", "lines/smollm3_sft.cmd",
         {"stack": "deepspeed", "grad_accum": 16, "seq_len": 65536, "loss": "fused"},
         ("--params", "3B")),
    Case("alignment_handbook", "lines/smollm3_apo.cmd",
         {"stack": "deepspeed", "grad_accum": 4, "seq_len": 24576, "loss": "fused"},
         ("--params", "3B")),
    Case("alignment_handbook", "lines/starchat2_sft.cmd",
         {"stack": "deepspeed", "micro_batch": 8, "grad_accum": 2, "seq_len": 2048},
         ("--params", "16B")),  # bigcode/starcoder2-15b
    Case("alignment_handbook", "lines/starchat2_dpo.cmd",
         {"stack": "deepspeed", "micro_batch": 2, "grad_accum": 8, "seq_len": 1024},
         ("--params", "16B")),
    Case("alignment_handbook", "lines/zephyr141b_orpo.cmd",
         {"stack": "fsdp1", "hardware.gpus_per_node": 8, "micro_batch": 1, "seq_len": 2048,
          "optimizer": "adamw8bit", "precision": "bf16-mixed"},
         ("--model", "mistralai/Mixtral-8x22B-v0.1")),  # mistral-community/Mixtral-8x22B-v0.1
    Case("alignment_handbook", "lines/cai_dpo.cmd",
         {"stack": "deepspeed", "micro_batch": 2, "grad_accum": 1, "seq_len": 1024,
          "optimizer": "sgd-momentum"}, MISTRAL),
    Case("alignment_handbook", "recipes/zephyr-7b-beta/sft/config_full.yaml",
         {"stack": "trainer", "precision": "bf16", "micro_batch": 16, "seq_len": 2048},
         said=("without its launch line", GPUS_ASSUMED)),
    Case("alignment_handbook", "recipes/zephyr-7b-beta/sft/config_qlora.yaml",
         {"method": "qlora", "lora_rank": 16, "micro_batch": 4, "grad_accum": 2}),
    Case("alignment_handbook", "recipes/zephyr-7b-beta/dpo/config_qlora.yaml",
         {"method": "qlora", "lora_rank": 128, "micro_batch": 4, "grad_accum": 4,
          "seq_len": 1024, "optimizer": "paged-adamw"}, MISTRAL),
    Case("alignment_handbook", "recipes/constitutional-ai/sft/config_grok.yaml",
         {"stack": "trainer", "precision": "bf16", "micro_batch": 8, "grad_accum": 4,
          "seq_len": 2048, "checkpointing": "full", "attention": "flash"}),
    Case("alignment_handbook", "recipes/smollm2/sft/config.yaml",
         {"micro_batch": 4, "grad_accum": 4, "seq_len": 8192, "precision": "bf16"}),
    Case("alignment_handbook", "recipes/accelerate_configs/zero3.yaml",
         {"stack": "deepspeed", "strategy": "zero3", "hardware.gpus_per_node": 8}),
    Case("alignment_handbook", "recipes/accelerate_configs/fsdp.yaml",
         {"stack": "fsdp1", "hardware.gpus_per_node": 8}),
    Case("alignment_handbook", "recipes/accelerate_configs/ddp.yaml",
         {"stack": "trainer", "strategy": "ddp", "hardware.gpus_per_node": 8}),
    # -- PEFT examples/sft: train.py's own flags over TRL's SFTConfig ---------------------------
    Case("peft/examples/sft", "run_peft.sh",
         {"stack": "trainer", "method": "qlora", "lora_rank": 8, "lora_targets": ("all-linear",),
          "qlora_double_quant": True, "micro_batch": 8, "grad_accum": 8, "seq_len": 2048,
          "checkpointing": "full", "attention": "flash", "precision": "bf16-autocast"},
         said=(GPUS_ASSUMED,), reads=("use_4bit_quantization", "use_nested_quant",
                                      "use_flash_attn", "bnb_4bit_quant_storage_dtype")),
    Case("peft/examples/sft", "run_peft_multigpu.sh",
         {"stack": "trainer", "hardware.gpus_per_node": 8, "method": "qlora", "lora_rank": 8}),
    Case("peft/examples/sft", "run_unsloth_peft.sh",
         {"method": "qlora", "lora_rank": 8, "lora_targets": ("q_proj", "k_proj", "v_proj",
          "o_proj", "down_proj", "up_proj", "gate_proj")}, said=("Unsloth",)),
    Case("peft/examples/sft", "run_peft_deepspeed.sh",
         {"stack": "deepspeed", "strategy": "zero3", "hardware.gpus_per_node": 8,
          "method": "lora", "lora_rank": 8, "micro_batch": 8, "grad_accum": 4, "seq_len": 2048}),
    Case("peft/examples/sft", "run_peft_fsdp.sh",
         {"stack": "fsdp1", "hardware.gpus_per_node": 8, "method": "lora", "micro_batch": 8,
          "grad_accum": 4, "precision": "bf16-mixed"}),
    # hugging-quants/Meta-Llama-3.1-8B-Instruct-GPTQ-INT4: sized on the 16-bit base (more)
    Case("peft/examples/sft", "run_peft_fsdp_gptq.sh",
         {"stack": "fsdp1", "method": "lora", "lora_targets": ("q_proj", "k_proj", "v_proj",
          "o_proj", "up_proj", "gate_proj")}, ("--model", "meta-llama/Llama-3.1-8B")),
    Case("peft/examples/sft", "run_peft_qlora_deepspeed_stage3.sh",
         {"stack": "deepspeed", "strategy": "zero3", "hardware.gpus_per_node": 2,
          "method": "qlora", "micro_batch": 2, "grad_accum": 2}),
    # `--bf16 True` against accelerate's `mixed_precision: 'no'`: the Trainer's wins
    Case("peft/examples/sft", "run_peft_qlora_fsdp.sh",
         {"stack": "fsdp1", "hardware.gpus_per_node": 2, "method": "qlora", "offload": "params",
          "precision": "bf16-mixed", "micro_batch": 2},
         said=("wins over", "mixed_precision (no)"), reads=("fsdp_offload_params",)),
    Case("peft/examples/sft", "configs/fsdp_config_qlora.yaml",
         {"stack": "fsdp1", "hardware.gpus_per_node": 2, "offload": "params"}),
    Case("peft/examples/sft", "configs/deepspeed_config.yaml",
         {"stack": "deepspeed", "strategy": "zero3", "grad_accum": 4}),
    # -- DeepSpeed-Chat: main.py's own flags, the script's $ZERO_STAGE default ------------------
    Case("deepspeed_chat", "step1_supervised_finetuning/training_scripts/llama2/run_llama2_7b.sh",
         {"stack": "deepspeed", "strategy": "zero3", "method": "full", "micro_batch": 4,
          "seq_len": 512, "grad_accum": 1, "checkpointing": "full", "precision": "bf16-mixed"},
         said=("$ZERO_STAGE is '3'", "fp16 counted as bf16", GPUS_ASSUMED),
         reads=("zero_stage", "max_seq_len")),
    Case("deepspeed_chat",
         "step1_supervised_finetuning/training_scripts/llama2/run_llama2_7b_lora.sh",
         {"stack": "deepspeed", "strategy": "zero3", "method": "lora", "lora_rank": 128,
          "lora_dropout": 0.0, "modules_to_save": ("embed_tokens",), "seq_len": 512},
         said=("without --only_optimize_lora",), reads=("lora_dim", "lora_module_name")),
    Case("deepspeed_chat",
         "step1_supervised_finetuning/training_scripts/opt/single_gpu/run_1.3b.sh",
         {"stack": "generic", "strategy": "ddp", "hardware.gpus_per_node": 1, "method": "lora",
          "lora_rank": 128, "micro_batch": 16, "grad_accum": 8, "seq_len": 512,
          "checkpointing": "none"}, said=("ZeRO stage 0",)),
    Case("deepspeed_chat",
         "step1_supervised_finetuning/training_scripts/opt/single_gpu/run_6.7b_lora.sh",
         {"stack": "generic", "hardware.gpus_per_node": 1, "method": "lora", "micro_batch": 8,
          "grad_accum": 16, "checkpointing": "full"}, ("--params", "6.7B")),
    Case("deepspeed_chat",
         "step1_supervised_finetuning/training_scripts/opt/single_node/run_1.3b.sh",
         {"stack": "deepspeed", "strategy": "zero2", "method": "full", "micro_batch": 8}),
    Case("deepspeed_chat",
         "step1_supervised_finetuning/training_scripts/opt/single_node/run_1.3b_lora.sh",
         {"stack": "generic", "method": "lora", "modules_to_save": ()},
         reads=("only_optimize_lora",)),
    Case("deepspeed_chat",
         "step1_supervised_finetuning/training_scripts/opt/single_node/run_13b.sh",
         {"stack": "deepspeed", "strategy": "zero3", "method": "lora", "micro_batch": 4},
         ("--params", "13B")),
    Case("deepspeed_chat",
         "step1_supervised_finetuning/training_scripts/opt/single_node/run_30b_lora.sh",
         {"stack": "deepspeed", "strategy": "zero3", "method": "lora"}, ("--params", "30B")),
    Case("deepspeed_chat",
         "step1_supervised_finetuning/training_scripts/opt/single_node/run_6.7b.sh",
         {"stack": "deepspeed", "strategy": "zero3", "method": "full", "micro_batch": 6},
         ("--params", "6.7B")),
    Case("deepspeed_chat", "step1_supervised_finetuning/training_scripts/opt/multi_node/run_66b.sh",
         {"stack": "deepspeed", "strategy": "zero3", "method": "lora"}, ("--params", "66B")),
    Case("deepspeed_chat", "step2_dpo_finetuning/training_scripts/llama2/run_llama2_7b.sh",
         {"stack": "deepspeed", "strategy": "zero3", "offload": "params", "micro_batch": 8},
         reads=("offload",)),
    Case("deepspeed_chat", "step2_dpo_finetuning/training_scripts/llama2/run_llama2_7b_lora.sh",
         {"stack": "deepspeed", "method": "lora", "lora_rank": 128, "offload": "params"}),
    # -- accelerate's examples and DeepSpeed templates -------------------------------------------
    Case("accelerate/examples/config_yaml_templates", "deepspeed.yaml",
         {"stack": "deepspeed", "strategy": "zero1", "hardware.gpus_per_node": 2,
          "grad_accum": 1}, said=("fp16 counted as bf16", DEEPSPEED_AUTO),
         reads=("deepspeed_config_file", "fp16.enabled")),
    Case("accelerate/examples/config_yaml_templates", "fp8.yaml",
         {"stack": "trainer", "hardware.gpus_per_node": 1}, said=("fp8",)),
    Case("accelerate/examples/config_yaml_templates", "fsdp.yaml",
         {"stack": "fsdp1", "hardware.gpus_per_node": 2, "checkpointing": "none",
          "offload": "none", "precision": "bf16-mixed"}),
    Case("accelerate/examples/config_yaml_templates", "multi_gpu.yaml",
         {"stack": "trainer", "strategy": "ddp", "hardware.gpus_per_node": 2}),
    Case("accelerate/examples/config_yaml_templates", "multi_node.yaml",
         {"stack": "trainer", "hardware.gpus_per_node": 4, "hardware.nodes": 2}),
    Case("accelerate/examples/config_yaml_templates", "single_accelerator.yaml",
         {"stack": "trainer", "hardware.gpus_per_node": 1}),
    Case("accelerate", "examples/slurm/fsdp_config.yaml", {"stack": "fsdp1"},
         said=(GPUS_ASSUMED,)),
    Case("accelerate", "examples/torch_native_parallelism/configs/cp.yaml",
         {"stack": "fsdp2", "hardware.gpus_per_node": 8, "checkpointing": "full"},
         said=("context parallel 8",)),
    Case("accelerate", "examples/torch_native_parallelism/configs/tp_hsdp.yaml",
         {"stack": "fsdp2", "strategy": "hsdp", "tp": 2}),
    Case("accelerate", "examples/deepspeed_config_templates/zero_stage2_offload_config.json",
         {"stack": "deepspeed", "strategy": "zero2", "offload": "optimizer"},
         said=(GPUS_ASSUMED, "fp16 counted as bf16")),
    Case("accelerate", "examples/deepspeed_config_templates/zero_stage3_offload_config.json",
         {"stack": "deepspeed", "strategy": "zero3", "offload": "params"}),
    Case("accelerate", "examples/deepspeed_config_templates/zero_stage3_config.json",
         {"stack": "deepspeed", "strategy": "zero3", "offload": "none"}),
    Case("accelerate", "examples/deepspeed_config_templates/zero_stage2_config.json",
         {"stack": "deepspeed", "strategy": "zero2"}),
    Case("accelerate", "examples/deepspeed_config_templates/zero_stage1_config.json",
         {"stack": "deepspeed", "strategy": "zero1"}),
    # -- transformers' DeepSpeed test configs: fp16/bf16 "auto", no Trainer arguments: fp32 ----
    Case("transformers", "ds_config_zero2.json", {"strategy": "zero2", "offload": "optimizer"},
         said=(DEEPSPEED_AUTO, GPUS_ASSUMED, "fp16 'enabled' are 'auto'")),
    Case("transformers", "ds_config_zero3.json", {"strategy": "zero3", "offload": "params"}),
    Case("transformers", "ds_config_zero3_bf16.json", {"strategy": "zero3", "offload": "params"}),
    # -- launch lines that override their config's keys (the override wins over the file:
    # torchtune config/_utils.py _merge_yaml_and_cli_args, where `optimizer=X` over a block
    # with a _component_ sets that component; LLaMA-Factory hparams/parser.py read_args;
    # axolotl cli/utils/args.py add_options_from_config); the provenance names the word ---------
    Case("torchtune", "lines/readme_overrides.cmd",
         {"stack": "torchtune", "strategy": "ddp", "hardware.gpus_per_node": 1, "method": "lora",
          "lora_rank": 8, "micro_batch": 8, "grad_accum": 8, "checkpointing": "full",
          "precision": "bf16"},
         reads=("readme_overrides.cmd:1:batch_size=8 (over batch_size of recipes/configs/"
                "llama2/7B_lora_single_device.yaml)", "enable_activation_checkpointing=True")),
    Case("torchtune", "lines/readme_qlora_3b.cmd",
         {"stack": "torchtune", "hardware.gpus_per_node": 1, "method": "qlora", "lora_rank": 64,
          "micro_batch": 2, "grad_accum": 1, "seq_len": 4096, "checkpointing": "full",
          "activation_offload": True, "optimizer": "adamw", "optimizer_in_backward": False,
          "loss": "chunked", "precision": "bf16"},
         reads=(":1:batch_size=2 (over batch_size", "tokenizer.max_seq_len=4096",
                ":1:optimizer=torch.optim.AdamW (over optimizer._component_",
                "loss=torchtune.modules.loss.CEWithChunkedOutputLoss")),
    Case("llamafactory", "lines/readme_overrides.cmd",
         {"stack": "trainer", "method": "lora", "lora_rank": 8, "micro_batch": 1,
          "seq_len": 2048, "grad_accum": 8, "checkpointing": "full", "precision": "bf16"},
         ("--model", "Qwen/Qwen3-4B")),
    Case("axolotl", "lines/cli_overrides.cmd",
         {"stack": "trainer", "method": "lora", "lora_rank": 16, "micro_batch": 2,
          "seq_len": 2048, "grad_accum": 2, "checkpointing": "full", "optimizer": "adamw8bit",
          "precision": "bf16"},
         ("--model", "meta-llama/Llama-3.2-1B"),
         reads=("cli_overrides.cmd:1:--micro-batch-size 2 (over micro_batch_size of "
                "examples/llama-3/lora-1b.yml)",)),
]  # fmt: skip

#: The objective each preference or RL launch trains (the trainer the line runs, or its
#: config's keys: DPOConfig's loss_type, ...); every other case trains SFT.
OBJECTIVES = {
    "trl/lines/dpo_full.cmd": "dpo", "trl/lines/dpo_lora.cmd": "dpo",
    "trl/lines/kto_full.cmd": "kto", "trl/lines/kto_qlora.cmd": "kto",
    "trl/lines/orpo_full.cmd": "orpo", "trl/lines/orpo_peft.cmd": "orpo",
    "trl/lines/cpo_full.cmd": "cpo", "trl/lines/cpo_qlora.cmd": "cpo",
    "trl/lines/reward_full.cmd": "reward", "trl/lines/reward_lora.cmd": "reward",
    "trl/lines/readme_trl_dpo.cmd": "dpo", "trl/lines/readme_trl_kto.cmd": "kto",
    "trl/lines/cli_dpo.cmd": "dpo", "trl/lines/cli_reward.cmd": "reward",
    "trl/lines/cli_grpo.cmd": "grpo", "trl/lines/cli_kto.cmd": "kto",
    "trl/clis_dpo/launch.cmd": "dpo",
    "alignment_handbook/lines/zephyr7b_dpo_full.cmd": "dpo",
    "alignment_handbook/lines/gemma_dpo.cmd": "dpo",
    "alignment_handbook/lines/smollm2_dpo.cmd": "dpo",
    "alignment_handbook/lines/smollm2_dpo_smol.cmd": "dpo",
    "alignment_handbook/lines/smollm3_apo.cmd": "dpo",
    "alignment_handbook/lines/starchat2_dpo.cmd": "dpo",
    "alignment_handbook/lines/zephyr141b_orpo.cmd": "orpo",
    "alignment_handbook/lines/cai_dpo.cmd": "dpo",
    "alignment_handbook/recipes/zephyr-7b-beta/dpo/config_qlora.yaml": "dpo",
    "deepspeed_chat/step2_dpo_finetuning/training_scripts/llama2/run_llama2_7b.sh": "dpo",
    "deepspeed_chat/step2_dpo_finetuning/training_scripts/llama2/run_llama2_7b_lora.sh": "dpo",
}  # fmt: skip


def estimate(case: Case, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> tuple[int, str, str]:
    """`memtui estimate --json --from FILE` run from the case's folder: (exit, out, err)."""
    monkeypatch.chdir(UPSTREAM / case.cwd)
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf"))  # no accelerate default config
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")  # no GPU counted: the count is assumed
    out, err = io.StringIO(), io.StringIO()
    with redirect_stdout(out), redirect_stderr(err):
        try:
            code = main(["estimate", "--json", "--from", case.path, *case.flags])
        except SystemExit as exit_:
            code = int(exit_.code or 0)
    return code, out.getvalue(), err.getvalue()


def value(plan: Mapping[str, Any], dotted: str) -> Any:
    head, _, rest = dotted.partition(".")
    found = plan[head]
    return value(found, rest) if rest else found


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_the_upstream_file_is_read_as_its_tools_run_it(
    case: Case, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    code, out, err = estimate(case, monkeypatch, tmp_path)
    assert "Traceback" not in out + err
    if case.error is not None:
        assert code == 2 and case.error in err, err
        assert len(err.strip().splitlines()) == 1, err
        return
    assert code == 0, err
    document = json.loads(out)
    plan = document["plan"]
    for dotted, expected in case.plan.items():
        got = value(plan, dotted)
        got = tuple(got) if isinstance(got, list) else got
        assert got == expected, f"{dotted}: {got!r}, expected {expected!r}"
    assumptions = " | ".join(document["assumptions"])
    for text in case.said:
        assert text in assumptions, f"{text!r} not among: {assumptions}"
    said = assumptions + " | " + " | ".join(p["source"] for p in document["provenance"])
    for setting in case.reads:
        assert setting in said, f"{setting} neither read nor named"
    assert plan["objective"] == OBJECTIVES.get(case.id, "sft")
    gpus_given = any(p["field"] == "hardware.gpus_per_node" for p in document["provenance"])
    assert gpus_given or GPUS_ASSUMED in assumptions, "a GPU count neither given nor said"


FOLDERS = ("accelerate", "alignment_handbook", "deepspeed_chat", "peft", "transformers", "trl")
"""This file's part of the corpus (tests/test_upstream_yaml.py runs the YAML tools' folders)."""


def _corpus() -> list[Path]:
    return sorted(
        p
        for folder in FOLDERS
        for p in (UPSTREAM / folder).rglob("*")
        if p.is_file() and p.name != "SOURCES.toml"
    )


def test_every_file_records_its_repository_path_and_commit() -> None:
    for folder in (UPSTREAM / name for name in FOLDERS):
        sources = tomllib.loads((folder / "SOURCES.toml").read_text())["files"]
        files = {str(p.relative_to(folder)) for p in _corpus() if folder in p.parents}
        assert set(sources) == files, folder
        for entry in sources.values():
            assert entry["repository"].count("/") == 1 and len(entry["commit"]) == 40


def test_every_file_is_a_case_or_one_a_case_launches() -> None:
    used = {UPSTREAM / c.cwd / c.path for c in CASES}
    named = {p for p in _corpus() if p.name in " ".join(p2.read_text() for p2 in used)}
    assert not set(_corpus()) - used - named
    assert len(CASES) >= 70


def _estimate_process(
    line: Path, env: dict[str, str], *args: str
) -> subprocess.CompletedProcess[str]:
    env = {**env, "PYTHONPATH": str(REPO), "HF_HOME": str(line.parent / "hf")}
    return subprocess.run(
        [sys.executable, "-m", "memtui", "estimate", "--from", str(line), *args],
        capture_output=True, text=True, env=env, cwd=UPSTREAM / "trl", timeout=120,
    )  # fmt: skip


def test_the_gpu_count_is_the_nodes_when_no_file_gives_it(
    fake_nvml: FakeNvml, tmp_path: Path
) -> None:
    """`trl sft` without an accelerate config runs a process per GPU: NVML's count."""
    fake_nvml.write({"gpus": [gpu(i) for i in range(4)]})
    line = tmp_path / "launch.cmd"
    line.write_text((UPSTREAM / "trl" / "lines" / "readme_trl_sft.cmd").read_text())
    env = fake_nvml.env()
    env.pop("CUDA_VISIBLE_DEVICES", None)
    done = _estimate_process(line, env, "--json")
    assert done.returncode == 0, done.stderr
    document = json.loads(done.stdout)
    assert document["plan"]["hardware"]["gpus_per_node"] == 4
    source = next(p["source"] for p in document["provenance"]
                  if p["field"] == "hardware.gpus_per_node")  # fmt: skip
    assert "NVML" in source and "accelerate launch without a config" in source
    assert not any(GPUS_ASSUMED in a for a in document["assumptions"])
    env["CUDA_VISIBLE_DEVICES"] = "0,1"  # what CUDA, and so accelerate, would count
    again = json.loads(_estimate_process(line, env, "--json").stdout)
    assert again["plan"]["hardware"]["gpus_per_node"] == 2


def test_without_a_gpu_the_verdict_line_says_the_count_it_assumed(tmp_path: Path) -> None:
    line = tmp_path / "launch.cmd"
    line.write_text((UPSTREAM / "trl" / "lines" / "readme_trl_sft.cmd").read_text())
    env = {**os.environ, "CUDA_VISIBLE_DEVICES": ""}
    done = _estimate_process(line, env)
    assert done.returncode == 0, done.stderr
    verdict = next(t for t in done.stdout.splitlines() if "FIT" in t and "headroom" in t)
    assert "assumed: GPU count: accelerate launch without a config" in verdict
    assert "sized for 8 GPUs per node" in verdict


@pytest.mark.parametrize(
    "line",
    [
        "torchrun --nproc_per_node 1000000000000 train.py --per_device_train_batch_size 2",
        "torchrun --nproc-per-node=0 train.py --per_device_train_batch_size 2",
        "accelerate launch --num_processes 99999 train.py --per_device_train_batch_size 2",
        "deepspeed --num_gpus 5000 train.py --per_device_train_batch_size 2",
    ],
)
def test_an_absurd_process_count_is_one_line(
    line: str, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    (tmp_path / "launch.sh").write_text(line + "\n")
    code, _, err = estimate(Case(str(tmp_path), "launch.sh"), monkeypatch, tmp_path)
    assert code == 2 and "not a process count (1 to 1024)" in err
    assert len(err.strip().splitlines()) == 1 and "Traceback" not in err


@pytest.mark.parametrize(
    ("line", "gpus", "nodes"),
    [
        ("torchrun --nproc_per_node 4 train.py --bf16", 4, 1),
        ("torchrun --nproc-per-node 4 train.py --bf16", 4, 1),
        ("torchrun --nproc-per-node=4 --nnodes=2 train.py --bf16", 4, 2),
        ("torchrun train.py --bf16", 1, 1),  # torch's default: one process
        ("PET_NPROC_PER_NODE=2 torchrun train.py --bf16", 2, 1),
        ("python -m torch.distributed.run --nproc_per_node=3 train.py --bf16", 3, 1),
        ("axolotl train cfg.yml --launcher torchrun -- --nproc_per_node=2", 2, 1),
        ("axolotl train cfg.yml -- --num_processes 2", 2, 1),
        ("NPROC_PER_NODE=4 NNODES=2 llamafactory-cli train lf.yaml", 4, 2),
        ("deepspeed --num_gpus 2 train.py --bf16", 2, 1),
        ("deepspeed --include localhost:0,1,2 train.py --bf16", 3, 1),
    ],
)
def test_the_process_count_in_every_spelling(
    line: str, gpus: int, nodes: int, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    (tmp_path / "cfg.yml").write_text("base_model: openai-community/gpt2\nmicro_batch_size: 1\n"
                                      "sequence_len: 512\ndatasets: []\n")  # fmt: skip
    (tmp_path / "lf.yaml").write_text("model_name_or_path: openai-community/gpt2\nstage: sft\n"
                                      "finetuning_type: lora\ncutoff_len: 512\n")  # fmt: skip
    (tmp_path / "launch.sh").write_text(line + "\n")
    code, out, err = estimate(Case(str(tmp_path), "launch.sh"), monkeypatch, tmp_path)
    assert code == 0, err
    hardware = json.loads(out)["plan"]["hardware"]
    assert (hardware["gpus_per_node"], hardware["nodes"]) == (gpus, nodes)


@pytest.mark.parametrize(
    ("bf16", "precision"),
    [("--bf16 false", "bf16-autocast"), ("--fp16 false", "bf16-autocast"), ("", "bf16-autocast")],
)
def test_the_trainers_bf16_false_leaves_accelerates_mixed_precision(
    bf16: str, precision: str, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """TrainingArguments keeps ACCELERATE_MIXED_PRECISION unless bf16 / fp16 is on
    (transformers 5.24 training_args.py:1614-1618); TRL's bf16 is on unless set."""
    config = UPSTREAM / "alignment_handbook" / "recipes" / "accelerate_configs" / "ddp.yaml"
    (tmp_path / "launch.sh").write_text(
        f"accelerate launch --config_file {config} scripts/sft.py --model_name_or_path gpt2 "
        f"--dtype float32 {bf16}\n"
    )
    code, out, err = estimate(Case(str(tmp_path), "launch.sh"), monkeypatch, tmp_path)
    assert code == 0, err
    assert json.loads(out)["plan"]["precision"] == precision
