"""Stack bookkeeping that a CPU cannot measure, checked against each stack's own code:
LitGPT's bf16-mixed autocast copies and the 4-bit linear inputs that old bitsandbytes keeps
alive into the next step."""

from __future__ import annotations

from memtui.estimator import (
    Checkpointing,
    Hardware,
    LossKind,
    Method,
    OptimizerKernel,
    OverheadSettings,
    Plan,
    Precision,
    StackName,
    Strategy,
    TermKind,
    breakdown,
    estimate,
)
from memtui.estimator.activations import layer_saved
from memtui.estimator.model_source import load_model
from memtui.estimator.stacks import STACKS

LLAMA2_7B = load_model("meta-llama/Llama-2-7b-hf")
HIDDEN, INNER, LAYERS = 4096, 11008, 32  # Llama-2-7B's config.json


def plan(**update) -> Plan:
    fields = {
        "model": LLAMA2_7B,
        "hardware": Hardware(gpus_per_node=1),
        "strategy": Strategy.ddp,
        "overhead": OverheadSettings(enabled=False),
        "seq_len": 512,
        "micro_batch": 2,
        **update,
    }
    if fields.get("stack") is StackName.litgpt:
        fields["loss"] = LossKind.chunked  # chunked_cross_entropy, LitGPT's only loss
    return Plan(**fields)


def transient(p: Plan) -> int:
    """Bytes of the buffers alive in forward and backward (beyond the saved activations)."""
    return breakdown(p).transient.backward


def transient_source(p: Plan) -> str:
    return estimate(p).budget.terms[list(TermKind).index(TermKind.transient)].source


def test_litgpt_bf16_mixed_holds_a_bf16_copy_of_every_matmul_weight():
    # Fabric's bf16-mixed runs fp32 weights under torch.autocast, which caches a bf16 copy of
    # each trainable weight a matmul reads until the forward's autocast exits: without
    # checkpointing all of them (the decoder linears and lm_head) at once, 2 bytes each.
    mixed = plan(stack=StackName.litgpt, precision=Precision.bf16_autocast)
    true = plan(stack=StackName.litgpt, precision=Precision.bf16)
    linears = LAYERS * (4 * HIDDEN * HIDDEN + 3 * HIDDEN * INNER) + 32000 * HIDDEN
    # the copies are alive at the forward's end, which under LitGPT's chunked loss holds a
    # little more than the loss's backward (the step's peak without them): less than one
    # bf16 logits tensor (b s V) on top
    extra = transient(mixed) - transient(true) - 2 * linears
    assert 0 <= extra < 2 * 512 * 2 * 32000
    assert "autocast's bf16 weight copies" in transient_source(mixed)
    assert "autocast" not in transient_source(true)


def qlora(stack: StackName, keeps: bool, **update) -> Plan:
    return plan(
        stack=stack,
        method=Method.qlora,
        precision=Precision.bf16,
        qlora_keeps_inputs=keeps,
        **update,
    )


def test_old_bitsandbytes_keeps_the_previous_steps_4bit_inputs_under_litgpt():
    # bitsandbytes < 0.43.2 stores MatMul4Bit's input on ctx, released only with the graph;
    # LitGPT's fit loop holds loss and logits into the next forward, so at the forward's end
    # two steps' inputs are alive: the attn, proj, fc (shared by fc_1 and fc_2) and mlp.proj
    # inputs, 2 bytes each, per layer and token. The transient term is what they add above
    # the step's own peak (the loss's backward, where this step holds less than at the
    # forward's end), so it is most of them and never more.
    previous = LAYERS * (3 * HIDDEN + INNER) * 2 * 512 * 2
    kept = transient(qlora(StackName.litgpt, True)) - transient(qlora(StackName.litgpt, False))
    assert previous * 0.7 <= kept <= previous
    assert "previous step's 4-bit linear inputs" in transient_source(qlora(StackName.litgpt, True))
    assert "previous step" not in transient_source(qlora(StackName.litgpt, False))


def test_the_previous_steps_inputs_are_litgpts_alone_and_gone_under_full_checkpointing():
    # a stack whose loop drops the loss before the next forward (the generic step, Trainer)
    # never holds two steps; with full checkpointing the linears' inputs are recomputed
    for stack in (StackName.generic, StackName.trainer):
        assert "previous step" not in transient_source(qlora(stack, True))
    full = {"checkpointing": Checkpointing.full}
    assert transient(qlora(StackName.litgpt, True, **full)) == transient(
        qlora(StackName.litgpt, False, **full)
    )


