"""memtui against publicly reported peak memory of real fine-tunes, compared like with like.

Each run is a measurement somebody else made and published: where it was published (the
repository, file and commit), the line quoted, the plan as `memtui estimate` flags, and what
was measured: `allocated` (torch.cuda.max_memory_allocated, or torchtune's peak_memory_active,
which counts the same live blocks), `reserved` (max_memory_reserved), `nvidia-smi` (the whole
process as the driver sees it) or `unknown`. memtui's matching figure is the budget's
allocated, reserved or total; an `unknown` metric is compared with reserved and reported
apart. Runs that used something memtui cannot express are listed with the reason, not
dropped. Shapes that depend on the dataset are the cap the run was truncated or padded to
(said per run).

    python benchmarks/published.py                      # the table and the summary
    python benchmarks/published.py --write docs/accuracy.md
"""

from __future__ import annotations

import argparse
import statistics
import sys
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))  # doc_table

from memtui.cli import build_parser  # noqa: E402
from memtui.commands.plan_flags import plan_from_args  # noqa: E402
from memtui.estimator import estimate  # noqa: E402

GB, GiB = 10**9, 2**30
BEGIN, END = "<!-- published:begin -->", "<!-- published:end -->"

LITGPT_RT = (
    "Lightning-AI/litgpt tutorials/resource-tables.md @26857050f (lit-gpt 8641822, Oct 2023)"
)
LITGPT_HUB = "Lightning-AI/litgpt config_hub/finetune/README.md @26857050f (LitGPT 2024)"
TT_README_2404 = "pytorch/torchtune README.md @fef3ed10d (Apr 2024)"
TT_README_2409 = "pytorch/torchtune README.md @bd2a0fc7c (Sep 2024 table)"
TT_README_2411 = "pytorch/torchtune README.md @bd2a0fc7c (Nov 2024 table)"
TT_LORA_TUT = "pytorch/torchtune docs/source/tutorials/lora_finetune.rst @bd2a0fc7c"
PEFT_FSDP = "huggingface/peft docs/source/accelerate/fsdp.md @5d602fdbf"
PEFT_DS = "huggingface/peft docs/source/accelerate/deepspeed.md @5d602fdbf"

