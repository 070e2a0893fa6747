"""The step-time model against figures derived by hand from its sources.

FLOP counts: Narayanan et al. 2021 (eq. 3: 96 B s l h^2 (1 + s / 6h + V / 16 l h) for a GPT
layer stack with full recomputation, 72 B s l h^2 (1 + s / 6h + V / 12 l h) without), PaLM's
appendix B (6N + 12 L H Q T per token), Kaplan et al. 2020 (6N per token), LoRA's frozen base
(no weight gradients: 4N); Switch Transformer (only the routed experts run). Times: the
roofline (Williams et al. 2009), the optimizer step's bytes over the bandwidth, the datasheet
figures of the card. Every expected number is derived here from the formula, not read off
memtui.
"""

from __future__ import annotations

import json
import statistics

import pytest

from memtui.cli import main
from memtui.estimator import Plan, estimate
from memtui.estimator.architecture import Architecture
from memtui.estimator.budget import per_gpu_total
from memtui.estimator.capabilities import TensorParallelPlan
from memtui.estimator.communication import payloads, tensor_parallel_passes, volume
from memtui.estimator.hardware import GPUS, card_of
from memtui.estimator.levers import LeverOrder, ordered
from memtui.estimator.model_source import load_model
from memtui.estimator.plan import ModelSpec
from memtui.estimator.report import StepPartKind
from memtui.estimator.state import static_state
from memtui.estimator.step_time import (
    NCCL_NVLINK_SHARE,
    matmul_seconds,
    seconds_per_token,
    step_time,
)

H100 = GPUS["h100-sxm"]
PEAK, BW = H100.bf16_flops, H100.memory_bandwidth

# A GPT stack as Narayanan et al. count it: 4h MLP, no gating, h = a x 128
H, L, V, A = 2048, 8, 32000, 16
GPT = Architecture(
    model_type="gpt-test",
    hidden_size=H,
    num_layers=L,
    num_heads=A,
    intermediate_size=4 * H,
    vocab_size=V,
    mlp_kind="plain",
    rotary=False,
    hidden_act="gelu",
)


def gpt_plan(**fields) -> Plan:
    fields.setdefault("hardware", {"gpus_per_node": 1})
    fields.setdefault("strategy", "ddp")
    return Plan(model=ModelSpec.from_architecture("gpt-test", GPT), **fields)


def test_narayanan_flops_with_and_without_full_recomputation():
    b, s = 2, 1024
    plain = step_time(gpt_plan(micro_batch=b, seq_len=s, attention="eager"))
    # without recomputation: 72 B s l h^2 (1 + s / 6h + V / 12 l h)
    expected = 72 * b * s * L * H**2 * (1 + s / (6 * H) + V / (12 * L * H))
    assert plain.hardware_flops == pytest.approx(expected, rel=1e-12)
    assert plain.model_flops == pytest.approx(expected, rel=1e-12)
    ckpt = step_time(gpt_plan(micro_batch=b, seq_len=s, attention="eager", checkpointing="full"))
    # with full recomputation the layers run forward twice: 96 B s l h^2 (1 + s/6h + V/16lh)
    expected = 96 * b * s * L * H**2 * (1 + s / (6 * H) + V / (16 * L * H))
    assert ckpt.hardware_flops == pytest.approx(expected, rel=1e-12)
    assert ckpt.model_flops == plain.model_flops  # MFU counts no recompute
    assert ckpt.part(StepPartKind.recompute) > 0
    assert ckpt.seconds > plain.seconds


def test_palm_model_flops_per_token_on_a_real_llama():
    # PaLM appendix B: 6N + 12 L H Q T per token, N the matmul parameters (the embedding
    # table is a lookup), H heads of width Q, T the sequence
    model = load_model("meta-llama/Llama-2-7b-hf")
    arch = model.architecture
    s = 4096
    timed = step_time(Plan(model=model, seq_len=s, hardware={"gpus_per_node": 1}, strategy="ddp"))
    n = sum(lin.d_in * lin.d_out * lin.count for lin in arch.linear_layers) + V * 4096
    per_token = 6 * n + 12 * arch.num_layers * arch.num_heads * arch.dim_head * s
    assert timed.model_flops / timed.tokens_per_step == pytest.approx(per_token, rel=1e-12)
    # 6N is the bulk (Kaplan et al. 2020): the parameter count less the embedding and norms
    assert 6 * n == pytest.approx(6 * (model.parameters - 32000 * 4096), rel=1e-3)
    # causal FlashAttention executes half the s^2 term, and its backward 2.5x its forward
    attention = 4 * arch.num_layers * arch.num_heads * arch.dim_head * s
    executed = 6 * n + 0.5 * attention * (1 + 2.5)
    assert timed.hardware_flops / timed.tokens_per_step == pytest.approx(executed, rel=1e-12)


