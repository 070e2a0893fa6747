"""LitGPT's books where its own code differs from a transformers model's, each checked against
figures derived here from LitGPT's and Lightning Fabric's source (named beside each test), and
against the published LitGPT runs it was traced from.

- Fabric's module wrapper casts the output to fp32 (lightning wrappers.py
  _FabricModule.forward, plugins/precision/half.py HalfPrecision.convert_output, 2.1.0 to
  2.3.3), so the logit chunks the fit loop keeps and their log-probs are fp32;
- LitGPT's GPT holds its lm_head apart from the token embedding (litgpt model.py / lora.py
  GPT.__init__), so a tied checkpoint is held twice;
- under QLoRA Fabric's BitsandbytesPrecision makes that head NF4 too (module_init_context
  replaces every torch.nn.Linear) and bitsandbytes dequantizes it whole for its matmul;
- Gemma 2's soft-capped attention runs eager (model.py CausalSelfAttention
  .scaled_dot_product_attention: "with softcapping we cannot use SDPA").
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest
import torch

from memtui.estimator import (
    Hardware,
    LossKind,
    Method,
    OverheadSettings,
    Plan,
    Precision,
    StackName,
    Strategy,
    TermKind,
    breakdown,
)
from memtui.estimator.activations import logits_bytes
from memtui.estimator.choices import Attention
from memtui.estimator.model_source import load_model
from memtui.estimator.stacks import STACKS
from memtui.estimator.stacks.autocast import autocast_weight_copies
from memtui.measure.tracker import LiveTracker

ROOT = Path(__file__).resolve().parent.parent
GEMMA_2B = load_model("google/gemma-2b")
# google/gemma-2b config.json: vocab_size 256000, hidden_size 2048, embeddings tied
GEMMA_HEAD = 256000 * 2048
LLAMA2_7B = load_model("meta-llama/Llama-2-7b-hf")
LLAMA2_HEAD = 32000 * 4096  # its own lm_head (untied)
NF4_NO_DQ = 4.5 / 8  # bytes per NF4 weight with fp32 absmax per 64 (bitsandbytes, bnb.nf4)


def plan(model: object = GEMMA_2B, **update: object) -> Plan:
    fields: dict[str, object] = {
        "model": model,
        "hardware": Hardware(gpus_per_node=1),
        "strategy": Strategy.ddp,
        "overhead": OverheadSettings(enabled=False),
        "precision": Precision.bf16,
        "method": Method.lora,
        "seq_len": 512,
        "micro_batch": 2,
        "stack": StackName.litgpt,
        "loss": LossKind.chunked,
        **update,
    }
    return Plan(**fields)  # type: ignore[arg-type]


def term(p: Plan, kind: TermKind) -> int:
    return breakdown(p).terms[kind]


def beside_torchtune(p: Plan, kind: TermKind) -> int:
    """The term's difference from torchtune's, which keeps the same one-dtype books
    (same_dtype_layout) but ties Gemma's head to its embedding (TiedLinear) and keeps
    torchtune's lm_head 16-bit under QLoRA."""
    return term(p, kind) - term(p.model_copy(update={"stack": StackName.torchtune}), kind)


# -- the lm_head apart from a tied embedding -----------------------------------------------


def test_litgpt_holds_a_tied_checkpoints_lm_head_as_a_second_bf16_matrix():
    # model.py GPT.__init__: lm_head = nn.Linear(n_embd, padded_vocab_size) beside
    # wte = nn.Embedding(padded_vocab_size, n_embd); convert_hf_checkpoint copies the
    # embedding into lm_head.weight when the checkpoint has none: V x h more bf16 weights
    assert GEMMA_2B.architecture.tie_embeddings
    assert beside_torchtune(plan(), TermKind.weights) == 2 * GEMMA_HEAD
    assert "lm_head LitGPT keeps apart" in breakdown_source(plan(), TermKind.weights)


def test_an_untied_checkpoint_has_no_second_head():
    assert beside_torchtune(plan(LLAMA2_7B), TermKind.weights) == 0
    assert "lm_head LitGPT keeps apart" not in breakdown_source(plan(LLAMA2_7B), TermKind.weights)


