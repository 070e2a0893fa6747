"""Bytes each GPU sends per optimizer step (ZeRO paper sec. 7; the 13B analysis, docs/references.md,
item 5).

A ring all-reduce sends 2(N-1)/N of the buffer per GPU; a reduce-scatter or an all-gather sends
(N-1)/N. DDP, ZeRO-1 and ZeRO-2 all move 2(N-1)/N of the gradients; ZeRO-3/FSDP gather the
weights in forward and again in backward and reduce-scatter the gradients: 1.5x DDP. The
pattern of each strategy is read from its spec (`strategies.py`), never from its name.
Tensor parallelism adds its own collectives of activations (`tensor_parallel_volume`).
"""

from __future__ import annotations

from dataclasses import replace

from memtui.estimator.architecture import Architecture, Role
from memtui.estimator.capabilities import CAPABILITIES, TensorParallelPlan
from memtui.estimator.choices import (
    Checkpointing,
    Method,
    ReduceDtype,
    Strategy,
    TensorParallelStyle,
)
from memtui.estimator.plan import Plan
from memtui.estimator.report import Communication
from memtui.estimator.state import StaticState, frozen_base_bytes
from memtui.estimator.strategies import strategy_spec


def payloads(plan: Plan, trainable: int) -> tuple[float, float]:
    """(weights, gradients): the bytes of one tensor-parallel rank's copy of the model's
    weights as they are gathered, and of its gradients as they are reduced."""
    wb = plan.precision.weight_bytes  # the weights travel in the parameter dtype
    # ZeRO-3/FSDP gather the weights as stored: under QLoRA the NF4 base (packed in its
    # bnb_4bit_quant_storage, one byte per two weights) and the upcast rest, not 2 B/param
    base = wb * plan.model.parameters if plan.method is Method.full else frozen_base_bytes(plan)
    weights = (base + (0 if plan.method is Method.full else wb * trainable)) / plan.tp
    # the gradients in the plan's reduce dtype: FSDP2 casts each unit's gradients to its
    # MixedPrecisionPolicy.reduce_dtype before the reduce-scatter (torch
    # distributed/fsdp/_fully_shard/_fsdp_collectives.py foreach_reduce, 2.4-2.13)
    gb = _REDUCE_BYTES.get(plan.reduce_dtype, wb)
    return weights, gb * trainable / plan.tp


_REDUCE_BYTES = {ReduceDtype.bf16: 2, ReduceDtype.fp32: 4}