def test_lora_base_needs_no_weight_gradients():
    b, s = 1, 512
    full = step_time(gpt_plan(micro_batch=b, seq_len=s, attention="eager"))
    lora = step_time(gpt_plan(micro_batch=b, seq_len=s, attention="eager", method="lora"))
    tokens = b * s
    layers = L * (4 * H * H + 2 * H * 4 * H)  # q, k, v, o and the MLP's two
    r = 16
    adapters = L * r * (4 * (H + H) + (H + 4 * H) + (4 * H + H))
    attention = 3 * 4 * L * s * H  # forward and backward of QK^T and AV, whole
    # full: 6 N; LoRA: 4 N over the frozen base (lm_head frozen too), 6 A over the adapters
    assert full.model_flops == pytest.approx(
        tokens * (6 * layers + 6 * V * H) + attention * tokens, rel=1e-12
    )
    assert lora.model_flops == pytest.approx(
        tokens * (4 * layers + 4 * V * H + 6 * adapters) + attention * tokens, rel=1e-12
    )
    # in time, on Llama-2-7B: the frozen base's backward is shorter, the adapters' own
    # matmuls and PEFT's scale-and-add lengthen the forward
    model = load_model("meta-llama/Llama-2-7b-hf")
    full_7b, lora_7b = (
        step_time(Plan(model=model, method=method, micro_batch=4, seq_len=2048))
        for method in ("full", "lora")
    )
    assert lora_7b.part(StepPartKind.backward) < full_7b.part(StepPartKind.backward)
    assert lora_7b.part(StepPartKind.forward) > full_7b.part(StepPartKind.forward)
    assert lora_7b.seconds < full_7b.seconds


def test_moe_runs_only_the_routed_experts():
    model = load_model("mistralai/Mixtral-8x7B-v0.1")
    arch = model.architecture
    s = 1024
    timed = step_time(Plan(model=model, seq_len=s, hardware={"gpus_per_node": 8}))
    active = (
        sum(
            lin.d_in * lin.d_out * lin.count * (2 / 8 if lin.group == "expert" else 1)
            for lin in arch.linear_layers
        )
        + arch.vocab_size * arch.hidden_size
    )
    attention = 12 * arch.num_layers * arch.num_heads * arch.dim_head * s
    assert timed.model_flops / (timed.tokens_per_step / 8) == pytest.approx(
        6 * active + attention, rel=1e-12
    )
    # Mixtral's 12.9B active of 46.7B (its model card)
    assert active + arch.vocab_size * arch.hidden_size == pytest.approx(12.9e9, rel=0.02)


def test_roofline_memory_bound_below_the_ridge_and_compute_bound_above():
    ceiling = PEAK * H100.matmul_ceiling
    # one token through a 4096 x 4096 weight: the weight's bytes dominate
    narrow = matmul_seconds(1, 4096, 4096, 2, ceiling, BW)
    assert narrow == pytest.approx(2 * (4096 + 4096 * 4096 + 4096) / BW)
    wide = matmul_seconds(16384, 8192, 8192, 2, ceiling, BW)
    assert wide == pytest.approx(2 * 16384 * 8192 * 8192 / ceiling)


def test_optimizer_step_is_memory_bound_bytes_over_bandwidth():
    # one GPU, bf16-mixed: fused AdamW reads the bf16 gradient (2 B), the fp32 master (4),
    # both fp32 moments (8), writes master and moments (12), then copies the master into the
    # bf16 weights (read 4, write 2): 32 B per parameter
    plan = gpt_plan(optimizer_kernel="fused")
    trainable = estimate(plan).parameters.trainable
    assert step_time(plan).part(StepPartKind.optimizer) == pytest.approx(32 * trainable / BW)
    # foreach: eight kernels (torch _multi_tensor_adamw): 4 pw + 14 m + 3 gw + the copy
    foreach = step_time(gpt_plan(optimizer_kernel="foreach")).part(StepPartKind.optimizer)
    assert foreach == pytest.approx((4 * 4 + 14 * 4 + 3 * 2 + 6) * trainable / BW)
    # 8-bit: a byte per moment and a 4-byte absmax per 256-element block
    eight = step_time(gpt_plan(optimizer="adamw8bit")).part(StepPartKind.optimizer)
    assert eight == pytest.approx((2 + 8 + 4 * (1 + 4 / 256) + 6) * trainable / BW)
    paged = step_time(gpt_plan(optimizer="paged-adamw8bit")).part(StepPartKind.optimizer)
    assert paged == eight  # the same kernels while the pages are on the GPU


