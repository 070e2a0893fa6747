"""Plans on disk: one codec per format, mapping files to and from a `Plan` (pure, no UI).

`memtui_toml` is memtui's own plan file (`memtui --plan FILE`, the save key). The config
formats of the training stacks (DeepSpeed, accelerate, Trainer arguments...) join here as one
module each. This package imports the estimator, never the UI or the commands.
"""
