"""Lightning's LitGPT (lit-gpt): Fabric, its own model code, LoRA and chunked loss.

Read from Lightning-AI/litgpt (2024, commits 5895df10 and 00af8b0d; the 2023 lit-gpt of its
resource tables, 8641822, differs where said): `--precision bf16-true` builds the model in
bf16 (weights, gradients and torch.optim's foreach AdamW moments in bf16, no master),
`bf16-mixed` keeps fp32 weights under autocast (memtui's bf16-autocast). Its RMSNorm upcasts
to fp32 as transformers' does (litgpt/model.py RMSNorm; the 2023 lit_gpt/rmsnorm.py did not,
keeping 2 bytes less per element of each norm's input). Its LoRA (lit_gpt/lora.py
LoRAQKVLinear) adds one lora_A over the fused qkv input for the enabled q and v projections
(r = 8, dropout 0.05 by default): one dropout mask and one dropped input per layer. Its
attention is one fused qkv linear for every family (model.py CausalSelfAttention.attn). The
model returns the logits in chunks of 128 tokens (lm_head_chunk_size=128) that the training
step keeps referenced through backward and the optimizer step (finetune/lora.py fit: `logits`
is rebound only by the next forward), and chunked_cross_entropy runs cross_entropy on each
chunk (utils.py). Fabric casts the model's output to fp32 (see `FABRIC_OUTPUT_BYTES`), so the
kept chunks and their log-probs are fp32. Multi-GPU runs use Fabric's FSDPStrategy (FSDP1,
limit_all_gathers).

Its GPT keeps the lm_head apart from the token embedding for every family (model.py and
lora.py GPT.__init__: `lm_head = nn.Linear(n_embd, padded_vocab_size)` beside
`wte = nn.Embedding(...)`, never tied; scripts/convert_hf_checkpoint.py copies a tied
checkpoint's embedding into `lm_head.weight`; 5895df10 to 26857050f), so a model whose
checkpoint ties them holds two copies (`head_copy_elements`). Under QLoRA Fabric's
BitsandbytesPrecision replaces every torch.nn.Linear built under `fabric.init_module`, the
lm_head's included (module_init_context's _ClassReplacementContextManager, no
ignore_modules: lightning 2.1.0 to 2.3.3; LitGPT passes none, finetune/lora.py setup), so the
head is NF4 and is dequantized whole for its matmul like the decoder's linears. Gemma 2's
attention soft-cap makes its attention eager (model.py CausalSelfAttention
.scaled_dot_product_attention: "with softcapping we cannot use SDPA", 916a84ca on). Its
final logit soft-cap reaches the chunked training forward from 17a58dfa (Dec 2024, lora.py
GPT.forward `clamp_head`); the books follow that code, 2 bytes per logit above the Gemma 2
runs of mid-2024.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace

from memtui.estimator.activations import MomentBytes, Setup, base_linear_inputs, buffers_beyond
from memtui.estimator.architecture import Role
from memtui.estimator.choices import Attention, Method, Precision, StackName, Strategy
from memtui.estimator.plan import Plan
from memtui.estimator.stacks.autocast import autocast_weight_copies
from memtui.estimator.stacks.base import BookStack, Breakdown
from memtui.estimator.stacks.fsdp2 import unit_buffers
from memtui.estimator.stacks.generic import GENERIC
from memtui.estimator.stacks.torchtune import same_dtype_layout, same_dtype_setup
from memtui.estimator.state import Layout, StaticState, TrainableTensor, nf4_bits_per_param
from memtui.estimator.terms import TermKind
from memtui.estimator.transient import Transient, dequantized_weight, optimizer_temporaries
from memtui.estimator.units import ceil_div

LM_HEAD_CHUNK = 128
"""Tokens per logits chunk (lit-gpt finetune/lora.py: model(input_ids, lm_head_chunk_size=128))."""

FABRIC_OUTPUT_BYTES = 4
"""Bytes per logit of the output the loop gets: Fabric's module wrapper converts the forward's
output (wrappers.py _FabricModule.forward: `precision.convert_output(output)`), and the
precision plugins LitGPT runs cast every floating tensor in it to torch.get_default_dtype(),
fp32 outside their forward context (plugins/precision/half.py HalfPrecision.convert_output
for bf16-true, amp.py MixedPrecision for bf16-mixed, bitsandbytes.py BitsandbytesPrecision for
QLoRA; lightning 2.1.0 to 2.3.3). chunked_cross_entropy then keeps fp32 log-probs. Measured on
CPU through Fabric with litgpt 0.4.2 and lightning 2.3.3: 10.3 bytes per logit at the step's
peak, 5.3 without the wrapper (tests/test_litgpt_stack.py replays the step)."""


def head_copy_elements(plan: Plan) -> int:
    """Elements of the lm_head LitGPT holds beyond what the architecture counts: the whole
    head when the checkpoint ties it to the embedding (LitGPT never ties them)."""
    arch = plan.model.architecture
    if not arch.tie_embeddings or arch.score_labels:
        return 0
    return head_elements(plan)


def head_elements(plan: Plan) -> int:
    """Elements of the lm_head's weight (V x the embedding width)."""
    arch = plan.model.architecture
    return arch.vocab_size * (arch.embed_proj_dim or arch.hidden_size)