def test_paged_state_beyond_the_gpu_crosses_the_host_link_every_step():
    # torchtune's 8B_full_single_device on a 24 GB RTX 4090: bf16 weights (16 GB) and the
    # paged 8-bit AdamW state (16 GB) cannot both be resident; bitsandbytes pages what does
    # not fit back in before each update (prefetch_state) while as much is evicted, the two
    # directions of the PCIe link at once
    model = load_model("meta-llama/Llama-3.1-8B")
    fields = dict(model=model, stack="torchtune", precision="bf16", strategy="ddp",
                  micro_batch=2, seq_len=2048, checkpointing="full", loss="chunked",
                  optimizer_in_backward=True)  # fmt: skip
    card = {"gpus_per_node": 1, "gpu_name": "RTX 4090 24GB", "compute_capability": 8.9,
            "gpu_memory": GPUS["rtx4090"].memory}  # fmt: skip
    paged = Plan(optimizer="paged-adamw8bit", hardware=card, **fields)
    resident = Plan(optimizer="adamw8bit", hardware=card, **fields)
    spill = min(static_state(paged).managed, per_gpu_total(paged) - card["gpu_memory"])
    assert spill > 10 * 10**9
    paging = spill / GPUS["rtx4090"].host_link  # 32 GB/s per direction (PCIe 4.0 x16)
    assert step_time(paged).part(StepPartKind.optimizer) == pytest.approx(
        step_time(resident).part(StepPartKind.optimizer) + paging
    )
    # on an 80 GB card everything stays resident: the same kernels, nothing paged
    roomy = {"gpus_per_node": 1, "gpu_name": "A100 80GB", "compute_capability": 8.0}
    assert step_time(Plan(optimizer="paged-adamw8bit", hardware=roomy, **fields)).part(
        StepPartKind.optimizer
    ) == step_time(Plan(optimizer="adamw8bit", hardware=roomy, **fields)).part(
        StepPartKind.optimizer
    )


def test_sharding_divides_the_optimizer_step():
    model = load_model("meta-llama/Llama-2-7b-hf")
    ddp = step_time(Plan(model=model, strategy="ddp", hardware={"gpus_per_node": 4}))
    zero1 = step_time(Plan(model=model, strategy="zero1", hardware={"gpus_per_node": 4}))
    assert zero1.part(StepPartKind.optimizer) == pytest.approx(ddp.part(StepPartKind.optimizer) / 4)


def test_gradient_accumulation_repeats_the_micro_step_only():
    one = step_time(gpt_plan(micro_batch=2))
    four = step_time(gpt_plan(micro_batch=2, grad_accum=4))
    assert four.micro_step_seconds == pytest.approx(one.micro_step_seconds)
    once = four.part(StepPartKind.optimizer) + four.part(StepPartKind.step_communication)
    assert four.seconds == pytest.approx(4 * four.micro_step_seconds + once)
    assert four.tokens_per_step == 4 * one.tokens_per_step
    assert four.tokens_per_second_per_gpu > one.tokens_per_second_per_gpu


def test_qlora_dequantizes_every_weight_before_each_use():
    # bitsandbytes MatMul4Bit: dequantize_4bit in forward and again in backward; each reads
    # the packed NF4 weight and its double-quantized absmax and writes it in bf16
    plan = gpt_plan(method="qlora")
    linears = L * (4 * H * H + 2 * H * 4 * H)
    bits = 4 + 8 / 64 + 32 / (64 * 256)
    assert step_time(plan).part(StepPartKind.dequantization) == pytest.approx(
        2 * linears * (bits / 8 + 2) / BW
    )
    ckpt = step_time(gpt_plan(method="qlora", checkpointing="full"))
    assert ckpt.part(StepPartKind.dequantization) == pytest.approx(
        1.5 * step_time(plan).part(StepPartKind.dequantization)
    )
    assert step_time(gpt_plan(method="lora")).part(StepPartKind.dequantization) == 0


