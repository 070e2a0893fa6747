tune run lora_finetune_single_device \
--config recipes/configs/llama2/7B_lora_single_device.yaml \
batch_size=8 \
enable_activation_checkpointing=True \
max_steps_per_epoch=128
