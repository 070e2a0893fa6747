"""Every stack's books, checked against figures derived here from the stack's own source code
(the file and function are named beside each expectation), never from memtui's constants.

The model is Llama-2-7B, whose shape is read off its config.json below; the runtime overhead
is off unless a test is about it, so each term is the stack's tensors alone.
"""

from __future__ import annotations

import math

import pytest

from memtui.estimator import (
    Checkpointing,
    Hardware,
    LossKind,
    Method,
    Offload,
    Optimizer,
    OverheadSettings,
    Plan,
    Precision,
    StackName,
    Strategy,
    TermKind,
    breakdown,
    estimate,
)
from memtui.estimator.capabilities import CAPABILITIES
from memtui.estimator.model_source import load_model
from memtui.estimator.stacks import STACKS
from memtui.estimator.versions import PackageVersion

LLAMA2_7B = load_model("meta-llama/Llama-2-7b-hf")
# meta-llama/Llama-2-7b-hf config.json: hidden_size, intermediate_size, num_hidden_layers,
# vocab_size; untied embeddings, RMSNorm without bias, no linear biases
H, INNER, LAYERS, VOCAB = 4096, 11008, 32, 32000
LAYER = 4 * H * H + 3 * H * INNER + 2 * H  # q, k, v, o; gate, up, down; two norms
P = LAYERS * LAYER + 2 * VOCAB * H + H  # + embed_tokens, lm_head, the final norm
QUANTIZED = LAYERS * (4 * H * H + 3 * H * INNER)  # the linears bitsandbytes makes 4-bit
# PEFT LoRA r=16 on all-linear (q, k, v, o, gate, up, down): r (d_in + d_out) per linear
ADAPTERS = LAYERS * 16 * (4 * (H + H) + 2 * (H + INNER) + (INNER + H))
N = 8


def plan(**update: object) -> Plan:
    fields: dict[str, object] = {
        "model": LLAMA2_7B,
        "hardware": Hardware(gpus_per_node=N),
        "overhead": OverheadSettings(enabled=False),
        "seq_len": 1024,
        "micro_batch": 1,
        **update,
    }
    return Plan(**fields)  # type: ignore[arg-type]


def one_gpu(**update: object) -> Plan:
    return plan(hardware=Hardware(gpus_per_node=1), **update)


def state(p: Plan) -> tuple[int, int, int, int]:
    """(weights, gradients, master weights, optimizer states) bytes per GPU."""
    t = breakdown(p).terms
    return (
        t[TermKind.weights],
        t[TermKind.gradients],
        t[TermKind.master_weights],
        t[TermKind.optimizer_states],
    )


def test_the_shape_read_here_is_the_published_parameter_count():
    # Llama 2 paper, Table 1 / the model card: 6,738,415,616 parameters
    assert P == LLAMA2_7B.parameters == 6_738_415_616
    assert ADAPTERS == 39_976_960  # PEFT's print_trainable_parameters for r=16 all-linear


# -- generic ------------------------------------------------------------------------------


def test_generic_keeps_the_zero_papers_16_bytes_per_parameter():
    # ZeRO paper sec. 3: mixed-precision Adam keeps 2 (bf16 weights) + 2 (bf16 gradients)
    # + 12 (fp32 master, momentum, variance) bytes per parameter, all whole under DDP
    p = one_gpu(stack=StackName.generic, strategy=Strategy.ddp)
    assert state(p) == (2 * P, 2 * P, 4 * P, 8 * P)


# -- DeepSpeed ------------------------------------------------------------------------------


def deepspeed(strategy: Strategy, **update: object) -> Plan:
    return plan(stack=StackName.deepspeed, strategy=strategy, **update)