def test_fused_loss_moves_fewer_bytes_than_the_fp32_upcast():
    full = step_time(gpt_plan(loss="full", stack="trainer", precision="bf16"))
    fused = step_time(gpt_plan(loss="fused", stack="trainer", precision="bf16"))
    tokens = 4096
    assert full.part(StepPartKind.loss) == pytest.approx(32 * tokens * V / BW)
    assert fused.part(StepPartKind.loss) == pytest.approx(6 * tokens * V / BW)


def test_communication_hidden_behind_compute_unless_the_link_is_slow():
    model = load_model("meta-llama/Llama-2-13b-hf")
    fast = Plan(model=model, hardware={"nodes": 2})
    slow = fast.evolve(hardware={"inter_node_bandwidth": 3.125e9})  # 25 Gb/s Ethernet
    fsdp_fast, fsdp_slow = step_time(fast), step_time(slow)
    hsdp_slow = step_time(slow.evolve(strategy="hsdp"))
    # over NDR the gathers hide behind compute; over 25 GbE FSDP's every-micro-step gathers
    # cross the slow link and HSDP's single all-reduce across nodes costs less
    exposed = fsdp_fast.part(StepPartKind.communication)
    assert exposed < 0.05 * fsdp_fast.seconds
    assert fsdp_slow.part(StepPartKind.communication) > 10 * exposed
    assert hsdp_slow.seconds < fsdp_slow.seconds
    # one GPU talks to nobody
    alone = step_time(Plan(model=model, strategy="ddp", hardware={"gpus_per_node": 1}))
    assert alone.part(StepPartKind.communication) == 0
    assert alone.part(StepPartKind.step_communication) == 0


def test_hidden_collectives_slow_compute_by_nccl_share_of_the_sms():
    # FSDP over 4 A100 on NVLink: every micro-step gathers the bf16 weights twice and
    # reduce-scatters the gradients, all behind compute but the first unit of each pass;
    # NCCL's 24 blocks hold 24 of the 108 SMs meanwhile
    model = load_model("meta-llama/Llama-2-7b-hf")
    card = {"gpus_per_node": 4, "gpu_name": "A100 80GB", "compute_capability": 8.0,
            "intra_node_bandwidth": 300e9}  # fmt: skip
    plan = Plan(model=model, strategy="fsdp", hardware=card, checkpointing="full", grad_accum=2)
    timed = step_time(plan)
    trainable = estimate(plan).parameters.trainable
    weights, grads = payloads(plan, trainable)
    intra, inter = volume(plan, plan.strategy, trainable)
    assert inter == 0
    each = intra / (NCCL_NVLINK_SHARE * 300e9) / 2  # per micro-step, NCCL's rings at 240 GB/s
    gather = each * weights / (2 * weights + grads)
    units = model.architecture.num_layers
    exposed = gather / units + (each - gather) / units  # the compute hides all but these
    assert timed.part(StepPartKind.communication) == pytest.approx(2 * exposed)
    assert timed.part(StepPartKind.contention) == pytest.approx(2 * (each - exposed) * 24 / 108)
    # over PCIe NCCL keeps 2 channels, and one GPU has no collectives to contend with
    pcie = step_time(plan.evolve(hardware={"intra_node_bandwidth": 32e9}))
    hidden = 2 * (each * NCCL_NVLINK_SHARE * 300 / 32 - pcie.part(StepPartKind.communication) / 2)
    assert pcie.part(StepPartKind.contention) == pytest.approx(hidden * 2 / 108)
    alone = step_time(Plan(model=model, strategy="ddp", hardware={"gpus_per_node": 1}))
    assert alone.part(StepPartKind.contention) == 0


