"""How far the estimator is from real training steps, term by term.

    python benchmarks/accuracy.py [--stack generic|trainer|fsdp2|real|all] [--quick]
                                  [--write docs/accuracy.md]

`--stack generic` (the default) runs `memtui.measure` over a grid of catalog models (sizes
124M-47B, MHA/GQA/MQA, vocabularies 32k-256k, sequences 512-8192, micro-batches 1-8, eager and
SDPA attention, no/selective/full checkpointing, LoRA, the precisions and optimizers torch.optim
has on CPU) with memtui's own step. Full-size models run under FakeTensorMode: every tensor has
its real shape and dtype, nothing is allocated, and the bytes are the ones a real step has
(tests/test_measure_accuracy.py checks fake against real on small models).

`--stack trainer` / `fsdp2` (`real`: both) run memtui/measure/grid.py's tiny models through
the stacks themselves, for real on CPU: a real `transformers.Trainer` step with PEFT's
default LoRA, and Trainer + accelerate's FSDP2 over two CPU processes
(tests/test_measure_stacks.py checks the rows marked for CI).

Prints markdown tables: the error of each term per configuration, then the median and maximum
absolute error per term; `--write` replaces the matching section of the file (between its
`<!-- generic:begin -->` / `<!-- stacks:begin -->` markers), leaving the rest, such as
benchmarks/published.py's block, as it is.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from memtui.commands.plan_flags import installed_versions
from memtui.estimator.model_source import load_model
from memtui.estimator.plan import Plan
from memtui.estimator.versions import Versions
from memtui.measure.grid import STACK_GRID
from memtui.measure.grid import Row as GridRow

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
    # the families people fine-tune now (catalog.py)
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
    """(predicted - measured) / measured per term; a tiny term's is 0 (see `tiny`)."""
    seconds: float
    mode: str
    failure: str = ""
    peak_in: str = ""
    tiny: dict[str, int] = field(default_factory=dict)
    """Terms under TINY bytes both predicted and measured, by their difference in bytes (a
    ratio of a few scalars means nothing: gradient clipping's norms)."""
    transformers: str = ""
    """The transformers release the row ran with, which its plan was estimated for."""


TINY = 4096


def outcome_of(name: str, result: Any, seconds: float) -> Outcome:
    """The errors of one measured result, tiny terms apart."""
    errors, tiny = {}, {}
    given = result.plan.versions.transformers
    for row in result.rows:
        if max(abs(row.predicted), abs(row.measured)) < TINY:
            errors[row.key], tiny[row.key] = 0.0, row.difference
        else:
            errors[row.key] = row.error
    m = result.measurement
    mode = "fake" if m.fake else "real"
    peak_in = "fwd/bwd" if m.forward_backward_peak >= m.step_temporaries else "opt. step"
    return Outcome(name, errors, seconds, mode, "", peak_in, tiny, given.version if given else "")


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
    return outcome_of(describe(result.plan), result, time.perf_counter() - start)


def table(
    outcomes: list[Outcome],
    terms: tuple[str, ...] = TERMS,
    headers: tuple[str, ...] = HEADERS,
    first: str = "configuration",
    versions: bool = False,
) -> str:
    """The markdown table of `outcomes`; `versions`: a column with each row's transformers."""
    lines = [
        f"| {first} | " + ("transformers | " if versions else "") + " | ".join(headers)
        + " | peak in |",
        "|---|" + ("---|" if versions else "") + "---:|" * len(headers) + "---|",
    ]  # fmt: skip
    for o in outcomes:
        name = f"{o.name} | {o.transformers}" if versions else o.name
        if o.failure:
            lines.append(f"| {name} | not measured: {o.failure} |" + " |" * len(headers))
            continue
        cells = [f"{o.tiny[t]:+,} B" if t in o.tiny else f"{o.errors[t]:+.2%}" for t in terms]
        lines.append(f"| {name} | " + " | ".join(cells) + f" | {o.peak_in} |")
    done = [o for o in outcomes if not o.failure]
    ci = [o for o in done if not o.name.endswith(OUT_OF_CI)]
    groups = [("", done)] + ([(" (rows in CI)", ci)] if ci and len(ci) < len(done) else [])
    for suffix, group in groups:
        for label, fn in (("median abs error", statistics.median), ("max abs error", max)):
            cells = [f"{fn(abs(o.errors[t]) for o in group):.2%}" if group else "-" for t in terms]
            gap = " |" if versions else ""
            lines.append(f"| **{label}{suffix}** |{gap} " + " | ".join(cells) + " | |")
    return "\n".join(lines)


OUT_OF_CI = " (not in CI)"


STACK_TERMS = ("weights", "gradients", "master_weights", "optimizer_states", "activations",
               "logits", "backward_buffers", "step_temporaries", "peak")  # fmt: skip
