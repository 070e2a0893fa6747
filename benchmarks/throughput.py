"""memtui's step time against publicly reported fine-tuning throughput, like with like.

Each run is a throughput somebody else measured and published: where (the repository, file
and commit, or the page), the line quoted, and the whole configuration as a typed `Config`
(model, card and count, method, precision, optimizer, sharding, micro-batch, sequence length,
gradient accumulation, checkpointing, the memtui stack that books it, and the flags beyond
those). A field the source does not state is the default of the software that ran it, and
the run says so in `defaults` with where that default is written. Throughput is compared as
tokens per second per GPU (a figure published for the whole job is divided by its GPUs); the
error is the step-time error, (predicted seconds - measured seconds) / measured seconds, which
is measured tokens/s over predicted tokens/s, minus one.

Runs that used something a memtui plan cannot express (a checkpointing policy between none,
selective and full, a card memtui has no figures for) are listed with the reason, not dropped.
Runs under torch.compile are compared (compile changes how fast the kernels run, not the work
the plan describes) and summarised apart, so that what compile buys shows as their error.

    python benchmarks/throughput.py                      # the table and the summary
    python benchmarks/throughput.py --write docs/accuracy.md
"""

from __future__ import annotations

import argparse
import statistics
import sys
from collections.abc import Callable
from dataclasses import dataclass
from enum import Enum
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))  # doc_table

from memtui.cli import build_parser  # noqa: E402
from memtui.commands.plan_flags import plan_from_args  # noqa: E402
from memtui.estimator.plan import Plan  # noqa: E402
from memtui.estimator.step_time import StepTime, step_time  # noqa: E402

BEGIN, END = "<!-- throughput:begin -->", "<!-- throughput:end -->"


class Per(Enum):
    """Whose tokens the published figure counts."""

    gpu = "per GPU"
    job = "all GPUs"
    step = "seconds per optimizer step"
    """The figure is the optimizer step's seconds (a trainer's s/it), each GPU training its
    own micro_batch x seq_len x grad_accum tokens in it (data parallel only)."""


class Over(Enum):
    """Which steps the published tokens/s is taken over."""

    optimizer_steps = "optimizer steps"
    """Whole optimizer steps (an epoch, a logging window): the optimizer step included."""
    micro_steps = "median micro-step"
    """The median micro-step of an accumulation: the optimizer step left out."""


@dataclass(frozen=True)
class Config:
    """A run's whole configuration, as memtui plan flags."""

    model: str
    card: str
    """A `memtui.estimator.hardware.GPUS` key."""
    gpus: int
    """GPUs per node."""
    method: str
    precision: str
    optimizer: str
    strategy: str
    micro_batch: int
    seq_len: int
    grad_accum: int
    checkpointing: str
    stack: str
    extra: str = ""
    """Flags beyond the fields above (LoRA shape, loss, kernels, offload, links)."""
    nodes: int = 1

    def flags(self) -> list[str]:
        return [
            *("--model", self.model, "--gpu-memory", self.card),
            *("--gpus", str(self.gpus), "--nodes", str(self.nodes)),
            *("--method", self.method, "--precision", self.precision),
            *("--optimizer", self.optimizer, "--strategy", self.strategy),
            *("--micro-batch", str(self.micro_batch), "--seq-len", str(self.seq_len)),
            *("--grad-accum", str(self.grad_accum), "--checkpointing", self.checkpointing),
            *("--stack", self.stack, "--attention", "flash"),
            *self.extra.split(),
        ]

    @property
    def total_gpus(self) -> int:
        return self.gpus * self.nodes


@dataclass(frozen=True)
class Run:
    """One published throughput and the configuration that reached it."""

    id: str
    source: str
    quote: str
    config: Config
    figure: float
    """Tokens per second, or seconds per optimizer step (`Per.step`), as published."""
    per: Per
    runner: str
    """The software that ran it, as the source names it."""
    over: Over = Over.optimizer_steps
    compiled: bool = False
    pretraining: bool = False
    """A pretraining-style run of a fine-tuning stack (synthetic or web data, full model)."""
    defaults: tuple[str, ...] = ()
    """Fields the source does not state: the runner's default and where it is written."""
    notes: tuple[str, ...] = ()
    cannot: str = ""
    """Why a memtui plan cannot express this run (then it is listed, not compared)."""

    @property
    def tokens_per_second_per_gpu(self) -> float:
        if self.per is Per.step:
            c = self.config
            return c.micro_batch * c.seq_len * c.grad_accum / self.figure
        return self.figure if self.per is Per.gpu else self.figure / self.config.total_gpus


# --- sources -------------------------------------------------------------------------------

TT_2409 = "pytorch/torchtune README.md @30b8519e8 (Sep 2024 table)"
TT_2411 = "pytorch/torchtune README.md @1814feb17 (Nov 2024 table)"
TITAN_A100 = "pytorch/torchtitan docs/performance.md @041336434 (64 x A100 80GB)"
TITAN_H100 = "pytorch/torchtitan docs/performance.md @eaea6f6a2 (torchtitan 9dec370, Dec 2024)"
TITAN_H200 = "pytorch/torchtitan benchmarks/llama3-8b_h200_202506_trainy-whitefiber.md @1af29373a"
TITAN_H200_CONFIG = (
    "the doc's command: train_configs/llama3_8b.toml (seq_len 8192, selective op "
    "checkpointing), --training.local_batch_size=2 --training.compile "
    "--model.converters=float8 --float8.enable_fsdp_float8_all_gather"
)
AUTOMODEL = "NVIDIA-NeMo/Automodel docs/performance-summary.md @01926a5c4"
SWIFT_ZERO3 = "modelscope/ms-swift examples/train/long_text/zero3.sh @e2a5019da"
SWIFT_BENCH = "modelscope/ms-swift docs/source_en/Megatron-SWIFT/Quick-start.md @8d86f2444"
SWIFT_BENCH_SCRIPT = (
    "the table's script, examples/megatron/benchmark/deepspeed.sh @d0c71e48c: "
    "--per_device_train_batch_size 1 --gradient_accumulation_steps 2 --packing true "
    "--max_length 8192 --attn_impl flash_attn (its --deepspeed set to the column's stage)"
)
SWIFT_DEFAULTS = (
    "swift/trainers/arguments.py @e2a5019da: gradient_checkpointing True; transformers "
    "TrainingArguments' optim adamw_torch; --torch_dtype bfloat16 (bf16 mixed precision, "
    "DeepSpeed's fp32 partitions)",
    "s/it: the trainer's seconds per optimizer step",
)
SWIFT_PACKING = (
    "--packing true: swift/llm/template/base.py @e2a5019da restarts position_ids at each "
    "packed sample, so flash-attention attends within each sample (a memtui plan times causal "
    "attention over the whole max_length), and a bin-packed row's fill below max_length is "
    "not stated"
)
FMS = "foundation-model-stack/fms-fsdp README.md @f1460f2 (128 x A100)"
FMS_DEFAULTS = (
    "fms_fsdp/config/training.py @f1460f2: seq_length 4096, mixed_precision True "
    "(train_utils.get_policies: bfSixteen, bf16 parameters and reductions over fp32 shards), "
    "use_torch_compile False, selective_checkpointing 1 ('checkpoint every block' when "
    "fsdp_activation_checkpointing is on, docs/configurations.md); main_training.py: "
    "optim.AdamW (torch's default kernel), one LLaMABlock per FSDP unit, no accumulation",
    "HSDP: sharded inside each node of 8, replicated across the 16 nodes (docs/"
    "configurations.md); the link between nodes is not stated: memtui's default",
    "the A100's memory is not stated: 80GB (the 70B row's 6 x 4096 tokens keep 6 x 4096 x "
    "8192 x 2 B x 80 layers = 32 GB of checkpointed block inputs alone)",
    "token/gpu/sec: train_utils.train's tokens of all ranks over world_size and the time",
)
FMS_ROWS = (
    ("7b", "meta-llama/Llama-2-7b-hf", "hsdp", 2, "none", 3760,
     "| 7b         | 128 * A100  | HSDP              | False                    | 2          "
     "| 3760 token/gpu/sec                   |"),
    ("13b", "meta-llama/Llama-2-13b-hf", "hsdp", 1, "none", 1700,
     "| 13b        | 128 * A100  | HSDP              | False                    | 1          "
     "| 1700 token/gpu/sec                   |"),
    ("70b", "meta-llama/Llama-2-70b-hf", "fsdp", 6, "full", 380,
     "| 70b        | 128 * A100  | FSDP              | True                     | 6          "
     "| 380 token/gpu/sec                    |"),
)  # fmt: skip
HF_BLOG = "huggingface/blog deepspeed-to-fsdp-and-back.md @09e9aa2d9 (Table 3)"
VLM = "VectorInstitute/vectorlm docs/reference_throughput.md @0703e0752 (torch 2.2.2)"