# lit-gpt's finetune/lora.py defaults: r=8, alpha 16, dropout 0.05 on q and v, AdamW,
# --precision bf16-true, SDPA, lm_head and cross-entropy in chunks; no checkpointing on one
# GPU (FSDP runs checkpoint every Block); the peak batch is the longest Alpaca sample.
LITGPT_LORA = (
    "--stack litgpt --precision bf16 --method lora --lora-rank 8 --lora-dropout 0.05 "
    "--optimizer adamw --attention flash --gpus 1 --strategy ddp --checkpointing none"
)
LITGPT_QLORA = (
    "--stack litgpt --precision bf16 --method qlora --lora-rank 8 --lora-dropout 0.05 "
    "--no-double-quant --optimizer paged-adamw --attention flash --gpus 1 --strategy ddp "
    "--checkpointing none --qlora-keeps-inputs"  # bitsandbytes 0.41.1 (tool_version)
)
# config_hub YAMLs: r=32 on q and v, dropout 0.05, micro-batch and max_seq_length 512 as listed
HUB_LORA = (
    "--stack litgpt --precision bf16 --method lora --lora-rank 32 --lora-dropout 0.05 "
    "--optimizer adamw --attention flash --gpus 1 --strategy ddp --checkpointing none "
    "--seq-len 512 --gpu-memory a10g"
)
# LitGPT 2024 with bitsandbytes before 0.43.2: its 4-bit linears kept their inputs
HUB_QLORA = HUB_LORA.replace("--method lora", "--method qlora").replace(
    "--optimizer adamw", "--optimizer paged-adamw --no-double-quant --qlora-keeps-inputs"
)
# torchtune 2024 configs: bf16, batch 2, max_seq_len 512 (Alpaca is longer), CrossEntropyLoss;
# torchtune 0.1.x (v0.1.0 2024-04-15, v0.1.1 2024-04-18)
TT_2404 = (
    "--stack torchtune --torchtune-version 0.1.1 --precision bf16 --micro-batch 2 --seq-len 512 "
    "--loss full "
    "--attention flash --optimizer adamw --optimizer-kernel foreach"  # no fused: True in 2024
)
PEFT_70B = (
    "--model meta-llama/Llama-2-70b-hf --precision bf16-mixed --lora-rank 8 --lora-dropout 0.1 "
    "--lora-targets all-linear --micro-batch 2 --seq-len 2048 --checkpointing full "
    "--attention flash"
)
COMPILE = "torch.compile: its effect on what the compiled graph saves is not modelled"
OUTSIDE_STEP = (
    "the whole-run maximum of a 2- or 4-GPU FSDP job that shards the model exceeds the same "
    "model's 1-GPU run (21.30 GB for Llama 2 7B, 38.12 GB for 13B), so it was not reached in "
    "the training step memtui models (loading the full checkpoint into FSDP, evaluation, "
    "generation: phases outside the step)"
)
TORCHAO_INIT = (
    "the run's max_memory_reserved was set at model init (the same table: 9.13 GB reserved "
    "after init, 9.29 GB in training; the recipe never resets the peak): torchao 0.1, current "
    "when the tutorial was written, quantized each weight to NF4 in one piece "
    "(nf4tensor.py quantize_tensor_nearest: (value - nf4).abs() holds 16 bf16 distances per "
    "element, twice, 3.1 GB for a 4096 x 11008 linear), and the allocator kept those blocks "
    "cached; torchao 0.2.0 quantizes in chunks of 1M elements (CHUNK_SIZE), so the init "
    "peak memtui would model for torchtune today is not the one measured"
)
MQA_MATH = (
    "--attention eager: lit-gpt 2023 hands Falcon's single key/value head to "
    "scaled_dot_product_attention unexpanded (model.py: n_query_groups == 1), which only the "
    "math kernel accepts (PyTorch 2.1 sdp_utils: fused kernels need equal head counts), so "
    "the s x s scores are stored; the 1079- and 256-token runs differ by 9.5 MB per token"
)
FUSED_QV = (
    "LoRA on the fused query_key_value: the litgpt stack takes lit-gpt's q and v parts of it "
    "(finetune/lora.py lora_query, lora_value) and the update zero_pad keeps for backward"
)
TINYLLAMA_ACCUM = (
    "tiny-llama/full.yaml (Lightning-AI/litgpt @089fc5c6c): global_batch_size 32, "
    "micro_batch_size 4, devices 1: 8 micro-batches per optimizer step"
)
SHARDED_QLORA = (
    "--no-kbit-upcast: TRL's SFTTrainer never calls prepare_model_for_kbit_training for QLoRA "
    "+ FSDP / DS-Zero3 (its is_sharded_qlora branch: the 4-bit parameters are on cpu or meta "
    "at init), so nothing is upcast to fp32"
)
PEFT_READ = "the doc's GPU memory is the process as the driver sees it (likely; not stated)"
PEFT_BNB = "bitsandbytes of early 2024 (before 0.43.2): 4-bit linears kept their inputs"


@dataclass(frozen=True)
class Run:
    """One published measurement and the plan that ran it."""

    id: str
    source: str
    quote: str
    flags: str
    measured: float
    """Bytes."""
    kind: str
    """allocated, reserved, nvidia-smi or unknown."""
    cannot: str = ""
    """Why memtui cannot express this run (then it is listed, not compared)."""
    notes: list[str] = field(default_factory=list)


