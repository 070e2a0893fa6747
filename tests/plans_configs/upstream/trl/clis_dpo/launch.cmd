trl dpo --config dpo_config.yaml