def test_a_full_fine_tune_trains_the_separate_head_too():
    # finetune/full.py trains every parameter: the head's bf16 gradient and torch.optim
    # AdamW's two bf16 moments (bf16-true: zeros_like the parameter) beside the embedding's
    full = plan(method=Method.full, optimizer="adamw")
    assert beside_torchtune(full, TermKind.weights) == 2 * GEMMA_HEAD
    assert beside_torchtune(full, TermKind.gradients) == 2 * GEMMA_HEAD
    assert beside_torchtune(full, TermKind.optimizer_states) == 2 * 2 * GEMMA_HEAD


# -- QLoRA: the head NF4, dequantized whole ------------------------------------------------


def qlora(model: object, **update: object) -> Plan:
    return plan(
        model, method=Method.qlora, qlora_double_quant=False, qlora_keeps_inputs=False, **update
    )


def test_qlora_makes_litgpts_lm_head_nf4():
    # lightning plugins/precision/bitsandbytes.py module_init_context: torch.nn.Linear is
    # replaced by the NF4 class for every module built under fabric.init_module, the
    # LoRALinear head's `linear` included (LitGPT passes no ignore_modules)
    untied = beside_torchtune(qlora(LLAMA2_7B), TermKind.weights)
    assert untied == round(LLAMA2_HEAD * NF4_NO_DQ) - 2 * LLAMA2_HEAD
    # Gemma: the embedding stays bf16 (nn.Embedding is not replaced), the copy is NF4
    assert beside_torchtune(qlora(GEMMA_2B), TermKind.weights) == round(GEMMA_HEAD * NF4_NO_DQ)


def test_qlora_dequantizes_the_whole_head_for_its_matmul():
    # bitsandbytes autograd/_functions.py MatMul4Bit: forward and backward each dequantize
    # the whole weight to the compute dtype; Gemma's head (256000 x 2048) is its largest
    # 4-bit linear, beyond any MLP matrix (2048 x 16384)
    extra = breakdown(qlora(GEMMA_2B)).transient.backward
    lora = breakdown(plan()).transient.backward
    assert extra - lora == 2 * GEMMA_HEAD


# -- Fabric's fp32 output ------------------------------------------------------------------


def _chunked_cross_entropy(chunks: list[torch.Tensor], targets: torch.Tensor) -> torch.Tensor:
    # litgpt/utils.py chunked_cross_entropy, the list branch (5895df10 to 26857050f):
    # cross_entropy(reduction="none") per chunk, summed over the unmasked targets
    flat = [c.reshape(-1, c.size(-1)) for c in chunks]
    goals = [t.reshape(-1) for t in targets.split(chunks[0].size(1), dim=1)]
    losses = [
        torch.nn.functional.cross_entropy(c, t, ignore_index=-100, reduction="none")
        for c, t in zip(flat, goals, strict=True)
    ]
    return torch.cat(losses).sum() / max(1, int((targets != -100).sum()))


def _fit_peak_per_logit(cast: torch.dtype | None) -> float:
    """Peak live bytes per logit of two iterations of LitGPT's fit step over a bf16 lm_head
    in chunks of 128 tokens, its output cast to `cast` as Fabric's convert_output does
    (apply_to_collection(_convert_fp_tensor): tensor.to(dtype)), or left bf16 (None)."""
    torch.manual_seed(0)
    b, s, h, vocab = 2, 512, 16, 4096
    weight = torch.randn(vocab, h, dtype=torch.bfloat16)
    hidden = torch.randn(b, s, h, dtype=torch.bfloat16)
    targets = torch.randint(0, vocab, (b, s))
    tracker = LiveTracker(lambda _t, phase: phase, known=[weight, hidden, targets])
    with tracker:
        for _ in range(2):
            x = (hidden * 1).requires_grad_()  # the final norm's output
            # lora.py GPT.forward: [self.lm_head(x_i) for x_i in x.split(128, dim=1)]
            logits = [torch.nn.functional.linear(c, weight) for c in x.split(128, dim=1)]
            if cast is not None:
                logits = [c.to(cast) for c in logits]
            # finetune/lora.py fit: logits[-1] = logits[-1][..., :-1, :]; the targets shifted
            logits[-1] = logits[-1][..., :-1, :]
            loss = _chunked_cross_entropy(logits, targets[..., 1:])
            loss.backward()
            del loss  # fit keeps `logits` until the next forward returns; `loss` is logged
    return tracker.peak / (b * s * vocab)