# torchtune 2024: the README's note over its table. Tokens are torchtune's own count
# (recipes/*.py: labels that are not ignore_index; alpaca's train_on_input is True, so a
# packed sequence counts all its tokens), logged as tokens_per_second_per_gpu.
TT_2409_NOTE = (
    "README: 'all the below numbers are provided for batch size 2 (without gradient "
    "accumulation), a dataset packed to sequence length 2048, and torch compile enabled'; "
    "'Measured over one full training epoch' (compile and warm-up included)"
)
TT_CONFIGS_2409 = "recipes/configs/llama3_1/*.yaml @30b8519e8"
TT_2411_NOTE = (
    "README: 'Baseline uses Recipe=full_finetune_single_device, Model=Llama 3.2 3B, Batch "
    "size=2, Max sequence length=4096, Precision=bf16, Hardware=A100'; each row adds its "
    "technique to the row above (LoRA and QLoRA drop the in-backward step and 8-bit AdamW)"
)
TT_ADAMW = (
    "optimizer: the baseline's AdamW with torch's own default kernel (foreach); the fused "
    "kernel is not stated for the full-model rows"
)
A100_SIZE = "the A100's memory is not stated; 80GB (the 3B packed run peaks at 60.0 GiB)"
A100_8X = "the A100's memory is not stated; 80GB (the 405B QLoRA row peaks at 44.8 GB)"
# torchtune's recipes log tokens_per_second_per_gpu (rank 0's own tokens), but read so, these
# rows would need more than an A100's 312 TFLOPS dense bf16 peak: 6 x 70.6e9 FLOPs a token
# (frozen base, checkpointed) x 3497 = 1.48 PFLOP/s for the 70B LoRA, 8 x 70.6e9 x 1568 =
# 886 TFLOP/s for the 70B full fine-tune, 6 x 405.9e9 x 653 = 1.59 PFLOP/s for the 405B QLoRA
TT_8X_JOB = (
    "read as the whole job's tokens/s: per GPU, the figure would exceed the A100's dense "
    "bf16 peak (the FLOPs per token times the tokens/s)"
)
# torchtune's LoRA names: output_proj is o_proj; apply_lora_to_mlp adds w1, w2, w3
TT_ATTN_MLP = "q_proj,v_proj,o_proj,gate_proj,up_proj,down_proj"

TITAN_DEFAULTS = (
    "pytorch/torchtitan train_configs/llama3_8b.toml @0011fb905: AdamW, compile = false, "
    "data_parallel_shard_degree = -1 (FSDP2 over all 64 GPUs), tensor_parallel_degree = 1",
    "torchtitan config_manager.py: mixed_precision_param bfloat16, mixed_precision_reduce "
    "float32 (fp32 sharded parameters and optimizer state)",
    "the link between the 8 nodes is not stated: memtui's default inter-node link",
)
# torchtitan reduces its gradients in fp32: parallelisms/parallelize_llama.py @041336434
# MixedPrecisionPolicy(param_dtype=bfloat16, reduce_dtype=float32), later config_manager.py's
# mixed_precision_reduce default "float32"
TITAN_FLAGS = "--loss full --reduce-dtype fp32"
TITAN_SEQ = (
    "sequence length: the doc's 'the default sequence length in Llama 2 is 4096 which is "
    "halved compared with Llama 3' (llama3_8b.toml: seq_len = 8192)"
)
TITAN_OP_SAC = (
    "selective op checkpointing (torchtitan's policy saves matmul outputs except every second "
    "one and recomputes the rest): between memtui's selective (the attention core only) and "
    "full"
)
TITAN_LAYER_SAC = (
    "selective layer checkpointing (every second block rebuilt): memtui checkpoints all "
    "blocks or none"
)
H100_96 = (
    "the card: H100 with 96 GB HBM2e at a 500 W power limit (the doc: its peak lies between "
    "SXM and NVL and is not known); memtui's H100 presets are the 80 GB SXM and PCIe cards"
)

HF_BLOG_DEFAULTS = (
    "the card: 'four A100 GPUs' (80GB assumed); model: IBM Granite 7B, 'which follows the "
    "Meta Llama2 architecture' (Llama 2 7B's shapes)",
    "sequence length 4096: the table's own figures, 3158.7 tokens/s x 10.4 s = 32,850 tokens "
    "per GPU per step = 8 x 4096",
    "checkpointing: not stated; full, since 8 x 4096 tokens of a 7B model's activations "
    "without it exceed 80 GB",
    "optimizer: torch AdamW (accelerate's examples); the accelerate issue the blog cites "
    "(huggingface/accelerate#2624) holds the script",
)

VLM_DEFAULTS = (
    "VectorInstitute/vectorlm profiling/configs/benchmark.yaml and lora-benchmark.yaml "
    "@9045f08ac: sharding_strategy FULL_SHARD, use_mp True, use_activation_checkpointing True, "
    "gradient_accumulation_steps 4; LoRA r 8, lora_alpha 32, lora_dropout 0.1",
    "vectorlm/utils/model_utils.py @17e24bd0c: the model loaded in bfloat16, FSDP1 "
    "MixedPrecision(param_dtype, reduce_dtype, buffer_dtype = bfloat16), FlashAttention-2",
    "profiling/benchmark.py @35b97b8d5: torch.optim.AdamW (torch's default kernel), synthetic "
    "sequences of the full length; PEFT's default LoRA targets for llama (q_proj, v_proj)",
)
VLM_NOTE = (
    "'the median training throughput in tokens/second across all training steps, aggregated "
    "across all GPU devices': with 4 micro-batches per optimizer step, the median step has "
    "no optimizer step"
)
VLM_ROWS = {
    ("full", 1): "| (full_rank) NVIDIA A100-SXM4-80GB x1 | 3550.48 (batch: 8)       | "
    "3461.64 (batch: 4)       | 3204.21 (batch: 2)       |",
    ("full", 2): "| (full_rank) NVIDIA A100-SXM4-80GB x2 | 6346.00 (batch: 8)       | "
    "6182.59 (batch: 4)       | 5772.91 (batch: 2)       |",
    ("full", 4): "| (full_rank) NVIDIA A100-SXM4-80GB x4 | 12688.44 (batch: 8)      | "
    "12249.74 (batch: 4)      | 11463.46 (batch: 2)      |",
    ("lora", 1): "| (lora) NVIDIA A100-SXM4-80GB x1      | 4079.28 (batch: 8)       | "
    "3682.15 (batch: 4)       | 3528.93 (batch: 2)       |",
    ("lora", 2): "| (lora) NVIDIA A100-SXM4-80GB x2      | 7182.97 (batch: 8)       | "
    "6955.58 (batch: 4)       | 6452.96 (batch: 2)       |",
    ("lora", 4): "| (lora) NVIDIA A100-SXM4-80GB x4      | 14299.47 (batch: 8)      | "
    "13834.43 (batch: 4)      | 12769.23 (batch: 2)      |",
}