STACK_HEADERS = ("weights", "grads", "master", "optimizer", "activations", "logits",
                 "buffers", "step temps", "peak")  # fmt: skip


def run_stack_row(row: GridRow) -> Outcome:
    """One grid row measured through its stack (a real step on CPU)."""
    from memtui.measure import Unsupported, measure

    start = time.perf_counter()
    versions = installed()
    try:
        result = measure(row.name, row.plan.evolve(versions=versions), config=row.config)
    except (Unsupported, RuntimeError, ValueError) as err:  # ValueError: a release refusing it
        line = str(err).splitlines()[0] if str(err) else type(err).__name__
        given = versions.transformers.version if versions.transformers else ""
        seconds = time.perf_counter() - start
        return Outcome(row.name, {}, seconds, "real", line[:120], transformers=given)
    name = row.name + ("" if row.ci else OUT_OF_CI)
    return outcome_of(name, result, time.perf_counter() - start)


def installed() -> Versions:
    """The frameworks' versions the rows run with, as the plan is told them where memtui runs
    beside the job (`--installed-versions`: their metadata, the first found on sys.path)."""
    fields = installed_versions()
    return Versions(**{key.removeprefix("versions."): value for key, value in fields.items()})


TITLE = """# Estimator accuracy against real training steps

Two grids, each regenerated by `benchmarks/accuracy.py` (see its docstring): real stacks run
with their own defaults on tiny models, for real on CPU, and memtui's own step on full-size
catalog models under FakeTensorMode. Error = (predicted - measured) / measured; "peak in" says
whether the step's peak is reached in forward/backward (activations and logits on top of the
state) or in the optimizer step (its temporaries on top of the state). A term under 4 KiB
both predicted and measured is shown as its difference in bytes and counts as 0 in the
medians (gradient clipping's per-tensor norms, a few scalars).
"""

STACKS_HEADER = """## Through the real stacks (Trainer, PEFT, FSDP2) on CPU

Each row trains a tiny model (hidden 256, 2 layers, vocabulary 4096 unless it says otherwise,
sequence 256, micro-batch 2; memtui/measure/grid.py) through code memtui did not write:
`trainer` rows are a real `transformers.Trainer` step with real `TrainingArguments` (bf16=True
for bf16 and fp32+autocast, the model loaded in bf16 or fp32; the default adamw_torch_fused;
`activation_checkpointing` for ckpt) and, for LoRA, `peft.get_peft_model` with a `LoraConfig`
at PEFT's defaults but r=8, the targets and the dropout (q,v is PEFT's own default for llama;
adapters in fp32, autocast_adapter_dtype=True); `fsdp2` rows are Trainer + accelerate's FSDP2
(fsdp_version 2, accelerate's MixedPrecisionPolicy, trainable parameters upcast to fp32) over
two CPU processes with gloo, one rank's bytes against `--stack fsdp2 --gpus 2`. The last
micro-batch of the second optimizer step and that step are measured per storage (memtui/
measure/probe.py); "buffers" are the stack's own (autocast's bf16 weight copies, FSDP's
gathered units, unsharded gradients and reduce-scatter inputs). Rows not in CI say why.
Reproduce with:

    pip install torch==2.13.0 transformers peft accelerate   # a CPU torch is enough
    python benchmarks/accuracy.py --stack real --write docs/accuracy.md
"""

STACKS_NOTES = """
What CPU cannot show, and what benchmarks/cuda_check.py measures instead on a GPU:
- The caching allocator (512-byte rounding, 2 MiB segments, per-stream pools, fragmentation),
  kernel workspaces (cuBLAS, FlashAttention) and the CUDA context: these rows count storages.
  On CUDA, FSDP2's all-gathers and reduce-scatters run on their own streams and the allocator
  keeps blocks per stream, so reserved memory exceeds these allocated bytes.
- Dropout: CPU's composite dropout keeps a mask in the activation dtype, CUDA's fused kernel a
  1-byte mask; the rows route F.dropout to `native_dropout` (CUDA's kernel, same bool mask on
  CPU). SDPA with attention dropout falls back to the math kernel on CPU: flash rows run
  without attention dropout (CUDA's flash kernel keeps only an RNG state for it).
- Autocast's CPU op lists differ from CUDA's outside the matmuls; LayerNorm statistics are
  bf16 on CPU, fp32 on CUDA (GPT-2 rows, under 0.1 percent).
- Not measured on CPU: DeepSpeed (installed for its config parser; its ZeRO optimizers
  build CUDA extensions), FSDP1 (accelerate enables FSDP only on accelerator devices; memtui
  promotes FSDP2 alone), torchtune and LitGPT (not installed), QLoRA (bitsandbytes' 4-bit
  kernels need CUDA), 8-bit and paged optimizers. benchmarks/cuda_check.py runs Trainer steps
  (QLoRA included) on a GPU and records max_memory_allocated / reserved and NVML's peak.
- Known gap, in the table as a row out of CI: small vocabularies under FSDP2 with
  checkpointing (a layer's backward sets the peak and the estimate counts all of a unit's
  gradients there: an upper bound).
"""