def test_a_foreach_adamw_step_holds_one_moment_sized_copy_a_fused_one_none():
    # torch/optim/adam.py _multi_tensor_adam: exp_avg_sq_sqrt = torch._foreach_sqrt(...) is a
    # new tensor per moment (fp32 here: 4 bytes per trainable parameter of this GPU); the
    # fused kernel (fused=True, the Trainer's adamw_torch_fused) allocates nothing sizeable.
    # The Trainer's default is fused; `--optimizer-kernel foreach` is `optim adamw_torch`.
    trainer = plan(stack=StackName.trainer, precision=Precision.bf16_autocast)
    fused = breakdown(trainer).transient.step
    foreach = breakdown(trainer.evolve(optimizer_kernel=OptimizerKernel.foreach)).transient.step
    assert foreach - fused == 4 * LLAMA2_7B.parameters
    explicit = breakdown(trainer.evolve(optimizer_kernel=OptimizerKernel.fused)).transient.step
    assert explicit == fused
    # LitGPT builds torch.optim.AdamW without fused=True: foreach unless the plan says so
    litgpt = plan(stack=StackName.litgpt, precision=Precision.bf16)
    assert (
        breakdown(litgpt).transient.step
        > breakdown(litgpt.evolve(optimizer_kernel=OptimizerKernel.fused)).transient.step
    )


def test_litgpt_runs_gelu_as_one_op_that_keeps_its_input():
    # lit_gpt/model.py GptNeoxMLP.forward: F.gelu(x, approximate="tanh") keeps x alone, where
    # Transformers' NewGELUActivation (phi-1.5's `gelu_new`) is written as elementwise ops in
    # Python that keep four f-wide tensors (f = 8,192 for phi-1.5)
    phi = load_model("microsoft/phi-1_5")

    def intermediates(stack: StackName) -> int:
        p = plan(model=phi, stack=stack, precision=Precision.bf16)
        saved = layer_saved(phi.architecture, STACKS[stack].setup(p))
        return sum(item.per_token for item in saved if item.what == "activation intermediates")

    assert intermediates(StackName.litgpt) == 8192
    assert intermediates(StackName.generic) == 4 * 8192


def test_litgpt_lora_on_part_of_qkv_keeps_the_update_that_zero_pad_scatters():
    # lit_gpt/lora.py LoRAQKVLinear.zero_pad writes lora_B's output for the enabled parts into
    # a zero qkv-wide tensor with index_copy, whose backward keeps its source (torch keeps it:
    # checked on CPU); with q and v adapted that is 4096 + 4096 values per token for Llama-2-7B

    def padded(stack: StackName, targets: tuple[str, ...]) -> int:
        p = plan(stack=stack, precision=Precision.bf16, method=Method.lora, lora_targets=targets)
        saved = layer_saved(LLAMA2_7B.architecture, STACKS[stack].setup(p))
        return sum(item.per_token for item in saved if "zero_pad" in item.what)

    assert padded(StackName.litgpt, ("q_proj", "v_proj")) == 2 * HIDDEN
    assert padded(StackName.litgpt, ("q_proj", "k_proj", "v_proj")) == 0  # nothing to pad
    assert padded(StackName.generic, ("q_proj", "v_proj")) == 0  # PEFT adapts each linear


def test_litgpt_lora_on_a_fused_qkv_projection_updates_its_query_and_value_parts():
    # lit-gpt has no LoRA over a whole fused attention linear: finetune/lora.py builds
    # LoRAQKVLinear with enable_lora = (lora_query, lora_key, lora_value) = (True, False, True),
    # so zero_pad keeps the q and v parts' update: 2 x 4096 values per token for StableLM-alpha
    # 3B (hidden 4096, 32 heads of 128); measured on CPU with lit-gpt 8641822's GPT-NeoX block
    stablelm = load_model("stabilityai/stablelm-base-alpha-3b")
    p = plan(model=stablelm, stack=StackName.litgpt, precision=Precision.bf16,
             method=Method.lora, lora_targets=("query_key_value",))  # fmt: skip
    saved = layer_saved(stablelm.architecture, STACKS[StackName.litgpt].setup(p))
    assert sum(item.per_token for item in saved if "zero_pad" in item.what) == 2 * 4096


def test_the_generic_step_under_autocast_pays_for_the_bf16_weight_copies_too():
    # fp32 weights under torch.autocast: whatever loop runs them, autocast caches a bf16 copy
    # of each trainable weight a matmul reads (aten/src/ATen/autocast_mode.h cached_cast)
    autocast = plan(stack=StackName.generic, precision=Precision.bf16_autocast)
    mixed = plan(stack=StackName.generic, precision=Precision.bf16_mixed)
    linears = LAYERS * (4 * HIDDEN * HIDDEN + 3 * HIDDEN * INNER) + 32000 * HIDDEN
    assert transient(autocast) - transient(mixed) == 2 * linears
    assert "autocast's bf16 weight copies" in transient_source(autocast)