XTUNER_L3 = "InternLM/xtuner xtuner/configs/llama/llama3_8b/README.md @1cc5ef98c (Speed)"
XTUNER_BENCH = "InternLM/xtuner docs/zh_cn/acceleration/benchmark.rst @4d2758ec5"
XTUNER_DEFAULTS = (
    "the card: A100-SXM4-80GB, the hardware of XTuner's speed benchmarks "
    "(docs/zh_cn/acceleration/benchmark.rst @4d2758ec5); the README: 'Full parameter "
    "fine-tune Llama3 8B in 8k context only requires 2 * A100-80G'",
    "xtuner/model/sft.py @0c3a08fc0 SupervisedFinetune: use_activation_checkpointing=True "
    "(gradient_checkpointing_enable on every decoder layer)",
    "xtuner/configs/deepspeed/deepspeed_zero3.json @05525371: stage 3, overlap_comm true, "
    "reduce_bucket_size and allgather_bucket_size 3e8, fp16 with dynamic loss scaling: "
    "timed as 16-bit mixed precision (the A100's dense fp16 and bf16 peaks are the same "
    "312 TFLOPS)",
)
XTUNER_L3_CONFIG = (
    "the README's own config, xtuner/configs/llama/llama3_8b_instruct/"
    "llama3_8b_instruct_full_alpaca_e3.py @bbcd94bb0: batch_size 1, accumulative_counts 16 "
    "(times the sequence-parallel size), torch.optim.AdamW, pack_to_max_length True, "
    "use_varlen_attn False (each packed sequence attends causally over its whole length); "
    "max_length the row's sequence length"
)
XTUNER_PER_GPU = (
    "'Tokens per Second' per GPU: the row's TFLOPs column is XTuner's per-GPU figure "
    "(xtuner/engine/hooks/throughput_hook.py @0cf62e606: FLOPs per iteration over the "
    "iteration time, recompute counted); the figure is taken over whole accumulations"
)
XTUNER_SP = (
    "sequence parallelism (XTuner's DeepSpeed-Ulysses-style all-to-all around attention, "
    "docs/zh_cn/acceleration/train_extreme_long_sequence.rst): a memtui plan has no "
    "sequence-parallel degree"
)
XTUNER_VARLEN = (
    "use_varlen_attn True: each packed Alpaca sample attends only to itself (flash-attn's "
    "varlen kernel), where a memtui plan times causal attention over the whole packed "
    "sequence"
)
XTUNER_STAGE = (
    "the ZeRO stage is not stated (the doc's configs leave it to the launch command's "
    "--deepspeed; ZeRO-2 and ZeRO-3 both fit a 7B model on 80 GB)"
)


def _xtuner_llama3(gpus: int, seq_len: int, sp: int, row: str) -> Run:
    """One row of XTuner's Llama 3 8B ZeRO-3 speed table (full fine-tune, 8 GPUs a node)."""
    figure = float(row.split("|")[6])
    per_node = min(gpus, 8)
    return Run(
        f"xtuner-llama3-8b-full-zero3-{gpus}xa100-s{seq_len}" + (f"-sp{sp}" if sp > 1 else ""),
        XTUNER_L3,
        row,
        Config(
            "meta-llama/Meta-Llama-3-8B-Instruct", "a100-80gb", per_node, "full", "bf16-mixed",
            "adamw", "zero3", 1, seq_len, 16 * sp, "full", "deepspeed",
            "--ds-overlap-comm --ds-reduce-bucket 3e8", nodes=gpus // per_node,
        ),
        figure,
        Per.gpu,
        "XTuner (DeepSpeed ZeRO-3)",
        defaults=(
            *XTUNER_DEFAULTS, XTUNER_L3_CONFIG,
            *(("16 GPUs: two nodes of 8; the link between them is not stated: memtui's "
               "default inter-node link",) if gpus > 8 else ()),
        ),
        notes=(XTUNER_PER_GPU,),
        cannot=XTUNER_SP if sp > 1 else "",
    )  # fmt: skip


def _xtuner_bench(model: str, gpus: int, seq_len: int, sp: int, figure: float, row: str) -> Run:
    """One row of XTuner's speed benchmark (varlen attention, full fine-tune, ZeRO)."""
    size = "70b" if "70b" in model else "7b"
    config = (
        f"xtuner/configs/llama_speed_benchmark/llama2_{size}/llama2_{size}_full_alpaca_enzh_"
        f"{seq_len // 1024 if seq_len < 2**20 else 1}{'k' if seq_len < 2**20 else 'M'}"
        f"_sp{sp}.py @10bf08396: batch_size 1, accumulative_counts = sequence_parallel_size, "
        "torch.optim.AdamW, packed to max_length, use_varlen_attn True"
    )
    why = [XTUNER_VARLEN]
    if sp > 1:
        why.append(XTUNER_SP)
    if size == "7b":
        why.append(XTUNER_STAGE)
    return Run(
        f"xtuner-bench-llama2-{size}-full-{gpus}xa100-s{seq_len}-sp{sp}",
        XTUNER_BENCH,
        row,
        Config(
            model, "a100-80gb", 8, "full", "bf16-mixed", "adamw", "zero3", 1, seq_len, sp,
            "full", "deepspeed", nodes=gpus // 8,
        ),
        figure,
        Per.gpu,
        "XTuner (DeepSpeed)",
        defaults=(
            *XTUNER_DEFAULTS, config,
            *(("ZeRO-3: a 70B model's bf16 weights alone (140 GB) exceed one 80 GB card, "
               "so the stage that shards them",) if size == "70b" else ()),
        ),
        notes=("'TGS 全称是 Tokens per GPU per Second'",),
        cannot="; ".join(why),
    )  # fmt: skip


KEMPNER = (
    "KempnerInstitute/KempnerForge benchmarks/mfu_scaling/mfu_scaling_2026-04-05.md @9f3f03a07"
)
KEMPNER_DEFAULTS = (
    "KempnerInstitute/KempnerForge benchmarks/mfu_scaling/mfu_bench.sh @9f3f03a07: "
    "--train.activation_checkpointing=full, --optimizer.fused=true, seq_len 4096, each "
    "experiment's batch_size, grad_accum_steps, tp and dp_shard; compile_model=true",
    "kempnerforge/distributed/parallel.py @01b461a: FSDP2 fully_shard per TransformerBlock, "
    "default_mp_policy MixedPrecisionPolicy(param_dtype bfloat16, reduce_dtype float32)",
    "the 7B and 70B models: Llama 3 8B's and 70B's shapes (the report's Models table and the "
    "script's --model flags: dim, layers, heads, 8 kv heads, vocab 128256, ffn 1.3x / 28672)",
    "4 H200s per node on NVLink; 'InfiniBand inter-node' at a speed not stated: memtui's "
    "default inter-node link",
    "one data-parallel rank (1 GPU, or tensor parallelism alone) is not sharded "
    "(scripts/train.py @01b461a applies fully_shard only over a mesh): a memtui plan of "
    "one data-parallel rank has no FSDP collectives either",
    "kempnerforge/distributed/tensor_parallel.py @01b461a: DTensor ColwiseParallel q, k, v, "
    "gate, up; RowwiseParallel o, down; SequenceParallel norms",
)
KEMPNER_WEAK = "KempnerInstitute/KempnerForge benchmarks/weak_scaling_160gpu/README.md @e9f918929"
KEMPNER_B70 = (
    "benchmarks/weak_scaling_160gpu/weak_scaling_160gpu_bench.sh @e9f918929: B70 "
    "--train.batch_size=2 --train.grad_accum_steps=4 --train.compile_model=true, "
    "--distributed.tp=4 and dp_shard; the README: 'activation checkpointing (full), fused "
    "AdamW'"
)
KEMPNER_TP = (
    "kempnerforge/distributed/tensor_parallel.py @01b461a _build_block_tp_plan: "
    "ColwiseParallel(input_layouts=Shard(1)) on q, k, v, gate and up with no "
    "PrepareModuleInput, SequenceParallel norms: each projection all-gathers its own copy of "
    "the sequence-sharded input (torch style.py ColwiseParallel._prepare_input_fn), 7 "
    "collectives per layer and pass where Megatron's plan has 4 (--tp-style per-projection); "
    "output_head ColwiseParallel(output_layouts=Replicate()): the logits gathered"
)
KEMPNER_JOB = (
    "tok/s is the job's: 'Step Time' times it is the step's tokens (experiment 1: 3.13 s x "
    "10,471 = 32,768 = 2 x 4 x 4096)"
)