def test_fabrics_fp32_output_doubles_what_the_loss_keeps_and_memtui_covers_it():
    measured = _fit_peak_per_logit(torch.float32)
    bf16 = _fit_peak_per_logit(None)
    assert measured > 1.8 * bf16  # the cast is the mechanism: ~10 against ~5 bytes
    p = plan()
    arch = p.model.architecture
    setup = STACKS[StackName.litgpt].setup(p)
    per_logit = logits_bytes(arch, setup, p.seq_len, p.micro_batch) / (
        p.seq_len * p.micro_batch * arch.vocab_size
    )
    assert measured <= per_logit <= 1.1 * measured


def test_the_fit_loop_holds_the_fp32_logits_through_the_optimizer_step():
    # finetune/lora.py fit: `logits` is rebound only by the next iteration's forward, so the
    # optimizer step runs beside the fp32 chunks (4 bytes per logit)
    kept = 4 * 512 * 2 * 256000
    assert f"the loop's output {kept / 1e9:.2f} GB" in breakdown(plan()).transient.detail


# -- bf16-mixed: the frozen fp32 head cast once per chunk ----------------------------------


def test_autocast_casts_a_frozen_head_once_per_chunk_and_each_copy_is_saved():
    # aten/src/ATen/autocast_mode.cpp cached_cast caches the casts of trainable leaves only:
    # a frozen fp32 lm_head is cast anew by every chunk's matmul, which saves the copy
    vocab, h, s = 4096, 64, 1024
    weight = torch.randn(vocab, h)
    hidden = torch.randn(1, s, h)
    tracker = LiveTracker(lambda _t, phase: phase, known=[weight, hidden])
    with tracker:
        x = (hidden * 1).requires_grad_()
        with torch.autocast("cpu", dtype=torch.bfloat16):
            chunks = [torch.nn.functional.linear(c, weight) for c in x.split(128, dim=1)]
        outputs = sum(c.numel() * c.element_size() for c in chunks)
        copies = (tracker.current - x.numel() * 4 - outputs) / (2 * vocab * h)
    assert copies == s // 128
    # memtui: one copy per chunk (9 for 1034 tokens) where autocast_weight_copies has one
    mixed = plan(LLAMA2_7B, precision=Precision.bf16_autocast, seq_len=1034, micro_batch=1)
    one_copy = autocast_weight_copies(mixed, STACKS[StackName.litgpt].setup(mixed), peft=False)
    beyond = (breakdown(mixed).transient.backward - one_copy) / (2 * LLAMA2_HEAD)
    assert 8 <= beyond < 8.5  # 8 more copies, at a moment a little past the activations' peak


# -- Gemma 2: eager attention --------------------------------------------------------------


def test_gemma2s_soft_capped_attention_runs_eager_under_litgpt():
    gemma2 = load_model("google/gemma-2-2b")
    assert gemma2.architecture.attn_softcap
    flash = plan(gemma2, attention=Attention.flash)
    assert STACKS[StackName.litgpt].setup(flash).attention is Attention.eager
    eager = plan(gemma2, attention=Attention.eager)
    assert term(flash, TermKind.activations) == term(eager, TermKind.activations)
    assert "soft-capped attention cannot use SDPA" in breakdown_source(flash, TermKind.activations)
    # Gemma 1 has no soft-cap: SDPA as asked
    assert STACKS[StackName.litgpt].setup(plan()).attention is Attention.flash


def breakdown_source(p: Plan, kind: TermKind) -> str:
    stack = STACKS[p.stack]
    return stack.sources(p, stack.breakdown(p, p.strategy))[kind]


# -- the published runs these mechanisms were traced from ----------------------------------


@pytest.fixture(scope="module")
def published() -> object:
    spec = importlib.util.spec_from_file_location("published", ROOT / "benchmarks/published.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["published"] = module
    spec.loader.exec_module(module)
    return module


def test_no_published_litgpt_config_hub_run_is_under_predicted(published: object) -> None:
    # Lightning-AI/litgpt config_hub/finetune/README.md's 1xA10G rows (max_memory_allocated)
    runs = [r for r in published.RUNS if r.id.startswith("litgpt-ch-") and not r.cannot]  # type: ignore[attr-defined]
    assert len(runs) >= 25
    errors = {r.id: published.predict(r).error for r in runs}  # type: ignore[attr-defined]
    assert min(errors.values()) > -0.10, errors
