"""memtui against publicly reported peak memory of real fine-tunes, compared like with like.

Each run is a measurement somebody else made and published: where it was published (the
repository, file and commit), the line quoted, the plan as `memtui estimate` flags, and what
was measured: `allocated` (torch.cuda.max_memory_allocated, or torchtune's peak_memory_active,
which counts the same live blocks), `reserved` (max_memory_reserved), `nvidia-smi` (the whole
process as the driver sees it) or `unknown`. memtui's matching figure is the budget's
allocated, reserved or total; an `unknown` metric is compared with reserved and reported
apart. Runs that used something memtui cannot express are listed with the reason, not
dropped. Shapes that depend on the dataset are the cap the run was truncated or padded to
(said per run). The frameworks' versions a run recorded are its plan's --*-version flags; the
summary gives the error per stack, stack and method, method, kind of figure, transformers
release range and source (benchmarks/error_band.py turns the same residuals into the band).

    python benchmarks/published.py                      # the table and the summary
    python benchmarks/published.py --write docs/accuracy.md
"""

from __future__ import annotations

import argparse
import statistics
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))  # doc_table

from memtui.cli import build_parser  # noqa: E402
from memtui.commands.plan_flags import plan_from_args  # noqa: E402
from memtui.estimator import estimate  # noqa: E402
from memtui.estimator.plan import Plan  # noqa: E402
from memtui.estimator.report import Report  # noqa: E402
from memtui.estimator.versions import Package  # noqa: E402

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
# its LoRA builders dropped out the adapters' input: torchtune/models/llama2/_model_builders.py
# lora_llama2_7b `lora_dropout: float = 0.05` (v0.1.0 to v0.2.1; 0.0 from v0.3.0), and
# llama3/_model_builders.py lora_llama3_8b passes `lora_dropout=0.05` (20747cd87); the configs
# do not set it
TT_2404_LORA = f"{TT_2404} --lora-dropout 0.05"
TT_4090_GAP = (
    "re-measured on RTX 4090s for the README in pull 775 (the table before it, a95c6b931: A100s "
    "capped by set_per_process_memory_fraction, the March configs: 14.17 GB for 2-GPU LoRA, "
    "12.01 GB for 4-GPU full); read in torchtune 0.1 (recipes/*_finetune_distributed.py, "
    "modules/) and torch 2.2.2 (FSDP1 _runtime_utils.py: frozen units resharded once their "
    "input's gradient exists; _limiter_utils.py: two all-gathers in flight), nothing in the "
    "step holds more than memtui's allocated figure; the gap to this reserved figure is not "
    "located (the caching allocator on an uncapped card, over batches of varying length, is "
    "the suspect left)"
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
# The FSDP QLoRA figures were written with the doc's section (peft 6008f272a, 2024-03-13), whose
# launch needs transformers' FSDP+QLoRA support (transformers pull 29587, released in 4.39.0);
# the doc's later "transformers>4.44.2" line came with the section's October 2024 update
PEFT_FSDP_VERSIONS = "--transformers-version 4.39.0"
PEFT_FSDP_WHEN = (
    "transformers 4.39.0: the figures date from peft 6008f272a (2024-03-13), when FSDP+QLoRA "
    "had just landed in transformers (pull 29587, released in 4.39.0)"
)


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


# ---- Runs from two more sources: PEFT's method comparison and fms-acceleration's benchmark ----
# Each run's versions are its plan's --*-version flags (the stacks follow that code); the
# runs memtui cannot express are listed with the reason, as above.

PEFT_MC = "huggingface/peft method_comparison/MetaMathQA/results/{}.json @{}"
# method_comparison/MetaMathQA (run.py, utils.py, data.py at each commit): Llama-3.2-3B loaded
# in bf16 (no autocast; PEFT keeps the adapters fp32: autocast_adapter_dtype), batch 4,
# torch.optim.AdamW (foreach), no checkpointing, the SDPA default, one L40S
PEFT_MC_PLAN = (
    "--stack trainer --loop custom --loop-keeps-output --model meta-llama/Llama-3.2-3B "
    "--precision bf16 --optimizer adamw --optimizer-kernel foreach --attention flash "
    "--checkpointing none --micro-batch 4 --seq-len 768 --gpus 1 --strategy ddp "
    "--gpu-memory l40s"
)
PEFT_MC_LOOP = (
    "run.py train(): outputs = model(**batch); loss = outputs.loss; backward; step: the "
    "output and its logits stay bound through backward and the optimizer step"
)
PEFT_MC_PEAK = (
    "accelerator_memory_max: max_memory_reserved at the end of the whole run less the reserve "
    "after init (utils.py init_accelerator, log_results), so the evaluations (generation at "
    "batch 50, up to 800 tokens) are inside it too; empty_cache every 10 steps"
)
PEFT_MC_SEQ = (
    "seq 768 is the cap (data.py tokenize_with_answer truncates to max_seq_length); batches "
    "are padded to their longest sample of at most 1300 characters (CHAR_LIMIT), which may "
    "be shorter"
)
# (result file, commit, accelerator_memory_max, the versions in its meta_info.package_info);
# a file rewritten with the same figure and versions is the same run, kept once
_PEFT_MC_V452 = "--torch-version 2.7.1 --transformers-version 4.52.4 --peft-version 0.15.2.dev0"
_PEFT_MC_V457 = "--torch-version 2.9.0 --transformers-version 4.57.1 --peft-version 0.18.1.dev0"
_PEFT_MC_V513 = "--torch-version 2.13.0 --transformers-version 5.13.1 --peft-version 0.19.2.dev0"
_PEFT_MC_COMPARED: tuple[tuple[str, str, int, str, str], ...] = (
    ("lora--llama-3.2-3B-rank32", "f650b08ab", 22273851392, _PEFT_MC_V452,
     "--method lora --lora-rank 32 --lora-targets q_proj,v_proj"),
    ("lora--llama-3.2-3B-rank32", "a99942694", 22286434304, _PEFT_MC_V457,
     "--method lora --lora-rank 32 --lora-targets q_proj,v_proj"),
    ("lora--llama-3.2-3B-rank32", "51c2ff666", 22292725760, _PEFT_MC_V513,
     "--method lora --lora-rank 32 --lora-targets q_proj,v_proj"),
    ("lora--llama-3.2-3B-rank64", "f650b08ab", 22540189696, _PEFT_MC_V452,
     "--method lora --lora-rank 64 --lora-targets q_proj,v_proj"),
    ("lora--llama-3.2-3B-rank64", "a99942694", 22554869760, _PEFT_MC_V457,
     "--method lora --lora-rank 64 --lora-targets q_proj,v_proj"),
    ("lora--llama-3.2-3B-rank64", "51c2ff666", 22552772608, _PEFT_MC_V513,
     "--method lora --lora-rank 64 --lora-targets q_proj,v_proj"),
    # rsLoRA only changes the adapters' scale (alpha / sqrt(r)), not what is stored
    ("lora--llama-3.2-3B-rank64-rslora", "f650b08ab", 22538092544, _PEFT_MC_V452,
     "--method lora --lora-rank 64 --lora-targets q_proj,v_proj"),
    ("lora--llama-3.2-3B-rank64-rslora", "a99942694", 22554869760, _PEFT_MC_V457,
     "--method lora --lora-rank 64 --lora-targets q_proj,v_proj"),
    ("lora--llama-3.2-3B-rank64-rslora", "51c2ff666", 22561161216, _PEFT_MC_V513,
     "--method lora --lora-rank 64 --lora-targets q_proj,v_proj"),
    ("lora--llama-3.2-3B-rank10-target-mlp", "f4763a0e7", 24712839168,
     "--torch-version 2.9.0 --transformers-version 4.57.1 --peft-version 0.17.2.dev0",
     "--method lora --lora-rank 10 --lora-targets gate_proj,up_proj,down_proj"),
    ("lora--llama-3.2-3B-rank10-target-mlp", "a99942694", 24693964800, _PEFT_MC_V457,
     "--method lora --lora-rank 10 --lora-targets gate_proj,up_proj,down_proj"),
    ("lora--llama-3.2-3B-rank10-target-mlp", "51c2ff666", 24698159104, _PEFT_MC_V513,
     "--method lora --lora-rank 10 --lora-targets gate_proj,up_proj,down_proj"),
    ("full-finetuning--llama-3.2-3B-lr_0.00001", "f650b08ab", 37241225216, _PEFT_MC_V452,
     "--method full"),
    ("full-finetuning--llama-3.2-3B-lr_0.00001", "a99942694", 38549848064, _PEFT_MC_V457,
     "--method full"),
    ("full-finetuning--llama-3.2-3B-lr_0.00001", "51c2ff666", 38868615168, _PEFT_MC_V513,
     "--method full"),
)  # fmt: skip
# the other result files (transformers 5.13.1, lokr's 5.15.0; torch 2.13.0): the file (less its
# --llama-3.2-3B), its commit, accelerator_memory_max and its peft_config.peft_type
_PEFT_MC_LISTED: tuple[tuple[str, str, int, str], ...] = (
    ("adalora-rank32", "51c2ff666", 22781362176, "ADALORA"),
    ("adamss-rank32", "51c2ff666", 20321402880, "ADAMSS"),
    ("adaptionprompt-lr_0.0005", "51c2ff666", 22456303616, "ADAPTION_PROMPT"),
    ("adaptionprompt-lr_5e-3", "5dbe5cefe", 22456303616, "ADAPTION_PROMPT"),
    ("beft-target-v_proj", "51c2ff666", 20172505088, "BEFT"),
    ("boft-default", "51c2ff666", 24691867648, "BOFT"),
    ("c3a-default", "51c2ff666", 22059941888, "C3A"),
    ("deft-rank32-para", "51c2ff666", 21514682368, "DEFT"),
    ("deft-rank32", "51c2ff666", 23620222976, "DEFT"),
    ("delora-rank32", "51c2ff666", 22351446016, "DELORA"),
    ("fourierft-default", "51c2ff666", 23657971712, "FOURIERFT"),
    ("fourierft-n_frequency-5000", "51c2ff666", 23670554624, "FOURIERFT"),
    ("frod-default", "51c2ff666", 23477616640, "FROD"),
    ("frod-sparse0.02-lr_0.001", "51c2ff666", 23876075520, "FROD"),
    ("glora-default", "51c2ff666", 21533556736, "GLORA"),
    ("glora-vector-paths", "51c2ff666", 21451767808, "GLORA"),
    ("gralora-rank32", "51c2ff666", 22296920064, "GRALORA"),
    ("hira-rank32-lr4.5e-3", "51c2ff666", 23597154304, "HIRA"),
    ("lily-rank140-mlp-a2-b2-s8.0", "51c2ff666", 25614614528, "LILY"),
    ("lily-rank896-a2-b2-s2.0", "51c2ff666", 23527948288, "LILY"),
    ("ia3-all-attn-5k-lr0.005", "51c2ff666", 26145193984, "IA3"),
    ("ia3-default", "51c2ff666", 23234347008, "IA3"),
    ("ia3-lr_0.001", "51c2ff666", 23234347008, "IA3"),
    ("ln_tuning-default", "51c2ff666", 21181235200, "LN_TUNING"),
    ("loha-rank32", "51c2ff666", 23907532800, "LOHA"),
    ("lokr-rank32-factor4-lr0.003", "b8bf4075a", 23590862848, "LOKR"),
    ("lora-rank14-target-mlp-bdlora", "51c2ff666", 24685576192, "LORA"),
    ("lora-rank32-dora", "51c2ff666", 24532484096, "LORA"),
    ("lora-rank32-lorafa", "51c2ff666", 22240296960, "LORA"),
    ("lora-rank32-mica", "51c2ff666", 22244491264, "LORA"),
    ("miss-bat", "51c2ff666", 25195184128, "MISS"),
    ("miss-default", "51c2ff666", 20271071232, "MISS"),
    ("miss-mini", "51c2ff666", 20208156672, "MISS"),
    ("oft-rank32", "51c2ff666", 22332571648, "OFT"),
    ("osf-rank128", "51c2ff666", 38545653760, "OSF"),
    ("peanut-rank1-relu-depth0-s32.0", "51c2ff666", 25134366720, "PEANUT"),
    ("peanut-rank32-relu-depth0-s2.0", "51c2ff666", 25214058496, "PEANUT"),
    ("prefixtuning-lr_0.001", "51c2ff666", 21952987136, "PREFIX_TUNING"),
    ("prefixtuning-lr_0.005_zero_init", "51c2ff666", 21952987136, "PREFIX_TUNING"),
    ("prefixtuning-tokens50-init_prefix-lr_0.005", "51c2ff666", 20585644032, "PREFIX_TUNING"),
    ("prompt_tuning-default", "51c2ff666", 24394072064, "PROMPT_TUNING"),
    ("prompt_tuning-lr_0.001", "51c2ff666", 24394072064, "PROMPT_TUNING"),
    ("prompt_tuning-sample_vocab-lr_0.001", "51c2ff666", 24410849280, "PROMPT_TUNING"),
    ("psoft-default", "51c2ff666", 22001221632, "PSOFT"),
    ("psoft-fast", "51c2ff666", 20776484864, "PSOFT"),
    ("ptuning-default", "51c2ff666", 20921188352, "P_TUNING"),
    ("pvera-default", "51c2ff666", 22177382400, "PVERA"),
    ("pvera-rank64", "51c2ff666", 21567111168, "PVERA"),
    ("randlora-default", "51c2ff666", 22785556480, "RANDLORA"),
    ("road-lr_0.001", "51c2ff666", 22821208064, "ROAD"),
    ("shira-lr_0.0003-random_seed_42", "51c2ff666", 21674065920, "SHIRA"),
    ("tinylora-default", "51c2ff666", 20124270592, "TINYLORA"),
    ("tinylora-weight-tying", "51c2ff666", 20126367744, "TINYLORA"),
    ("trainable_tokens-sos+eos", "51c2ff666", 20937965568, "TRAINABLE_TOKENS"),
    ("unilora-default", "51c2ff666", 22309502976, "UNILORA"),
    ("vblora-default", "51c2ff666", 22185771008, "VBLORA"),
    ("vera-default", "51c2ff666", 21621637120, "VERA"),
    ("waveft-n_frequency-5000", "51c2ff666", 24895291392, "WAVEFT"),
)  # fmt: skip
_PEFT_MC_VARIANTS = {  # LoRA variants: the state each adds that memtui does not model
    "lora-rank14-target-mlp-bdlora": "block-diagonal factors (use_bdlora)",
    "lora-rank32-dora": "DoRA (use_dora: each adapted weight's norm and a full-size update)",
    "lora-rank32-lorafa": "LoRA-FA's optimizer (A frozen, only B trained)",
    "lora-rank32-mica": "MiCA",
}


def _peft_mc_cannot(name: str, peft_type: str) -> str:
    if peft_type == "LORA":
        return f"a LoRA variant whose own state memtui does not model: {_PEFT_MC_VARIANTS[name]}"
    return f"PEFT {peft_type}: a method memtui does not model (it models LoRA and QLoRA adapters)"


def _peft_mc_runs() -> tuple[Run, ...]:
    runs = [
        Run(f"peft-mc-{name.replace('--llama-3.2-3B', '')}-{commit}",
            PEFT_MC.format(name, commit), f'"accelerator_memory_max": {peak}',
            f"{PEFT_MC_PLAN} {method} {versions}", float(peak), "reserved",
            notes=[PEFT_MC_LOOP, PEFT_MC_PEAK, PEFT_MC_SEQ])
        for name, commit, peak, versions, method in _PEFT_MC_COMPARED
    ]  # fmt: skip
    runs += [
        Run(f"peft-mc-{name}", PEFT_MC.format(name.replace("-", "--llama-3.2-3B-", 1), commit),
            f'"accelerator_memory_max": {peak}', "", float(peak), "reserved",
            cannot=_peft_mc_cannot(name, peft_type))
        for name, commit, peak, peft_type in _PEFT_MC_LISTED
    ]  # fmt: skip
    return tuple(runs)


FMS = "foundation-model-stack/fms-acceleration scripts/benchmarks/refs/a100_80gb.csv @{}"
# scripts/benchmarks/refs/requirements.txt at the same commit (the packages the table ran)
FMS_VERSIONS = {
    "c3a069c84": "--torch-version 2.2.2 --transformers-version 4.39.3 --peft-version 0.11.1 "
    "--accelerate-version 0.32.1 --trl-version 0.9.6 --bitsandbytes-version 0.43.1",
    "b6c1455bf": "--torch-version 2.4.0 --transformers-version 4.43.3 --peft-version 0.12.0 "
    "--accelerate-version 0.33.0 --trl-version 0.9.6 --bitsandbytes-version 0.43.2",
    "4e81c6445": "--torch-version 2.4.1 --transformers-version 4.44.2 --peft-version 0.12.0 "
    "--accelerate-version 0.33.0 --trl-version 0.10.1 --bitsandbytes-version 0.43.3",
    "97fc3c138": "--torch-version 2.4.1 --transformers-version 4.45.2 --peft-version 0.13.2 "
    "--accelerate-version 0.34.2 --trl-version 0.11.3 --bitsandbytes-version 0.43.3",
    "9239802cc": "--torch-version 2.4.1 --transformers-version 4.45.2 --peft-version 0.13.2 "
    "--accelerate-version 1.0.1 --trl-version 0.11.4 --bitsandbytes-version 0.43.3",
    "24bdadb22": "--torch-version 2.4.1 --transformers-version 4.48.1 --peft-version 0.13.2 "
    "--accelerate-version 1.0.1 --trl-version 0.13.0 --bitsandbytes-version 0.43.3",
}
FMS_FP16 = ("c3a069c84", "b6c1455bf")  # scenarios.yaml: torch_dtype float16 (fp16: True for QLoRA)
FMS_MODELS = {  # the same architectures as the catalog's ids
    "mistralai/Mistral-7B-v0.1": "mistralai/Mistral-7B-v0.1",
    "mistralai/Mixtral-8x7B-Instruct-v0.1": "mistralai/Mixtral-8x7B-v0.1",
    "NousResearch/Llama-2-70b-hf": "meta-llama/Llama-2-70b-hf",
}
# scenarios.yaml and defaults.yaml: flash attention, gradient checkpointing, the Alpaca set
# packed to 4096 tokens (benchmark.py --packing_matrix True, --max_seq_len_matrix 4096), LoRA
# r 16 on the attention projections with dropout 0.1, the Trainer's default adamw_torch
# (torch.optim.AdamW, foreach: transformers of 2024 default to it, not to the fused kernel)
FMS_PLAN = (
    "--attention flash --checkpointing full --seq-len 4096 --gpu-memory a100-80gb "
    "--optimizer adamw --optimizer-kernel foreach"
)
FMS_LORA = "--lora-rank 16 --lora-targets q_proj,k_proj,v_proj,o_proj --lora-dropout 0.1"
FMS_LAUNCH = (
    "benchmark.py: one GPU runs fms-hf-tuning's sft_trainer (TRL's SFTTrainer: the Trainer's "
    "loop) in one process; two GPUs run it under accelerate launch with "
    "scripts/benchmarks/accelerate.yaml (FSDP1 FULL_SHARD, TRANSFORMER_BASED_WRAP, "
    "mixed_precision no)"
)
FMS_PEAK = (
    "mem_peak_torch_mem_alloc_in_bytes: the Trainer's memory metrics on rank 0 "
    "(skip_memory_metrics=False: max_memory_allocated over init and train; the README's "
    "'Calculating Memory from HFTrainer Output Metrics')"
)
FMS_AMP = (
    "bf16=True (fp16=True) under FSDP: accelerate upcasts the trainable parameters to fp32 "
    "and runs MixedPrecision, memtui's bf16-mixed"
)
FMS_FP16_NOTE = "torch_dtype float16: fp16 has bf16's bytes; memtui has no fp16 precision"
FMS_ACCEL_BNB = (
    "accelerated-peft-bnb: the plugin's own _prepare_model_for_kbit_training, which casts "
    "nothing to fp32 (plugins/accelerated-peft framework_plugin_bnb.py)"
)
FMS_BASE_BNB = (
    "baseline-peft-bnb on one GPU: SFTTrainer calls PEFT's prepare_model_for_kbit_training "
    "(the fp32 upcast)"
)
FMS_CANNOT = {
    "foak": "fms-acceleration's fused ops and kernels (Triton LoRA, RMSNorm, RoPE and "
    "cross-entropy kernels): not modelled",
    "autogptq": "a GPTQ 4-bit base (AutoGPTQ's triton_v2 kernels): memtui's QLoRA is "
    "bitsandbytes NF4",
    "santacoder": "bigcode/gpt_bigcode-santacoder has no config in memtui's catalog, and this "
    "benchmark reads none from the Hub",
}
# Per commit, one row per line: framework_config, the model's name (FMS_ORGS: its owner),
# num_gpus, per_device_train_batch_size, peft_method (full: none), bf16 or fp16 set (amp),
# mem_peak_torch_mem_alloc_in_bytes (0: none), mem_nvidia_mem_reserved (MiB). Every row whose
# figure differs from the previous commit's (a row the next commit kept unchanged is one
# run), and the last commit's rows memtui cannot express.
FMS_ORGS = {
    "Llama-2-70b-hf": "NousResearch",
    "Llama-2-70B-GPTQ": "TheBloke",
    "Mistral-7B-v0.1-GPTQ": "TheBloke",
    "Mixtral-8x7B-Instruct-v0.1-GPTQ": "TheBloke",
    "gpt_bigcode-santacoder": "bigcode",
    "Mistral-7B-v0.1": "mistralai",
    "Mixtral-8x7B-Instruct-v0.1": "mistralai",
}
_FMS_TABLES = {
    "c3a069c84": """
none Mistral-7B-v0.1 1 4 full - 72972297728 76671
none Mistral-7B-v0.1 2 2 full - 36763146240 43744
none Mistral-7B-v0.1 1 8 full - 72972690944 79365
none Mistral-7B-v0.1 2 4 full - 36763342848 52883
none Mistral-7B-v0.1 1 4 lora - 26109561344 28707
none Mistral-7B-v0.1 2 2 lora - 15458877440 17897
none Mistral-7B-v0.1 1 8 lora - 37100825088 42171
none Mistral-7B-v0.1 2 4 lora - 22105014272 25659
none Mixtral-8x7B-Instruct-v0.1 2 2 lora - 57898183168 61532
none Mixtral-8x7B-Instruct-v0.1 2 4 lora - 65039245312 69436
baseline-peft-bnb Mistral-7B-v0.1 1 4 lora amp 23228815360 25999
baseline-peft-bnb Mistral-7B-v0.1 2 2 lora amp 10431547904 12818
baseline-peft-bnb Mistral-7B-v0.1 1 8 lora amp 41084491776 46121
baseline-peft-bnb Mistral-7B-v0.1 2 4 lora amp 17446783488 20421
baseline-peft-bnb Mixtral-8x7B-Instruct-v0.1 1 4 lora amp 46825980416 47567
baseline-peft-bnb Mixtral-8x7B-Instruct-v0.1 2 2 lora amp 22356893696 25163
baseline-peft-bnb Mixtral-8x7B-Instruct-v0.1 1 8 lora amp 67906358784 69237
baseline-peft-bnb Mixtral-8x7B-Instruct-v0.1 2 4 lora amp 30165152256 32960
baseline-peft-bnb Llama-2-70b-hf 2 2 lora amp 47591447040 52469
accelerated-peft-bnb Mistral-7B-v0.1 1 4 lora amp 15860617728 18907
accelerated-peft-bnb Mistral-7B-v0.1 2 2 lora amp 10431547904 12783
accelerated-peft-bnb Mistral-7B-v0.1 1 8 lora amp 26851881472 33331
accelerated-peft-bnb Mistral-7B-v0.1 2 4 lora amp 17446783488 20523
accelerated-peft-bnb Mixtral-8x7B-Instruct-v0.1 1 4 lora amp 36828377600 37399
accelerated-peft-bnb Mixtral-8x7B-Instruct-v0.1 2 2 lora amp 22359233024 25216
accelerated-peft-bnb Mixtral-8x7B-Instruct-v0.1 1 8 lora amp 48447599616 49913
accelerated-peft-bnb Mixtral-8x7B-Instruct-v0.1 2 4 lora amp 30167236096 33214
accelerated-peft-bnb Llama-2-70b-hf 1 4 lora amp 69770819584 72701
accelerated-peft-bnb Llama-2-70b-hf 2 2 lora amp 47591447040 52469
""",
    "b6c1455bf": """
none Mistral-7B-v0.1 1 4 full - 72435426816 76031
none Mistral-7B-v0.1 2 2 full - 36226242560 43610
none Mistral-7B-v0.1 1 8 full - 72435820032 78727
none Mistral-7B-v0.1 2 4 full - 36226439168 52837
none Mistral-7B-v0.1 1 4 lora - 25654479360 28069
none Mistral-7B-v0.1 2 2 lora - 15245721600 17745
none Mistral-7B-v0.1 1 8 lora - 36645743104 41405
none Mistral-7B-v0.1 2 4 lora - 22161342464 25347
none Mixtral-8x7B-Instruct-v0.1 2 2 lora - 58190445568 61651
none Mixtral-8x7B-Instruct-v0.1 2 4 lora - 65584154624 69774
baseline-peft-bnb Mistral-7B-v0.1 1 4 lora amp 21215549440 25359
baseline-peft-bnb Mistral-7B-v0.1 2 2 lora amp 9525447168 12012
baseline-peft-bnb Mistral-7B-v0.1 1 8 lora amp 37594830848 45481
baseline-peft-bnb Mistral-7B-v0.1 2 4 lora amp 16171584000 19437
baseline-peft-bnb Mixtral-8x7B-Instruct-v0.1 1 4 lora amp 44196393984 44857
baseline-peft-bnb Mixtral-8x7B-Instruct-v0.1 2 2 lora amp 21761152512 24006
baseline-peft-bnb Mixtral-8x7B-Instruct-v0.1 1 8 lora amp 62284255232 63891
baseline-peft-bnb Mixtral-8x7B-Instruct-v0.1 2 4 lora amp 28873790464 31110
baseline-peft-bnb Llama-2-70b-hf 2 2 lora amp 46685150208 51535
baseline-peft-bnb Llama-2-70b-hf 2 4 lora amp 72626134016 80307
accelerated-peft-bnb Mistral-7B-v0.1 1 4 lora amp 15323746816 18267
accelerated-peft-bnb Mistral-7B-v0.1 2 2 lora amp 9525447168 11974
accelerated-peft-bnb Mistral-7B-v0.1 1 8 lora amp 26315010560 32691
accelerated-peft-bnb Mistral-7B-v0.1 2 4 lora amp 16171584000 19507
accelerated-peft-bnb Mixtral-8x7B-Instruct-v0.1 1 4 lora amp 36218622464 37381
accelerated-peft-bnb Mixtral-8x7B-Instruct-v0.1 2 2 lora amp 21762409472 24002
accelerated-peft-bnb Mixtral-8x7B-Instruct-v0.1 1 8 lora amp 47209886208 49911
accelerated-peft-bnb Mixtral-8x7B-Instruct-v0.1 2 4 lora amp 28883566592 31178
accelerated-peft-bnb Llama-2-70b-hf 1 4 lora amp 68126652928 71645
accelerated-peft-bnb Llama-2-70b-hf 2 2 lora amp 46685150208 51534
accelerated-peft-bnb Llama-2-70b-hf 2 4 lora amp 72626134016 80576
""",
    "4e81c6445": """
none Mistral-7B-v0.1 1 4 full amp 72434853376 76047
none Mistral-7B-v0.1 2 2 full amp 72434657280 77716
none Mistral-7B-v0.1 1 8 full amp 72435246592 71823
none Mistral-7B-v0.1 2 4 full amp 72434853888 77628
none Mistral-7B-v0.1 1 4 lora amp 25681144320 28769
none Mistral-7B-v0.1 2 2 lora amp 14975934464 17316
none Mistral-7B-v0.1 1 8 lora amp 36670876160 42809
none Mistral-7B-v0.1 2 4 lora amp 21622071296 24995
none Mixtral-8x7B-Instruct-v0.1 2 2 lora amp 57922956288 61260
none Mixtral-8x7B-Instruct-v0.1 2 4 lora amp 65045124608 69154
baseline-peft-bnb Mistral-7B-v0.1 1 4 lora amp 20556796416 24727
baseline-peft-bnb Mistral-7B-v0.1 2 2 lora amp 9525273600 11914
baseline-peft-bnb Mistral-7B-v0.1 1 8 lora amp 36801860096 44721
baseline-peft-bnb Mistral-7B-v0.1 2 4 lora amp 16171410432 19423
baseline-peft-bnb Mixtral-8x7B-Instruct-v0.1 1 4 lora amp 43550715392 43775
baseline-peft-bnb Mixtral-8x7B-Instruct-v0.1 2 2 lora amp 21767946240 24068
baseline-peft-bnb Mixtral-8x7B-Instruct-v0.1 1 8 lora amp 61500009472 63329
baseline-peft-bnb Mixtral-8x7B-Instruct-v0.1 2 4 lora amp 28883934208 31356
baseline-peft-bnb Llama-2-70b-hf 2 2 lora amp 46684804608 51569
baseline-peft-bnb Llama-2-70b-hf 2 4 lora amp 72625788416 80853
accelerated-peft-bnb Mistral-7B-v0.1 1 4 lora amp 15323147776 18263
accelerated-peft-bnb Mistral-7B-v0.1 2 2 lora amp 9525273600 11981
accelerated-peft-bnb Mistral-7B-v0.1 1 8 lora amp 26312879616 32687
accelerated-peft-bnb Mistral-7B-v0.1 2 4 lora amp 16171410432 19379
accelerated-peft-bnb Mixtral-8x7B-Instruct-v0.1 1 4 lora amp 36218023424 37347
accelerated-peft-bnb Mixtral-8x7B-Instruct-v0.1 2 2 lora amp 21767827968 23942
accelerated-peft-bnb Mixtral-8x7B-Instruct-v0.1 1 8 lora amp 47207755264 49889
accelerated-peft-bnb Mixtral-8x7B-Instruct-v0.1 2 4 lora amp 28881018368 31310
accelerated-peft-bnb Llama-2-70b-hf 1 4 lora amp 68126422016 71641
accelerated-peft-bnb Llama-2-70b-hf 2 2 lora amp 46684804608 51531
accelerated-peft-bnb Llama-2-70b-hf 2 4 lora amp 72625788416 80647
""",
    "97fc3c138": """
none Mistral-7B-v0.1 2 2 full - 36225955840 43214
none Mistral-7B-v0.1 2 4 full - 36226152448 52384
none Mistral-7B-v0.1 1 4 lora - 25653881344 28065
none Mistral-7B-v0.1 2 2 lora - 15245549568 17741
none Mistral-7B-v0.1 1 8 lora - 36643613184 41401
none Mistral-7B-v0.1 2 4 lora - 22161170432 25343
none Mixtral-8x7B-Instruct-v0.1 2 2 lora - 58193823232 61924
none Mixtral-8x7B-Instruct-v0.1 2 4 lora - 65584260096 69602
baseline-peft-bnb Mixtral-8x7B-Instruct-v0.1 1 4 lora amp 43523053568 44079
baseline-peft-bnb Mixtral-8x7B-Instruct-v0.1 2 2 lora amp 21763944448 24088
baseline-peft-bnb Mixtral-8x7B-Instruct-v0.1 1 8 lora amp 61477128704 62685
baseline-peft-bnb Mixtral-8x7B-Instruct-v0.1 2 4 lora amp 28880510976 31061
baseline-peft-bnb Llama-2-70b-hf 2 2 lora amp 46685328896 51545
accelerated-peft-bnb Mixtral-8x7B-Instruct-v0.1 2 2 lora amp 21766241792 24011
accelerated-peft-bnb Mixtral-8x7B-Instruct-v0.1 2 4 lora amp 28888264192 31205
accelerated-peft-bnb Llama-2-70b-hf 2 2 lora amp 46685328896 51545
""",
    "9239802cc": """
none Mixtral-8x7B-Instruct-v0.1 2 2 lora - 58196957184 61598
none Mixtral-8x7B-Instruct-v0.1 2 4 lora - 65592615936 69370
baseline-peft-bnb Mixtral-8x7B-Instruct-v0.1 1 4 lora amp 43550249472 44299
baseline-peft-bnb Mixtral-8x7B-Instruct-v0.1 2 2 lora amp 21768876032 30916
baseline-peft-bnb Mixtral-8x7B-Instruct-v0.1 1 8 lora amp 61492521984 63459
baseline-peft-bnb Mixtral-8x7B-Instruct-v0.1 2 4 lora amp 28883986432 36289
accelerated-peft-bnb Mixtral-8x7B-Instruct-v0.1 2 4 lora amp 28882755584 36198
""",
    "24bdadb22": """
none Mistral-7B-v0.1 1 4 full - 72434837504 77256
none Mistral-7B-v0.1 2 2 full - 36225939968 44382
none Mistral-7B-v0.1 1 8 full - 72435230720 72988
none Mistral-7B-v0.1 2 4 full - 36226136576 53587
none Mistral-7B-v0.1 1 4 lora - 26704571904 29576
none Mistral-7B-v0.1 2 2 lora - 15144870400 18678
none Mistral-7B-v0.1 1 8 lora - 38742912512 43232
none Mistral-7B-v0.1 2 4 lora - 21959827968 26328
none Mixtral-8x7B-Instruct-v0.1 2 2 lora - 57554708992 63398
none Mixtral-8x7B-Instruct-v0.1 2 4 lora - 64851605504 70747
baseline-peft-bnb Mistral-7B-v0.1 1 4 lora amp 20669338112 26056
baseline-peft-bnb Mistral-7B-v0.1 2 2 lora amp 9424594432 13164
baseline-peft-bnb Mistral-7B-v0.1 1 8 lora amp 37002646016 46050
baseline-peft-bnb Mistral-7B-v0.1 2 4 lora amp 15970067968 21182
baseline-peft-bnb Mixtral-8x7B-Instruct-v0.1 1 4 lora amp 42794268160 44924
baseline-peft-bnb Mixtral-8x7B-Instruct-v0.1 2 2 lora amp 21129981952 29958
baseline-peft-bnb Mixtral-8x7B-Instruct-v0.1 1 8 lora amp 60545920512 63932
baseline-peft-bnb Mixtral-8x7B-Instruct-v0.1 2 4 lora amp 28146350592 35417
baseline-peft-bnb Llama-2-70b-hf 2 2 lora amp 46685287936 51988
accelerated-peft-bnb Mistral-7B-v0.1 1 4 lora amp 16373838336 19912
accelerated-peft-bnb Mistral-7B-v0.1 2 2 lora amp 9424594432 13284
accelerated-peft-bnb Mistral-7B-v0.1 1 8 lora amp 28412178944 34016
accelerated-peft-bnb Mistral-7B-v0.1 2 4 lora amp 15970067968 21299
accelerated-peft-bnb Mixtral-8x7B-Instruct-v0.1 1 4 lora amp 36731843072 38064
accelerated-peft-bnb Mixtral-8x7B-Instruct-v0.1 2 2 lora amp 21126185472 29896
accelerated-peft-bnb Mixtral-8x7B-Instruct-v0.1 1 8 lora amp 48770183680 50630
accelerated-peft-bnb Mixtral-8x7B-Instruct-v0.1 2 4 lora amp 28154534912 35448
accelerated-peft-bnb Llama-2-70b-hf 1 4 lora amp 68126381056 72950
accelerated-peft-bnb Llama-2-70b-hf 2 2 lora amp 46685287936 51989
none gpt_bigcode-santacoder 1 4 full - 11267745280 15116
none gpt_bigcode-santacoder 2 2 full - 5716304896 10345
none gpt_bigcode-santacoder 1 8 full - 15193274880 18102
none gpt_bigcode-santacoder 2 4 full - 7819433984 12788
foak-fast-kernels gpt_bigcode-santacoder 1 4 full - 11267745280 15122
foak-fast-kernels gpt_bigcode-santacoder 2 2 full - 5658123264 10344
foak-fast-kernels gpt_bigcode-santacoder 1 8 full - 13582956544 18108
foak-fast-kernels gpt_bigcode-santacoder 2 4 full - 7019943936 12429
foak-fast-kernels Mistral-7B-v0.1 1 4 full - 72432707584 77278
foak-fast-kernels Mistral-7B-v0.1 2 2 full - 36225939968 44088
foak-fast-kernels Mistral-7B-v0.1 1 8 full - 72433100800 71198
foak-fast-kernels Mistral-7B-v0.1 2 4 full - 36226136576 53304
none Mixtral-8x7B-Instruct-v0.1 1 4 full - 0 81166
none Mixtral-8x7B-Instruct-v0.1 2 2 full - 0 80284
none Mixtral-8x7B-Instruct-v0.1 1 8 full - 0 81166
none Mixtral-8x7B-Instruct-v0.1 2 4 full - 0 80750
foak-fast-kernels Mixtral-8x7B-Instruct-v0.1 1 4 full - 0 81168
foak-fast-kernels Mixtral-8x7B-Instruct-v0.1 2 2 full - 0 79960
foak-fast-kernels Mixtral-8x7B-Instruct-v0.1 1 8 full - 0 81168
foak-fast-kernels Mixtral-8x7B-Instruct-v0.1 2 4 full - 0 80464
none Llama-2-70b-hf 1 4 full - 0 80882
none Llama-2-70b-hf 2 2 full - 0 80808
none Llama-2-70b-hf 1 8 full - 0 80882
none Llama-2-70b-hf 2 4 full - 0 80603
foak-fast-kernels Llama-2-70b-hf 1 4 full - 0 80884
foak-fast-kernels Llama-2-70b-hf 2 2 full - 0 80938
foak-fast-kernels Llama-2-70b-hf 1 8 full - 0 80884
foak-fast-kernels Llama-2-70b-hf 2 4 full - 0 80430
foak-fast-kernels Mistral-7B-v0.1 1 4 lora - 24473332736 29066
foak-fast-kernels Mistral-7B-v0.1 2 2 lora - 14943543808 18352
foak-fast-kernels Mistral-7B-v0.1 1 8 lora - 34280434688 41698
foak-fast-kernels Mistral-7B-v0.1 2 4 lora - 21557174784 25266
none Mixtral-8x7B-Instruct-v0.1 1 4 lora - 0 81214
none Mixtral-8x7B-Instruct-v0.1 1 8 lora - 0 81214
foak-fast-kernels Mixtral-8x7B-Instruct-v0.1 1 4 lora - 0 81214
foak-fast-kernels Mixtral-8x7B-Instruct-v0.1 2 2 lora - 57334586368 61398
foak-fast-kernels Mixtral-8x7B-Instruct-v0.1 1 8 lora - 0 81214
foak-fast-kernels Mixtral-8x7B-Instruct-v0.1 2 4 lora - 64400873984 69387
none Llama-2-70b-hf 1 4 lora - 0 81038
none Llama-2-70b-hf 2 2 lora - 0 80937
none Llama-2-70b-hf 1 8 lora - 0 81038
none Llama-2-70b-hf 2 4 lora - 0 80981
foak-fast-kernels Llama-2-70b-hf 1 4 lora - 0 81038
foak-fast-kernels Llama-2-70b-hf 2 2 lora - 0 80958
foak-fast-kernels Llama-2-70b-hf 1 8 lora - 0 81038
foak-fast-kernels Llama-2-70b-hf 2 4 lora - 0 81045
baseline-peft-bnb Llama-2-70b-hf 1 4 lora amp 0 79762
baseline-peft-bnb Llama-2-70b-hf 1 8 lora amp 0 80220
baseline-peft-bnb Llama-2-70b-hf 2 4 lora amp 0 79517
accelerated-peft-bnb gpt_bigcode-santacoder 1 4 lora amp 9147162112 12816
accelerated-peft-bnb gpt_bigcode-santacoder 2 2 lora amp 4788195328 8468
accelerated-peft-bnb gpt_bigcode-santacoder 1 8 lora amp 17486716416 23092
accelerated-peft-bnb gpt_bigcode-santacoder 2 4 lora amp 8957644800 13636
accelerated-peft-bnb-foak gpt_bigcode-santacoder 1 4 lora amp 7538417152 10296
accelerated-peft-bnb-foak gpt_bigcode-santacoder 2 2 lora amp 3989590016 7383
accelerated-peft-bnb-foak gpt_bigcode-santacoder 1 8 lora amp 14264901120 18484
accelerated-peft-bnb-foak gpt_bigcode-santacoder 2 4 lora amp 7353749504 11398
accelerated-peft-bnb-foak Mistral-7B-v0.1 1 4 lora amp 14115336192 19946
accelerated-peft-bnb-foak Mistral-7B-v0.1 2 2 lora amp 9208653312 13134
accelerated-peft-bnb-foak Mistral-7B-v0.1 1 8 lora amp 23922438144 33666
accelerated-peft-bnb-foak Mistral-7B-v0.1 2 4 lora amp 15484642816 21244
accelerated-peft-bnb-foak Mixtral-8x7B-Instruct-v0.1 1 4 lora amp 34473340928 38202
accelerated-peft-bnb-foak Mixtral-8x7B-Instruct-v0.1 2 2 lora amp 20843741184 33156
accelerated-peft-bnb-foak Mixtral-8x7B-Instruct-v0.1 1 8 lora amp 44280442880 50628
accelerated-peft-bnb-foak Mixtral-8x7B-Instruct-v0.1 2 4 lora amp 27532073984 38249
accelerated-peft-bnb Llama-2-70b-hf 1 8 lora amp 0 80526
accelerated-peft-bnb Llama-2-70b-hf 2 4 lora amp 0 79313
accelerated-peft-bnb-foak Llama-2-70b-hf 1 4 lora amp 67048903680 72376
accelerated-peft-bnb-foak Llama-2-70b-hf 2 2 lora amp 46407611904 55050
accelerated-peft-bnb-foak Llama-2-70b-hf 1 8 lora amp 0 80302
accelerated-peft-bnb-foak Llama-2-70b-hf 2 4 lora amp 0 77734
accelerated-peft-autogptq Mistral-7B-v0.1-GPTQ 1 4 lora amp 16404148736 20010
accelerated-peft-autogptq Mistral-7B-v0.1-GPTQ 2 2 lora amp 9442125824 14887
accelerated-peft-autogptq Mistral-7B-v0.1-GPTQ 1 8 lora amp 28442489344 33858
accelerated-peft-autogptq Mistral-7B-v0.1-GPTQ 2 4 lora amp 15987599360 23023
accelerated-peft-autogptq-foak Mistral-7B-v0.1-GPTQ 1 4 lora amp 14145646592 20132
accelerated-peft-autogptq-foak Mistral-7B-v0.1-GPTQ 2 2 lora amp 9226184704 14914
accelerated-peft-autogptq-foak Mistral-7B-v0.1-GPTQ 1 8 lora amp 23952748544 33990
accelerated-peft-autogptq-foak Mistral-7B-v0.1-GPTQ 2 4 lora amp 15502174208 23029
accelerated-peft-autogptq Mixtral-8x7B-Instruct-v0.1-GPTQ 1 4 lora amp 36041912832 37596
accelerated-peft-autogptq Mixtral-8x7B-Instruct-v0.1-GPTQ 2 2 lora amp 20432607232 27105
accelerated-peft-autogptq Mixtral-8x7B-Instruct-v0.1-GPTQ 1 8 lora amp 48080253440 50208
accelerated-peft-autogptq Mixtral-8x7B-Instruct-v0.1-GPTQ 2 4 lora amp 27446670336 32530
accelerated-peft-autogptq-foak Mixtral-8x7B-Instruct-v0.1-GPTQ 1 4 lora amp 33783410688 37346
accelerated-peft-autogptq-foak Mixtral-8x7B-Instruct-v0.1-GPTQ 2 2 lora amp 20151232000 27669
accelerated-peft-autogptq-foak Mixtral-8x7B-Instruct-v0.1-GPTQ 1 8 lora amp 43590512640 49362
accelerated-peft-autogptq-foak Mixtral-8x7B-Instruct-v0.1-GPTQ 2 4 lora amp 26828732928 32944
accelerated-peft-autogptq Llama-2-70B-GPTQ 1 4 lora amp 67069711872 71926
accelerated-peft-autogptq Llama-2-70B-GPTQ 2 2 lora amp 45637991424 52716
accelerated-peft-autogptq Llama-2-70B-GPTQ 1 8 lora amp 0 80778
accelerated-peft-autogptq Llama-2-70B-GPTQ 2 4 lora amp 0 80935
accelerated-peft-autogptq-foak Llama-2-70B-GPTQ 1 4 lora amp 65992234496 71728
accelerated-peft-autogptq-foak Llama-2-70B-GPTQ 2 2 lora amp 45360315392 53145
accelerated-peft-autogptq-foak Llama-2-70B-GPTQ 1 8 lora amp 0 81200
accelerated-peft-autogptq-foak Llama-2-70B-GPTQ 2 4 lora amp 0 79448
""",
}


FmsRow = tuple[str, str, str, int, int, str, bool, int, int]


def _fms_rows() -> list[FmsRow]:
    """(commit, framework_config, model id, GPUs, batch, method, amp, peak bytes, MiB)."""
    rows = []
    for commit, table in _FMS_TABLES.items():
        for line in table.strip().splitlines():
            framework, name, gpus, batch, method, amp, peak, smi = line.split()
            model = f"{FMS_ORGS[name]}/{name}"
            rows.append((commit, framework, model, int(gpus), int(batch), method, amp == "amp",
                         int(peak), int(smi)))  # fmt: skip
    return rows


def _fms_run(row: FmsRow) -> Run:
    commit, framework, model, gpus, batch, method, amp, peak, smi = row
    qlora = "bnb" in framework
    run_id = f"fms-{framework}-{model.split('/')[1]}-{method}-{gpus}gpu-mb{batch}-{commit[:7]}"
    source = FMS.format(commit)
    quote = (
        f"{framework},{model},num_gpus {gpus},per_device_train_batch_size {batch},{method}: "
        f"mem_peak_torch_mem_alloc_in_bytes {peak or 'none'}, mem_nvidia_mem_reserved {smi}"
    )
    why = next((why for key, why in FMS_CANNOT.items() if key in framework + model), "")
    if not why and not peak:
        why = f"out of memory: no torch figure, nvidia-smi at the card's limit ({smi} MiB)"
    if why:  # the torch figure where the row has one, else the driver's (MiB)
        measured, kind = (float(peak), "allocated") if peak else (smi * 2.0**20, "nvidia-smi")
        return Run(run_id, source, quote, "", measured, kind, cannot=why)
    sharded = gpus > 1
    precision = "bf16-mixed" if amp and sharded else "bf16"
    flags = [
        f"--stack {'fsdp1' if sharded else 'trainer'} --gpus {gpus}",
        f"--strategy {'fsdp' if sharded else 'ddp'} --model {FMS_MODELS[model]}",
        f"--precision {precision} --micro-batch {batch} {FMS_PLAN} {FMS_VERSIONS[commit]}",
        f"--method {'qlora' if qlora else method}",
    ]
    notes = [FMS_LAUNCH, FMS_PEAK]
    if method == "lora":
        flags.append(FMS_LORA)
    if precision == "bf16-mixed":
        notes.append(FMS_AMP)
    if commit in FMS_FP16:
        notes.append(FMS_FP16_NOTE)
    if qlora:
        if sharded:
            flags.append("--no-kbit-upcast")
            notes.append(SHARDED_QLORA)
        elif framework == "accelerated-peft-bnb":
            flags.append("--no-kbit-upcast")
            notes.append(FMS_ACCEL_BNB)
        else:
            notes.append(FMS_BASE_BNB)
        if commit == "c3a069c84":
            flags.append("--qlora-keeps-inputs")
            notes.append("bitsandbytes 0.43.1 (before 0.43.2): 4-bit linears kept their inputs")
    return Run(run_id, source, quote, " ".join(flags), float(peak), "allocated", notes=notes)


PEFT_MC_RUNS = _peft_mc_runs()
FMS_RUNS = tuple(_fms_run(row) for row in _fms_rows())


def _plan(flags: str) -> Report:
    """memtui's report for a run's flags (the parameter count a row is checked against)."""
    return estimate(plan_from_args(build_parser().parse_args(["estimate", *flags.split()])))


# ---- The rest of LitGPT's config-hub table: its 1xA10G rows not compared above ----
# The README's rows (cells as published, spaces around them dropped). config_hub/finetune/
# <config> at the same commit: the checkpoint, LoRA rank and dropout, the
# layers (lora_query and lora_value only, or every linear and lora_head), and for the full
# fine-tunes the micro-batches per step (global_batch_size / micro_batch_size); bf16-true,
# torch.optim.AdamW, no checkpointing, one device (bitsandbytes==0.42.0 in its pyproject)
HUB_QV, HUB_ALL, HUB_QKV = "q_proj,v_proj", "all-linear,lm_head", "query_key_value"
HUB_ROWS = """
|falcon-7b/lora.yaml|falcon-7b|4|512|1|1xA10G|24.84 min|$0.7|16.69 GB|
|falcon-7b/qlora.yaml|falcon-7b|4|512|1|1xA10G|50.85 min|$1.5|9.44 GB|
|gemma-2b/lora.yaml|gemma-2b|2|512|2|1xA10G|9.41 min|$0.3|12.62 GB|
|gemma-2b/qlora.yaml|gemma-2b|2|512|2|1xA10G|12.91 min|$0.4|11.58 GB|
|gemma-7b/qlora.yaml|gemma-7b|2|512|1|1xA10G|43.58 min|$1.3|17.18 GB|
|gemma2-2b/lora.yaml|gemma-2b|2|512|2|1xA10G|11.96 min|$0.4|14.31 GB|
|gemma2b/qlora.yaml|gemma-2b|2|512|2|1xA10G|16.06 min|$0.5|13.52 GB|
|gemma2-9b/qlora.yaml|gemma-2-9b|2|512|1|1xA10G|50.01 min|$4.0|20.92 GB|
|llama-3.1-8b/lora.yaml|llama-3.1-8b|2|512|1|1xA10G|13.36 min|$1.1|19.73 GB|
|llama-3.1-8b/qlora.yaml|llama-3.1-8b|2|512|2|1xA10G|21.81 min|$0.7|17.41 GB|
|llama-3.2-1b/full.yaml|llama-3.2-1b|1|512|4|1xA10G|2.01 min|$0.1|8.70 GB|
|llama-3.2-1b/lora.yaml|llama-3.2-1b|2|512|1|1xA10G|4.17 min|$0.4|4.49 GB|
|llama-3.2-1b/qlora.yaml|llama-3.2-1b|2|512|2|1xA10G|6.20 min|$0.6|5.53 GB|
|llama-3.2-3b/full.yaml|llama-3.2-3b|1|512|4|1xA10G|4.71 min|$0.4|16.51 GB|
|llama-3.2-3b/lora.yaml|llama-3.2-3b|2|512|1|1xA10G|8.31 min|$0.8|9.67 GB|
|llama-3.2-3b/qlora.yaml|llama-3.2-3b|2|512|2|1xA10G|14.89 min|$1.4|10.30 GB|
|mistral-7b-v0.2/lora.yaml|mistral-7b-v0.2|4|512|2|1xA10G|31.00 min|$0.9|20.66 GB|
|mistral-7b-v0.2/qlora.yaml|mistral-7b-v0.2|4|512|2|1xA10G|44.75 min|$1.3|14.29 GB|
|mistral-7b/qlora.yaml|mistral-7b|4|512|2|1xA10G|44.75 min|$1.3|14.29 GB|
|phi-2/qlora.yaml|phi-2|1|512|4|1xA10G|4.51 min|$0.1|14.27 GB|
|phi-3/full.yaml|Phi-3-mini-4k-instruct|1|512|4|1xA10G|6.93 min|$0.2|17.01 GB|
|phi-3/lora.yaml|Phi-3-mini-4k-instruct|1|512|4|1xA10G|6.46 min|$0.2|19.75 GB|
|phi-3/qlora.yaml|Phi-3-mini-4k-instruct|1|512|4|1xA10G|7.47 min|$0.2|19.13 GB|
|stablelm-base-alpha-3b/lora.yaml|stablelm-base-alpha-3b|4|512|1|1xA10G|13.07 min|$0.4|8.58 GB|
|stablelm-base-alpha-3b/qlora.yaml|stablelm-base-alpha-3b|4|512|1|1xA10G|25.86 min|$0.8|5.24 GB|
|tiny-llama/lora.yaml|tiny-llama|3|512|8|1xA10G|8.09 min|$0.2|13.50 GB|
|tiny-llama/qlora.yaml|tiny-llama|3|512|8|1xA10G|8.70 min|$0.3|16.24 GB|
"""
HUB_PLANS: dict[str, tuple[str, int, float, str, int]] = {
    "falcon-7b/lora.yaml": ("tiiuae/falcon-7b", 32, 0.05, HUB_QKV, 1),
    "falcon-7b/qlora.yaml": ("tiiuae/falcon-7b", 32, 0.05, HUB_QKV, 1),
    "gemma-2b/lora.yaml": ("google/gemma-2b", 8, 0.1, HUB_ALL, 1),
    "gemma-2b/qlora.yaml": ("google/gemma-2b", 16, 0.1, HUB_ALL, 1),
    "gemma-7b/qlora.yaml": ("google/gemma-7b", 16, 0.1, HUB_ALL, 1),
    "gemma2-2b/lora.yaml": ("google/gemma-2-2b", 8, 0.1, HUB_ALL, 1),
    "gemma2b/qlora.yaml": ("google/gemma-2-2b", 16, 0.1, HUB_ALL, 1),  # gemma2-2b/qlora.yaml
    "gemma2-9b/qlora.yaml": ("google/gemma-2-9b", 16, 0.1, HUB_ALL, 1),
    "llama-3.1-8b/lora.yaml": ("meta-llama/Llama-3.1-8B", 32, 0.05, HUB_QV, 1),
    "llama-3.1-8b/qlora.yaml": ("meta-llama/Llama-3.1-8B", 32, 0.05, HUB_QV, 1),
    "llama-3.2-1b/full.yaml": ("meta-llama/Llama-3.2-1B", 0, 0.0, "", 16),
    "llama-3.2-1b/lora.yaml": ("meta-llama/Llama-3.2-1B", 32, 0.05, HUB_QV, 1),
    "llama-3.2-1b/qlora.yaml": ("meta-llama/Llama-3.2-1B", 32, 0.05, HUB_QV, 1),
    "llama-3.2-3b/full.yaml": ("meta-llama/Llama-3.2-3B", 0, 0.0, "", 16),
    "llama-3.2-3b/lora.yaml": ("meta-llama/Llama-3.2-3B", 32, 0.05, HUB_QV, 1),
    "llama-3.2-3b/qlora.yaml": ("meta-llama/Llama-3.2-3B", 32, 0.05, HUB_QV, 1),
    "mistral-7b-v0.2/lora.yaml": ("mistralai/Mistral-7B-v0.1", 32, 0.05, HUB_QV, 1),
    "mistral-7b-v0.2/qlora.yaml": ("mistralai/Mistral-7B-v0.1", 32, 0.05, HUB_QV, 1),
    "mistral-7b/qlora.yaml": ("mistralai/Mistral-7B-v0.1", 32, 0.05, HUB_QV, 1),
    "phi-2/qlora.yaml": ("microsoft/phi-2", 8, 0.05, HUB_ALL, 1),
    "phi-3/full.yaml": ("microsoft/Phi-3-mini-4k-instruct", 0, 0.0, "", 2),
    "phi-3/lora.yaml": ("microsoft/Phi-3-mini-4k-instruct", 8, 0.05, HUB_ALL, 1),
    "phi-3/qlora.yaml": ("microsoft/Phi-3-mini-4k-instruct", 8, 0.05, HUB_ALL, 1),
    "stablelm-base-alpha-3b/lora.yaml": ("stabilityai/stablelm-base-alpha-3b", 32, 0.05, HUB_QKV,
                                         1),
    "stablelm-base-alpha-3b/qlora.yaml": ("stabilityai/stablelm-base-alpha-3b", 32, 0.05, HUB_QKV,
                                          1),
    "tiny-llama/lora.yaml": ("TinyLlama/TinyLlama-1.1B-intermediate-step-1431k-3T", 32, 0.05,
                             HUB_ALL, 1),
    "tiny-llama/qlora.yaml": ("TinyLlama/TinyLlama-1.1B-intermediate-step-1431k-3T", 32, 0.05,
                              HUB_ALL, 1),
}  # fmt: skip
HUB_FULL_SHORT = (
    "the row's peak is below what its config's bf16 weights, gradients and AdamW's two moments "
    "take alone (8 B per parameter: 9.9 GB for Llama 3.2 1B, 25.7 GB for 3B, 30.6 GB for "
    "Phi-3-mini, the last two beyond the A10G's 24 GB), so the run was not the config it names"
)
MISTRAL_V02 = (
    "unsloth/Mistral-7B-v0.2 has Mistral-7B-v0.1's shapes (layers, heads, 32,000 vocabulary); "
    "its larger rope theta and no sliding window change no stored tensor at 512 tokens"
)


def _hub_run(row: str) -> Run:
    cells = [cell.strip() for cell in row.strip("|").split("|")]
    config, micro_batch, peak = cells[0], cells[4], float(cells[8].removesuffix(" GB"))
    model, rank, dropout, targets, accum = HUB_PLANS[config]
    method = config.split("/")[1].removesuffix(".yaml")
    run_id = f"litgpt-ch-{config.removesuffix('.yaml').replace('/', '-')}-a10g"
    notes = [FUSED_QV] if targets == HUB_QKV else []
    if model.startswith("mistralai/") and "v0.2" in config:
        notes.append(MISTRAL_V02)
    if method == "full":
        flags = (
            "--stack litgpt --precision bf16 --method full --optimizer adamw --attention flash "
            "--gpus 1 --strategy ddp --checkpointing none --seq-len 512 --gpu-memory a10g "
            f"--grad-accum {accum}"
        )
        notes.append(f"{config}: {accum} micro-batches per optimizer step")
    else:
        base = HUB_QLORA if method == "qlora" else HUB_LORA
        flags = base.replace("--lora-rank 32", f"--lora-rank {rank}").replace(
            "--lora-dropout 0.05", f"--lora-dropout {dropout}"
        )
        flags += f" --lora-targets {targets}"
    flags += f" --model {model} --micro-batch {micro_batch}"
    if method == "full" and peak * GB < 8 * _plan(flags).parameters.total:
        return Run(run_id, LITGPT_HUB, row, "", peak * GB, "allocated", cannot=HUB_FULL_SHORT)
    return Run(run_id, LITGPT_HUB, row, flags, peak * GB, "allocated", notes=notes)


HUB_RUNS = tuple(_hub_run(row) for row in HUB_ROWS.strip().splitlines())


# ---- llama-recipes' FSDP LoRA memory PR: listed (its forward returns the key/value cache) ----
COOKBOOK = "meta-llama/llama-cookbook pull/41 (merged as e5970e2e, Jul 2023)"
COOKBOOK_CACHE = (
    "use_cache=True: llama_finetuning.py wraps the decoder layers in FSDP's own checkpoint "
    "wrapper, so transformers' gradient checkpointing flag is off and LlamaModel.forward "
    "returns every layer's key/value cache (llama-recipes pull 165 turns it off: ~4 GB on "
    "this 7B run); memtui does not model a training forward that builds the cache"
)
COOKBOOK_RUNS = (
    Run("cookbook-pr41-llama2-7b-lora-fsdp4-no-limiter", COOKBOOK,
        "With `limit_all_gathers=False`: Peak active: 25.86 GB", "", 25.86 * GB, "allocated",
        cannot=COOKBOOK_CACHE),
    Run("cookbook-pr41-llama2-7b-lora-fsdp4-keeps-output", COOKBOOK,
        "With `limit_all_gathers=True`: Peak active: 20.20 GB", "", 20.20 * GB, "allocated",
        cannot=COOKBOOK_CACHE),
    Run("cookbook-pr41-llama2-7b-lora-fsdp4", COOKBOOK,
        "this only uses 15.22 GB peak active memory and 19.36 GB peak reserved memory", "",
        15.22 * GB, "allocated", cannot=COOKBOOK_CACHE),
)  # fmt: skip


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
        f"{TT_2404_LORA} --model meta-llama/Llama-2-7b-hf --method lora --lora-rank 8 "
        "--lora-targets q_proj,v_proj --checkpointing full --gpus 1 --strategy ddp "
        "--gpu-memory rtx4090", 17.18 * GB, "reserved",
        notes=["the README's table does not name the metric; torchtune logged reserved"]),
    Run("tt-readme-2404-llama2-7b-lora-2x4090-fsdp", TT_README_2404,
        "| 2 x RTX 4090 | LoRA | lora_finetune_distributed | Llama-7B | 20.95 GB |",
        f"{TT_2404_LORA} --model meta-llama/Llama-2-7b-hf --method lora --lora-rank 8 "
        "--lora-targets q_proj,v_proj --checkpointing none --gpus 2 --strategy fsdp "
        "--gpu-memory rtx4090", 20.95 * GB, "reserved",
        notes=["7B_lora.yaml turns activation checkpointing off", TT_4090_GAP]),
    Run("tt-readme-2404-llama2-7b-full-lowmem-1x4090", TT_README_2404,
        "| 1 x RTX 4090 | Full finetune | full_finetune_single_device | Llama-7B | 14.97 GB |",
        f"{TT_2404} --model meta-llama/Llama-2-7b-hf --method full --optimizer paged-adamw "
        "--optimizer-in-backward --checkpointing full --gpus 1 --strategy ddp "
        "--gpu-memory rtx4090", 14.97 * GB, "reserved",
        notes=["paged AdamW state in managed memory: not in torch's reserved figure"]),
    Run("tt-readme-2404-llama2-7b-full-4x4090-fsdp", TT_README_2404,
        "| 4 x RTX 4090 | Full finetune | full_finetune_distributed | Llama-7B | 22.9 GB |",
        f"{TT_2404} --model meta-llama/Llama-2-7b-hf --method full --checkpointing full "
        "--gpus 4 --strategy fsdp --gpu-memory rtx4090", 22.9 * GB, "reserved",
        notes=[TT_4090_GAP]),
    Run("tt-lora-tut-llama2-7b-qv-r8", TT_LORA_TUT, "* - Q and V only - 8 - 16 - **15.57 GB**",
        f"{TT_2404_LORA} --model meta-llama/Llama-2-7b-hf --method lora --lora-rank 8 "
        "--lora-targets q_proj,v_proj --checkpointing full --gpus 1 --strategy ddp",
        15.57 * GB, "reserved"),
    Run("tt-lora-tut-llama2-7b-all-r8", TT_LORA_TUT, "* - all layers - 8 - 16 - 15.87 GB",
        f"{TT_2404_LORA} --model meta-llama/Llama-2-7b-hf --method lora --lora-rank 8 "
        "--lora-targets all-linear,lm_head --checkpointing full --gpus 1 --strategy ddp",
        15.87 * GB, "reserved"),
    Run("tt-lora-tut-llama2-7b-qv-r64", TT_LORA_TUT, "* - Q and V only - 64 - 128 - 15.86 GB",
        f"{TT_2404_LORA} --model meta-llama/Llama-2-7b-hf --method lora --lora-rank 64 "
        "--lora-targets q_proj,v_proj --checkpointing full --gpus 1 --strategy ddp",
        15.86 * GB, "reserved"),
    Run("tt-lora-tut-llama2-7b-all-r64", TT_LORA_TUT, "* - all layers - 64 - 128 - 17.04 GB",
        f"{TT_2404_LORA} --model meta-llama/Llama-2-7b-hf --method lora --lora-rank 64 "
        "--lora-targets all-linear,lm_head --checkpointing full --gpus 1 --strategy ddp",
        17.04 * GB, "reserved"),
    Run("tt-qlora-tut-llama2-7b-qlora",
        "pytorch/torchtune docs/source/tutorials/qlora_finetune.rst @bd2a0fc7c",
        "QLoRA 9.13 GB 9.29 GB",
        f"{TT_2404_LORA} --model meta-llama/Llama-2-7b-hf --method qlora --lora-rank 8 "
        "--lora-targets all-linear --checkpointing full --gpus 1 --strategy ddp",
        9.29 * GB, "reserved", cannot=TORCHAO_INIT),
    Run("tt-llama3-tut-8b-lora",
        "pytorch/torchtune docs/source/tutorials/llama3.rst @bd2a0fc7c",
        "In our experiments, we observed a peak memory usage of 18.5 GB.",
        f"{TT_2404_LORA} --model meta-llama/Meta-Llama-3-8B-Instruct --method lora --lora-rank 8 "
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
        f"--qlora-keeps-inputs --no-kbit-upcast {PEFT_FSDP_VERSIONS}", 35.6 * GB, "nvidia-smi",
        notes=[PEFT_READ, PEFT_BNB, SHARDED_QLORA, PEFT_FSDP_WHEN]),
    Run("peft-doc-fsdp-qlora-llama2-70b-2gpu-cpuoffload", PEFT_FSDP,
        "In the above example, the memory consumed per GPU is **19.6 GB**",
        f"--stack fsdp1 --method qlora {PEFT_70B} --gpus 2 --strategy fsdp --offload params "
        f"--gpu-memory 24GB --qlora-keeps-inputs --no-kbit-upcast {PEFT_FSDP_VERSIONS}",
        19.6 * GB, "nvidia-smi", notes=[PEFT_READ, PEFT_BNB, SHARDED_QLORA, PEFT_FSDP_WHEN]),
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
    # ---- the two sources above the runs list: PEFT's method comparison, fms-acceleration ----
    *PEFT_MC_RUNS,
    *FMS_RUNS,
    *HUB_RUNS,
    *COOKBOOK_RUNS,
)  # fmt: skip