def _kempner(
    name: str,
    model: str,
    gpus: int,
    tp: int,
    micro_batch: int,
    grad_accum: int,
    row: str,
    source: str = KEMPNER,
) -> Run:
    """One row of KempnerForge's H200 tables (pretraining-style, FSDP2 and TP)."""
    nodes = max(1, gpus // 4)
    size = "70b" if model == L3_70B else "8b"
    layout = f"tp{tp}-" if tp > 1 else ""
    return Run(
        f"kempner-{name}-llama3-{size}-{layout}{gpus}xh200",
        source,
        row,
        Config(
            model, "h200", gpus // nodes, "full", "bf16-mixed", "adamw",
            "fsdp", micro_batch, 4096, grad_accum, "full", "fsdp2",
            f"--loss full --optimizer-kernel fused --reduce-dtype fp32 --tp {tp}"
            + (" --tp-style per-projection" if tp > 1 else ""), nodes=nodes,
        ),
        float(row.split("|")[6 if source == KEMPNER else 4].split("±")[0].replace(",", "")),
        Per.job,
        "KempnerForge (FSDP2)",
        compiled=True,
        pretraining=True,
        defaults=KEMPNER_DEFAULTS if source == KEMPNER else (*KEMPNER_DEFAULTS[1:], KEMPNER_B70),
        notes=(
            KEMPNER_JOB, *((KEMPNER_TP,) if tp > 1 else ()),
            *(("the report: 'the 8-GPU 70B point is memory-bound at 128.5 GB of 141'",)
              if source == KEMPNER_WEAK and gpus == 8 else ()),
        ),
    )  # fmt: skip


def _vectorlm(method: str, gpus: int, column: int) -> Run:
    """One cell of VectorLM's Meta-Llama-3-8B table: (seq_len, micro-batch) per column."""
    seq_len, micro_batch = ((2048, 8), (4096, 4), (8192, 2))[column]
    row = VLM_ROWS[(method, gpus)]
    cell = row.split("|")[2 + column].strip()
    lora = "--lora-rank 8 --lora-dropout 0.1 --lora-targets q_proj,v_proj"
    return Run(
        f"vectorlm-llama3-8b-{method}-{gpus}xa100-s{seq_len}",
        VLM,
        row,
        Config(
            "meta-llama/Meta-Llama-3-8B", "a100-80gb", gpus, method, "bf16", "adamw", "fsdp",
            micro_batch, seq_len, 4, "full", "fsdp1", lora if method == "lora" else "",
        ),
        float(cell.split()[0]),
        Per.job,
        "VectorLM (FSDP1)",
        Over.micro_steps,
        defaults=VLM_DEFAULTS,
        notes=(f"column 'Meta-Llama-3-8B ({seq_len})': {cell}", VLM_NOTE),
    )  # fmt: skip


XTUNER_L3_ROWS = {
    (2, 8192): "| Llama3 8B |       8k        |     2      | ZeRO-3 |         2         |      "
    "1037.0       |  76.8  |",
    (4, 8192): "| Llama3 8B |       8k        |     4      | ZeRO-3 |         1         |      "
    "2331.3       | 172.6  |",
    (8, 8192): "| Llama3 8B |       8k        |     8      | ZeRO-3 |         1         |      "
    "2771.2       | 205.1  |",
    (16, 8192): "| Llama3 8B |       8k        |     16     | ZeRO-3 |         1         |      "
    "2127.2       | 157.5  |",
    (8, 16384): "| Llama3 8B |       16k       |     8      | ZeRO-3 |         2         |      "
    "2320.7       | 191.7  |",
    (8, 32768): "| Llama3 8B |       32k       |     8      | ZeRO-3 |         4         |      "
    "1870.2       | 186.6  |",
    (8, 65536): "| Llama3 8B |       64k       |     8      | ZeRO-3 |         8         |      "
    "1356.4       | 182.0  |",
    (8, 131072): "| Llama3 8B |      128k       |     8      | ZeRO-3 |         8         |      "
    " 875.7       | 177.7  |",
}
L3_8B, L3_70B = "meta-llama/Meta-Llama-3-8B", "meta-llama/Meta-Llama-3-70B"
# experiment, model, GPUs, TP degree, micro-batch, accumulation (mfu_bench.sh's flags; the
# 13B rows' model, a 14.84B Llama 3 shape, is no published checkpoint memtui can read)
KEMPNER_RUNS = (
    (1, L3_8B, 1, 1, 2, 4), (2, L3_8B, 2, 1, 2, 4), (3, L3_8B, 2, 2, 4, 2),
    (4, L3_8B, 4, 1, 4, 2), (5, L3_8B, 4, 4, 4, 2), (6, L3_8B, 4, 2, 4, 2),
    (7, L3_8B, 8, 4, 4, 2), (10, L3_8B, 16, 4, 4, 2), (12, L3_8B, 32, 4, 4, 2),
    (14, L3_70B, 32, 4, 2, 4),
)  # fmt: skip
KEMPNER_ROWS = {
    1: "| 1 | 1 | 1 | 7B | — | 10,471 | **57.8** | 80.7 GB | 3.13s |",
    2: "| 2 | 2 | 1 | 7B | FSDP=2 | 18,728 | 51.7 | 62.4 GB | 3.50s |",
    3: "| 3 | 2 | 1 | 7B | TP=2 | 13,163 | 36.4 | 57.8 GB | 2.49s |",
    4: "| 4 | 4 | 1 | 7B | FSDP=4 | 38,983 | **53.8** | 61.1 GB | 3.36s |",
    5: "| 5 | 4 | 1 | 7B | TP=4 | 25,135 | 34.7 | 39.4 GB | 1.30s |",
    6: "| 6 | 4 | 1 | 7B | TP=2+FSDP=2 | 25,980 | 35.9 | 45.9 GB | 2.52s |",
    7: "| 7 | 8 | 2 | 7B | TP=4+FSDP=2 | 44,299 | 30.6 | 32.7 GB | 1.48s |",
    10: "| 10 | 16 | 4 | 7B | TP=4+FSDP=4 | 82,988 | 28.6 | 29.4 GB | 1.58s |",
    12: "| 12 | 32 | 8 | 7B | TP=4+FSDP=8 | 155,917 | 26.9 | 27.6 GB | 1.68s |",
    14: "| 14 | 32 | 8 | 70B | TP=4+FSDP=8 | 17,657 | 25.4 | 93.2 GB | 14.85s |",
}
# the 70B rows of the weak-scaling report (TP 4 in a node, FSDP across nodes, batch 2 and
# accumulation 4 a GPU: weak_scaling_160gpu_bench.sh @e9f918929, compile_model=true)
KEMPNER_WEAK_ROWS = (
    (8, "| 70b | 8 | tp4_fsdp2 | 3,623 | 20.6 | 128.5 | 18.09 | 1 |"),
    (32, "| 70b | 32 | tp4_fsdp8 | 18,688 | 26.5 | 93.2 | 14.03 | 1 |"),
    (64, "| 70b | 64 | tp4_fsdp16 | 35,824 | 25.4 | 86.8 | 14.63 | 1 |"),
    (96, "| 70b | 96 | tp4_fsdp24 | 52,190 | 24.7 | 84.6 | 15.07 | 1 |"),
    (128, "| 70b | 128 | tp4_fsdp32 | 69,985 | 24.8 | 83.6 | 14.98 | 1 |"),
    (160, "| 70b | 160 | tp4_fsdp40 | 85,571±43 | 24.3±0.0 | 82.9 | 15.32 | 2 |"),
)
# benchmark.rst's list-table rows: model, GPUs, sequence length, sequence parallel, TGS
XTUNER_BENCH_ROWS = (
    ("meta-llama/Llama-2-7b-hf", 8, 8192, 1, 3028.3),
    ("meta-llama/Llama-2-7b-hf", 8, 32768, 1, 2234.2),
    ("meta-llama/Llama-2-7b-hf", 8, 131072, 8, 948.6),
    ("meta-llama/Llama-2-7b-hf", 8, 262144, 8, 540.1),
    ("meta-llama/Llama-2-7b-hf", 32, 1048576, 16, 133.6),
    ("meta-llama/Llama-2-70b-hf", 32, 8192, 1, 216.8),
    ("meta-llama/Llama-2-70b-hf", 32, 32768, 4, 300.9),
    ("meta-llama/Llama-2-70b-hf", 32, 131072, 8, 144.7),
    ("meta-llama/Llama-2-70b-hf", 32, 262144, 16, 63.8),
    ("meta-llama/Llama-2-70b-hf", 64, 1048576, 64, 21.8),
)


def _rst_row(model: str, gpus: int, seq_len: int, figure: float) -> str:
    """benchmark.rst's list-table row, its cells joined (model, GPUs, length, TGS)."""
    name = "Llama2-70B" if "70b" in model else "Llama2-7B"
    length = f"{seq_len // 1024}k" if seq_len < 2**20 else "1M"
    return f"* - {name} - {gpus} - {length} - {figure}"


RUNS: tuple[Run, ...] = (
    # torchtune, Nov 2024: Llama 3.2 3B on one A100, packed to 4096, batch 2
    Run("tt-2411-llama32-3b-full-packed", TT_2411,
        "| [+ Packed Dataset](https://pytorch.org/torchtune/main/basics/packing.html) | 60.0 | "
        "+135.16% | 7075 | +238.40% |",
        Config("meta-llama/Llama-3.2-3B-Instruct", "a100-80gb", 1, "full", "bf16", "adamw",
               "ddp", 2, 4096, 1, "none", "torchtune", "--loss full --optimizer-kernel foreach"),
        7075, Per.gpu, "torchtune full_finetune_single_device",
        defaults=(A100_SIZE, TT_ADAMW), notes=(TT_2411_NOTE,)),
    Run("tt-2411-llama32-3b-full-packed-compile", TT_2411,
        "| [+ Compile](https://pytorch.org/tutorials/intermediate/torch_compile_tutorial.html) | "
        "51.0 | -14.93% | 8998 | +27.18% |",
        Config("meta-llama/Llama-3.2-3B-Instruct", "a100-80gb", 1, "full", "bf16", "adamw",
               "ddp", 2, 4096, 1, "none", "torchtune", "--loss full --optimizer-kernel foreach"),
        8998, Per.gpu, "torchtune full_finetune_single_device", compiled=True,
        defaults=(A100_SIZE, TT_ADAMW), notes=(TT_2411_NOTE,)),
    Run("tt-2411-llama32-3b-full-packed-compile-cce", TT_2411,
        "| [+ Chunked Cross Entropy](https://pytorch.org/torchtune/main/generated/torchtune."
        "modules.loss.CEWithChunkedOutputLoss.html) | 42.9 | -15.83% | 9174 | +1.96% |",
        Config("meta-llama/Llama-3.2-3B-Instruct", "a100-80gb", 1, "full", "bf16", "adamw",
               "ddp", 2, 4096, 1, "none", "torchtune",
               "--loss chunked --optimizer-kernel foreach"),
        9174, Per.gpu, "torchtune full_finetune_single_device", compiled=True,
        defaults=(A100_SIZE, TT_ADAMW), notes=(TT_2411_NOTE,)),
    Run("tt-2411-llama32-3b-full-packed-compile-cce-ac", TT_2411,
        "| [+ Activation Checkpointing](https://pytorch.org/torchtune/main/tutorials/"
        "memory_optimizations.html#activation-checkpointing) | 24.9 | -41.93% | 7210 | -21.41% |",
        Config("meta-llama/Llama-3.2-3B-Instruct", "a100-80gb", 1, "full", "bf16", "adamw",
               "ddp", 2, 4096, 1, "full", "torchtune",
               "--loss chunked --optimizer-kernel foreach"),
        7210, Per.gpu, "torchtune full_finetune_single_device", compiled=True,
        defaults=(A100_SIZE, TT_ADAMW), notes=(TT_2411_NOTE,)),
    Run("tt-2411-llama32-3b-full-packed-compile-cce-ac-optinbwd", TT_2411,
        "| [+ Fuse optimizer step into backward](https://pytorch.org/torchtune/main/tutorials/"
        "memory_optimizations.html#fusing-optimizer-step-into-backward-pass) | 23.1 | -7.29% | "
        "7309 | +1.38% |",
        Config("meta-llama/Llama-3.2-3B-Instruct", "a100-80gb", 1, "full", "bf16", "adamw",
               "ddp", 2, 4096, 1, "full", "torchtune",
               "--loss chunked --optimizer-kernel foreach --optimizer-in-backward"),
        7309, Per.gpu, "torchtune full_finetune_single_device", compiled=True,
        defaults=(A100_SIZE, TT_ADAMW), notes=(TT_2411_NOTE,)),
    Run("tt-2411-llama32-3b-full-packed-compile-cce-ac-optinbwd-actoffload", TT_2411,
        "| [+ Activation Offloading](https://pytorch.org/torchtune/main/tutorials/"
        "memory_optimizations.html#activation-offloading) | 21.8 | -5.48% | 7301 | -0.11% |",
        Config("meta-llama/Llama-3.2-3B-Instruct", "a100-80gb", 1, "full", "bf16", "adamw",
               "ddp", 2, 4096, 1, "full", "torchtune",
               "--loss chunked --optimizer-kernel foreach --optimizer-in-backward "
               "--activation-offload"),
        7301, Per.gpu, "torchtune full_finetune_single_device", compiled=True,
        defaults=(A100_SIZE, TT_ADAMW), notes=(TT_2411_NOTE,)),
    Run("tt-2411-llama32-3b-full-packed-compile-cce-ac-optinbwd-actoffload-adamw8bit", TT_2411,
        "| [+ 8-bit AdamW](https://pytorch.org/torchtune/main/tutorials/memory_optimizations."
        "html#lower-precision-optimizers) | 17.6 | -19.63% | 6960 | -4.67% |",
        Config("meta-llama/Llama-3.2-3B-Instruct", "a100-80gb", 1, "full", "bf16",
               "paged-adamw8bit", "ddp", 2, 4096, 1, "full", "torchtune",
               "--loss chunked --optimizer-in-backward --activation-offload"),
        6960, Per.gpu, "torchtune full_finetune_single_device", compiled=True,
        defaults=(A100_SIZE, "the 8-bit AdamW is not named: the recipe config's own, "
                  "bitsandbytes.optim.PagedAdamW8bit (recipes/configs/llama3_2/"
                  "3B_full_single_device.yaml @1814feb17)"),
        notes=(TT_2411_NOTE,)),
    Run("tt-2411-llama32-3b-lora-packed-compile-cce-ac-actoffload", TT_2411,
        "| [LoRA](https://pytorch.org/torchtune/main/tutorials/memory_optimizations.html"
        "#glossary-lora) | 8.5 | -51.61% | 8210 | +17.96% |",
        Config("meta-llama/Llama-3.2-3B-Instruct", "a100-80gb", 1, "lora", "bf16", "adamw",
               "ddp", 2, 4096, 1, "full", "torchtune",
               f"--lora-rank 64 --lora-targets {TT_ATTN_MLP} --loss chunked "
               "--optimizer-kernel fused --activation-offload"),
        8210, Per.gpu, "torchtune lora_finetune_single_device", compiled=True,
        defaults=(A100_SIZE, "LoRA shape and optimizer: recipes/configs/llama3_2/"
                  "3B_lora_single_device.yaml @1814feb17 (rank 64 on q, v, output_proj and "
                  "the MLP; AdamW fused: True)"),
        notes=(TT_2411_NOTE,)),
    Run("tt-2411-llama32-3b-qlora-packed-compile-cce-ac-actoffload", TT_2411,
        "| [QLoRA](https://pytorch.org/torchtune/main/tutorials/memory_optimizations.html"
        "#quantized-low-rank-adaptation-qlora) | 4.6 | -45.71% | 8035 | -2.13% |",
        Config("meta-llama/Llama-3.2-3B-Instruct", "a100-80gb", 1, "qlora", "bf16", "adamw",
               "ddp", 2, 4096, 1, "full", "torchtune",
               f"--lora-rank 64 --lora-targets {TT_ATTN_MLP} --loss chunked "
               "--optimizer-kernel fused --activation-offload"),
        8035, Per.gpu, "torchtune lora_finetune_single_device", compiled=True,
        defaults=(A100_SIZE, "LoRA shape and optimizer: recipes/configs/llama3_2/"
                  "3B_qlora_single_device.yaml @1814feb17 (rank 64 on q, v, output_proj and "
                  "the MLP; AdamW fused: True)"),
        notes=(TT_2411_NOTE,)),
    # torchtune, Sep 2024: Llama 3.1, packed to 2048, batch 2, compiled
    Run("tt-2409-llama31-8b-full-1x4090", TT_2409,
        "| Llama 3.1 8B | Full finetune | 1x 4090 | 18.9 GiB | 1650 |",
        Config("meta-llama/Llama-3.1-8B", "rtx4090", 1, "full", "bf16", "paged-adamw8bit",
               "ddp", 2, 2048, 1, "full", "torchtune",
               "--loss chunked --optimizer-in-backward"),
        1650, Per.gpu, "torchtune full_finetune_single_device", compiled=True,
        defaults=(f"{TT_CONFIGS_2409} 8B_full_single_device: bitsandbytes PagedAdamW8bit, "
                  "optimizer_in_bwd True, activation checkpointing, CEWithChunkedOutputLoss",),
        notes=(TT_2409_NOTE,)),
    Run("tt-2409-llama31-8b-lora-1x4090", TT_2409,
        "| Llama 3.1 8B | LoRA | 1x 4090 |  16.2 GiB | 3083 |",
        Config("meta-llama/Llama-3.1-8B", "rtx4090", 1, "lora", "bf16", "adamw", "ddp", 2,
               2048, 1, "full", "torchtune",
               "--lora-rank 8 --lora-targets q_proj,v_proj --loss chunked "
               "--optimizer-kernel fused"),
        3083, Per.gpu, "torchtune lora_finetune_single_device", compiled=True,
        defaults=(f"{TT_CONFIGS_2409} 8B_lora_single_device: rank 8 on q_proj and v_proj, "
                  "AdamW fused, activation checkpointing, CEWithChunkedOutputLoss",),
        notes=(TT_2409_NOTE,)),
    Run("tt-2409-llama31-8b-qlora-1x4090", TT_2409,
        "| Llama 3.1 8B | QLoRA | 1x 4090 | 7.4 GiB | 2413  |",
        Config("meta-llama/Llama-3.1-8B", "rtx4090", 1, "qlora", "bf16", "adamw", "ddp", 2,
               2048, 1, "full", "torchtune",
               "--lora-rank 8 --lora-targets all-linear --loss chunked --optimizer-kernel fused"),
        2413, Per.gpu, "torchtune lora_finetune_single_device", compiled=True,
        defaults=(f"{TT_CONFIGS_2409} 8B_qlora_single_device: rank 8 on q, k, v, output_proj "
                  "and the MLP, AdamW fused, activation checkpointing, CEWithChunkedOutputLoss",),
        notes=(TT_2409_NOTE,)),
    Run("tt-2409-llama31-70b-full-8xa100-cpuoffload", TT_2409,
        "| Llama 3.1 70B | Full finetune | 8x A100  | 13.9 GiB ** | 1568  |",
        Config("meta-llama/Llama-3.1-70B", "a100-80gb", 8, "full", "bf16", "adamw", "fsdp", 2,
               2048, 1, "full", "torchtune",
               "--loss chunked --optimizer-kernel fused --offload params"),
        1568, Per.job, "torchtune full_finetune_distributed", compiled=True,
        defaults=(A100_8X, f"{TT_CONFIGS_2409} 70B_full: fsdp_cpu_offload True (parameters, "
                  "gradients and the AdamW step on the CPU), AdamW fused, activation "
                  "checkpointing, CEWithChunkedOutputLoss"),
        notes=(TT_8X_JOB, TT_2409_NOTE, "README: '** = Uses CPU offload with fused optimizer'")),
    Run("tt-2409-llama31-70b-lora-8xa100", TT_2409,
        "| Llama 3.1 70B | LoRA | 8x A100 | 27.6 GiB  | 3497  |",
        Config("meta-llama/Llama-3.1-70B", "a100-80gb", 8, "lora", "bf16", "adamw", "fsdp", 2,
               2048, 1, "full", "torchtune",
               "--lora-rank 16 --lora-targets q_proj,k_proj,v_proj --loss chunked "
               "--optimizer-kernel fused"),
        3497, Per.job, "torchtune lora_finetune_distributed", compiled=True,
        defaults=(A100_8X, f"{TT_CONFIGS_2409} 70B_lora: rank 16 on q, k and v, AdamW fused, "
                  "activation checkpointing, CEWithChunkedOutputLoss"),
        notes=(TT_8X_JOB, TT_2409_NOTE,)),
    Run("tt-2409-llama31-405b-qlora-8xa100", TT_2409,
        "| Llama 3.1 405B | QLoRA | 8x A100 | 44.8 GB  | 653  |",
        Config("meta-llama/Llama-3.1-405B", "a100-80gb", 8, "qlora", "bf16", "adamw", "fsdp",
               2, 2048, 1, "full", "torchtune",
               "--lora-rank 16 --lora-targets all-linear --loss chunked "
               "--optimizer-kernel fused"),
        653, Per.job, "torchtune lora_finetune_distributed", compiled=True,
        defaults=(A100_8X, f"{TT_CONFIGS_2409} 405B_qlora: rank 16 on q, k, v, output_proj and "
                  "the MLP, AdamW fused, activation checkpointing (its batch_size 1 and "
                  "gradient_accumulation_steps 16 are overridden by the README's note)"),
        notes=(TT_8X_JOB, TT_2409_NOTE,)),
    # torchtitan, mid 2024: FSDP2 pretraining on 64 A100 80GB (8 nodes), C4
    Run("titan-a100-llama3-70b-full-mb1", TITAN_A100, "| 70B | 1 | full | 331 | 51.7% |",
        Config("meta-llama/Meta-Llama-3-70B", "a100-80gb", 8, "full", "bf16-mixed", "adamw",
               "fsdp", 1, 8192, 1, "full", "fsdp2", TITAN_FLAGS, nodes=8),
        331, Per.gpu, "torchtitan (FSDP2)", pretraining=True,
        defaults=(*TITAN_DEFAULTS, TITAN_SEQ)),
    Run("titan-a100-llama2-13b-none-mb2", TITAN_A100, "| 13B | 2 | no | 2162 | 61.1%",
        Config("meta-llama/Llama-2-13b-hf", "a100-80gb", 8, "full", "bf16-mixed", "adamw",
               "fsdp", 2, 4096, 1, "none", "fsdp2", TITAN_FLAGS, nodes=8),
        2162, Per.gpu, "torchtitan (FSDP2)", pretraining=True,
        defaults=(*TITAN_DEFAULTS, TITAN_SEQ)),
    Run("titan-a100-llama2-70b-full-mb2", TITAN_A100, "| 70B | 2 | full | 353 | 50.5% |",
        Config("meta-llama/Llama-2-70b-hf", "a100-80gb", 8, "full", "bf16-mixed", "adamw",
               "fsdp", 2, 4096, 1, "full", "fsdp2", TITAN_FLAGS, nodes=8),
        353, Per.gpu, "torchtitan (FSDP2)", pretraining=True,
        defaults=(*TITAN_DEFAULTS, TITAN_SEQ)),
    Run("titan-a100-llama3-8b-sac-layer-mb1", TITAN_A100,
        "| 8B | 1 | selective layer | 2904 | 56.8% |",
        Config("meta-llama/Meta-Llama-3-8B", "a100-80gb", 8, "full", "bf16-mixed", "adamw",
               "fsdp", 1, 8192, 1, "selective", "fsdp2", TITAN_FLAGS, nodes=8),
        2904, Per.gpu, "torchtitan (FSDP2)", pretraining=True,
        defaults=(*TITAN_DEFAULTS, TITAN_SEQ), cannot=TITAN_LAYER_SAC),
    Run("titan-a100-llama3-8b-sac-op-mb1", TITAN_A100, "| 8B | 1 | selective op | 2973 | 58.2% |",
        Config("meta-llama/Meta-Llama-3-8B", "a100-80gb", 8, "full", "bf16-mixed", "adamw",
               "fsdp", 1, 8192, 1, "selective", "fsdp2", TITAN_FLAGS, nodes=8),
        2973, Per.gpu, "torchtitan (FSDP2)", pretraining=True,
        defaults=(*TITAN_DEFAULTS, TITAN_SEQ), cannot=TITAN_OP_SAC),
    Run("titan-a100-llama2-13b-sac-layer-mb2", TITAN_A100,
        "| 13B | 2 | selective layer | 1914 | 54.1% |",
        Config("meta-llama/Llama-2-13b-hf", "a100-80gb", 8, "full", "bf16-mixed", "adamw",
               "fsdp", 2, 4096, 1, "selective", "fsdp2", TITAN_FLAGS, nodes=8),
        1914, Per.gpu, "torchtitan (FSDP2)", pretraining=True,
        defaults=(*TITAN_DEFAULTS, TITAN_SEQ), cannot=TITAN_LAYER_SAC),
    Run("titan-a100-llama2-13b-sac-op-mb2", TITAN_A100,
        "| 13B | 2 | selective op | 1904 | 53.8% |",
        Config("meta-llama/Llama-2-13b-hf", "a100-80gb", 8, "full", "bf16-mixed", "adamw",
               "fsdp", 2, 4096, 1, "selective", "fsdp2", TITAN_FLAGS, nodes=8),
        1904, Per.gpu, "torchtitan (FSDP2)", pretraining=True,
        defaults=(*TITAN_DEFAULTS, TITAN_SEQ), cannot=TITAN_OP_SAC),
    Run("titan-a100-llama2-70b-sac-op-mb1", TITAN_A100,
        "| 70B | 1[^1] | selective op | 355 | 50.8% |",
        Config("meta-llama/Llama-2-70b-hf", "a100-80gb", 8, "full", "bf16-mixed", "adamw",
               "fsdp", 1, 4096, 1, "selective", "fsdp2", TITAN_FLAGS, nodes=8),
        355, Per.gpu, "torchtitan (FSDP2)", pretraining=True,
        defaults=(*TITAN_DEFAULTS, TITAN_SEQ), cannot=TITAN_OP_SAC),
    # torchtitan, Dec 2024: Llama 3.1 8B on H100 96GB (Grand Teton), batch 2, selective AC
    Run("titan-h100-llama31-8b-fsdp8", TITAN_H100, "| FSDP | 5,762 | 82.4 |",
        Config("meta-llama/Llama-3.1-8B", "h100-sxm", 8, "full", "bf16-mixed", "adamw", "fsdp",
               2, 8192, 1, "selective", "fsdp2", TITAN_FLAGS),
        5762, Per.gpu, "torchtitan (FSDP2)", pretraining=True,
        defaults=TITAN_DEFAULTS[:2], notes=("Table 1: 8 GPUs, local batch size 2",),
        cannot=f"{H100_96}; {TITAN_OP_SAC}"),
    Run("titan-h100-llama31-8b-fsdp128", TITAN_H100, "| FSDP | 5,605 | 67.0 |",
        Config("meta-llama/Llama-3.1-8B", "h100-sxm", 8, "full", "bf16-mixed", "adamw", "fsdp",
               2, 8192, 1, "selective", "fsdp2", f"{TITAN_FLAGS} --inter-node ib-ndr", nodes=16),
        5605, Per.gpu, "torchtitan (FSDP2)", pretraining=True,
        defaults=TITAN_DEFAULTS[:2],
        notes=("Table 3: 128 GPUs, local batch size 2; 'backend RDMA network with 400 Gb/s "
               "per GPU'",),
        cannot=f"{H100_96}; {TITAN_OP_SAC}"),
    # torchtitan on H200 (Trainy, June 2025): Float8 linears and Float8 FSDP all-gathers
    *(Run(f"titan-h200-llama31-8b-fp8-{8 * n}xh200", TITAN_H200,
          f"| {n} | {tps} | {mem} |",
          Config("meta-llama/Llama-3.1-8B", "h200", 8, "full", "bf16-mixed", "adamw", "fsdp",
                 2, 8192, 1, "selective", "fsdp2", f"{TITAN_FLAGS} --inter-node ib-ndr", nodes=n),
          tps, Per.gpu, "torchtitan (FSDP2)", compiled=True, pretraining=True,
          defaults=(TITAN_H200_CONFIG, TITAN_DEFAULTS[1]),
          notes=("'TPS and Memory(GiB) are arbitrarily sampled at the 100th iteration'; "
                 "'400Gb/s (Mellanox CX-7) per GPU'",),
          cannot=f"--model.converters=float8 (Float8 matmuls and all-gathers): a memtui plan "
                 f"has no fp8 precision; {TITAN_OP_SAC}")
      for n, tps, mem in ((4, 10938, "47.96"), (8, 10753, "46.97"))),
    # NeMo AutoModel's LoRA row on DGX-H100: pipeline parallelism
    Run("automodel-llama3-70b-lora-tp2-pp4-8xh100", AUTOMODEL,
        "| Llama3 70B | 8 | 32 | 1 | 4 | 4 | 4096 | 2 | 4 | 1 | - | 10 | 1 | - | 26.92 | 176 | "
        "608.42 |",
        Config("meta-llama/Meta-Llama-3-70B", "h100-sxm", 8, "lora", "bf16", "adamw", "ddp",
               1, 4096, 4, "none", "generic", "--tp 2"),
        608.42, Per.gpu, "NeMo AutoModel",
        notes=("'System: DGX-H100, Precision: BF16'; 'Step times include forward and backward "
               "passes + optimizer step for the global batch'",),
        cannot="pipeline parallelism (PP 4, 10 virtual stages) beside TP 2: a memtui plan has "
               "no pipeline-parallel degree; the LoRA shape and checkpointing are in a config "
               "the summary links but does not quote"),
    # ms-swift: DeepSpeed full fine-tunes of Qwen2.5, packed; the trainer's s/it
    Run("swift-qwen25-7b-full-zero3-4xa100-s16384", SWIFT_ZERO3,
        "# GPU Memory: 4 * 56GB, Training Speed 10s/it",
        Config("Qwen/Qwen2.5-7B", "a100-80gb", 4, "full", "bf16-mixed", "adamw", "zero3", 1,
               16384, 2, "full", "deepspeed", "--loss fused"),
        10, Per.step, "ms-swift (DeepSpeed ZeRO-3)",
        defaults=(*SWIFT_DEFAULTS, "the card: 'Env: 4 * A100' at 56 GB a GPU, so 80GB",
                  "the script: --per_device_train_batch_size 1 --gradient_accumulation_steps 2 "
                  "--packing true --max_length 16384 --deepspeed zero3 --use_liger_kernel "
                  "true --attn_impl flash_attn"),
        cannot=SWIFT_PACKING),
    *(Run(f"swift-qwen25-14b-full-{stage}-8xa800-s8192", SWIFT_BENCH,
          "| Training Speed   | 9.04s/it    | 10.32s/it       | 10.56s/it       |",
          Config("Qwen/Qwen2.5-14B", "a100-80gb", 8, "full", "bf16-mixed", "adamw", stage, 1,
                 8192, 2, "full", "deepspeed"),
          seconds, Per.step, f"ms-swift (DeepSpeed {stage.upper()})",
          defaults=(*SWIFT_DEFAULTS, SWIFT_BENCH_SCRIPT),
          cannot=f"{SWIFT_PACKING}; the card: 'a single-node, eight-GPU A800 environment' "
                 "(A100 80GB compute with a narrower NVLink), not a memtui preset")
      for stage, seconds in (("zero2", 10.32), ("zero3", 10.56))),
    # fms-fsdp (IBM): FSDP1 pretraining of Llama 2 shapes on 128 A100s, eager
    *(Run(f"fms-fsdp-llama2-{size}-{strategy}-128xa100", FMS, row,
          Config(model, "a100-80gb", 8, "full", "bf16-mixed", "adamw", strategy, mb, 4096, 1,
                 ckpt, "fsdp1", "--loss full --optimizer-kernel foreach", nodes=16),
          figure, Per.gpu, "fms-fsdp (FSDP1)", pretraining=True, defaults=FMS_DEFAULTS)
      for size, model, strategy, mb, ckpt, figure, row in FMS_ROWS),
    # accelerate's FSDP and DeepSpeed compared on four A100s (IBM Granite 7B)
    Run("hfblog-granite7b-fsdp-4xa100", HF_BLOG,
        "| FSDP (aligned mode) | 3158.7                    | 10.4              | 0.41"
        "                              |",
        Config("meta-llama/Llama-2-7b-hf", "a100-80gb", 4, "full", "bf16-mixed", "adamw",
               "fsdp", 8, 4096, 1, "full", "fsdp1"),
        3158.7, Per.gpu, "accelerate FSDP (full sharding)",
        defaults=HF_BLOG_DEFAULTS,
        notes=("'Batch size of 8', 'Model loaded in torch.bfloat16', 'Mixed precision is the "
               "same dtype'; aligned mode: fp32 sharded parameters (accelerate 0.30)",)),
    Run("hfblog-granite7b-dszero3-4xa100", HF_BLOG,
        "| DeepSpeed           | 3094.5                    | 10.6              | 0.40"
        "                              |",
        Config("meta-llama/Llama-2-7b-hf", "a100-80gb", 4, "full", "bf16-mixed", "adamw",
               "zero3", 8, 4096, 1, "full", "deepspeed"),
        3094.5, Per.gpu, "accelerate DeepSpeed (ZeRO-3)",
        defaults=HF_BLOG_DEFAULTS,
        notes=("'Batch size of 8', 'Model loaded in torch.bfloat16'; DeepSpeed keeps fp32 "
               "partitions (the blog's Table 1)",)),
    # VectorLM: FSDP1 fine-tuning of Llama 3 8B on 1, 2 and 4 A100 80GB
    *(_vectorlm(m, g, c) for m in ("full", "lora") for g in (1, 2, 4) for c in (0, 1, 2)),
    # XTuner: Llama 3 8B full fine-tune under DeepSpeed ZeRO-3 on A100 80GB, 8k packed
    *(_xtuner_llama3(g, s, sp, XTUNER_L3_ROWS[(g, s)]) for g, s, sp in (
        (4, 8192, 1), (8, 8192, 1), (16, 8192, 1), (2, 8192, 2), (8, 16384, 2),
        (8, 32768, 4), (8, 65536, 8), (8, 131072, 8))),
    # KempnerForge: Llama 3 shapes on H200 (4 a node), FSDP2 and tensor parallelism
    *(_kempner(f"{n:02d}", m, g, tp, b, ga, KEMPNER_ROWS[n])
      for n, m, g, tp, b, ga in KEMPNER_RUNS),
    *(_kempner("weak", L3_70B, g, 4, 2, 4, row, KEMPNER_WEAK) for g, row in KEMPNER_WEAK_ROWS),
    # XTuner's speed benchmark against LLaMA-Factory: Llama 2 7B and 70B, varlen attention
    *(_xtuner_bench(m, g, s, sp, f, _rst_row(m, g, s, f)) for m, g, s, sp, f in XTUNER_BENCH_ROWS),
)  # fmt: skip


def plan_for(run: Run) -> Plan:
    """The memtui plan of the run's configuration, built as `memtui estimate` builds it."""
    return plan_from_args(build_parser().parse_args(["estimate", *run.config.flags()]))


def compared() -> list[Run]:
    return [r for r in RUNS if not r.cannot]


def listed() -> list[Run]:
    return [r for r in RUNS if r.cannot]


@dataclass(frozen=True)
class Outcome:
    """A compared run: what was measured, and memtui's step for its plan."""

    run: Run
    plan: Plan
    step: StepTime

    @property
    def predicted(self) -> float:
        """memtui's tokens/s per GPU over the steps the run's figure was taken over."""
        if self.run.over is Over.optimizer_steps:
            return self.step.tokens_per_second_per_gpu
        per_micro_step = self.step.tokens_per_step / self.plan.grad_accum / self.plan.hardware.gpus
        return per_micro_step / self.step.micro_step_seconds

    @property
    def error(self) -> float:
        """Step-time error: predicted seconds over measured seconds, minus one (the same
        tokens in both, so measured tokens/s over predicted tokens/s)."""
        return self.run.tokens_per_second_per_gpu / self.predicted - 1

    @property
    def card(self) -> str:
        return self.plan.hardware.gpu_name

    @property
    def largest_parts(self) -> str:
        """The two largest parts of memtui's step, as shares of it."""
        parts = sorted(self.step.parts, key=lambda p: p.seconds, reverse=True)[:2]
        return ", ".join(f"{p.kind.value} {p.seconds / self.step.seconds:.0%}" for p in parts)


def outcome(run: Run) -> Outcome:
    plan = plan_for(run)
    return Outcome(run, plan, step_time(plan))


def _pct(x: float) -> str:
    return f"{x:+.1%}"


def report() -> tuple[str, list[Outcome]]:
    outcomes = [outcome(r) for r in compared()]
    lines = [
        "| run | stack | card | method | measured tok/s/GPU | memtui tok/s/GPU | step-time error "
        "| memtui MFU | largest parts | source |",
        "|---|---|---|---|---:|---:|---:|---:|---|---|",
    ]
    for o in outcomes:
        flags = " (compiled)" if o.run.compiled else ""
        lines.append(
            f"| {o.run.id}{flags} | {o.plan.stack.value} | {o.card} | {o.plan.method.value} | "
            f"{o.run.tokens_per_second_per_gpu:,.0f} | {o.predicted:,.0f} | {_pct(o.error)} | "
            f"{o.step.mfu:.0%} | {o.largest_parts} | {o.run.source} |"
        )
    lines += ["", *_summary(outcomes), "", "Worst runs:", ""]
    worst = sorted(outcomes, key=lambda o: abs(o.error), reverse=True)[:5]
    lines += [f"- {o.run.id}: {_pct(o.error)} ({o.largest_parts})" for o in worst]
    lines += ["", "Listed, not compared (a memtui plan cannot express what they ran):", ""]
    lines += [
        f"- {r.id} ({r.tokens_per_second_per_gpu:,.0f} tok/s/GPU): {r.cannot}" for r in listed()
    ]
    return "\n".join(lines), outcomes


def _summary(outcomes: list[Outcome]) -> list[str]:
    def line(label: str, group: list[Outcome]) -> str:
        errors = [o.error for o in group]
        return (
            f"| {label} | {len(group)} | {statistics.median(abs(e) for e in errors):.1%} | "
            f"{max(abs(e) for e in errors):.1%} | {_pct(statistics.median(errors))} |"
        )

    groups: list[tuple[str, Callable[[Outcome], str]]] = [
        ("stack", lambda o: o.plan.stack.value),
        ("card", lambda o: o.card),
        ("stack and card", lambda o: f"{o.plan.stack.value}, {o.card}"),
        ("method", lambda o: o.plan.method.value),
        ("runner", lambda o: o.run.runner),
        ("torch.compile", lambda o: "compiled" if o.run.compiled else "eager"),
        ("tensor parallel", lambda o: "TP" if o.plan.tp > 1 else "none"),
    ]
    rows = [
        "| runs | n | median abs error | max abs error | median error |",
        "|---|---:|---:|---:|---:|",
        line("all", outcomes),
    ]
    for name, key in groups:
        for value in sorted({key(o) for o in outcomes}):
            rows.append(line(f"{name}: {value}", [o for o in outcomes if key(o) == value]))
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
