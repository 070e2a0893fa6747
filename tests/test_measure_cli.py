"""`memtui measure` as a user runs it: a real process, real flags, a catalog id, a config.json.

The install hint is checked with torch hidden from the process, so it runs everywhere; the
rest needs torch, transformers and peft and is skipped without them.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

HIDE_TORCH = (
    "import sys; sys.modules['torch'] = None; from memtui.cli import main; "
    "sys.exit(main(sys.argv[1:]))"
)


def memtui(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "memtui", *args], capture_output=True, text=True, timeout=300
    )


def test_missing_torch_is_one_line_with_the_install_hint_and_exit_2():
    out = subprocess.run(
        [sys.executable, "-c", HIDE_TORCH, "measure", "--model", "openai-community/gpt2"],
        capture_output=True,
        text=True,
    )
    assert out.returncode == 2
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1, out.stderr
    assert "pip install 'memtui[measure]'" in lines[0]
    assert "cpu" in lines[0]
    assert "Traceback" not in out.stderr


@pytest.fixture
def tiny_config(tmp_path: Path) -> Path:
    """A config.json of a 2-layer LLaMA small enough for a real CPU step in a second."""
    config = {
        "model_type": "llama",
        "hidden_size": 128,
        "intermediate_size": 344,
        "num_attention_heads": 4,
        "num_key_value_heads": 2,
        "num_hidden_layers": 2,
        "vocab_size": 2048,
    }
    path = tmp_path / "config.json"
    path.write_text(json.dumps(config))
    return path


needs_torch = pytest.mark.skipif(
    any(
        __import__("importlib").util.find_spec(name) is None
        for name in ("torch", "transformers", "peft")
    ),
    reason="memtui[measure] not installed",
)


@needs_torch
def test_catalog_model_under_fake_tensor_mode_as_json():
    out = memtui("measure", "--model", "meta-llama/Llama-3.2-1B", "--seq-len", "512", "--json")
    assert out.returncode == 0, out.stderr
    data = json.loads(out.stdout)
    assert data["mode"] == "fake"  # above 300M parameters, nothing is allocated
    terms = data["terms"]
    for key in ("weights", "gradients", "master_weights", "optimizer_states"):
        assert terms[key]["predicted"] == terms[key]["measured"] > 0
    for key in ("activations", "logits", "peak"):
        assert abs(terms[key]["error"]) <= 0.05


@needs_torch
def test_config_json_runs_a_real_step_and_prints_the_table(tiny_config: Path):
    path = tiny_config
    out = memtui("measure", "--model", str(path), "--seq-len", "128", "--micro-batch", "2")
    assert out.returncode == 0, out.stderr
    assert "real step on CPU" in out.stdout
    for label in ("Weights", "Optimizer states", "Activations", "Logits and loss", "Peak"):
        assert label in out.stdout


@needs_torch
@pytest.mark.parametrize(
    ("flags", "says"),
    [
        (["--optimizer", "lion"], "not in torch.optim"),
        (["--method", "qlora"], "QLoRA needs bitsandbytes"),
        (["--params", "7B"], "needs an architecture"),
    ],
)
def test_what_cannot_run_here_is_one_line_and_exit_2(flags, says):
    base = [] if "--params" in flags else ["--model", "openai-community/gpt2"]
    out = memtui("measure", *base, *flags, "--seq-len", "64", "--json")
    assert out.returncode == 2
    assert out.stdout == ""
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1, out.stderr
    assert says in lines[0]


@needs_torch
def test_stack_trainer_runs_a_real_trainer_step_as_json(tiny_config: Path):
    path = tiny_config
    flags = ["--stack", "trainer", "--seq-len", "128", "--micro-batch", "2", "--json"]
    out = memtui("measure", "--model", str(path), *flags)
    assert out.returncode == 0, out.stderr
    data = json.loads(out.stdout)
    assert (data["stack"], data["mode"], data["world_size"]) == ("trainer", "real", 1)
    assert data["plan"]["precision"] == "bf16"  # --stack trainer's first precision
    terms = data["terms"]
    assert terms["master_weights"]["predicted"] == terms["master_weights"]["measured"] == 0
    for key in ("weights", "gradients", "optimizer_states"):
        assert terms[key]["predicted"] == terms[key]["measured"] > 0


@needs_torch
def test_a_stack_not_measured_on_cpu_says_why_in_one_line():
    flags = ["--model", "openai-community/gpt2", "--stack", "deepspeed", "--seq-len", "64"]
    out = memtui("measure", *flags)
    assert out.returncode == 2
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1, out.stderr
    assert "not measured on CPU" in lines[0] and "CUDA" in lines[0]


def test_a_stack_with_no_cpu_runner_is_refused_not_run_as_another(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # a stack without a runner and without a NOT_MEASURED entry (a new stack whose author
    # forgot it) must be refused, not measured through the FSDP2 runner
    import types

    import memtui.measure as measure_package
    from memtui.estimator import StackName, Strategy
    from memtui.measure import Unsupported, measure
    from memtui.measure.grid import llama, plan_for

    def ran_fsdp2(*args: object) -> None:
        raise AssertionError("the litgpt plan was measured as FSDP2")

    fake = types.ModuleType("memtui.measure.fsdp2")
    fake.WORLD_SIZE = 2  # type: ignore[attr-defined]
    fake.measure_fsdp2 = ran_fsdp2  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "memtui.measure.fsdp2", fake)
    monkeypatch.delitem(measure_package.NOT_MEASURED, StackName.litgpt)
    config = llama()
    fields = {
        "stack": StackName.litgpt,
        "strategy": Strategy.ddp,
        "precision": "bf16",
        "loss": "chunked",
    }
    plan = plan_for(config, fields, "tiny")
    with pytest.raises(Unsupported, match="--stack litgpt is not measured on CPU"):
        measure("tiny", plan, config=config)
