"""How far the estimator is from real PyTorch training steps, term by term.

    python benchmarks/accuracy.py [--write docs/accuracy.md] [--quick]

Runs `memtui.measure` over a grid of catalog models (sizes 124M-47B, MHA/GQA/MQA, vocabularies
32k-256k, sequences 512-8192, micro-batches 1-8, eager and SDPA attention, no/selective/full
checkpointing, LoRA, the precisions and optimizers torch.optim has on CPU). Full-size models
run under FakeTensorMode: every tensor has its real shape and dtype, nothing is allocated, and
the bytes are the ones a real step has (tests/test_measure_accuracy.py checks fake against
real on small models). Prints a markdown table: the error of each term per configuration,
then the median and maximum absolute error per term; `--write` saves it.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from memtui.estimator.model_source import load_model
from memtui.estimator.plan import Plan

TERMS = ("weights", "gradients", "master_weights", "optimizer_states", "activations", "logits",
         "step_temporaries", "peak")  # fmt: skip
HEADERS = ("weights", "grads", "master", "optimizer", "activations", "logits", "step temps",
           "peak")  # fmt: skip

L2_7B, L3_8B, L32_1B = (
    "meta-llama/Llama-2-7b-hf",
    "meta-llama/Meta-Llama-3-8B",
    ("meta-llama/Llama-3.2-1B"),
)
GRID: list[tuple[str, dict[str, Any]]] = [
    ("openai-community/gpt2", {"seq_len": 1024, "micro_batch": 8, "attention": "eager"}),
    ("openai-community/gpt2-medium", {"seq_len": 1024, "micro_batch": 4}),
    ("openai-community/gpt2-large", {"seq_len": 1024, "micro_batch": 2, "checkpointing": "full"}),
    ("Qwen/Qwen2.5-0.5B", {"seq_len": 2048, "micro_batch": 4}),
    ("Qwen/Qwen2.5-0.5B", {"seq_len": 4096, "micro_batch": 1, "attention": "eager"}),
    (L32_1B, {"seq_len": 512, "micro_batch": 8, "attention": "eager"}),
    (L32_1B, {"seq_len": 8192, "micro_batch": 1, "checkpointing": "full"}),
    (L32_1B, {"seq_len": 8192, "micro_batch": 2}),
    (L32_1B, {"seq_len": 2048, "micro_batch": 2, "precision": "fp32"}),
    (L32_1B, {"seq_len": 2048, "micro_batch": 2, "precision": "bf16", "optimizer": "sgd-momentum"}),
    (L32_1B, {"seq_len": 2048, "micro_batch": 1, "optimizer": "adafactor"}),
    ("google/gemma-2b", {"seq_len": 2048, "micro_batch": 2}),
    (L2_7B, {"seq_len": 4096, "micro_batch": 1}),
    (L2_7B, {"seq_len": 4096, "micro_batch": 1, "attention": "eager",
             "checkpointing": "selective"}),
    (L2_7B, {"seq_len": 4096, "micro_batch": 2, "checkpointing": "full"}),
    (L2_7B, {"seq_len": 2048, "micro_batch": 4, "method": "lora", "lora_rank": 16}),
    (L2_7B, {"seq_len": 4096, "micro_batch": 1, "method": "lora", "checkpointing": "full"}),
    (L3_8B, {"seq_len": 8192, "micro_batch": 1, "checkpointing": "full"}),
    (L3_8B, {"seq_len": 2048, "micro_batch": 4}),
    (L3_8B, {"seq_len": 4096, "micro_batch": 1, "method": "lora", "lora_targets": ("attention",)}),
    ("mistralai/Mistral-7B-v0.1", {"seq_len": 4096, "micro_batch": 2, "attention": "eager",
                                   "checkpointing": "full"}),
    ("Qwen/Qwen2.5-7B", {"seq_len": 2048, "micro_batch": 1, "checkpointing": "selective"}),
    ("mistralai/Mixtral-8x7B-v0.1", {"seq_len": 1024, "micro_batch": 1}),
    ("Qwen/Qwen1.5-MoE-A2.7B", {"seq_len": 2048, "micro_batch": 1}),
    ("Qwen/Qwen3-8B", {"seq_len": 2048, "micro_batch": 1, "checkpointing": "full"}),
    ("google/gemma-2-2b", {"seq_len": 2048, "micro_batch": 1, "attention": "eager"}),
    ("microsoft/Phi-3-mini-4k-instruct", {"seq_len": 2048, "micro_batch": 1}),
    ("facebook/opt-1.3b", {"seq_len": 2048, "micro_batch": 1}),
    ("EleutherAI/pythia-1b", {"seq_len": 2048, "micro_batch": 1}),
    # issue 9's families
    ("microsoft/phi-2", {"seq_len": 2048, "micro_batch": 1}),
    ("stabilityai/stablelm-3b-4e1t", {"seq_len": 2048, "micro_batch": 1}),
    ("allenai/OLMo-2-1124-7B", {"seq_len": 2048, "micro_batch": 1}),
    ("google/gemma-3-1b-pt", {"seq_len": 512, "micro_batch": 4}),
    ("HuggingFaceTB/SmolLM2-1.7B", {"seq_len": 2048, "micro_batch": 2}),
    ("Qwen/Qwen3-30B-A3B", {"seq_len": 1024, "micro_batch": 1}),
    ("deepseek-ai/DeepSeek-V2-Lite", {"seq_len": 1024, "micro_batch": 1, "attention": "eager"}),
    ("mistralai/Mistral-Nemo-Base-2407", {"seq_len": 2048, "micro_batch": 1,
                                          "checkpointing": "full"}),
]  # fmt: skip
QUICK = [0, 3, 5, 11, 14]


@dataclass
class Outcome:
    name: str
    errors: dict[str, float]
    seconds: float
    mode: str
    failure: str = ""
    peak_in: str = ""


def describe(plan: Plan) -> str:
    parts = [f"s={plan.seq_len} b={plan.micro_batch}", plan.attention.value]
    if plan.checkpointing.value != "none":
        parts.append(f"ckpt {plan.checkpointing.value}")
    if plan.method.value != "full":
        parts.append(f"LoRA r={plan.lora_rank} {','.join(plan.lora_targets)}")
    if plan.precision.value != "bf16-mixed":
        parts.append(plan.precision.value)
    if plan.optimizer.value != "adamw":
        parts.append(plan.optimizer.value)
    return f"{plan.model.name.split('/')[-1]} {' '.join(parts)}"


def run_one(ref: str, fields: dict[str, Any]) -> Outcome:
    from memtui.measure import Unsupported, measure

    plan = Plan(model=load_model(ref), **fields)
    start = time.perf_counter()
    try:
        result = measure(ref, plan, fake=True)
    except (Unsupported, RuntimeError, NotImplementedError) as err:
        line = str(err).splitlines()[0] if str(err) else type(err).__name__
        return Outcome(describe(plan), {}, time.perf_counter() - start, "fake", line[:120])
    errors = {row.key: row.error for row in result.rows}
    m = result.measurement
    mode = "fake" if m.fake else "real"
    peak_in = "fwd/bwd" if m.forward_backward_peak >= m.step_temporaries else "opt. step"
    return Outcome(describe(result.plan), errors, time.perf_counter() - start, mode, "", peak_in)


def table(outcomes: list[Outcome]) -> str:
    lines = [
        "| configuration | " + " | ".join(HEADERS) + " | peak in |",
        "|---|" + "---:|" * len(HEADERS) + "---|",
    ]
    for o in outcomes:
        if o.failure:
            lines.append(f"| {o.name} | not measured: {o.failure} |" + " |" * len(HEADERS))
            continue
        cells = [f"{o.errors[t]:+.2%}" for t in TERMS]
        lines.append(f"| {o.name} | " + " | ".join(cells) + f" | {o.peak_in} |")
    done = [o for o in outcomes if not o.failure]
    for label, fn in (("median abs error", statistics.median), ("max abs error", max)):
        cells = [f"{fn(abs(o.errors[t]) for o in done):.2%}" if done else "-" for t in TERMS]
        lines.append(f"| **{label}** | " + " | ".join(cells) + " | |")
    return "\n".join(lines)


HEADER = """# Estimator accuracy against real PyTorch training steps