def test_tp_collectives_follow_the_stacks_tensor_parallel_plan():
    llama = load_model("meta-llama/Llama-2-7b-hf")  # 32 layers, h 4096, vocab 32000
    arch = llama.architecture
    # Megatron-LM (and torch's PrepareModuleInput): one collective before and one after each
    # of attention and the MLP, each way
    assert tensor_parallel_passes(arch, TensorParallelPlan()) == (4, 4)
    # each of q, k, v, gate and up gathering its own sequence-sharded input: 5 + 2 each way
    per_projection = TensorParallelPlan(per_projection=True)
    assert tensor_parallel_passes(arch, per_projection) == (7, 7)
    # replicated between blocks: the two all-reduces forward, one per projection backward
    replicated = TensorParallelPlan(per_projection=True, sequence_parallel=False)
    assert tensor_parallel_passes(arch, replicated) == (4, 10)
    # GPT-2's fused c_attn and c_fc: one column-parallel input per sublayer, Megatron's count
    gpt2 = load_model("openai-community/gpt2").architecture
    assert tensor_parallel_passes(gpt2, per_projection) == (4, 4)
    # the bytes: b 1, s 4096, bf16, t 2: a pass sends 1/2 of 4096 x 4096 x 2 B per GPU, and
    # transformers' lm_head "colwise_gather_output" gathers the 4096 x 32000 logits once
    card = {"gpus_per_node": 4, "gpu_name": "H100 80GB SXM", "compute_capability": 9.0}
    generic = Plan(model=llama, hardware=card, tp=2)
    fsdp2 = generic.evolve(stack="fsdp2")
    one_pass = 4096 * 4096 * 2 / 2
    assert estimate(generic).communication.tensor_parallel_bytes == 32 * 8 * one_pass
    logits = 4096 * 32000 * 2 / 2
    assert estimate(fsdp2).communication.tensor_parallel_bytes == 32 * 14 * one_pass + logits
    # the user's style over the stack's: under full recomputation the forward's collectives
    # run again, 7 per layer gathering sequence-sharded inputs, 4 replicated
    recomputed = fsdp2.evolve(checkpointing="full")
    kempner = recomputed.evolve(tp_style="per-projection")
    assert estimate(recomputed).communication.tensor_parallel_bytes == 32 * 18 * one_pass + logits
    assert estimate(kempner).communication.tensor_parallel_bytes == 32 * 21 * one_pass + logits
    # ... and the loss runs on the whole vocabulary on every rank, as without tp
    alone = fsdp2.evolve(tp=1)
    loss = step_time(fsdp2).part(StepPartKind.loss)
    assert loss == pytest.approx(step_time(alone).part(StepPartKind.loss))
    assert step_time(generic).part(StepPartKind.loss) == pytest.approx(loss / 2)


def test_gradients_travel_in_the_reduce_dtype():
    # FSDP2's MixedPrecisionPolicy(reduce_dtype=float32) (torchtitan's and KempnerForge's):
    # the reduce-scatter sends 4 B per gradient where accelerate's bf16 policy sends 2
    llama = load_model("meta-llama/Llama-2-7b-hf")
    plan = Plan(model=llama, stack="fsdp2", hardware={"gpus_per_node": 4})
    trainable = estimate(plan).parameters.trainable
    weights, grads = payloads(plan, trainable)
    assert grads == 2 * trainable
    assert payloads(plan.evolve(reduce_dtype="fp32"), trainable) == (weights, 4 * trainable)
    # FSDP's three passes per micro-step: 2 weights + 1 gradients, the gradients doubled
    base = sum(volume(plan, plan.strategy, trainable))
    fp32 = sum(volume(plan.evolve(reduce_dtype="fp32"), plan.strategy, trainable))
    assert fp32 == pytest.approx(base * 4 / 3)
    assert step_time(plan.evolve(reduce_dtype="fp32")).seconds > step_time(plan).seconds


def test_offload_crosses_the_host_link_and_steps_on_the_cpu():
    model = load_model("meta-llama/Llama-2-7b-hf")
    base = Plan(model=model, strategy="zero3")
    none = step_time(base)
    opt = step_time(base.evolve(offload="optimizer"))
    params = step_time(base.evolve(offload="params"))
    assert none.seconds < opt.seconds <= params.seconds
    assert opt.part(StepPartKind.optimizer) > 5 * none.part(StepPartKind.optimizer)
    # the CPU step over the host's memory, then the 16-bit shard back over PCIe: DeepSpeed's
    # fused CPU Adam moves 28 B per fp32 parameter, torch's AdamW on CPU tensors (FSDP's
    # offload) runs its eight operations unfused: 84 B
    local = estimate(base).parameters.trainable / 8
    host = 2 * 307.2e9 / 8
    for strategy, moved in (("zero3", 28), ("fsdp", 84)):
        timed = step_time(base.evolve(strategy=strategy, offload="optimizer"))
        assert timed.part(StepPartKind.optimizer) == pytest.approx(
            local * moved / host + local * 2 / H100.host_link
        )