@dataclass(frozen=True)
class Outcome:
    run: Run
    stack: str
    predicted: int
    basis: str
    method: str
    versions: str
    """The transformers release range the plan says it ran, or "not stated"."""

    @property
    def error(self) -> float:
        return (self.predicted - self.run.measured) / self.run.measured


def predict(run: Run) -> Outcome:
    """memtui's figure for the run's plan that matches what the run measured."""
    plan = plan_from_args(build_parser().parse_args(["estimate", *run.flags.split()]))
    return _outcome(run, plan)


def predict_default(run: Run) -> Outcome:
    """memtui's figure for the run's plan with its `--stack` dropped: the plan a new user
    gets, built as `memtui estimate` does with no --stack (commands/estimate.py `run`:
    plan_from_args, then default_stack.choose)."""
    from memtui.commands.default_stack import choose

    words = run.flags.split()
    if "--stack" in words:
        at = words.index("--stack")
        words = words[:at] + words[at + 2 :]
    args = build_parser().parse_args(["estimate", *words])
    return _outcome(run, choose(args, plan_from_args(args), None).plan)


def _outcome(run: Run, plan: Plan) -> Outcome:
    """The figure of `plan`'s budget that matches what the run measured."""
    budget = estimate(plan).budget
    if run.kind == "allocated":
        figure, basis = budget.allocated, "allocated"
    elif run.kind == "nvidia-smi":
        figure, basis = budget.total, "total"
    else:  # reserved, and the unknown metrics: the allocator's whole share
        figure, basis = budget.reserved, "reserved"
    return Outcome(run, plan.stack.value, figure, basis, plan.method.value, _range(plan))


