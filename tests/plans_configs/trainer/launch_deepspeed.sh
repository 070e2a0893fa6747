#!/bin/bash
# Transformers' examples: run_clm.py under torchrun with a DeepSpeed config of "auto" values
export NCCL_DEBUG=WARN
torchrun --nproc_per_node 4 --nnodes 1 \
  examples/run_clm.py \
  --model_name_or_path meta-llama/Llama-3.1-8B \
  --per_device_train_batch_size 2 \
  --gradient_accumulation_steps 16 \
  --block_size 2048 \
  --gradient_checkpointing \
  --bf16 \
  --optim adamw_torch_fused \
  --deepspeed deepspeed/zero2_auto.json \
  --output_dir out/clm