def test_mfu_and_tokens_per_second_are_consistent():
    timed = step_time(Plan(model=load_model("meta-llama/Llama-2-7b-hf")))
    assert timed.seconds == pytest.approx(sum(p.seconds for p in timed.parts))
    assert timed.mfu == pytest.approx(timed.model_flops / timed.seconds / timed.peak_flops)
    assert timed.tokens_per_second_per_gpu == pytest.approx(
        timed.tokens_per_step / timed.seconds / 8
    )
    assert 0 < timed.mfu < H100.matmul_ceiling  # nothing beats the best matmul
    assert timed.peak_flops == PEAK and timed.card == H100.name and not timed.card_assumed
    assert timed.seconds_for_tokens(timed.tokens_per_step * 10 + 1) == pytest.approx(
        11 * timed.seconds
    )


def test_every_card_has_its_datasheet_figures():
    for card in GPUS.values():
        assert card.fp16_flops > card.fp32_flops > 0, card.key
        assert card.memory_bandwidth > 0 and card.host_link > 0, card.key
        assert card.bf16_flops in (0, card.fp16_flops), card.key  # dense bf16 = fp16
        assert 0 < card.matmul_ceiling <= 1, card.key
        assert card.sms > 0, card.key
    # the datasheets' dense figures (sparse ones are twice these)
    assert GPUS["a100-80gb"].bf16_flops == 312e12
    assert GPUS["h100-sxm"].fp8_flops == 1979e12
    assert GPUS["h200"].memory_bandwidth == 4.8e12
    assert GPUS["v100-32gb"].bf16_flops == 0  # no bf16 tensor cores: fp32 rate
    # the whitepapers' SMs: A100 108, H100 SXM5 132 (PCIe 114), AD102 as the 4090 128
    assert (GPUS["a100-80gb"].sms, GPUS["h100-sxm"].sms, GPUS["h100-pcie"].sms) == (108, 132, 114)
    assert GPUS["rtx4090"].sms == 16384 // 128  # CUDA cores over Ada's 128 per SM
    v100 = Plan(
        model=ModelSpec.from_architecture("gpt-test", GPT),
        hardware={"gpu_name": "V100 32GB", "compute_capability": 7.0},
    )
    assert step_time(v100).peak_flops == GPUS["v100-32gb"].fp32_flops


def test_rtx4090_matmul_ceiling_is_its_published_best_matmul():
    # torch.mm bf16 on six RTX 4090 24GB (zzc0721/torch-performance-test-data database.md
    # @9d828276), TFLOPS: their median over the Ada whitepaper's 165.2 dense peak
    measured = (170.06, 173.31, 162.39, 163.09, 165.71, 164.81)
    card = GPUS["rtx4090"]
    assert statistics.median(measured) * 1e12 / card.bf16_flops == pytest.approx(1.0, abs=0.005)
    assert card.matmul_ceiling == 1.0
    # a compute-bound matmul runs at the datasheet peak, not at H100's 80.3% share
    wide = matmul_seconds(8192, 8192, 8192, 2, card.bf16_flops * card.matmul_ceiling, 1008e9)
    assert wide == pytest.approx(2 * 8192**3 / 165.2e12)


def test_a_card_is_found_by_its_nvml_name():
    assert card_of("NVIDIA H100 80GB HBM3", 9.0, 81559 * 2**20) == (GPUS["h100-sxm"], False)
    assert card_of("NVIDIA H100 PCIe", 9.0, 81559 * 2**20)[0] is GPUS["h100-pcie"]
    assert card_of("NVIDIA L40S", 8.9, 46068 * 2**20)[0] is GPUS["l40s"]
    assert card_of("NVIDIA A100-SXM4-40GB", 8.0, 40960 * 2**20)[0] is GPUS["a100-40gb"]
    # a bare size: the nearest preset of the same compute capability, said to be assumed
    assert card_of("80GB GPU", 8.0, 80 * 10**9) == (GPUS["a100-80gb"], True)


