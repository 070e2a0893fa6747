"""Real configs of axolotl, LLaMA-Factory and torchtune, copied verbatim from their repositories
(tests/plans_configs/upstream/<tool>/, SOURCES.toml beside them: repository, path, commit), run
through `memtui estimate --from FILE` as text and as `--json`.

What each file must give is written in expected.toml beside it, from reading the file and the
tool's source for its defaults (each default cited there with file, line and commit), never from
memtui's output. For every file the test checks: no traceback; a refusal only where expected,
one line naming why; the expected plan fields; the expected assumption lines; and that every
memory-relevant key the file sets (to anything but null or false) is either read (named in a
field's provenance) or named in an assumption line, in the text report and in the JSON alike.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from memtui.cli import build_parser, main
from memtui.commands.plan_flags import plan_and_import

if sys.version_info >= (3, 11):
    import tomllib
else:
    import tomli as tomllib

UPSTREAM = Path(__file__).resolve().parent / "plans_configs" / "upstream"
TOOLS = ("axolotl", "llamafactory", "torchtune")

#: The keys that change per-GPU memory, per tool (their schemas: axolotl
#: src/axolotl/utils/schemas/config.py, training.py, peft.py and integrations/*/args.py;
#: LLaMA-Factory src/llamafactory/hparams/*.py and Transformers' TrainingArguments; torchtune
#: recipes/*.py `cfg.` reads). Dotted keys are nested.
MEMORY_KEYS: dict[str, tuple[str, ...]] = {
    "axolotl": (
        "base_model", "adapter", "load_in_4bit", "load_in_8bit", "lora_r", "lora_target_linear",
        "lora_target_modules", "lora_modules_to_save", "sequence_len", "micro_batch_size",
        "gradient_accumulation_steps", "optimizer", "bf16", "fp16", "bfloat16", "float16", "fp8",
        "gradient_checkpointing", "activation_offloading", "attn_implementation",
        "flash_attention", "deepspeed", "fsdp_config", "fsdp", "dp_shard_size",
        "dp_replicate_size", "tensor_parallel_size", "context_parallel_size",
        "liger_fused_linear_cross_entropy", "liger_rms_norm", "liger_layer_norm",
        "liger_glu_activation", "liger_swiglu", "liger_rope", "cut_cross_entropy",
        "lora_mlp_kernel", "lora_qkv_kernel", "lora_o_kernel", "tiled_mlp",
        "unfrozen_parameters", "rl", "reward_model", "gptq", "model_quantization_config",
        "use_kernels", "torch_compile", "fused_attn_kernel",
    ),
    "llamafactory": (
        "model_name_or_path", "stage", "finetuning_type", "lora_rank", "lora_target",
        "additional_target", "quantization_bit", "double_quantization", "pure_bf16", "bf16",
        "fp16", "fp8", "cutoff_len", "flash_attn", "disable_gradient_checkpointing",
        "use_unsloth_gc", "enable_liger_kernel", "per_device_train_batch_size",
        "gradient_accumulation_steps", "optim", "deepspeed", "fsdp", "use_galore", "use_apollo",
        "use_badam", "use_adam_mini", "use_muon", "mixture_of_depths", "use_v1_kernels",
        "use_unsloth", "use_asft_loss", "ray_num_workers",
    ),
    "torchtune": (
        "model._component_", "model.lora_attn_modules", "model.apply_lora_to_mlp",
        "model.apply_lora_to_output", "model.lora_rank", "model.use_dora", "model.quantize_base",
        "batch_size", "gradient_accumulation_steps", "tokenizer.max_seq_len", "dtype",
        "optimizer._component_", "optimizer.fused", "optimizer_in_bwd",
        "enable_activation_checkpointing", "enable_activation_offloading", "fsdp_cpu_offload",
        "fsdp.cpu_offload", "loss._component_", "compile", "tensor_parallel_dim",
        "custom_sharded_layers",
    ),
}  # fmt: skip

#: expected.toml's plan fields -> where the JSON document's `plan` keeps them
_PLAN_KEYS = {
    "method": "method",
    "precision": "precision",
    "micro_batch": "micro_batch",
    "seq_len": "seq_len",
    "grad_accum": "grad_accum",
    "checkpointing": "checkpointing",
    "optimizer": "optimizer",
    "stack": "stack",
    "strategy": "strategy",
    "lora_rank": "lora_rank",
    "loss": "loss",
    "offload": "offload",
    "optimizer_in_backward": "optimizer_in_backward",
    "activation_offload": "activation_offload",
    "tp": "tp",
}
#: entries of expected.toml that are not plan fields
_META = {
    "model", "model_flag", "params_flag", "refuse", "assumptions", "ignored", "gpus", "trainable",
}  # fmt: skip


def _expected(tool: str) -> dict[str, dict[str, Any]]:
    data = tomllib.loads((UPSTREAM / tool / "expected.toml").read_text(encoding="utf-8"))
    return {k: v for k, v in data.items() if k != "objective"}


def _objectives(tool: str) -> dict[str, str]:
    """The objective each preference or reward file trains (every other file: SFT)."""
    data = tomllib.loads((UPSTREAM / tool / "expected.toml").read_text(encoding="utf-8"))
    return dict(data.get("objective", {}))


CASES = [(tool, path) for tool in TOOLS for path in _expected(tool)]


def _run(
    capsys: pytest.CaptureFixture[str], argv: list[str]
) -> tuple[int, str, str]:  # fmt: skip
    code = main(argv)
    out = capsys.readouterr()
    return code, out.out, out.err


def _memory_keys(tool: str, data: dict[str, Any]) -> list[str]:
    """The memory-relevant keys the file sets to something (null and false are off)."""
    found = []
    for key in MEMORY_KEYS[tool]:
        node: Any = data
        for part in key.split("."):
            node = node.get(part) if isinstance(node, dict) else None
        if node not in (None, False, "", [], {}) and str(node).lower() != "false":
            found.append(key)
    return found


def test_the_corpus_is_what_the_sources_say() -> None:
    """Every YAML file has its provenance and its expectations, and the other way round."""
    total = 0
    for tool in TOOLS:
        folder = UPSTREAM / tool
        sources = tomllib.loads((folder / "SOURCES.toml").read_text(encoding="utf-8"))["files"]
        files = {str(p.relative_to(folder)) for p in folder.rglob("*") if p.is_file()}
        files -= {"SOURCES.toml", "expected.toml"}
        assert files == set(sources), tool
        for entry in sources.values():
            assert set(entry) == {"repository", "path", "commit"}
            assert len(entry["commit"]) == 40
        configs = {f for f in files if f.endswith((".yml", ".yaml"))}
        assert configs == set(_expected(tool)), tool
        total += len(configs)
    assert total >= 90


@pytest.mark.parametrize(("tool", "path"), CASES, ids=[f"{t}/{p}" for t, p in CASES])
def test_an_upstream_config_plans_as_its_file_says(
    tool: str, path: str, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    expected = _expected(tool)[path]
    monkeypatch.chdir(UPSTREAM / tool)
    argv = ["estimate", "--from", path]
    if "model_flag" in expected:  # a model memtui cannot resolve offline: its nearest id
        argv += ["--model", expected["model_flag"]]
    elif "params_flag" in expected:
        argv += ["--params", expected["params_flag"]]
    code, out, err = _run(capsys, [*argv, "--json"])
    if "refuse" in expected:
        assert code == 2 and out == ""
        assert err.count("\n") == 1 and "Traceback" not in err
        assert expected["refuse"] in err, err
        return
    assert code == 0, err
    doc = json.loads(out)
    plan = doc["plan"]
    for key, want in expected.items():
        if key in _META:
            continue
        got = plan[_PLAN_KEYS[key]]
        assert got == want, f"{key}: {got!r} != {want!r}"
    assert plan["objective"] == _objectives(tool).get(path, "sft")
    if "gpus" in expected:
        hardware = plan["hardware"]
        assert hardware["gpus_per_node"] * hardware["nodes"] == expected["gpus"]
    if "trainable" in expected:  # counted by hand from the builder's shapes
        assert doc["parameters"]["trainable"] == expected["trainable"]
    if "model" in expected and "model_flag" not in expected and "params_flag" not in expected:
        assert doc["model"] == expected["model"]
    assumptions, ignored = doc["assumptions"], doc["ignored"]
    for line in expected.get("assumptions", ()):
        assert any(line in a for a in assumptions), (line, assumptions)
    for line in expected.get("ignored", ()):
        assert any(line in a for a in ignored), (line, ignored)
    sources = [p["source"] for p in doc["provenance"]]
    data = yaml.safe_load((UPSTREAM / tool / path).read_text(encoding="utf-8"))
    flagged = "model_flag" in expected or "params_flag" in expected  # the flag names it
    silent = [
        key
        for key in _memory_keys(tool, data)
        if not (flagged and key in ("base_model", "model_name_or_path"))
        if not any(f":{key}" in s or key.rsplit(".", 1)[-1] in s for s in sources)
        and not any(key in a for a in (*assumptions, *ignored))
    ]
    assert not silent, f"read silently wrong or dropped: {silent}"
    code, text, err = _run(capsys, argv)
    assert code == 0, err
    _, imported = plan_and_import(build_parser().parse_args(argv))
    assert imported is not None
    for line in imported.assumptions:  # the text report and the JSON say what was assumed
        assert f"assumed: {line}" in text and line in assumptions, line
    for line in imported.ignored:  # and what was not sized
        assert f"ignored: {line}" in text and line in ignored, line
