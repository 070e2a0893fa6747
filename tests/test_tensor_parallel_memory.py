"""Activation memory under tensor parallelism follows each stack's TP plan (never optimistic).

Llama-2-7B (h = 4096, f = 11008, 32 heads, 32 layers, V = 32000), s = 4096, b = 1, bf16,
flash attention, no checkpointing. One layer keeps per token (memtui.estimator.activations):
- on the residual stream (TpSplit.sequence): two RMSNorms, each its fp32 upcast 4096 * 4, its
  1/rms 4 and its normalized output 4096 * 2: 2 * 24,580 = 49,160 B;
- the column-parallel linears' inputs (TpSplit.gathered): QKV input and MLP input,
  2 * 4096 * 2 = 16,384 B;
- head- and MLP-width-sharded (TpSplit.shard): q, k, v 12,288 * 2, attention output
  4096 * 2, log-sum-exp 32 * 4, gate, SiLU, up and down inputs 4 * 11,008 * 2:
  24,576 + 8,192 + 128 + 88,064 = 120,960 B.
In all 186,504 B per token per layer on one GPU.
"""

from __future__ import annotations

from memtui.estimator import Hardware, OverheadSettings, Plan, Strategy, estimate
from memtui.estimator.activations import TpSplit, layer_saved
from memtui.estimator.choices import ReduceDtype, StackName, TensorParallelStyle
from memtui.estimator.model_source import load_model
from memtui.estimator.stacks import stack_for
from memtui.estimator.terms import TermKind

LLAMA2_7B = load_model("meta-llama/Llama-2-7b-hf")
TOKENS = 4096
LAYERS = 32
SEQUENCE, GATHERED, SHARD = 49_160, 16_384, 120_960


def _plan(**update: object) -> Plan:
    fields: dict[str, object] = {
        "model": LLAMA2_7B,
        "overhead": OverheadSettings(enabled=False),
        "stack": StackName.fsdp2,
        "strategy": Strategy.fsdp,
        "hardware": Hardware(gpus_per_node=8),
    }
    return Plan(**{**fields, **update})  # type: ignore[arg-type]


def _term(plan: Plan, kind: TermKind) -> int:
    return next(t.bytes for t in estimate(plan).budget.terms if t.key is kind)


def _per_token_by_split(plan: Plan) -> dict[TpSplit, int]:
    setup = stack_for(plan).setup(plan)
    split: dict[TpSplit, int] = dict.fromkeys(TpSplit, 0)
    for item in layer_saved(plan.model.architecture, setup):
        split[item.tp] += item.per_token * setup.dtype_bytes(item.dtype)
    return split


def test_the_layer_splits_as_the_docstring_counts() -> None:
    split = _per_token_by_split(_plan())
    assert split[TpSplit.sequence] == SEQUENCE
    assert split[TpSplit.gathered] == GATHERED
    assert split[TpSplit.shard] == SHARD
    assert split[TpSplit.whole] == 0


def test_one_gpu_per_model_copy_is_main_s_figure() -> None:
    # tp 1 divides nothing: main's digest (/tmp/digest_base4.jsonl) gives this plan's
    # activations as 24,581,881,856 B, of them the layers' 32 * 186,504 * 4096
    # = 24,445,452,288 B
    assert _term(_plan(), TermKind.activations) == 24_581_881_856
    assert LAYERS * (SEQUENCE + GATHERED + SHARD) * TOKENS == 24_445_452_288


def test_plain_tp_keeps_the_residual_stream_and_the_linear_inputs_whole() -> None:
    # fsdp2's own plan (transformers' tp_plan: ColwiseParallel / RowwiseParallel, no
    # sequence parallelism): only the sharded part is divided.
    # t = 2: per token per layer 49,160 + 16,384 + 120,960 / 2 = 126,024 B;
    # 32 * 126,024 * 4096 = 16,518,217,728 B
    tp2 = _term(_plan(tp=2), TermKind.activations)
    assert tp2 >= LAYERS * (SEQUENCE + GATHERED + SHARD // 2) * TOKENS == 16_518_217_728
    # t = 4: 49,160 + 16,384 + 30,240 = 95,784 B; 32 * 95,784 * 4096 = 12,554,600,448 B
    tp4 = _term(_plan(tp=4), TermKind.activations)
    assert tp4 >= LAYERS * (SEQUENCE + GATHERED + SHARD // 4) * TOKENS == 12_554_600_448
    # ... well above what dividing everything by t would give (24.6 GB / 4 = 6.1 GB)
    assert tp4 > 2 * _term(_plan(), TermKind.activations) // 4


def test_sequence_parallelism_splits_the_stream_but_keeps_the_gathered_inputs() -> None:
    # --tp-style megatron on fsdp2 (torchtitan's SequenceParallel norms): the norms shard the
    # sequence, but torch's ColwiseParallel all-gathers its input and F.linear saves it:
    # 49,160 / 2 + 16,384 + 60,480 = 101,444 B per token per layer at t = 2;
    # 32 * 101,444 * 4096 = 13,296,467,968 B
    plain = _term(_plan(tp=2), TermKind.activations)
    sp = _term(_plan(tp=2, tp_style=TensorParallelStyle.megatron), TermKind.activations)
    assert sp < plain
    assert sp >= LAYERS * (SEQUENCE // 2 + GATHERED + SHARD // 2) * TOKENS == 13_296_467_968
    # Megatron-LM itself (the generic stack) keeps the shard and re-gathers in backward:
    # everything divided, 186,504 / 2 = 93,252 B per token per layer
    generic = _term(_plan(tp=2, stack=StackName.generic), TermKind.activations)
    assert generic < sp
    assert generic >= LAYERS * (SEQUENCE + GATHERED + SHARD) // 2 * TOKENS


def test_logits_are_whole_unless_the_loss_is_vocab_parallel() -> None:
    # fsdp2's lm_head is colwise_gather_output: the logits and the loss's buffers are whole
    one = _term(_plan(), TermKind.logits)
    assert _term(_plan(tp=2), TermKind.logits) == one
    assert _term(_plan(tp=4, tp_style=TensorParallelStyle.megatron), TermKind.logits) == one
    # a vocab-parallel loss (the generic stack, Megatron's; torch loss_parallel) splits them:
    # 12 B per logit, 4096 * 32,000 * 12 = 1,572,864,000 B, halved at t = 2
    generic = _plan(stack=StackName.generic)
    assert _term(generic, TermKind.logits) == 1_572_864_000
    assert _term(_plan(stack=StackName.generic, tp=2), TermKind.logits) == 786_432_000


def test_an_fp32_reduce_dtype_allocates_an_fp32_reduce_scatter_input() -> None:
    # FSDP2 foreach_reduce: the reduce-scatter input takes the reduce dtype at the unsharded
    # gradients' size. At the lm_head's backward, the step's worst moment here, the tail unit
    # (final norm 4096 + lm_head 32,000 * 4096 = 131,076,096 parameters) has its bf16
    # gradients and that input: 2 more bytes each in fp32, 262,152,192 B.
    bf16 = _term(_plan(), TermKind.transient)
    fp32 = _term(_plan(reduce_dtype=ReduceDtype.fp32), TermKind.transient)
    assert fp32 - bf16 == 2 * 131_076_096
