accelerate launch \
    --config_file examples/accelerate_configs/deepspeed_zero3.yaml \
    examples/scripts/sft_gpt_oss.py \
    --dtype bfloat16 \
    --model_name_or_path openai/gpt-oss-20b \
    --packing \
    --run_name 20b-full-eager \
    --attn_implementation kernels-community/vllm-flash-attn3 \
    --dataset_num_proc 12 \
    --dataset_name HuggingFaceH4/Multilingual-Thinking \
    --max_length 4096 \
    --per_device_train_batch_size 2 \
    --num_train_epochs 1 \
    --logging_steps 1 \
    --warmup_steps 0.03 \
    --lr_scheduler_type cosine_with_min_lr \
    --lr_scheduler_kwargs '{"min_lr_rate": 0.1}' \
    --output_dir gpt-oss-20b-multilingual-reasoner \
    --report_to trackio \
    --seed 42