HEADER = """## memtui's own step on catalog models (FakeTensorMode)

Each row is one training step measured by `memtui measure` (FakeTensorMode: real shapes and
dtypes, nothing allocated) beside `memtui estimate` for the same plan on one GPU (no sharding,
no runtime overhead). Reproduce with:

    pip install torch==2.13.0 transformers peft   # a CPU torch is enough
    python benchmarks/accuracy.py --write docs/accuracy.md

The step mirrors the estimator's assumptions: bf16 weights and gradients with an fp32 master
copy (bf16-mixed), gradients already allocated (an accumulation micro-batch), the loss
computed as transformers' Trainer does, AdamW with foreach (torch.optim), transformers'
Adafactor. `tests/test_measure_accuracy.py` runs a smaller grid for real on CPU in CI and
checks that FakeTensorMode measures the same bytes as a real step. It checks memtui against
its own reading of a step; the section above checks it against the stacks themselves.
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


MARKERS = {
    "stacks": ("<!-- stacks:begin -->", "<!-- stacks:end -->"),
    "generic": ("<!-- generic:begin -->", "<!-- generic:end -->"),
}
STACK_CHOICES = {"trainer": ("trainer",), "fsdp2": ("fsdp2",), "real": ("trainer", "fsdp2")}


def replace_section(text: str, section: str, body: str) -> str:
    """`text` with `section`'s marked block replaced by `body` (appended when absent); a file
    without the title gets it first. Everything outside the markers is kept."""
    begin, end = MARKERS[section]
    block = f"{begin}\n{body.strip()}\n{end}"
    if begin in text and end in text:
        head, rest = text.split(begin, 1)
        return head + block + rest.split(end, 1)[1]
    if not text.startswith("# "):
        text = TITLE + "\n" + text
    return text.rstrip() + "\n\n" + block + "\n"


def generic_section(quick: bool) -> str:
    grid = [GRID[i] for i in QUICK] if quick else GRID
    outcomes = []
    for ref, fields in grid:
        outcome = run_one(ref, fields)
        print(f"{outcome.name}: {outcome.seconds:.1f}s {outcome.failure}", file=sys.stderr)
        outcomes.append(outcome)
    return f"{HEADER}\n{_versions()}\n\n{table(outcomes)}\n{NOTES}"


def stacks_section(stacks: tuple[str, ...], quick: bool) -> str:
    rows = [r for r in STACK_GRID if r.plan.stack.value in stacks and (r.ci or not quick)]
    outcomes = []
    for row in rows:
        outcome = run_stack_row(row)
        print(f"{outcome.name}: {outcome.seconds:.1f}s {outcome.failure}", file=sys.stderr)
        outcomes.append(outcome)
    body = table(outcomes, STACK_TERMS, STACK_HEADERS)
    why = [f"- {r.name}: {r.why}" for r in rows if r.why]
    out = f"{STACKS_HEADER}\n{_versions(stacks=True)}\n\n{body}\n"
    if why:
        out += "\nRows out of CI, and why:\n" + "\n".join(why) + "\n"
    return out + STACKS_NOTES


VERSIONS_HEADER = """## Through Trainer and a hand-written loop, by transformers release: {release}

The Trainer rows and the hand-written loop's rows of the grid above (memtui/measure/grid.py),
run with the transformers, PEFT and accelerate of that time and estimated for them: each
plan is told the versions installed where it runs (`--installed-versions`: their metadata,
the first found on sys.path), so its books follow that release's code
(memtui/estimator/stacks/hf_model.py, trainer.py). The hand-written loop (`--loop custom`,
memtui/measure/step.py) keeps the model output until after the backward and the optimizer
step, as hand-written FSDP loops do; it steps an fp32 master copy (`--stack generic`).
The older releases are installed beside the environment and shadow it:

    pip install --no-deps --target /work/tf439 transformers==4.39.3 tokenizers==0.15.2 \\
        peft==0.10.0 accelerate==0.28.0 huggingface_hub==0.27.1 datasets==3.2.0 \\
        requests==2.32.3 urllib3==2.2.3 charset-normalizer==3.4.0 certifi==2024.8.30
    pip install --target /work/tf439 aiohttp==3.11.11
    PYTHONPATH=/work/tf439 python benchmarks/accuracy.py --stack versions --write docs/accuracy.md

