"""Plans on disk: one codec per format, mapping files to and from a `Plan` (pure, no UI).

`memtui_toml` is memtui's own plan file (`memtui --plan FILE`, the save key). The job configs
of the training stacks are one codec module each (`formats` declares them: `deepspeed_json`,
`accelerate_yaml`, ...; they share `fsdp`): a file becomes `facts` with the file and key of
each; `registry` detects formats, follows the files a config names and merges them, `derive`
decides stack, precision and GPUs, `imports` applies them under the flags (`--from FILE...`).
`launchers` recognises a launch from a command line and `attach` finds the jobs behind the
processes on the GPUs. This package imports the estimator, never the UI, the commands or
telemetry; docs/plans.md lists every key.
"""