def _range(plan: Plan) -> str:
    """The run's transformers release, in the ranges whose loss code differs: up to 4.45 the
    Llama and Mistral forwards upcast the logits (`logits.float()`), 4.46-4.48's
    ForCausalLMLoss upcasts and takes a shifted copy, 4.49+ pads the labels instead."""
    given = plan.versions.of(Package.transformers)
    if given is None:
        return RANGES[3]
    if given.release < (4, 46):
        return RANGES[0]
    return RANGES[1] if given.release < (4, 49) else RANGES[2]


RANGES = (
    "transformers < 4.46",
    "transformers 4.46-4.48",
    "transformers >= 4.49",
    "transformers not stated",
)


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
    lines += ["", "Named stack against no --stack (the default rule's choice):", ""]
    lines += _default_lines(outcomes, [predict_default(o.run) for o in outcomes])
    cannot = [r for r in RUNS if r.cannot]
    if cannot:
        lines += ["", "Listed, not compared (memtui cannot express what they ran):", ""]
        lines += [f"- {r.id} ({r.measured / GB:.2f} GB {r.kind}): {r.cannot}" for r in cannot]
    return "\n".join(lines), outcomes


def _default_lines(named: list[Outcome], default: list[Outcome]) -> list[str]:
    """Median |error| and the runs under by more than 10%, named stack and default."""
    rows = ["| prediction | n | median abs error | most under | under by >10% |"]
    rows.append("|---|---:|---:|---:|---:|")
    for label, group in (("named --stack", named), ("no --stack", default)):
        errors = [o.error for o in group]
        under = sum(1 for e in errors if e < -0.10)
        median = statistics.median(abs(e) for e in errors)
        rows.append(f"| {label} | {len(group)} | {median:.1%} | {min(errors):+.1%} | {under} |")
    return rows


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
    groups: dict[str, Callable[[Outcome], str]] = {
        "stack": lambda o: o.stack,
        "stack and method": lambda o: f"{o.stack} {o.method}",
        "method": lambda o: o.method,
        "measured": lambda o: o.run.kind,
        "versions": lambda o: o.versions,
        "source": lambda o: o.run.source.split()[0],
    }
    for name, key in groups.items():
        order = RANGES.index if name == "versions" else None  # oldest release first
        for value in sorted({key(o) for o in outcomes}, key=order):
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