def test_deepspeed_zero2_bf16_books():
    # runtime/engine.py _cast_module_mixed_precision: the module is cast to bf16 (whole, the
    # weights are not partitioned before stage 3); runtime/zero/stage_1_and_2.py
    # DeepSpeedZeroOptimizer: single_partition_of_fp32_groups is this rank's 1/N fp32 copy,
    # Adam's exp_avg and exp_avg_sq live on it (fp32), and stage 2 keeps only this rank's
    # partition of the bf16 gradients (partition_gradients)
    assert state(deepspeed(Strategy.zero2)) == (2 * P, 2 * P // N, 4 * P // N, 8 * P // N)


def test_deepspeed_zero1_keeps_whole_bf16_gradients():
    # stage 1 partitions the optimizer state only: param.grad stays whole until
    # reduce_gradients (stage_1_and_2.py, partition_gradients False)
    assert state(deepspeed(Strategy.zero1)) == (2 * P, 2 * P, 4 * P // N, 8 * P // N)


def test_deepspeed_zero3_partitions_all_but_parameters_under_the_persistence_threshold():
    # runtime/zero/parameter_offload.py mark_persistent_parameters: a parameter of at most
    # stage3_param_persistence_threshold elements is never partitioned ("auto" = 10 hidden
    # in transformers' integrations/deepspeed.py trainer_config_finalize). In Llama-2-7B
    # that is the 2 L + 1 RMSNorm weights of H elements; everything else is 1/N in bf16
    persistent = (2 * LAYERS + 1) * H
    weights = 2 * persistent + 2 * (P - persistent) / N
    w, g, m, o = state(deepspeed(Strategy.zero3))
    assert w == round(weights)
    assert (g, m, o) == (2 * P // N, 4 * P // N, 8 * P // N)
    # a threshold of 0 partitions every parameter
    w0, *_ = state(deepspeed(Strategy.zero3, deepspeed={"persistence_threshold": 0}))
    assert w0 == 2 * P // N
    # "auto" is 10 hidden: the same figure as the threshold given explicitly
    explicit = deepspeed(Strategy.zero3, deepspeed={"persistence_threshold": 10 * H})
    assert state(explicit)[0] == w


def transient(p: Plan) -> tuple[int, int, int]:
    t = breakdown(p).transient
    return t.persistent, t.backward, t.step


def test_deepspeed_reduce_bucket_is_hidden_squared_bf16_elements_doubled_with_overlap_comm():
    # transformers integrations/deepspeed.py HfTrainerDeepSpeedConfig.trainer_config_finalize:
    # reduce_bucket_size "auto" = hidden_size * hidden_size elements
    auto = transient(deepspeed(Strategy.zero2))
    assert auto == transient(deepspeed(Strategy.zero2, deepspeed={"reduce_bucket_size": H * H}))
    # stage_1_and_2.py DeepSpeedZeroOptimizer.backward: with contiguous_gradients (default)
    # ipg_buffer holds one torch.empty(reduce_bucket_size, dtype=bf16), a second one
    # (buf_1) with overlap_comm: each extra element is 2 bytes, twice with overlap
    more = 1_000_000
    bigger = deepspeed(Strategy.zero2, deepspeed={"reduce_bucket_size": H * H + more})
    assert transient(bigger)[1] - auto[1] == 2 * more
    overlap = deepspeed(Strategy.zero2, deepspeed={"overlap_comm": True})
    assert transient(overlap)[1] - auto[1] == 2 * H * H
    both = deepspeed(
        Strategy.zero2, deepspeed={"overlap_comm": True, "reduce_bucket_size": H * H + more}
    )
    assert transient(both)[1] - transient(overlap)[1] == 2 * 2 * more


def test_deepspeed_overlap_comm_defaults_on_for_zero3_only():
    # runtime/zero/config.py DeepSpeedZeroConfig.overlap_comm_valid: None becomes
    # stage == 3. (No allgather buffer either way: runtime/utils.py all_gather_dp_groups
    # gathers straight into the bf16 flat groups with all_gather_into_tensor, so
    # allgather_bucket_size allocates nothing on current torch.)
    for strategy, default in ((Strategy.zero2, False), (Strategy.zero3, True)):
        given = deepspeed(strategy, deepspeed={"overlap_comm": default})
        assert transient(deepspeed(strategy)) == transient(given)
        other = deepspeed(strategy, deepspeed={"overlap_comm": not default})
        if strategy is Strategy.zero2:
            assert transient(other) != transient(given)


def test_deepspeed_step_upcasts_the_local_gradient_partition_to_fp32():
    # stage_1_and_2.py step: single_grad_partition = flatten(averaged_gradients).to(fp32)
    # before the optimizer runs (FusedAdam allocates nothing of its own): 4 B per element of
    # this rank's partition
    assert transient(deepspeed(Strategy.zero2))[2] == 4 * P // N


def test_deepspeed_zero3_gathered_parameters_follow_prefetch_and_max_live():
    # "auto" stage3_prefetch_bucket_size = 0.9 hidden^2 (integrations/deepspeed.py), the
    # same figure as that bucket given explicitly
    auto = transient(deepspeed(Strategy.zero3))
    explicit = deepspeed(Strategy.zero3, deepspeed={"prefetch_bucket_size": int(0.9 * H * H)})
    assert transient(explicit) == auto
    # partitioned_param_coordinator.py fetch_sub_module: no more than
    # stage3_max_live_parameters gathered elements (bf16) are alive at once
    small = transient(deepspeed(Strategy.zero3, deepspeed={"max_live_parameters": 10**6}))
    larger = transient(deepspeed(Strategy.zero3, deepspeed={"max_live_parameters": 2 * 10**6}))
    assert larger[1] - small[1] == 2 * 10**6
    # at the cap's default (1e9) the largest module (a 32000 x 4096 embedding or lm_head)
    # plus the prefetch bucket is gathered: at least 2 bytes of each of their elements
    assert auto[1] >= 2 * (VOCAB * H + int(0.9 * H * H))


# -- FSDP2 and FSDP1 ------------------------------------------------------------------------


@pytest.mark.parametrize("stack", [StackName.fsdp2, StackName.fsdp1])
def test_fsdp_mixed_precision_shards_fp32_parameters_and_gradients(stack):
    # accelerate utils/fsdp_utils.py fsdp2_prepare_model (FSDP1: accelerator.py
    # prepare_model) upcasts trainable parameters to fp32; MixedPrecisionPolicy /
    # MixedPrecision(param_dtype=bf16) only casts the unsharded copies. The fp32 shard is the
    # master (4/N B), the reduce-scattered gradient is cast back to it (FSDP2
    # _fsdp_collectives.py foreach_reduce; FSDP1 _runtime_utils.py
    # _cast_grad_to_param_dtype): 4/N B, AdamW's moments on it 8/N B. Llama's every dimension
    # divides by 8, so dim-0 sharding pads nothing
    p = plan(stack=stack, strategy=Strategy.fsdp, precision=Precision.bf16_mixed)
    assert state(p) == (4 * P // N, 4 * P // N, 0, 8 * P // N)


@pytest.mark.parametrize("stack", [StackName.fsdp2, StackName.fsdp1])
def test_shard_grad_op_parameters_rest_sharded_too(stack):
    # FSDP2: fully_shard(reshard_after_forward=False) only keeps the unsharded parameters
    # from forward to backward (_fully_shard.py docstring). FSDP1: FlatParamHandle.shard()
    # runs for every sharded strategy (_flat_param.py uses_sharded_strategy includes
    # SHARD_GRAD_OP): the fp32 _local_shard is 1/N; _should_free_in_backward frees the bf16
    # _full_param_padded after backward. So the static state is full sharding's
    full = plan(stack=stack, strategy=Strategy.fsdp)
    grad_op = plan(stack=stack, strategy=Strategy.fsdp_shard_grad_op)
    assert state(grad_op) == state(full)
    # ... and from forward to backward every unit's bf16 flat parameter stays gathered: the
    # whole model's 2 bytes per parameter beyond full sharding's buffers
    assert transient(grad_op)[1] >= 2 * P


def test_fsdp1_gathers_flat_parameters_two_units_at_a_time():
    # FSDP1 through accelerate: limit_all_gathers=True (_limiter_utils.py _FreeEventQueue:
    # at most two all-gathers in flight), the root unit (embeddings, final norm, lm_head)
    # is not resharded after forward. Under SHARD_GRAD_OP the other L - 2 layers' bf16 flat
    # parameters (_full_param_padded) stay gathered too: exactly 2 (L - 2) LAYER bytes more
    full = transient(plan(stack=StackName.fsdp1, strategy=Strategy.fsdp))
    grad_op = transient(plan(stack=StackName.fsdp1, strategy=Strategy.fsdp_shard_grad_op))
    assert grad_op[1] - full[1] == 2 * (LAYERS - 2) * LAYER
    # the root unit and two layers, in bf16, at least
    assert full[1] >= 2 * (2 * VOCAB * H + H + 2 * LAYER)
    # one GPU: FSDP shards over one rank and gathers nothing
    assert transient(one_gpu(stack=StackName.fsdp1, strategy=Strategy.fsdp))[1] == 0


def test_fsdp1_leaves_bitsandbytes_quant_state_whole_on_every_gpu():
    # bitsandbytes nn/modules.py: the absmax constants are Params4bit.quant_state, no parameter
    # or buffer, so FSDP1's FlatParamHandle never shards them and CPUOffload never moves them;
    # double quantization keeps 8 bits per block of 64 and one fp32 constant per 256 blocks
    qs = QUANTIZED * (8 / 64 + 32 / (64 * 256)) / 8
    fsdp1 = {"stack": StackName.fsdp1, "method": Method.qlora, "strategy": Strategy.fsdp}
    offloaded = state(plan(offload=Offload.params, **fsdp1))
    assert offloaded[0] == round(qs)
    sharded = state(plan(**fsdp1))[0]
    # FSDP2 (fully_shard) gives the same plan's weights without a whole quant_state
    fsdp2 = state(plan(**{**fsdp1, "stack": StackName.fsdp2}))[0]
    assert sharded - fsdp2 == pytest.approx(qs * (1 - 1 / N), abs=2)


@pytest.mark.parametrize("stack", [StackName.fsdp2, StackName.fsdp1])
def test_fsdp_no_sync_accumulates_unsharded_gradients(stack):
    # accelerate's gradient accumulation runs the model under no_sync (Accelerator.no_sync):
    # FSDP1's FullyShardedDataParallel.no_sync "will accumulate the full model gradients
    # (instead of gradient shards)"; FSDP2 set_requires_gradient_sync(False) keeps each
    # FSDPParam's unsharded gradient. bf16 (param_dtype): 2 bytes per parameter
    one = transient(plan(stack=stack, strategy=Strategy.fsdp, grad_accum=1))
    four = transient(plan(stack=stack, strategy=Strategy.fsdp, grad_accum=4))
    assert one[0] == 0
    assert four[0] == 2 * P


def test_fsdp2_holds_the_running_unit_and_the_prefetched_next_one():
    # fully_shard: the running layer's bf16 unsharded parameters and the next one prefetched
    # (FSDPParamGroup.wait_for_unshard / _backward_prefetch), not the whole model
    full = transient(plan(stack=StackName.fsdp2, strategy=Strategy.fsdp))
    assert 2 * 2 * LAYER <= full[1] < 2 * P / 4


def test_fsdp2_lora_keeps_the_frozen_base_in_bf16_and_adapters_in_fp32():
    # accelerate upcasts only trainable parameters (fsdp2_prepare_model: the model's
    # requires_grad parameters to fp32); the frozen base is sharded as loaded (bf16)
    p = plan(stack=StackName.fsdp2, strategy=Strategy.fsdp, method=Method.lora)
    w, g, m, o = state(p)
    assert w == round((2 * P + 4 * ADAPTERS) / N)
    assert (g, m, o) == (round(4 * ADAPTERS / N), 0, round(8 * ADAPTERS / N))


# -- Trainer + accelerate + PEFT ------------------------------------------------------------


def test_trainer_peft_lora_adapters_are_fp32():
    # peft get_peft_model(autocast_adapter_dtype=True) -> tuners_utils cast_adapter_dtype:
    # LoRA A and B in fp32 over a bf16 base; torch.optim.AdamW (adamw_torch_fused) keeps
    # its moments like the parameter (optim/adam.py _init_group: zeros_like(p)); no master
    p = one_gpu(stack=StackName.trainer, strategy=Strategy.ddp, precision=Precision.bf16,
                method=Method.lora)  # fmt: skip
    assert state(p) == (2 * P + 4 * ADAPTERS, 4 * ADAPTERS, 0, 8 * ADAPTERS)


def test_trainer_qlora_prepare_model_for_kbit_training_upcasts_the_rest_to_fp32():
    # peft utils/other.py prepare_model_for_kbit_training: every non-Params4bit parameter in
    # fp16/bf16 is cast to fp32: embeddings, lm_head and the norms, P - QUANTIZED elements,
    # 2 bytes more each than left in bf16
    base = {"stack": StackName.trainer, "strategy": Strategy.ddp, "precision": Precision.bf16}
    up = state(one_gpu(method=Method.qlora, qlora_upcast=True, **base))
    bf16 = state(one_gpu(method=Method.qlora, qlora_upcast=False, **base))
    assert up[0] - bf16[0] == 2 * (P - QUANTIZED)
    # the 4-bit linears: NF4 codes, 4 bits, plus double-quantized absmax, 8 bits per block of
    # 64 and one fp32 constant per 256 blocks (QLoRA paper sec. 3: 4.127 bits)
    nf4 = QUANTIZED * (4 + 8 / 64 + 32 / (64 * 256)) / 8
    assert up[0] == round(nf4) + 4 * (P - QUANTIZED) + 4 * ADAPTERS


def test_trainer_full_fp32_weights_under_autocast_have_no_master_and_ddp_buckets():
    # bf16=True on a model loaded without torch_dtype: fp32 weights are the optimizer's own
    # (training_args.py: bf16 only turns on autocast), fp32 gradients and moments
    p = plan(stack=StackName.trainer, strategy=Strategy.ddp, precision=Precision.bf16_autocast)
    assert state(p) == (4 * P, 4 * P, 0, 8 * P)
    # torch DDP without gradient_as_bucket_view (accelerate passes only non-default kwargs)
    # keeps its buckets beside the gradients for the whole step: another fp32 gradient set
    assert transient(p)[0] == 4 * P
    assert transient(one_gpu(stack=StackName.trainer, strategy=Strategy.ddp,
                             precision=Precision.bf16_autocast))[0] == 0  # fmt: skip


def test_trainer_modules_to_save_copy_keeps_the_base_dtype():
    # peft ModulesToSaveWrapper: a trainable deepcopy of lm_head in the base's dtype (bf16),
    # beside the frozen original; its gradient and AdamW moments in bf16 as well
    base = {"stack": StackName.trainer, "strategy": Strategy.ddp, "precision": Precision.bf16,
            "method": Method.lora}  # fmt: skip
    without = state(one_gpu(**base))
    with_head = state(one_gpu(modules_to_save=("lm_head",), **base))
    head = VOCAB * H
    assert [a - b for a, b in zip(with_head, without, strict=True)] == [
        2 * head, 2 * head, 0, 2 * 2 * head
    ]  # fmt: skip


# -- torchtune ------------------------------------------------------------------------------


def torchtune(**update: object) -> Plan:
    update = {"loss": LossKind.chunked, **update}
    return one_gpu(stack=StackName.torchtune, strategy=Strategy.ddp, precision=Precision.bf16,
                   **update)  # fmt: skip


def test_torchtune_pure_bf16_has_no_master_and_bf16_moments():
    # recipes/full_finetune_single_device.py: training.set_default_dtype(bf16) builds the
    # model in bf16; torch.optim.AdamW(fused=True) keeps zeros_like(param) moments: bf16
    assert state(torchtune()) == (2 * P, 2 * P, 0, 4 * P)


def test_torchtune_optimizer_in_backward_frees_each_gradient_in_its_hook():
    # training/memory.py register_optim_in_bwd_hooks: each parameter's optimizer steps and
    # zero_grad(set_to_none) in its post-accumulate-grad hook: at most the largest gradient
    # (the 32000 x 4096 embedding or lm_head, bf16) is alive, not 2 P bytes
    _, g, _, _ = state(torchtune(optimizer_in_backward=True))
    assert g == 2 * VOCAB * H


def test_torchtune_chunked_cross_entropy_upcasts_one_chunk_at_a_time():
    # modules/loss/ce_chunked_output_loss.py CEWithChunkedOutputLoss (num_output_chunks=8):
    # each chunk is .float()-ed and cross_entropy'd; log_softmax saves its fp32 output for
    # every chunk (4 B per logit) until backward, which then works one chunk at a time:
    # the fp32 gradient of the log-probs, of the logits, and the bf16 gradient (4 + 4 + 2 B
    # per logit of one chunk). The recipe dels the bf16 logits before backward
    s, b = 1024, 1
    logits = s * b * VOCAB
    expected = 4 * logits + 10 * math.ceil(logits / 8)
    assert breakdown(torchtune(seq_len=s, micro_batch=b)).terms[TermKind.logits] == expected
    # no 4 B fp32 copy of every logit and its gradients as with the whole-logits loss
    assert expected < 12 * logits


def test_torchtune_whole_logits_loss_runs_on_the_models_fp32_logits():
    # modules/transformer.py TransformerDecoder.forward (v0.1.0-v0.6.1): without output chunks
    # `output = self.output(h).float()`, so torch.nn.CrossEntropyLoss keeps fp32 log-probs and
    # its backward fp32 gradients: 3 x 4 B per logit. Before v0.3.0 the train loop also keeps
    # `logits[..., :-1, :].contiguous()` (fp32) through backward: 4 B more (recipes/
    # full_finetune_distributed.py v0.1.0-v0.2.1); v0.3.0 shifts the labels and dels the logits
    s, b = 1024, 1
    logits = s * b * VOCAB
    current = breakdown(torchtune(seq_len=s, micro_batch=b, loss=LossKind.full))
    assert current.terms[TermKind.logits] == 12 * logits
    old = {"torchtune": PackageVersion(version="0.1.1", source="a test")}
    kept = breakdown(torchtune(seq_len=s, micro_batch=b, loss=LossKind.full, versions=old))
    assert kept.terms[TermKind.logits] == 16 * logits


def test_torchtune_activation_offloading_pins_every_checkpointed_layer_input():
    # training/_activation_offloading.py OffloadActivations: with activation checkpointing
    # the tensors saved for backward are each layer's input (b s H, bf16 in a pure-bf16
    # recipe), copied to pinned CPU memory: L b s H 2 bytes of host RAM per GPU
    s, b = 2048, 2
    on = torchtune(seq_len=s, micro_batch=b, checkpointing=Checkpointing.full,
                   activation_offload=True)  # fmt: skip
    off = on.evolve(activation_offload=False)
    assert breakdown(on).cpu_bytes - breakdown(off).cpu_bytes == LAYERS * b * s * H * 2
    assert breakdown(on).terms[TermKind.activations] < breakdown(off).terms[TermKind.activations]


# -- every stack ---------------------------------------------------------------------------


def runnable(stack: StackName) -> Plan:
    """Llama-2-7B LoRA on 8 GPUs, with the stack's own strategy, precision and loss."""
    p = plan(method=Method.lora, optimizer=Optimizer.adamw)
    changes = STACKS[stack].suited(p.model_copy(update={"stack": stack}))
    return p.evolve(stack=stack, overhead={"enabled": True}, **changes)


@pytest.mark.parametrize("stack", list(StackName))
def test_allocated_reserved_and_device_totals_are_ordered_with_their_parts(stack):
    # what torch.cuda.max_memory_allocated counts <= max_memory_reserved (the caching
    # allocator's segments hold every allocation) <= what nvidia-smi shows (reserved + the
    # CUDA context and NCCL outside the allocator)
    report = estimate(runnable(stack))
    b = report.budget
    assert 0 < b.allocated < b.reserved < b.total
    outside = sum(r.bytes for r in report.runtime if r.where == "outside")
    reserve = sum(r.bytes for r in report.runtime if r.where == "reserved")
    assert b.total - b.reserved == outside > 0  # CUDA context + NCCL on 8 GPUs
    assert b.reserved - b.allocated == reserve
    assert [p.name for p in report.phases] == ["training step", "model loading",
                                               "checkpoint saving"]  # fmt: skip
    assert report.phases[0].gpu_bytes == b.total
    assert report.stack == CAPABILITIES[stack].label


@pytest.mark.parametrize("stack", list(StackName))
def test_the_strategies_table_marks_what_the_stack_cannot_run(stack):
    p = runnable(stack)
    report = estimate(p)
    for row in report.strategies:
        if row.strategy not in CAPABILITIES[stack].strategies:
            assert not row.applicable, (stack, row.strategy)
            assert f"the {stack.value} stack runs" in row.note
            assert (row.per_gpu_total, row.max_micro_batch) == (0, 0)
        elif row.strategy is p.strategy:
            assert row.applicable and row.per_gpu_total == report.budget.total


def test_torchtunes_multi_gpu_ddp_row_is_not_applicable():
    # torchtune's distributed recipes shard with FSDP (training/_distributed.py shard_model);
    # its single-device recipes are the only unsharded ones
    report = estimate(runnable(StackName.torchtune))
    ddp = next(r for r in report.strategies if r.strategy is Strategy.ddp)
    assert not ddp.applicable and "shard with FSDP" in ddp.note
    assert next(r for r in report.strategies if r.strategy is Strategy.fsdp).applicable


@pytest.mark.parametrize("stack", [StackName.fsdp2, StackName.fsdp1])
def test_shard_grad_op_loads_and_saves_like_a_sharded_model(stack):
    # parameters rest sharded under SHARD_GRAD_OP (above): loading places a shard and one
    # unit at a time, saving gathers FSDP's full state dict on rank 0 into CPU RAM
    full = estimate(plan(stack=stack, strategy=Strategy.fsdp)).phases
    grad_op = estimate(plan(stack=stack, strategy=Strategy.fsdp_shard_grad_op)).phases
    for a, b in zip(full[1:], grad_op[1:], strict=True):
        assert (a.name, a.cpu_bytes_per_node, a.source) == (b.name, b.cpu_bytes_per_node, b.source)
    assert grad_op[2].cpu_bytes_per_node > 4 * P  # fp32 parameters and moments, whole