RUNS: tuple[Run, ...] = (
    Run("litgpt-rt-phi15-lora-mb1", LITGPT_RT,
        "| 1.3 B | phi-1.5 | None | 1 | 1,572,864 | 4.82 GB | 1.62 min |",
        f"{LITGPT_LORA} --model microsoft/phi-1_5 --lora-targets q_proj,v_proj --micro-batch 1 "
        "--seq-len 1044 --gpu-memory a100-40gb", 4.82 * GB, "allocated"),
    Run("litgpt-rt-phi15-lora-mb4", LITGPT_RT,
        "| 1.3 B | phi-1.5 | None | 4 | 1,572,864 | 10.68 GB | 1.70 min |",
        f"{LITGPT_LORA} --model microsoft/phi-1_5 --lora-targets q_proj,v_proj --micro-batch 4 "
        "--seq-len 1044 --gpu-memory a100-40gb", 10.68 * GB, "allocated"),
    Run("litgpt-rt-stablelm3b-lora-mb1", LITGPT_RT,
        "| 3 B | StableLM Alpha | None | 1 | 2,097,152 | 9.69 GB | 1.24 min |",
        f"{LITGPT_LORA} --model stabilityai/stablelm-base-alpha-3b "
        "--lora-targets query_key_value --micro-batch 1 --seq-len 1034 --gpu-memory a100-40gb",
        9.69 * GB, "allocated", notes=[FUSED_QV]),
    Run("litgpt-rt-stablelm3b-lora-mb4", LITGPT_RT,
        "| 3 B | StableLM Alpha | None | 4 | 2,097,152 | 16.92 GB | 1.50 min |",
        f"{LITGPT_LORA} --model stabilityai/stablelm-base-alpha-3b "
        "--lora-targets query_key_value --micro-batch 4 --seq-len 1034 --gpu-memory a100-40gb",
        16.92 * GB, "allocated", notes=[FUSED_QV]),
    Run("litgpt-rt-stablelm3b-qlora-nf4-mb1", LITGPT_RT,
        "| 3 B | StableLM Alpha | bnb.nf4 | 1 | 2,097,152 | 6.35 GB | 1.82 min |",
        f"{LITGPT_QLORA} --model stabilityai/stablelm-base-alpha-3b "
        "--lora-targets query_key_value --micro-batch 1 --seq-len 1034 --gpu-memory a100-40gb",
        6.35 * GB, "allocated", notes=[FUSED_QV]),
    Run("litgpt-rt-llama2-7b-lora-mb1", LITGPT_RT,
        "| 7 B | Llama 2 | None | 1 | 4,194,304 | 21.30 GB | 2.36 min |",
        f"{LITGPT_LORA} --model meta-llama/Llama-2-7b-hf --lora-targets q_proj,v_proj "
        "--micro-batch 1 --seq-len 1304 --gpu-memory a100-40gb", 21.30 * GB, "allocated"),
    Run("litgpt-rt-llama2-7b-lora-mb2", LITGPT_RT,
        "| 7 B | Llama 2 | None | 2 | 4,194,304 | 29.07 GB | 2.52 min |",
        f"{LITGPT_LORA} --model meta-llama/Llama-2-7b-hf --lora-targets q_proj,v_proj "
        "--micro-batch 2 --seq-len 1304 --gpu-memory a100-40gb", 29.07 * GB, "allocated"),
    Run("litgpt-rt-llama2-7b-qlora-nf4-mb1", LITGPT_RT,
        "| 7 B | Llama 2 | bnb.nf4 | 1 | 4,194,304 | 14.14 GB | 3.68 min |",
        f"{LITGPT_QLORA} --model meta-llama/Llama-2-7b-hf --lora-targets q_proj,v_proj "
        "--micro-batch 1 --seq-len 1304 --gpu-memory a100-40gb", 14.14 * GB, "allocated"),
    Run("litgpt-rt-llama2-13b-lora-mb1", LITGPT_RT,
        "| 13 B | Llama 2 | None | 1 | 6,553,600 | 38.12 GB | 3.19 min |",
        f"{LITGPT_LORA} --model meta-llama/Llama-2-13b-hf --lora-targets q_proj,v_proj "
        "--micro-batch 1 --seq-len 1304 --gpu-memory a100-40gb", 38.12 * GB, "allocated"),
    Run("litgpt-rt-llama2-13b-qlora-nf4-mb1", LITGPT_RT,
        "| 13 B | Llama 2 | bnb.nf4 | 1 | 6,553,600 | 23.14 GB | 6.38 min |",
        f"{LITGPT_QLORA} --model meta-llama/Llama-2-13b-hf --lora-targets q_proj,v_proj "
        "--micro-batch 1 --seq-len 1304 --gpu-memory a100-40gb", 23.14 * GB, "allocated"),
    Run("litgpt-rt-llama2-7b-lora-fsdp2-mb1", LITGPT_RT,
        "| 7 B | Llama 2 | None | 1 | 4,194,304 | 2 x A100 | 22.18 GB | 5.93 min |",
        f"{LITGPT_LORA} --model meta-llama/Llama-2-7b-hf --lora-targets q_proj,v_proj "
        "--micro-batch 1 --seq-len 1304 --gpu-memory a100-40gb --gpus 2 --strategy fsdp "
        "--checkpointing full", 22.18 * GB, "allocated",
        cannot=OUTSIDE_STEP),
    Run("litgpt-rt-llama2-7b-lora-fsdp2-mb4", LITGPT_RT,
        "| 7 B | Llama 2 | None | 4 | 4,194,304 | 2 x A100 | 23.39 GB | 8.66 min |",
        f"{LITGPT_LORA} --model meta-llama/Llama-2-7b-hf --lora-targets q_proj,v_proj "
        "--micro-batch 4 --seq-len 1304 --gpu-memory a100-40gb --gpus 2 --strategy fsdp "
        "--checkpointing full", 23.39 * GB, "allocated",
        cannot=OUTSIDE_STEP),
    Run("litgpt-rt-llama2-13b-lora-fsdp4-mb1", LITGPT_RT,
        "| 13 B | Llama 2 | None | 1 | 6,553,600 | 4 x A100 | 35.57 GB | 10.25 min |",
        f"{LITGPT_LORA} --model meta-llama/Llama-2-13b-hf --lora-targets q_proj,v_proj "
        "--micro-batch 1 --seq-len 1304 --gpu-memory a100-40gb --gpus 4 --strategy fsdp "
        "--checkpointing full", 35.57 * GB, "allocated",
        cannot=OUTSIDE_STEP),
    Run("litgpt-ftlora-stablelm3b-lora-bf16mixed-mb1",
        "Lightning-AI/litgpt tutorials/finetune_lora.md @26857050f",
        "| Default (bf16-mixed) | 26.92 GB | 1.34 min | 21.43 GB |",
        f"{LITGPT_LORA.replace('--precision bf16', '--precision bf16-autocast')} "
        "--model stabilityai/stablelm-base-alpha-3b --lora-targets query_key_value "
        "--micro-batch 1 --seq-len 1034 --gpu-memory a100-40gb", 26.92 * GB, "allocated",
        notes=[FUSED_QV]),
    Run("litgpt-prep-falcon7b-lora-alpaca-full",
        "Lightning-AI/litgpt tutorials/prepare_dataset.md @26857050f",
        "the Falcon 7B model requires 23.52 GB of memory for the original Alpaca dataset",
        f"{LITGPT_LORA} --model tiiuae/falcon-7b --lora-targets query_key_value "
        "--micro-batch 1 --seq-len 1079 --attention eager", 23.52 * GB, "allocated",
        notes=[FUSED_QV, MQA_MATH]),
    Run("litgpt-prep-falcon7b-lora-trunc256",
        "Lightning-AI/litgpt tutorials/prepare_dataset.md @26857050f",
        "and 15.73 GB of memory for the truncated Alpaca dataset",
        f"{LITGPT_LORA} --model tiiuae/falcon-7b --lora-targets query_key_value "
        "--micro-batch 1 --seq-len 256 --attention eager", 15.73 * GB, "allocated",
        notes=[FUSED_QV, MQA_MATH]),
    Run("litgpt-ch-llama2-7b-lora-a10g", LITGPT_HUB,
        "| llama-2-7b/lora.yaml | llama-2-7b | 4 | 512 | 2 |"
        " 1xA10G | 32.82 min | $1.0 | 19.77 GB |",
        f"{HUB_LORA} --model meta-llama/Llama-2-7b-hf --lora-targets q_proj,v_proj "
        "--micro-batch 2", 19.77 * GB, "allocated"),
    Run("litgpt-ch-llama2-7b-qlora-a10g", LITGPT_HUB,
        "| llama-2-7b/qlora.yaml | llama-2-7b | 4 | 512 | 2 |"
        " 1xA10G | 45.67 min | $1.4 | 13.68 GB |",
        f"{HUB_QLORA} --model meta-llama/Llama-2-7b-hf --lora-targets q_proj,v_proj "
        "--micro-batch 2", 13.68 * GB, "allocated"),
    Run("litgpt-ch-mistral-7b-lora-a10g", LITGPT_HUB,
        "| mistral-7b/lora.yaml | mistral-7b | 4 | 512 | 2 |"
        " 1xA10G | 31.01 min | $0.9 | 20.66 GB |",
        f"{HUB_LORA} --model mistralai/Mistral-7B-v0.1 --lora-targets q_proj,v_proj "
        "--micro-batch 2", 20.66 * GB, "allocated"),
    Run("litgpt-ch-llama3-8b-lora-a10g", LITGPT_HUB,
        "| llama-3-8b/lora.yaml | llama-3-8b | 2 | 512 | 1 |"
        " 1xA10G | 14.79 min | $0.4 | 19.73 GB |",
        f"{HUB_LORA} --model meta-llama/Meta-Llama-3-8B --lora-targets q_proj,v_proj "
        "--micro-batch 1", 19.73 * GB, "allocated"),
    Run("litgpt-ch-llama3-8b-qlora-a10g", LITGPT_HUB,
        "| llama-3-8b/qlora.yaml | llama-3-8b | 2 | 512 | 2 |"
        " 1xA10G | 22.24 min | $0.7 | 17.41 GB |",
        f"{HUB_QLORA} --model meta-llama/Meta-Llama-3-8B --lora-targets q_proj,v_proj "
        "--micro-batch 2", 17.41 * GB, "allocated"),
    Run("litgpt-ch-phi2-lora-alllayers-a10g", LITGPT_HUB,
        "| phi-2/lora.yaml | phi-2 | 1 | 512 | 4 | 1xA10G | 3.78 min | $0.1 | 13.98 GB |",
        f"{HUB_LORA.replace('--lora-rank 32', '--lora-rank 8')} --model microsoft/phi-2 "
        "--lora-targets all-linear,lm_head --micro-batch 4", 13.98 * GB, "allocated"),
    Run("litgpt-ch-tinyllama-full-a10g", LITGPT_HUB,
        "| tiny-llama/full.yaml | tiny-llama | 1 | 512 | 4 | 1xA10G | 2.58 min | $0.1 | 14.10 GB |",
        "--stack litgpt --precision bf16 --method full --optimizer adamw --attention flash "
        "--gpus 1 --strategy ddp --checkpointing none --seq-len 512 --gpu-memory a10g "
        "--model TinyLlama/TinyLlama-1.1B-intermediate-step-1431k-3T --micro-batch 4 "
        "--grad-accum 8", 14.10 * GB, "allocated", notes=[TINYLLAMA_ACCUM]),
    Run("tt-readme-2404-llama2-7b-lora-1x4090", TT_README_2404,
        "| 1 x RTX 4090 | LoRA | lora_finetune_single_device | Llama-7B | 17.18 GB |",
        f"{TT_2404} --model meta-llama/Llama-2-7b-hf --method lora --lora-rank 8 "
        "--lora-targets q_proj,v_proj --checkpointing full --gpus 1 --strategy ddp "
        "--gpu-memory rtx4090", 17.18 * GB, "reserved",
        notes=["the README's table does not name the metric; torchtune logged reserved"]),
    Run("tt-readme-2404-llama2-7b-lora-2x4090-fsdp", TT_README_2404,
        "| 2 x RTX 4090 | LoRA | lora_finetune_distributed | Llama-7B | 20.95 GB |",
        f"{TT_2404} --model meta-llama/Llama-2-7b-hf --method lora --lora-rank 8 "
        "--lora-targets q_proj,v_proj --checkpointing none --gpus 2 --strategy fsdp "
        "--gpu-memory rtx4090", 20.95 * GB, "reserved",
        notes=["7B_lora.yaml turns activation checkpointing off"]),
    Run("tt-readme-2404-llama2-7b-full-lowmem-1x4090", TT_README_2404,
        "| 1 x RTX 4090 | Full finetune | full_finetune_single_device | Llama-7B | 14.97 GB |",
        f"{TT_2404} --model meta-llama/Llama-2-7b-hf --method full --optimizer paged-adamw "
        "--optimizer-in-backward --checkpointing full --gpus 1 --strategy ddp "
        "--gpu-memory rtx4090", 14.97 * GB, "reserved",
        notes=["paged AdamW state in managed memory: not in torch's reserved figure"]),
    Run("tt-readme-2404-llama2-7b-full-4x4090-fsdp", TT_README_2404,
        "| 4 x RTX 4090 | Full finetune | full_finetune_distributed | Llama-7B | 22.9 GB |",
        f"{TT_2404} --model meta-llama/Llama-2-7b-hf --method full --checkpointing full "
        "--gpus 4 --strategy fsdp --gpu-memory rtx4090", 22.9 * GB, "reserved"),
    Run("tt-lora-tut-llama2-7b-qv-r8", TT_LORA_TUT, "* - Q and V only - 8 - 16 - **15.57 GB**",
        f"{TT_2404} --model meta-llama/Llama-2-7b-hf --method lora --lora-rank 8 "
        "--lora-targets q_proj,v_proj --checkpointing full --gpus 1 --strategy ddp",
        15.57 * GB, "reserved"),
    Run("tt-lora-tut-llama2-7b-all-r8", TT_LORA_TUT, "* - all layers - 8 - 16 - 15.87 GB",
        f"{TT_2404} --model meta-llama/Llama-2-7b-hf --method lora --lora-rank 8 "
        "--lora-targets all-linear,lm_head --checkpointing full --gpus 1 --strategy ddp",
        15.87 * GB, "reserved"),
    Run("tt-lora-tut-llama2-7b-qv-r64", TT_LORA_TUT, "* - Q and V only - 64 - 128 - 15.86 GB",
        f"{TT_2404} --model meta-llama/Llama-2-7b-hf --method lora --lora-rank 64 "
        "--lora-targets q_proj,v_proj --checkpointing full --gpus 1 --strategy ddp",
        15.86 * GB, "reserved"),
    Run("tt-lora-tut-llama2-7b-all-r64", TT_LORA_TUT, "* - all layers - 64 - 128 - 17.04 GB",
        f"{TT_2404} --model meta-llama/Llama-2-7b-hf --method lora --lora-rank 64 "
        "--lora-targets all-linear,lm_head --checkpointing full --gpus 1 --strategy ddp",
        17.04 * GB, "reserved"),
    Run("tt-qlora-tut-llama2-7b-qlora",
        "pytorch/torchtune docs/source/tutorials/qlora_finetune.rst @bd2a0fc7c",
        "QLoRA 9.13 GB 9.29 GB",
        f"{TT_2404} --model meta-llama/Llama-2-7b-hf --method qlora --lora-rank 8 "
        "--lora-targets all-linear --checkpointing full --gpus 1 --strategy ddp",
        9.29 * GB, "reserved", cannot=TORCHAO_INIT),
    Run("tt-llama3-tut-8b-lora",
        "pytorch/torchtune docs/source/tutorials/llama3.rst @bd2a0fc7c",
        "In our experiments, we observed a peak memory usage of 18.5 GB.",
        f"{TT_2404} --model meta-llama/Meta-Llama-3-8B-Instruct --method lora --lora-rank 8 "
        "--lora-targets q_proj,v_proj --checkpointing full --gpus 1 --strategy ddp",
        18.5 * GB, "unknown"),
    Run("tt-readme-2411-llama32-3b-full-packed", TT_README_2411,
        "| [+ Packed Dataset](...) | 60.0 | +135.16% | 7075 | +238.40% |",
        "--stack torchtune --precision bf16 --model meta-llama/Llama-3.2-3B-Instruct "
        "--method full --micro-batch 2 --seq-len 4096 --loss full --checkpointing none "
        "--gpus 1 --strategy ddp --optimizer adamw --gpu-memory a100-80gb",
        60.0 * GiB, "allocated", notes=["peak_memory_active: the allocator's active blocks"]),
    Run("tt-readme-2411-llama32-3b-full-packed-compile", TT_README_2411,
        "| [+ Compile](...) | 51.0 | -14.93% | 8998 | +27.18% |", "", 51.0 * GiB, "allocated",
        cannot=COMPILE),
    Run("tt-readme-2411-llama32-3b-full-packed-compile-cce", TT_README_2411,
        "| [+ Chunked Cross Entropy](...) | 42.9 | -15.83% | 9174 | +1.96% |", "", 42.9 * GiB,
        "allocated", cannot=COMPILE),
    Run("tt-readme-2411-llama32-3b-full-packed-compile-cce-ac", TT_README_2411,
        "| [+ Activation Checkpointing](...) | 24.9 | -41.93% | 7210 | -21.41% |", "",
        24.9 * GiB, "allocated", cannot=COMPILE),
    Run("tt-readme-2411-llama32-3b-full-packed-compile-cce-ac-optinbwd", TT_README_2411,
        "| [+ Fuse optimizer step into backward](...) | 23.1 | -7.29% | 7309 | +1.38% |", "",
        23.1 * GiB, "allocated", cannot=COMPILE),
    Run("tt-readme-2411-llama32-3b-full-packed-compile-cce-ac-actoffload", TT_README_2411,
        "| [+ Activation Offloading](...) | 21.8 | -5.48% | 7301 | -0.11% |", "", 21.8 * GiB,
        "allocated", cannot=COMPILE),
    Run("tt-readme-2411-llama32-3b-full-packed-compile-cce-ac-adamw8bit", TT_README_2411,
        "| [+ 8-bit AdamW](...) | 17.6 | -19.63% | 6960 | -4.67% |", "", 17.6 * GiB,
        "allocated", cannot=COMPILE),
    Run("tt-readme-2411-llama32-3b-lora-packed-compile-cce-ac-offload", TT_README_2411,
        "| [LoRA](...) | 8.5 | -51.61% | 8210 | +17.96% |", "", 8.5 * GiB, "allocated",
        cannot=COMPILE),
    Run("tt-readme-2411-llama32-3b-qlora-packed-compile-cce-ac-offload", TT_README_2411,
        "| [QLoRA](...) | 4.6 | -45.71% | 8035 | -2.13% |", "", 4.6 * GiB, "allocated",
        cannot=COMPILE),
    Run("tt-readme-2409-llama31-8b-full-4090", TT_README_2409,
        "| Llama 3.1 8B | Full finetune | 1x 4090 | 18.9 GiB | 1650 |", "", 18.9 * GiB,
        "unknown", cannot=COMPILE),
    Run("tt-readme-2409-llama31-8b-lora-4090", TT_README_2409,
        "| Llama 3.1 8B | LoRA | 1x 4090 |  16.2 GiB | 3083 |", "", 16.2 * GiB, "unknown",
        cannot=COMPILE),
    Run("tt-readme-2409-llama31-8b-qlora-4090", TT_README_2409,
        "| Llama 3.1 8B | QLoRA | 1x 4090 | 7.4 GiB | 2413  |", "", 7.4 * GiB, "unknown",
        cannot=COMPILE),
    Run("tt-readme-2409-llama31-70b-lora-8xa100", TT_README_2409,
        "| Llama 3.1 70B | LoRA | 8x A100 | 27.6 GiB  | 3497  |", "", 27.6 * GiB, "unknown",
        cannot=COMPILE),
    Run("tt-readme-2409-llama31-70b-full-8xa100-cpuoffload", TT_README_2409,
        "| Llama 3.1 70B | Full finetune | 8x A100  | 13.9 GiB ** | 1568  |", "", 13.9 * GiB,
        "unknown", cannot=COMPILE),
    Run("peft-doc-fsdp-qlora-llama2-70b-2gpu", PEFT_FSDP,
        "When disabling CPU offloading, the GPU memory usage is  **35.6 GB/ GPU**.",
        f"--stack fsdp1 --method qlora {PEFT_70B} --gpus 2 --strategy fsdp --gpu-memory 80GB "
        "--qlora-keeps-inputs --no-kbit-upcast", 35.6 * GB, "nvidia-smi",
        notes=[PEFT_READ, PEFT_BNB, SHARDED_QLORA]),
    Run("peft-doc-fsdp-qlora-llama2-70b-2gpu-cpuoffload", PEFT_FSDP,
        "In the above example, the memory consumed per GPU is **19.6 GB**",
        f"--stack fsdp1 --method qlora {PEFT_70B} --gpus 2 --strategy fsdp --offload params "
        "--gpu-memory 24GB --qlora-keeps-inputs --no-kbit-upcast", 19.6 * GB, "nvidia-smi",
        notes=[PEFT_READ, PEFT_BNB, SHARDED_QLORA]),
    Run("peft-doc-dsz3-qlora-llama2-70b-2x40gb", PEFT_DS,
        "In the above example, the memory consumed per GPU is **36.6 GB**.",
        f"--stack deepspeed --method qlora {PEFT_70B} --gpus 2 --strategy zero3 "
        "--gpu-memory a100-40gb --qlora-keeps-inputs --no-kbit-upcast", 36.6 * GB,
        "nvidia-smi", notes=[PEFT_READ, PEFT_BNB, SHARDED_QLORA]),
    Run("peft-doc-dsz3-lora-llama2-70b-8xh100", PEFT_DS,
        "In the above example, the memory consumed per GPU is 64 GB (80%)",
        f"--stack deepspeed --method lora {PEFT_70B.replace('--micro-batch 2', '--micro-batch 8')}"
        " --gpus 8 --strategy zero3 --gpu-memory h100-sxm", 64.0 * GB, "nvidia-smi",
        notes=["read off the doc's screenshot of GPU memory"]),
)  # fmt: skip