def volume(plan: Plan, strategy: Strategy, trainable: int) -> tuple[float, float]:
    """(intra-node, inter-node) bytes sent per GPU per optimizer step."""
    weights, grads = payloads(plan, trainable)
    n, ga, nodes = plan.data_parallel, plan.grad_accum, plan.hardware.nodes
    if n == 1:
        return 0.0, 0.0
    how = strategy_spec(strategy)
    if how.hybrid:
        # HSDP: full sharding inside the group (a node), then the group's gradient shards are
        # all-reduced with their replicas on the other nodes once per step.
        g = how.shard_count(plan)
        intra = ga * (g - 1) / g * (2 * weights + grads)
        inter = 2 * (nodes - 1) / nodes * grads / g if nodes > 1 else 0.0
        return intra, inter
    ring = (n - 1) / n
    # A flat ring over nodes of g data-parallel GPUs: one link of each g crosses a node, and
    # NCCL spreads its channels (rings) over the node's NICs, one per GPU (rail-optimised
    # nodes): on average 1/g of what a GPU sends goes across, the rest over NVLink.
    g = max(1, plan.hardware.gpus_per_node // plan.tp)
    if how.shards_weights:
        # ZeRO-3 / FSDP: all-gather in forward and backward, reduce-scatter, per micro-batch.
        sent = ga * ring * (2 * weights + grads)
    elif how.shards_gradients:
        # Gradients are reduce-scattered every micro-batch (they are sharded), updated
        # parameters all-gathered once per step.
        sent = ring * (ga * grads + grads)
    else:
        # Gradients are all-reduced once per step (no_sync / accumulation boundary).
        sent = 2 * ring * grads
    return (sent * (g - 1) / g, sent / g) if nodes > 1 else (sent, 0.0)


# The column-parallel linears of a layer, which take the layer's (normed) input: one
# collective each when every projection brings in its own copy of it
_COLUMN_INPUTS = {
    "attention": frozenset({Role.q, Role.k, Role.v, Role.qkv}),
    "mlp": frozenset({Role.gate, Role.up, Role.gate_up, Role.fc_in}),
}
_COLUMN_GROUPS = {"attention": "attention", "mlp": "mlp", "shared_expert": "mlp"}


_STYLES = {
    TensorParallelStyle.megatron: TensorParallelPlan(),
    TensorParallelStyle.per_projection: TensorParallelPlan(per_projection=True),
    TensorParallelStyle.replicated: TensorParallelPlan(
        per_projection=True, sequence_parallel=False
    ),
}


def tensor_parallel_plan(plan: Plan) -> TensorParallelPlan:
    """How `plan`'s tensor parallelism splits a layer: its `tp_style`, else its stack's own;
    whether the logits are gathered and whether a gathered input is kept are always the
    stack's (its lm_head and loss; its linears' code)."""
    own = CAPABILITIES[plan.stack].tensor_parallel_plan
    style = _STYLES.get(plan.tp_style)
    if style is None:
        return own
    return replace(
        style,
        logits_gathered=own.logits_gathered,
        saves_gathered_input=own.saves_gathered_input,
    )


def tensor_parallel_passes(arch: Architecture, how: TensorParallelPlan) -> tuple[float, float]:
    """(forward, backward) collectives of one decoder layer's tensor parallelism, each counted
    as one ring pass, (t-1)/t of the b x s x h activation sent per GPU: an all-gather or a
    reduce-scatter is one, an all-reduce two.

    Megatron-LM needs one all-reduce after attention and one after the MLP in forward (g), and
    their conjugates in backward (f): 2 + 2 each way (Shoeybi et al. 2019, sec. 3, Fig. 4);
    with sequence parallelism each all-reduce is an all-gather before the sublayer and a
    reduce-scatter after it, the same volume (Korthikanti et al. 2022, sec. 4.2.2). torch's
    PrepareModuleInput gathers a sublayer's input once, as Megatron does. Without it, each
    ColwiseParallel redistributes its own input (torch distributed/tensor/parallel/style.py
    ColwiseParallel._prepare_input_fn, 2.4-2.13), so each of the c column-parallel projections
    (q, k, v, gate, up: c = 5 in a Llama layer) gathers it in forward and reduce-scatters its
    gradient in backward under sequence parallelism (c + 2 each way), or, replicated,
    all-reduces its input's gradient in backward (DTensor.from_local's backward) while forward
    keeps Megatron's two all-reduces (4 forward, 2c backward)."""
    if not how.per_projection:
        return 4.0, 4.0
    cols = dict.fromkeys(_COLUMN_INPUTS, 0)
    for lin in arch.linear_layers:
        group = _COLUMN_GROUPS.get(lin.group)
        if group and lin.role in _COLUMN_INPUTS[group]:
            cols[group] += lin.count
    # a sublayer whose projections are not plain linears (routed experts) gathers once
    c = sum(max(1.0, n / arch.num_layers) for n in cols.values())
    if how.sequence_parallel:
        return c + 2, c + 2
    return 4.0, 2 * c


def tensor_parallel_volume(plan: Plan) -> float:
    """Bytes each GPU sends per optimizer step for tensor parallelism's own collectives: each
    layer's (`tensor_parallel_passes`, the stack's `TensorParallelPlan`), the forward's again
    under full recomputation (Korthikanti et al. 2022, sec. 5), and where the stack gathers
    the lm_head's vocab shards for the loss, the b x s x V logits once in forward (the
    gradient of a replicated tensor is sliced locally, no collective)."""
    t = plan.tp
    if t == 1:
        return 0.0
    arch = plan.model.architecture
    how = tensor_parallel_plan(plan)
    tokens = plan.micro_batch * plan.seq_len
    w = plan.precision.activation_bytes
    forward, backward = tensor_parallel_passes(arch, how)
    passes = forward + backward + (forward if plan.checkpointing is Checkpointing.full else 0)
    elements = arch.num_layers * passes * arch.hidden_size
    if how.logits_gathered:
        elements += arch.vocab_size
    return plan.grad_accum * (t - 1) / t * tokens * elements * w


def communication(plan: Plan, state: StaticState) -> Communication:
    intra, inter = volume(plan, plan.strategy, state.trainable)
    ddp = sum(volume(plan, Strategy.ddp, state.trainable))
    hw = plan.hardware
    tp = tensor_parallel_volume(plan)
    # a TP group inside one node talks over its links, one that spans nodes across them
    if plan.tp <= hw.gpus_per_node:
        intra += tp
    else:
        inter += tp
    total = intra + inter
    seconds = intra / hw.intra_node_bandwidth + inter / hw.inter_node_bandwidth
    where = (
        "inside the node" if not inter else ("across nodes" if not intra else "inside and across")
    )
    with_tp = f", {tp / 1e9:.1f} GB of it tensor parallel (tp {plan.tp})" if tp else ""
    return Communication(
        bytes_per_gpu_per_step=round(total),
        relative_to_ddp=total / (ddp + tp) if ddp + tp else 1.0,
        seconds_per_step=seconds,
        detail=f"{plan.strategy.value}: {total / 1e9:.1f} GB per GPU per step ({where}){with_tp}",
        tensor_parallel_bytes=round(tp),
    )