(4.48: transformers==4.48.3 tokenizers==0.21.0 peft==0.14.0 accelerate==1.3.0, the rest the
same; the current release: no --target.) Rows the release cannot run say why.
"""

VERSIONS_NOTES = """
What the older releases do that CPU shows differently, or that the rows cannot tell:
- Trainer's default optimizer before transformers 4.54 is adamw_torch: torch.optim.AdamW
  with foreach=None, which takes the foreach step on CUDA and the per-tensor step on CPU
  (optim/optimizer.py _default_to_fused_or_foreach); the estimate counts CUDA's foreach
  temporaries, the CPU row measures fewer ("step temps" over).
- `--optimizer sgd-momentum`: Trainer reads no `optim_args` for "sgd" in 4.39-4.56
  (trainer.py get_optimizer_cls_and_kwargs: torch.optim.SGD alone; 5.24 trainer_optimizer.py
  _get_sgd reads them), so the measured run has no momentum buffer (the static row says so).
- Trainer's checkpointing is reentrant before 5.0 (modeling_utils.py
  gradient_checkpointing_enable: 4.48-4.57 turn gradient_checkpointing_kwargs None into
  use_reentrant=True, 4.39's Trainer passes {} and torch's default is True; 5.0
  `{"use_reentrant": False}`): the plans of these rows are estimated reentrant
  (`--checkpoint-variant auto`), whose rebuild holds the layer's output through its backward
  (memtui/estimator/stacks/hf_model.py reentrant). Under LoRA with a frozen embedding the
  reentrant step needs `enable_input_require_grads` (PEFT calls it when the model already
  checkpoints at get_peft_model; the Trainer of 4.39-4.57 does not), which the measured step
  calls as such jobs do. The "reentrant" rows run the variant on the current release too.
- 4.39's "fp32+autocast ckpt V=1024" row: its activations are under by 6 percent and its
  buffers over by as much (its peak agrees): not traced yet.
- fp32 models (no autocast) in 4.39 and 4.48: the split between activations and logits
  differs from the books (4.48: 14 B per logit at the loss, the books 12) and the eager
  rows' peaks are under by 2 (4.39) and 5 (4.48) percent: not traced yet.
"""


def versions_section(quick: bool) -> tuple[str, str]:
    """(the transformers release X.Y, its section): the Trainer rows and the hand-written
    loop's rows run with the installed frameworks."""
    given = installed().transformers
    release = ".".join(given.version.split(".")[:2]) if given else "unknown"
    rows = [
        r
        for r in STACK_GRID
        if r.plan.stack.value in ("trainer", "generic") and (r.ci or not quick)
    ]
    outcomes = []
    for row in rows:
        outcome = run_stack_row(row)
        print(f"{outcome.name}: {outcome.seconds:.1f}s {outcome.failure}", file=sys.stderr)
        outcomes.append(outcome)
    body = table(outcomes, STACK_TERMS, STACK_HEADERS, versions=True)
    header = VERSIONS_HEADER.format(release=release)
    return release, f"{header}\n{_versions(stacks=True)}\n\n{body}\n{VERSIONS_NOTES}"


def _versions(stacks: bool = False) -> str:
    import torch
    import transformers

    names = f"torch {torch.__version__}, transformers {transformers.__version__}"
    if stacks:
        import accelerate
        import peft

        names += f", peft {peft.__version__}, accelerate {accelerate.__version__}"
    return f"Measured with {names}."


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--write", type=Path, help="also write the markdown to this file")
    parser.add_argument("--quick", action="store_true", help="a few configurations")
    parser.add_argument(
        "--stack",
        choices=("generic", *STACK_CHOICES, "all", "versions"),
        default="generic",
        help="memtui's own step (generic), the real stacks (trainer, fsdp2, real), all, or "
        "the Trainer and hand-written loop rows for the installed transformers (versions)",
    )
    args = parser.parse_args(argv)
    try:
        import torch  # noqa: F401
    except ImportError:
        print("needs torch: pip install torch==2.13.0 transformers peft", file=sys.stderr)
        return 2
    if args.stack == "versions":
        release, text = versions_section(args.quick)
        print(text)
        if args.write:
            from doc_table import write_table  # benchmarks/, the script's own folder

            marker = f"stacks-transformers-{release}"
            write_table(args.write, f"<!-- {marker}:begin -->", f"<!-- {marker}:end -->", text)
        return 0
    sections = {}
    if args.stack in ("generic", "all"):
        sections["generic"] = generic_section(args.quick)
    if args.stack != "generic":
        stacks = STACK_CHOICES.get(args.stack, ("trainer", "fsdp2"))
        sections["stacks"] = stacks_section(stacks, args.quick)
    print("\n".join(sections.values()))
    if args.write:
        text = args.write.read_text(encoding="utf-8") if args.write.exists() else ""
        for section in ("stacks", "generic"):
            if section in sections:
                text = replace_section(text, section, sections[section])
        args.write.write_text(text, encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
