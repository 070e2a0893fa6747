"""The version rules the CPU grid found with transformers 4.39.3 and 4.48.3, PEFT 0.10 and
0.14 (benchmarks/accuracy.py --stack versions, docs/accuracy.md): each figure is derived
from the frameworks' source named beside it, on Llama-3-8B's shape (GQA: 32 query heads, 8
key/value heads of 128), the runtime overhead off.
"""

from __future__ import annotations

from memtui.estimator import (
    Hardware,
    Method,
    OverheadSettings,
    Plan,
    Precision,
    StackName,
    Strategy,
    TermKind,
    breakdown,
)
from memtui.estimator.model_source import load_model
from memtui.estimator.versions import PackageVersion, Versions

LLAMA3_8B = load_model("meta-llama/Meta-Llama-3-8B")
LAYERS, H, QW, KVW, D, VOCAB = 32, 4096, 4096, 1024, 128, 128256  # config.json
S, B = 1024, 1


def plan(transformers: str | None = None, peft: str | None = None, **update: object) -> Plan:
    given = {
        name: PackageVersion(version=v, source="a test")
        for name, v in (("transformers", transformers), ("peft", peft))
        if v is not None
    }
    fields: dict[str, object] = {
        "model": LLAMA3_8B,
        "hardware": Hardware(gpus_per_node=1),
        "overhead": OverheadSettings(enabled=False),
        "seq_len": S,
        "micro_batch": B,
        "stack": StackName.trainer,
        "strategy": Strategy.ddp,
        "precision": Precision.bf16,
        "method": Method.full,
        "versions": Versions(**given),
        **update,
    }
    return Plan(**fields)  # type: ignore[arg-type]


def activations(p: Plan) -> int:
    return breakdown(p).terms[TermKind.activations]


def test_sdpa_keeps_the_repeated_key_and_value_before_4_54():
    # integrations/sdpa_attention.py 4.53.3: key = repeat_kv(key, ...), value likewise, before
    # SDPA, which keeps them query-wide; 4.54.0 passes enable_gqa (use_gqa_in_sdpa) instead
    extra = activations(plan("4.53.3")) - activations(plan("4.54.0"))
    assert extra == LAYERS * S * B * 2 * (QW - KVW) * 2


def test_a_contiguous_query_makes_the_transpose_before_o_proj_a_copy_from_4_48_to_4_55():
    # sdpa_attention_forward 4.48-4.55: query.contiguous(), so the flash kernel's output is
    # (b, a, s, d) and attn_output.transpose(1, 2).contiguous() copies it for o_proj
    assert activations(plan("4.55.4")) - activations(plan("4.56.0")) == LAYERS * S * B * QW * 2
    # 4.47: no contiguous query without a mask (LlamaSdpaAttention: only on CUDA with one)
    step = activations(plan("4.48.0")) - activations(plan("4.47.1"))
    assert step == LAYERS * S * B * QW * 2


def test_up_to_4_39_sdpa_gets_an_s_by_s_causal_mask_and_each_layer_its_rotary():
    # modeling_llama.py 4.39.3 LlamaModel._update_causal_mask: a (s, s) mask in the
    # embeddings' dtype, expanded over the batch, which every layer's SDPA keeps; 4.40.0
    # returns None where _ignore_causal_mask_sdpa allows
    assert activations(plan("4.39.3")) - activations(plan("4.40.0")) == S * S * 2
    # up to 4.43 each attention's rotary_emb makes its own cos and sin, (1, s, d) each;
    # 4.44.2 computes position_embeddings once in LlamaModel.forward
    per_layer = activations(plan("4.43.4")) - activations(plan("4.44.0"))
    assert per_layer == (LAYERS - 1) * 2 * S * D * 2


def test_trainer_defaults_to_foreach_adamw_before_4_54():
    # training_args.py 4.53.3 default_optim = "adamw_torch" (foreach on CUDA: one
    # moment-sized temporary per tensor group); 4.54.0 "adamw_torch_fused" on torch >= 2.8
    old, new = (breakdown(plan(v)).transient.step for v in ("4.53.3", "4.54.0"))
    assert new == 0 and old == LLAMA3_8B.parameters * 2
    torch27 = plan("4.54.0").versions.model_copy(
        update={"torch": PackageVersion(version="2.7.1", source="a test")}
    )
    assert breakdown(plan("4.54.0").evolve(versions=torch27)).transient.step == old


def test_peft_before_0_12_keeps_the_adapters_in_the_base_dtype():
    # peft 0.11.1 tuners/lora/layer.py update_layer: self.to(weight.device, dtype=weight.dtype);
    # 0.12.0 get_peft_model(autocast_adapter_dtype=True) upcasts them to fp32
    lora = {"method": Method.lora}
    old, new = (breakdown(plan(peft=v, **lora)).state for v in ("0.11.1", "0.12.0"))
    adapters = (new.weights - old.weights) // 2  # 4 - 2 bytes per adapter parameter
    assert adapters > 0
    assert new.gradients == 2 * old.gradients == 4 * adapters
    assert new.optimizer_states == 2 * old.optimizer_states


def test_a_loop_that_keeps_its_output_holds_it_beside_the_optimizer_step():
    # a hand-written loop: output = model(...); output.loss.backward(); optimizer.step();
    # the output dropped after: before 4.46 its fp32 logits (LlamaForCausalLM.forward
    # logits.float()) sit beside the step's temporaries
    kept = breakdown(plan("4.39.3", loop="custom", loop_keeps_output=True)).transient.step
    dropped = breakdown(plan("4.39.3", loop="custom", loop_keeps_output=False)).transient.step
    assert kept - dropped == S * B * VOCAB * 4


def test_the_loss_forward_moment_holds_the_hidden_state_a_frozen_lm_head_did_not_save():
    # 4.48 ForCausalLMLoss holds 14 B per logit at nll_loss_forward, more than the backward's
    # 12, inside LlamaForCausalLM.forward, whose hidden_states (the final norm's output, b s h
    # bf16) is alive; under LoRA lm_head did not save it. 4.49 pads: the backward decides.
    lora = {"method": Method.lora}
    assert activations(plan("4.48.3", **lora)) - activations(plan("4.49.0", **lora)) == (
        S * B * H * 2
    )
    # a full fine-tune's lm_head saved it already
    assert activations(plan("4.48.3")) == activations(plan("4.49.0"))
