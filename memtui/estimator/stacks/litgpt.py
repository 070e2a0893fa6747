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
step keeps referenced through backward, and chunked_cross_entropy runs cross_entropy on each
bf16 chunk (utils.py), keeping bf16 log-probs. Multi-GPU runs use Fabric's FSDPStrategy
(FSDP1, limit_all_gathers).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace

from memtui.estimator.activations import MomentBytes, Setup, base_linear_inputs, buffers_beyond
from memtui.estimator.architecture import Role
from memtui.estimator.choices import Method, Precision, StackName, Strategy
from memtui.estimator.plan import Plan
from memtui.estimator.stacks.autocast import autocast_weight_copies
from memtui.estimator.stacks.base import BookStack, Breakdown
from memtui.estimator.stacks.fsdp2 import unit_buffers
from memtui.estimator.stacks.generic import GENERIC
from memtui.estimator.stacks.torchtune import same_dtype_layout, same_dtype_setup
from memtui.estimator.state import Layout, StaticState, TrainableTensor
from memtui.estimator.terms import TermKind
from memtui.estimator.transient import Transient, dequantized_weight, optimizer_temporaries
from memtui.estimator.units import ceil_div

LM_HEAD_CHUNK = 128
"""Tokens per logits chunk (lit-gpt finetune/lora.py: model(input_ids, lm_head_chunk_size=128))."""


class LitGptStack(BookStack):
    """LitGPT's finetune scripts (full, LoRA, QLoRA through Fabric's bitsandbytes plugin)."""

    name = StackName.litgpt

    def layout(
        self, plan: Plan, strategy: Strategy, tensors: tuple[TrainableTensor, ...]
    ) -> Layout:
        return same_dtype_layout(plan, tensors)

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
        return replace(
            same_dtype_setup(plan),
            compute_bytes=2,
            residual_bytes=4 if autocast else 2,
            input_casts=frozenset(roles | {Role.qkv}) if autocast and not lora else frozenset(),
            adapter_input_bytes=2 if autocast and lora else 0,
            adapter_output_bytes=2,
            one_adapter_per_input=True,
            loss_chunks=ceil_div(plan.seq_len, LM_HEAD_CHUNK),
            kept_logits_bytes=2,
            loss_bytes=2,
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
        copies = autocast_weight_copies(plan, setup, peft=False)
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
        width = plan.precision.weight_bytes
        step, why = optimizer_temporaries(plan, strategy, state, width, fused=False)
        return Transient(
            0,
            backward + copies + held + dequantized_weight(plan),
            step,
            f"{detail}; optimizer step: {why}",
        )

    def sources(self, plan: Plan, breakdown: Breakdown) -> Mapping[TermKind, str]:
        out = dict(GENERIC.sources(plan, breakdown))
        out[TermKind.master_weights] = "none: bf16-true, or fp32 weights under bf16-mixed"
        out[TermKind.logits] = (
            "bf16 logits in chunks of 128 tokens, kept through backward, + their bf16 "
            "log-probs (chunked_cross_entropy)"
        )
        return out


LITGPT = LitGptStack()
