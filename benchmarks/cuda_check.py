"""memtui's estimate against real training steps on a CUDA GPU: the check a CPU cannot make.

For every plan of the grid the model is built from its config (random weights, nothing
downloaded), put on the GPU the way its stack does, and trained for two steps through the
stack's own code: Transformers' Trainer with real TrainingArguments (and PEFT's default
LoraConfig for LoRA, prepare_model_for_kbit_training for QLoRA when bitsandbytes imports), or
a pure-bf16 loop with torchtune's chunked loss for the torchtune rows. It records
torch.cuda.max_memory_allocated, max_memory_reserved and the process's memory as NVML sees it
(sampled every few milliseconds during the steps), and the runtime constants the estimator
states without a GPU: the CUDA context (NVML used before any allocation), cuBLAS's workspace
and the allocator's reserve. It writes docs/accuracy-cuda.md (and a JSON copy under $OUT when
set) beside memtui's prediction for each figure. The grid fits in about 8 minutes on one H100
or H200.

    python benchmarks/cuda_check.py                      # every row, table on stdout
    python benchmarks/cuda_check.py --only trainer-lora  # rows whose name contains it
    python benchmarks/cuda_check.py --write docs/accuracy-cuda.md

On the device machine (torch, transformers, peft, accelerate and nvidia-ml-py are there;
pydantic is carried as wheels), see README.md "Accuracy".
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import threading
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

GB = 10**9
MiB = 2**20
BUDGET_S = 480  # stop starting new rows after 8 minutes


@dataclass(frozen=True)
class Row:
    """One plan to run: memtui flags, and how the stack runs it."""

    name: str
    flags: str
    runner: str
    """trainer (Transformers' Trainer, PEFT for LoRA), torchtune (pure bf16 loop), trl-dpo
    or trl-grpo (TRL 1.16's DPOTrainer / GRPOTrainer, memtui/measure/trl_step.py)."""


GRID: tuple[Row, ...] = (
    Row(
        "trainer-full-bf16-qwen0.5b",
        "--stack trainer --model Qwen/Qwen2.5-0.5B --method full --precision bf16 "
        "--micro-batch 4 --seq-len 2048",
        "trainer",
    ),
    Row(
        "trainer-full-autocast-llama1b-ckpt",
        "--stack trainer --model meta-llama/Llama-3.2-1B --method full "
        "--precision bf16-autocast --micro-batch 2 --seq-len 2048 --checkpointing full",
        "trainer",
    ),
    Row(
        "trainer-lora-qv-llama1b",
        "--stack trainer --model meta-llama/Llama-3.2-1B --method lora --lora-rank 8 "
        "--lora-targets q_proj,v_proj --precision bf16 --micro-batch 4 --seq-len 2048",
        "trainer",
    ),
    Row(
        "trainer-lora-all-llama2-7b-ckpt",
        "--stack trainer --model meta-llama/Llama-2-7b-hf --method lora --lora-rank 16 "
        "--lora-targets all-linear --precision bf16 --micro-batch 2 --seq-len 2048 "
        "--checkpointing full",
        "trainer",
    ),
    Row(
        "trainer-full-eager-gpt2-medium",
        "--stack trainer --model openai-community/gpt2-medium --method full --precision bf16 "
        "--micro-batch 8 --seq-len 1024 --attention eager",
        "trainer",
    ),
    Row(
        "trainer-full-bf16-mistral7b-ckpt",
        "--stack trainer --model mistralai/Mistral-7B-v0.1 --method full --precision bf16 "
        "--micro-batch 1 --seq-len 2048 --checkpointing full",
        "trainer",
    ),
    Row(
        "trainer-qlora-llama2-7b",
        "--stack trainer --model meta-llama/Llama-2-7b-hf --method qlora --lora-rank 16 "
        "--lora-targets all-linear --precision bf16 --micro-batch 2 --seq-len 2048 "
        "--checkpointing full",
        "trainer",
    ),
    Row(
        "trl-dpo-full-qwen0.5b",
        "--stack trainer --model Qwen/Qwen2.5-0.5B --objective dpo --method full "
        "--precision bf16 --loss fused --micro-batch 2 --seq-len 1024",
        "trl-dpo",
    ),
    Row(
        "trl-dpo-lora-llama1b-ckpt",
        "--stack trainer --model meta-llama/Llama-3.2-1B --objective dpo --method lora "
        "--lora-rank 8 --lora-targets all-linear --precision bf16 --loss fused "
        "--micro-batch 2 --seq-len 1024 --checkpointing full",
        "trl-dpo",
    ),
    Row(
        "trl-grpo-full-qwen0.5b-generate",
        "--stack trainer --model Qwen/Qwen2.5-0.5B --objective grpo --method full "
        "--precision bf16 --loss fused --micro-batch 4 --grad-accum 2 --num-generations 4 "
        "--max-prompt-length 256 --max-completion-length 256 --vllm-mode none",
        "trl-grpo",
    ),
    Row(
        "torchtune-full-llama1b-chunked",
        "--stack torchtune --model meta-llama/Llama-3.2-1B --method full --precision bf16 "
        "--micro-batch 2 --seq-len 4096 --loss chunked --gpus 1 --strategy ddp",
        "torchtune",
    ),
)


@dataclass
class Result:
    name: str
    flags: str
    predicted: dict[str, int] = field(default_factory=dict)
    measured: dict[str, int] = field(default_factory=dict)
    seconds: float = 0.0
    error: str = ""


class NvmlPeak:
    """The device's used memory as NVML reports it, sampled in a thread (nvidia-smi's
    memory.used is the same query)."""

    def __init__(self, index: int = 0, every_s: float = 0.002) -> None:
        import pynvml

        pynvml.nvmlInit()
        self._nvml = pynvml
        self._handle = pynvml.nvmlDeviceGetHandleByIndex(index)
        self._every = every_s
        self.peak = 0
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def used(self) -> int:
        return int(self._nvml.nvmlDeviceGetMemoryInfo(self._handle).used)

    def __enter__(self) -> NvmlPeak:
        self.peak = self.used()
        self._stop.clear()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()
        return self

    def _run(self) -> None:
        while not self._stop.is_set():
            self.peak = max(self.peak, self.used())
            time.sleep(self._every)

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()


def plan_of(flags: str) -> Any:
    from memtui.cli import build_parser
    from memtui.commands.plan_flags import plan_from_args

    gpu = "--gpus 1" if "--gpus" not in flags else ""
    return plan_from_args(build_parser().parse_args(["estimate", *flags.split(), *gpu.split()]))


def predicted(plan: Any, capacity: int) -> dict[str, int]:
    from memtui.estimator import estimate

    budget = estimate(plan.evolve(hardware={"gpu_memory": capacity})).budget
    return {"allocated": budget.allocated, "reserved": budget.reserved, "device": budget.total}


def _tokens(plan: Any, steps: int) -> Any:
    import torch

    vocab = plan.model.architecture.vocab_size
    return torch.randint(0, vocab, (steps * plan.micro_batch, plan.seq_len))


def build_model(plan: Any, dtype: Any) -> Any:
    from transformers import AutoConfig, AutoModelForCausalLM

    from memtui.estimator.model_source import resolve_model

    config = dict(resolve_model(plan.model.name).config or {})
    model_type = config.pop("model_type")
    hf = AutoConfig.for_model(model_type, **config)
    attention = "sdpa" if plan.attention.value == "flash" else "eager"
    return AutoModelForCausalLM.from_config(hf, torch_dtype=dtype, attn_implementation=attention)


def run_trainer(plan: Any) -> None:
    """Two steps through Transformers' Trainer with its defaults (PEFT's for LoRA)."""
    import torch
    from transformers import Trainer, TrainingArguments

    autocast = plan.precision.value in ("bf16", "bf16-autocast")
    dtype = torch.bfloat16 if plan.precision.value == "bf16" else torch.float32
    with tempfile.TemporaryDirectory() as out:
        if plan.method.value == "qlora":
            model = quantized_model(plan, Path(out))
        else:
            model = build_model(plan, dtype).cuda()
        if plan.method.value != "full":
            from peft import LoraConfig, get_peft_model

            targets = list(plan.lora_targets)
            target: Any = "all-linear" if targets == ["all-linear"] else targets
            model = get_peft_model(model, LoraConfig(r=plan.lora_rank, target_modules=target))
        data = [{"input_ids": t, "labels": t} for t in _tokens(plan, 2)]
        args = TrainingArguments(
            output_dir=out,
            per_device_train_batch_size=plan.micro_batch,
            max_steps=2,
            bf16=autocast,
            gradient_checkpointing=plan.checkpointing.value == "full",
            report_to=[],
            save_strategy="no",
            logging_strategy="no",
            dataloader_pin_memory=False,
        )
        trainer = Trainer(model=model, args=args, train_dataset=data)
        torch.cuda.reset_peak_memory_stats()
        trainer.train()
    del trainer, model


def quantized_model(plan: Any, folder: Path) -> Any:
    """QLoRA as its recipes load it: the bf16 checkpoint (random weights, saved here) read
    back through from_pretrained with bitsandbytes' NF4 (double quantization, bf16 compute),
    then PEFT's prepare_model_for_kbit_training with its defaults."""
    import torch
    from peft import prepare_model_for_kbit_training
    from transformers import AutoModelForCausalLM, BitsAndBytesConfig

    build_model(plan, torch.bfloat16).save_pretrained(folder / "model")
    quant = BitsAndBytesConfig(
        load_in_4bit=True,
        bnb_4bit_quant_type="nf4",
        bnb_4bit_use_double_quant=plan.qlora_double_quant,
        bnb_4bit_compute_dtype=torch.bfloat16,
    )
    model = AutoModelForCausalLM.from_pretrained(
        folder / "model", quantization_config=quant, torch_dtype=torch.bfloat16, device_map="cuda"
    )
    return prepare_model_for_kbit_training(model)


def run_torchtune(plan: Any) -> None:
    """Two steps of a pure-bf16 loop as torchtune's full_finetune_single_device runs it:
    bf16 model and AdamW(fused=True), CEWithChunkedOutputLoss-style chunked loss (8 chunks,
    each upcast to fp32), logits freed before backward."""
    import torch
    import torch.nn.functional as F

    model = build_model(plan, torch.bfloat16).cuda()
    optimizer = torch.optim.AdamW(model.parameters(), fused=True)
    tokens = _tokens(plan, 2).cuda()
    torch.cuda.reset_peak_memory_stats()
    for step in range(2):
        batch = tokens[step * plan.micro_batch : (step + 1) * plan.micro_batch]
        hidden = model.model(batch).last_hidden_state
        chunks = hidden.chunk(8, dim=1)
        labels = batch.roll(-1, dims=1).chunk(8, dim=1)
        loss = sum(
            F.cross_entropy(model.lm_head(h).float().flatten(0, 1), y.flatten(), reduction="sum")
            for h, y in zip(chunks, labels, strict=True)
        )
        del hidden, chunks
        loss.backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
    del model, optimizer


def run_trl(plan: Any) -> None:
    """Two optimizer steps through TRL 1.16's own trainer for the plan's objective, as
    memtui measure runs it on CPU (memtui/measure/trl_step.py: DPOTrainer with a reference
    copy for a full fine-tune and the adapter-disabled base for LoRA; GRPOTrainer with
    Transformers' generate), here on the GPU: TRL's Triton kernels for its fused LM head
    instead of the CPU's torch fold. Needs trl and datasets (carry their wheels)."""
    import torch

    from memtui.estimator.model_source import resolve_model
    from memtui.measure import trainer, trl_step

    config = dict(resolve_model(plan.model.name).config or {})
    cuda = torch.device("cuda")
    original = trl_step.hf_model

    def on_gpu(*args: Any, **kwargs: Any) -> Any:
        return original(*args, **kwargs).to(cuda)

    # the models on the GPU, built as the CPU measure builds them, Trainer off the CPU
    trl_step.hf_model = on_gpu
    trainer.ON_CPU = False
    try:
        trl_step._run(config, plan)
    finally:
        trl_step.hf_model = original
        trainer.ON_CPU = True


RUNNERS = {
    "trainer": run_trainer,
    "torchtune": run_torchtune,
    "trl-dpo": run_trl,
    "trl-grpo": run_trl,
}


def runtime_constants(nvml: NvmlPeak) -> dict[str, int]:
    """The CUDA context (NVML's used memory once the context exists, nothing allocated) and
    cuBLAS's workspace (what the first matmul adds to torch's allocated memory)."""
    import torch

    torch.cuda.init()
    torch.empty(1, device="cuda")
    torch.cuda.synchronize()
    context = nvml.used() - torch.cuda.memory_reserved()
    a = torch.randn(256, 256, device="cuda", dtype=torch.bfloat16)
    before = torch.cuda.memory_allocated()
    (a @ a).sum().item()
    workspace = torch.cuda.memory_allocated() - before - 256 * 256 * 2
    del a
    return {"cuda_context": int(context), "cublas_workspace": int(max(0, workspace))}


def run_row(row: Row, nvml: NvmlPeak, capacity: int) -> Result:
    import torch

    result = Result(row.name, row.flags)
    start = time.perf_counter()
    try:
        plan = plan_of(row.flags)
        result.predicted = predicted(plan, capacity)
        torch.cuda.empty_cache()
        torch.cuda.reset_peak_memory_stats()
        with nvml:
            RUNNERS[row.runner](plan)
        torch.cuda.synchronize()
        result.measured = {
            "allocated": torch.cuda.max_memory_allocated(),
            "reserved": torch.cuda.max_memory_reserved(),
            "device": nvml.peak,
        }
    except Exception as err:  # a row that cannot run here is reported, the grid goes on
        result.error = f"{type(err).__name__}: {str(err).splitlines()[0][:200]}"
    finally:
        import gc

        gc.collect()
        torch.cuda.empty_cache()
    result.seconds = time.perf_counter() - start
    return result


def table(results: list[Result], constants: dict[str, int], device: str) -> str:
    lines = [
        "# Estimator accuracy on a CUDA GPU",
        "",
        f"Measured by `python benchmarks/cuda_check.py` on {device}. Each row: two training "
        "steps through the stack's own code; errors are (memtui - measured) / measured.",
        "",
        f"Runtime constants measured: CUDA context {constants['cuda_context'] / MiB:.0f} MiB, "
        f"cuBLAS workspace {constants['cublas_workspace'] / MiB:.1f} MiB.",
        "",
        "| row | allocated GB (memtui / measured) | err | reserved GB | err | "
        "nvidia-smi GB | err |",
        "|---|---:|---:|---:|---:|---:|---:|",
    ]
    for r in results:
        if r.error:
            lines.append(f"| {r.name} | not run: {r.error} | | | | | |")
            continue
        cells = []
        for key in ("allocated", "reserved", "device"):
            p, m = r.predicted[key], r.measured[key]
            cells += [f"{p / GB:.2f} / {m / GB:.2f}", f"{(p - m) / m:+.1%}"]
        lines.append(f"| {r.name} | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", default="", help="run the rows whose name contains this")
    parser.add_argument("--write", metavar="FILE", help="write the markdown table to FILE")
    args = parser.parse_args()
    import torch

    if not torch.cuda.is_available():
        print("cuda_check: no CUDA GPU here; run it on a GPU machine", file=sys.stderr)
        return 2
    nvml = NvmlPeak()
    constants = runtime_constants(nvml)
    capacity = torch.cuda.get_device_properties(0).total_memory
    device = torch.cuda.get_device_name(0)
    results: list[Result] = []
    started = time.perf_counter()
    for row in GRID:
        if args.only not in row.name:
            continue
        if time.perf_counter() - started > BUDGET_S:
            results.append(Result(row.name, row.flags, error="time budget spent"))
            continue
        results.append(run_row(row, nvml, capacity))
        print(f"{row.name}: {results[-1].seconds:.0f} s {results[-1].error}", flush=True)
    text = table(results, constants, device)
    print(text)
    if args.write:
        Path(args.write).write_text(text, encoding="utf-8")
    out = os.environ.get("OUT")
    if out:
        payload = {"device": device, "constants": constants, "rows": [asdict(r) for r in results]}
        Path(out, "cuda_check.json").write_text(json.dumps(payload, indent=1), encoding="utf-8")
        Path(out, "accuracy-cuda.md").write_text(text, encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