Each row is one training step measured by `memtui measure` (FakeTensorMode: real shapes and
dtypes, nothing allocated) beside `memtui estimate` for the same plan on one GPU (no sharding,
no runtime overhead). Error = (predicted - measured) / measured; "peak in" says whether the
step's peak is reached in forward/backward (activations and logits on top of the state) or in
the optimizer step (its temporaries on top of the state). Reproduce with:

    pip install torch==2.13.0 transformers peft   # a CPU torch is enough
    python benchmarks/accuracy.py --write docs/accuracy.md

The step mirrors the estimator's assumptions: bf16 weights and gradients with an fp32 master
copy (bf16-mixed), gradients already allocated (an accumulation micro-batch), the loss
computed as transformers' Trainer does, AdamW with foreach (torch.optim), transformers'
Adafactor. `tests/test_measure_accuracy.py` runs a smaller grid for real on CPU in CI and
checks that FakeTensorMode measures the same bytes as a real step.
"""

NOTES = """
What the measurement cannot see, and the estimator does not model (it would differ on a GPU):
- The caching allocator's rounding (512-byte blocks, 2 MiB segments) and fragmentation: the
  estimator's separate overhead term covers them (`--overhead`), not these rows.
- Kernel workspaces (cuBLAS, cuDNN, FlashAttention's scratch), which never appear as tensors.
- CUDA keeps LayerNorm statistics in fp32 where CPU keeps them in the activation dtype
  (GPT-2 rows: 4 bytes per token per norm, under 0.1 percent).

Known gaps (families whose layers differ from the LLaMA and GPT-2 code the formulas follow):
- GPT-NeoX with eager attention is not modelled (its eager path differs from LLaMA's and
  GPT-2's).
- Gemma 3 with sequences longer than its sliding window: transformers hands SDPA
  materialised (b, 1, s, s) masks (two, shared by every layer), not counted yet.
- DeepSeek-V2-Lite runs eager here: CPU's SDPA has no flash kernel for its unequal q/k and v
  head widths (192, 128) and falls back to the math kernel; the estimator's flash rows model
  CUDA's memory-efficient kernel for it. Its router weight is fp32 (weights, gradients:
  -0.02 percent), which the state does not count yet. Its dense first layer is counted as an
  MoE layer.
- Eager attention with full checkpointing keeps the causal mask(s) of shape (b, 1, s, s) as
  layer inputs; a second (sliding-window) mask of Gemma 2 is not modelled.
- Falcon is not in the table: on CPU its SDPA call gets a mask and falls back to the math
  kernel (s x s scores), which says nothing about a GPU run.

Modelled from the measurement (memtui/estimator/activations.py):
- LLaMA-style layers keep the RMSNorm input upcast to fp32 (4h bytes per token per norm) and
  the normalized tensor (2h) besides the norm's output; SDPA's output is o_proj's input.
- A query made by `torch.cat` (partial rotary: Phi, Phi-3, StableLM, GPT-NeoX) is
  (b, a, s, d)-contiguous, and the flash kernel's output takes the query's layout (CPU's
  kernel, and FlashAttention-2's mha_fwd, which allocates it with empty_like(q)), so
  transformers' transpose + contiguous before o_proj copies it: qw more per token per layer.
- The loss holds three fp32 b s V buffers at its peak (12 bytes per logit).
- The activation peak is either the loss's backward or one layer's backward (eager score
  gradients, the layer rebuilt under checkpointing, the weight gradient being accumulated),
  whichever is larger.
"""


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--write", type=Path, help="also write the markdown to this file")
    parser.add_argument("--quick", action="store_true", help=f"{len(QUICK)} configurations")
    args = parser.parse_args(argv)
    try:
        import torch
    except ImportError:
        print("needs torch: pip install torch==2.13.0 transformers peft", file=sys.stderr)
        return 2
    grid = [GRID[i] for i in QUICK] if args.quick else GRID
    outcomes = []
    for ref, fields in grid:
        outcome = run_one(ref, fields)
        print(f"{outcome.name}: {outcome.seconds:.1f}s {outcome.failure}", file=sys.stderr)
        outcomes.append(outcome)
    import torch
    import transformers

    versions = f"torch {torch.__version__}, transformers {transformers.__version__}"
    text = f"{HEADER}\nMeasured with {versions}.\n\n{table(outcomes)}\n{NOTES}"
    print(text)
    if args.write:
        args.write.write_text(text, encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