def test_levers_are_priced_in_time_with_the_right_sign():
    model = load_model("meta-llama/Llama-2-7b-hf")
    report = estimate(Plan(model=model, attention="eager", micro_batch=4))
    by_name = {lever.name.split(" (")[0]: lever for lever in report.levers}
    for lever in report.levers:
        assert (lever.seconds_change is None) == lever.applied
    assert by_name["Activation checkpointing"].seconds_change > 0
    assert by_name["CPU offload of optimizer state"].seconds_change > 0
    assert by_name["FlashAttention"].seconds_change < 0  # no s x s scores through memory
    assert by_name["8-bit AdamW"].seconds_change < 0  # fewer bytes in the step
    checkpoint = by_name["Activation checkpointing"]
    pulled = step_time(Plan(model=model, attention="eager", micro_batch=4, checkpointing="full"))
    assert checkpoint.seconds_change == pytest.approx(pulled.seconds - report.step_time.seconds)
    assert checkpoint.percent_change == pytest.approx(
        100 * checkpoint.seconds_change / report.step_time.seconds
    )


def test_a_shorter_sequence_is_priced_for_the_same_tokens():
    plan = Plan(model=load_model("meta-llama/Llama-2-7b-hf"), seq_len=8192)
    lever = next(lv for lv in estimate(plan).levers if lv.name.startswith("Sequence"))
    half = plan.evolve(seq_len=4096)
    per_token = step_time(plan).tokens_per_step
    assert lever.seconds_change == pytest.approx(
        (seconds_per_token(half) - seconds_per_token(plan)) * per_token
    )
    assert lever.seconds_change < 0  # less of the s^2 term per token


def test_levers_by_efficiency_put_most_bytes_per_percent_first():
    report = estimate(Plan(model=load_model("meta-llama/Llama-2-13b-hf"), strategy="ddp"))
    ranked = ordered(report.levers, LeverOrder.efficiency)
    assert sorted(ranked, key=id) == sorted(report.levers, key=id)
    pending = [lv for lv in ranked if not lv.applied and lv.saves_bytes]
    rates = [lv.bytes_per_percent for lv in pending]
    assert rates == sorted(rates, reverse=True)
    memory = [lv.saves_bytes for lv in ordered(report.levers, LeverOrder.memory) if not lv.applied]
    assert memory == sorted(memory, reverse=True)


def run(capsys: pytest.CaptureFixture[str], *flags: str) -> dict:
    assert main(["estimate", "--model", "meta-llama/Llama-2-7b-hf", *flags, "--json"]) == 0
    return json.loads(capsys.readouterr().out)


def test_json_has_the_step_time_and_each_part(capsys):
    out = run(capsys, "--stack", "generic", "--tokens", "2B")
    st = out["step_time"]
    for key in ("seconds", "micro_step_seconds", "tokens_per_second_per_gpu", "mfu", "parts"):
        assert key in st
    assert [p["kind"] for p in st["parts"]] == [k.value for k in StepPartKind]
    assert sum(p["seconds"] for p in st["parts"]) == pytest.approx(st["seconds"])
    steps = -(-2 * 10**9 // st["tokens_per_step"])
    assert out["time_for_tokens"] == {
        "tokens": 2 * 10**9,
        "steps": steps,
        "seconds": pytest.approx(steps * st["seconds"]),
    }
    for lever in out["levers"]:
        assert ("seconds_change" in lever) and ("percent_change" in lever)
    assert run(capsys, "--stack", "generic")["time_for_tokens"] is None


@pytest.mark.parametrize("order", list(LeverOrder))
def test_levers_by_flag_orders_the_json(capsys, order):
    out = run(capsys, "--stack", "generic", "--levers-by", order.value)
    report = estimate(Plan(model=load_model("meta-llama/Llama-2-7b-hf")))
    assert [lv["name"] for lv in out["levers"]] == [lv.name for lv in ordered(report.levers, order)]


def test_tokens_must_be_positive(capsys):
    assert main(["estimate", "--tokens", "0"]) == 2
    assert "--tokens 0" in capsys.readouterr().err


def test_text_shows_the_step_time_block(capsys):
    argv = ["estimate", "--model", "meta-llama/Llama-2-7b-hf", "--stack", "generic"]
    assert main([*argv, "--tokens", "1B"]) == 0
    text = capsys.readouterr().out
    assert "Step time on H100 80GB SXM" in text
    assert "tokens/s per GPU" in text and "MFU" in text
    assert "1B tokens:" in text and "optimizer steps" in text
    assert "Step time" in text.split("Levers")[1]  # the levers' time column