@dataclass(frozen=True)
class Outcome:
    run: Run
    stack: str
    predicted: int
    basis: str
    method: str

    @property
    def error(self) -> float:
        return (self.predicted - self.run.measured) / self.run.measured


def predict(run: Run) -> Outcome:
    """memtui's figure for the run's plan that matches what the run measured."""
    args = build_parser().parse_args(["estimate", *run.flags.split()])
    plan = plan_from_args(args)
    budget = estimate(plan).budget
    if run.kind == "allocated":
        figure, basis = budget.allocated, "allocated"
    elif run.kind == "nvidia-smi":
        figure, basis = budget.total, "total"
    else:  # reserved, and the unknown metrics: the allocator's whole share
        figure, basis = budget.reserved, "reserved"
    return Outcome(run, plan.stack.value, figure, basis, plan.method.value)


def _pct(x: float) -> str:
    return f"{x:+.1%}"


def report() -> tuple[str, list[Outcome]]:
    outcomes = [predict(r) for r in RUNS if not r.cannot]
    lines = [
        "| run | stack | measured | memtui | error | source |",
        "|---|---|---:|---:|---:|---|",
    ]
    for o in outcomes:
        lines.append(
            f"| {o.run.id} | {o.stack} | {o.run.measured / GB:.2f} GB {o.run.kind} | "
            f"{o.predicted / GB:.2f} GB {o.basis} | {_pct(o.error)} | {o.run.source} |"
        )
    lines.append("")
    lines += _summary(outcomes)
    cannot = [r for r in RUNS if r.cannot]
    if cannot:
        lines += ["", "Listed, not compared (memtui cannot express what they ran):", ""]
        lines += [f"- {r.id} ({r.measured / GB:.2f} GB {r.kind}): {r.cannot}" for r in cannot]
    return "\n".join(lines), outcomes


def _summary(outcomes: list[Outcome]) -> list[str]:
    def line(label: str, group: list[Outcome]) -> str:
        errors = [o.error for o in group]
        under = sum(1 for e in errors if e < -0.10)
        return (
            f"| {label} | {len(group)} | {statistics.median(abs(e) for e in errors):.1%} | "
            f"{max(abs(e) for e in errors):.1%} | {min(errors):+.1%} | {under} |"
        )

    rows = [
        "| runs | n | median abs error | max abs error | most under | under by >10% |",
        "|---|---:|---:|---:|---:|---:|",
        line("all", outcomes),
    ]
    for key in sorted({o.stack for o in outcomes}):
        rows.append(line(f"stack {key}", [o for o in outcomes if o.stack == key]))
    for kind in sorted({o.run.kind for o in outcomes}):
        rows.append(line(f"measured {kind}", [o for o in outcomes if o.run.kind == kind]))
    return rows


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--write", metavar="FILE", help="replace the table in FILE's markers")
    args = parser.parse_args()
    text, _ = report()
    print(text)
    if args.write:
        from doc_table import write_table

        write_table(Path(args.write), BEGIN, END, text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
