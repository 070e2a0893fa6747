"""FSDP1 with the checkpoint around or inside each unit: the peak of a tiny Llama LoRA step.

Replays on CPU what `memtui.estimator.stacks.fsdp1.retained_grads` models: two gloo processes
run torch's FullyShardedDataParallel over a tiny LlamaForCausalLM with PEFT LoRA on q, k, v, o
(dropout 0.1), wrapped by PEFT's fsdp_auto_wrap_policy (every decoder layer a frozen unit, each
lora_A / lora_B a unit of its own), MixedPrecision bf16 with the trainable flat parameters
upcast to fp32 as accelerate's prepare_model does, torch.autocast bf16 around the forward and
reentrant checkpointing; rank 0 prints the peak bytes allocated during the second step
(memtui.measure.tracker.LiveTracker) and the largest classes of live storages at the peak.

    python -m torch.distributed.run --nproc_per_node 2 benchmarks/fsdp1_checkpoint_replay.py \
        --batch 2 --seq 512 [--inside] [--no-reshard-hook]

`--inside` checkpoints each layer inside its FSDP unit (as transformers 4.52+ does through
GradientCheckpointingLayer) instead of around it (transformers' loop before 4.52);
`--no-reshard-hook` patches out FSDP1's _register_post_backward_reshard_only_hook. To replay an
older transformers, put it first on the path, e.g. `pip install --no-deps --target /tmp/old
transformers==4.44.2 peft==0.12.0 accelerate==0.33.0 tokenizers==0.19.1
huggingface_hub==0.24.6` and PYTHONPATH=/tmp/old. Measured (torch 2.13, 12 layers, h 512,
b 2, s 512): around the unit, transformers 4.44.2 + peft 0.12.0 peaks at 61.1 MB, 5.24.0 +
peft 0.21.2 at 48.5 MB, 4.44.2 checkpointed inside the unit at 50.1 MB.
"""

from __future__ import annotations

import argparse
import os
from typing import Any

import torch
import torch.distributed as dist
import torch.utils.checkpoint as torch_checkpoint
from peft import LoraConfig, get_peft_model
from peft.utils.other import fsdp_auto_wrap_policy
from torch.distributed.fsdp import FullyShardedDataParallel, MixedPrecision, ShardingStrategy
from transformers import LlamaConfig, LlamaForCausalLM
from transformers.models.llama.modeling_llama import LlamaDecoderLayer

from memtui.measure.tracker import LiveTracker


def checkpoint_inside_each_layer() -> None:
    """Checkpoint each decoder layer's own forward, inside whatever wraps the layer."""
    forward = LlamaDecoderLayer.forward

    def checkpointed(self: Any, hidden_states: torch.Tensor, *args: Any, **kwargs: Any) -> Any:
        if not (self.training and torch.is_grad_enabled()):
            return forward(self, hidden_states, *args, **kwargs)
        return torch_checkpoint.checkpoint(
            lambda h: forward(self, h, *args, **kwargs), hidden_states, use_reentrant=True
        )

    LlamaDecoderLayer.forward = checkpointed  # type: ignore[method-assign]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batch", type=int, default=2)
    parser.add_argument("--seq", type=int, default=512)
    parser.add_argument("--layers", type=int, default=12)
    parser.add_argument("--inside", action="store_true")
    parser.add_argument("--no-reshard-hook", action="store_true")
    args = parser.parse_args()
    torch.manual_seed(0)
    config = LlamaConfig(
        hidden_size=512,
        intermediate_size=1024,
        num_hidden_layers=args.layers,
        num_attention_heads=8,
        num_key_value_heads=2,
        vocab_size=640,  # not the hidden size: the logits stay apart from the hidden states
        max_position_embeddings=4096,
    )
    config._attn_implementation = "sdpa"
    model: Any = LlamaForCausalLM(config).to(torch.bfloat16)
    if args.inside:
        checkpoint_inside_each_layer()
    else:
        model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": True})
    model.enable_input_require_grads()
    lora = LoraConfig(r=8, lora_alpha=16, lora_dropout=0.1, target_modules=["q_proj", "k_proj",
                      "v_proj", "o_proj"])  # fmt: skip
    model = get_peft_model(model, lora)
    model.config.use_cache = False
    dist.init_process_group("gloo")
    os.environ["FSDP_TRANSFORMER_CLS_TO_WRAP"] = "LlamaDecoderLayer"
    bf16 = torch.bfloat16
    model = FullyShardedDataParallel(
        model,
        auto_wrap_policy=fsdp_auto_wrap_policy(model),
        mixed_precision=MixedPrecision(param_dtype=bf16, reduce_dtype=bf16, buffer_dtype=bf16),
        sharding_strategy=ShardingStrategy.FULL_SHARD,
        limit_all_gathers=True,
        device_id=torch.device("cpu"),
    )
    for unit in FullyShardedDataParallel.fsdp_modules(model):  # accelerate's fp32 upcast
        flat = unit._flat_param if unit._has_params else None
        if flat is not None and flat.requires_grad and flat.dtype != torch.float32:
            flat.data = flat.data.to(torch.float32)
            unit._handle._orig_param_dtype = torch.float32
    if args.no_reshard_hook:
        import torch.distributed.fsdp._runtime_utils as runtime

        runtime._register_post_backward_reshard_only_hook = lambda *a, **k: None  # type: ignore[assignment]
    ids = torch.randint(0, config.vocab_size, (args.batch, args.seq))

    def step() -> None:
        with torch.autocast("cpu", dtype=bf16):
            loss = model(input_ids=ids, labels=ids).loss
        loss.backward()

    step()  # FSDP's lazy init and the first step's allocations
    for p in model.parameters():
        p.grad = None
    known = [*model.parameters(), *model.buffers()]
    tracker = LiveTracker(lambda t, phase: f"{t.dtype} {tuple(t.shape)}", known)
    with tracker:
        step()
    if dist.get_rank() == 0:
        print(f"peak {tracker.peak} bytes")
        largest = sorted(tracker.peak_by_class.items(), key=lambda kv: -kv[1])[:8]
        for name, size in largest:
            print(f"  {size / 1e6:8.3f} MB  {name}")
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