def _chunked_head_copies(plan: Plan, setup: Setup) -> int:
    """bf16-mixed LoRA: the frozen fp32 lm_head cast once per logits chunk, beyond the one
    copy `autocast_weight_copies` counts. autocast caches the casts of trainable leaves only
    (aten/src/ATen/autocast_mode.cpp cached_cast: `arg.requires_grad() && arg.is_leaf()`), so
    each chunk's `self.lm_head(x_i)` (lora.py GPT.forward) makes its own copy, which that
    chunk's matmul saves for backward (measured on CPU with torch 2.13: 8 chunks, 8 copies
    alive after the forward); all are alive from the forward's end to the head's backward."""
    if plan.precision is not Precision.bf16_autocast or plan.method is not Method.lora:
        return 0
    extra = 2 * head_elements(plan) * max(0, setup.loss_chunks - 1) / plan.tp
    moments = MomentBytes(loss_backward=extra, forward_end=extra, lm_head_backward=extra)
    arch = plan.model.architecture
    held, _ = buffers_beyond(arch, setup, plan.seq_len, plan.micro_batch, moments)
    return held


class LitGptStack(BookStack):
    """LitGPT's finetune scripts (full, LoRA, QLoRA through Fabric's bitsandbytes plugin)."""

    name = StackName.litgpt

    def layout(
        self, plan: Plan, strategy: Strategy, tensors: tuple[TrainableTensor, ...]
    ) -> Layout:
        copy = head_copy_elements(plan)
        if plan.method is Method.full and copy:
            # the separate lm_head trains beside the embedding: its gradient and moments too
            arch = plan.model.architecture
            cols = arch.embed_proj_dim or arch.hidden_size
            tensors = (*tensors, TrainableTensor(copy, 1, arch.vocab_size, cols))
        layout = same_dtype_layout(plan, tensors)
        width = plan.precision.weight_bytes
        if plan.method is Method.qlora:
            # the head is NF4 (BitsandbytesPrecision converts it), where the books keep an
            # untied head in the weights' dtype (transformers' quantizers leave it 16-bit)
            nf4 = head_elements(plan) * nf4_bits_per_param(plan.qlora_double_quant) / 8
            extra = nf4 - (0 if copy else width * head_elements(plan))
        else:
            extra = width * copy
        return replace(layout, weights=layout.weights + extra)

    def setup(self, plan: Plan) -> Setup:
        autocast = plan.precision is Precision.bf16_autocast
        lora = plan.method is not Method.full
        # bf16-mixed: an fp32 stream that autocast casts per op. Trained linears each keep
        # their own bf16 cast of their input (one for the fused attn, one each for fc_1 and
        # fc_2); an adapter's lora_A keeps its own cast of the (dropped) fp32 input.
        roles = {lin.role for lin in plan.model.architecture.linear_layers} - {
            Role.q,
            Role.k,
            Role.v,
        }
        base = same_dtype_setup(plan)
        return replace(
            base,
            attention=Attention.eager if plan.model.architecture.attn_softcap else base.attention,
            compute_bytes=2,
            residual_bytes=4 if autocast else 2,
            input_casts=frozenset(roles | {Role.qkv}) if autocast and not lora else frozenset(),
            adapter_input_bytes=2 if autocast and lora else 0,
            adapter_output_bytes=2,
            one_adapter_per_input=True,
            loss_chunks=ceil_div(plan.seq_len, LM_HEAD_CHUNK),
            kept_logits_bytes=FABRIC_OUTPUT_BYTES,
            loss_bytes=FABRIC_OUTPUT_BYTES,
            fused_qkv=True,
            # lit_gpt/model.py GptNeoxMLP.forward: torch.nn.functional.gelu(x, approximate=...)
            activation_saves=1,
            padded_qkv_update=True,
            # a LoRA on the fused attention linear updates its query and value parts only
            # (finetune/lora.py: lora_query=True, lora_key=False, lora_value=True, 8641822
            # to 2024; config_hub/finetune/*/lora.yaml lora_key: false)
            fused_qkv_parts=frozenset({Role.q, Role.v}),
        )

    def transient(
        self, plan: Plan, strategy: Strategy, state: StaticState, setup: Setup
    ) -> Transient:
        backward, detail = unit_buffers(plan, strategy, state, 2, 2)
        copies = autocast_weight_copies(plan, setup, peft=False) + _chunked_head_copies(plan, setup)
        if copies:
            detail += f", autocast's bf16 weight copies {copies / 1e9:.2f} GB"
        # bitsandbytes before 0.43.2 kept each 4-bit linear's input as a ctx attribute
        # (autograd/_functions.py MatMul4Bit.forward: ctx.tensors = (A, B)), which backward
        # does not release: it lives with the graph, and the fit loop's `loss` and `logits`
        # hold the graph until the next forward returns (finetune/lora.py fit), so the
        # previous step's inputs are alive at this step's forward's end (checked on CPU:
        # a tensor held only by ctx outlives backward until the loss is dropped).
        arch = plan.model.architecture
        previous = base_linear_inputs(arch, setup, plan.seq_len, plan.micro_batch)
        held, _ = buffers_beyond(
            arch, setup, plan.seq_len, plan.micro_batch, MomentBytes(forward_end=previous)
        )
        if held:
            detail += f", the previous step's 4-bit linear inputs {held / 1e9:.2f} GB"
        # the largest 4-bit linear dequantized for its matmul: the NF4 lm_head's too
        dequantized = dequantized_weight(plan)
        if dequantized:
            dequantized = max(dequantized, 2 * head_elements(plan))
        width = plan.precision.weight_bytes
        step, why = optimizer_temporaries(plan, strategy, state, width, fused=False)
        return Transient(
            0,
            backward + copies + held + dequantized,
            step,
            f"{detail}; optimizer step: {why}",
        )

    def sources(self, plan: Plan, breakdown: Breakdown) -> Mapping[TermKind, str]:
        out = dict(GENERIC.sources(plan, breakdown))
        out[TermKind.master_weights] = "none: bf16-true, or fp32 weights under bf16-mixed"
        out[TermKind.logits] = (
            "logits in chunks of 128 tokens cast to fp32 by Fabric's precision plugin, kept "
            "through backward, + their fp32 log-probs (chunked_cross_entropy)"
        )
        if head_copy_elements(plan):
            out[TermKind.weights] = (
                f"{out[TermKind.weights]}; + the lm_head LitGPT keeps apart from the tied "
                "embedding (model.py GPT)"
            )
        if plan.model.architecture.attn_softcap and plan.attention is Attention.flash:
            out[TermKind.activations] = (
                f"{out[TermKind.activations]}; eager attention: LitGPT's soft-capped "
                "attention cannot use SDPA (model.py)"
            )
        return out


LITGPT = LitGptStack()
