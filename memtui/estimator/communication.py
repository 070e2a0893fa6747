"""Bytes each GPU sends per optimizer step (ZeRO paper sec. 7; the 13B analysis, docs/references.md,
item 5).

A ring all-reduce sends 2(N-1)/N of the buffer per GPU; a reduce-scatter or an all-gather sends
(N-1)/N. DDP, ZeRO-1 and ZeRO-2 all move 2(N-1)/N of the gradients; ZeRO-3/FSDP gather the
weights in forward and again in backward and reduce-scatter the gradients: 1.5x DDP. The
pattern of each strategy is read from its spec (`strategies.py`), never from its name.
Tensor parallelism adds its own collectives of activations (`tensor_parallel_volume`).
"""

from __future__ import annotations

from memtui.estimator.choices import Checkpointing, Method, Strategy
from memtui.estimator.plan import Plan
from memtui.estimator.report import Communication
from memtui.estimator.state import StaticState, frozen_base_bytes
from memtui.estimator.strategies import strategy_spec


def payloads(plan: Plan, trainable: int) -> tuple[float, float]:
    """(weights, gradients): the bytes of one tensor-parallel rank's copy of the model's
    weights as they are gathered, and of its gradients as they are reduced."""
    wb = plan.precision.weight_bytes  # weights and gradients travel in the parameter dtype
    # ZeRO-3/FSDP gather the weights as stored: under QLoRA the NF4 base (packed in its
    # bnb_4bit_quant_storage, one byte per two weights) and the upcast rest, not 2 B/param
    base = wb * plan.model.parameters if plan.method is Method.full else frozen_base_bytes(plan)
    weights = (base + (0 if plan.method is Method.full else wb * trainable)) / plan.tp
    return weights, wb * trainable / plan.tp


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


def tensor_parallel_volume(plan: Plan) -> float:
    """Bytes each GPU sends per optimizer step for tensor parallelism's own collectives.

    Megatron-LM splits each layer's attention and MLP so that each needs one all-reduce of the
    b x s x h activations in forward and one in backward: 2 + 2 per layer (Shoeybi et al. 2019,
    sec. 3, Fig. 4). Sequence parallelism turns each all-reduce into an all-gather and a
    reduce-scatter of the same bandwidth (Korthikanti et al. 2022, sec. 4.2.2), and full
    recomputation runs the forward's two again in backward (ibid. sec. 5). A ring all-reduce
    sends 2(t-1)/t of the buffer per GPU."""
    t = plan.tp
    if t == 1:
        return 0.0
    arch = plan.model.architecture
    buffer = plan.micro_batch * plan.seq_len * arch.hidden_size * plan.precision.activation_bytes
    per_layer = 4 + (2 if plan.checkpointing is Checkpointing.full else 0)
    return plan.grad_accum * arch.num_layers * per_layer * 2 * (t - 1) / t * buffer


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
