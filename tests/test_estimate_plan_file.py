"""`memtui estimate --plan FILE`: the dashboard's saved plans, read by the CLI as a user runs it.

The file is written by `memtui.plans.memtui_toml.save_plan`, what the dashboard's save key (w)
calls; the flags and the `--from` files go over it in the order of
`memtui.estimator.precedence.merge` (the plan below, the files, the flags on top).
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

from memtui.estimator import Plan, estimate
from memtui.estimator.model_source import load_model
from memtui.plans.memtui_toml import save_plan

CONFIGS = Path(__file__).resolve().parent / "plans_configs"


def memtui(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "memtui", *args], capture_output=True, text=True, cwd=cwd
    )


def saved(tmp_path: Path) -> tuple[Plan, Path]:
    plan = Plan(model=load_model("Qwen/Qwen2.5-7B")).evolve(
        method="lora", seq_len=2048, micro_batch=2, checkpointing="full"
    )
    plan = plan.evolve(hardware=plan.hardware.model_copy(update={"gpus_per_node": 2}))
    return plan, save_plan(plan, tmp_path / "plan.toml")


def test_a_saved_plan_is_estimated_as_the_dashboard_saved_it(tmp_path: Path) -> None:
    plan, path = saved(tmp_path)
    out = memtui("estimate", "--plan", str(path), "--json")
    assert out.returncode == 0, out.stderr
    document = json.loads(out.stdout)
    fields = set(document["plan"]) - {"model"}  # the model is shown by name and count
    assert {k: document["plan"][k] for k in fields} == plan.model_dump(mode="json", include=fields)
    assert document["plan"]["model"] == {
        "name": "Qwen/Qwen2.5-7B",
        "parameters": plan.model.parameters,
    }
    assert document["per_gpu"]["total"] == estimate(plan).budget.total
    # the text report reads the same file
    text = memtui("estimate", "--plan", str(path))
    assert text.returncode == 0 and "Qwen/Qwen2.5-7B" in text.stdout


def test_flags_go_on_top_of_the_saved_plan(tmp_path: Path) -> None:
    plan, path = saved(tmp_path)
    out = memtui("estimate", "--plan", str(path), "--seq-len", "4096", "--json")
    assert out.returncode == 0, out.stderr
    document = json.loads(out.stdout)
    assert document["plan"]["seq_len"] == 4096  # the flag
    assert document["plan"]["method"] == "lora" and document["plan"]["micro_batch"] == 2
    assert document["per_gpu"]["total"] == estimate(plan.evolve(seq_len=4096)).budget.total


def test_the_job_files_go_between_the_saved_plan_and_the_flags(tmp_path: Path) -> None:
    _, path = saved(tmp_path)
    config = CONFIGS / "deepspeed" / "zero1_lion_fp16.json"
    out = memtui(
        "estimate", "--plan", str(path), "--from", str(config), "--micro-batch", "3", "--json"
    )
    assert out.returncode == 0, out.stderr
    got = json.loads(out.stdout)["plan"]
    # the file's ZeRO-1, Lion and accumulation over the saved plan
    assert (got["stack"], got["strategy"], got["optimizer"]) == ("deepspeed", "zero1", "lion")
    assert got["grad_accum"] == 2
    assert got["micro_batch"] == 3  # the flag over the file's 8
    # what the file does not say stays as saved
    assert got["method"] == "lora" and got["seq_len"] == 2048
    assert got["hardware"]["gpus_per_node"] == 2
    assert got["model"]["name"] == "Qwen/Qwen2.5-7B"


def test_a_config_json_ref_is_read_beside_the_plan(tmp_path: Path) -> None:
    folder = tmp_path / "job"
    shutil.copytree(CONFIGS / "checkpoints" / "tiny-llama", folder / "tiny-llama")
    plan = Plan(model=load_model(str(folder / "tiny-llama")))
    path = save_plan(plan, folder / "plan.toml")
    assert 'ref = "tiny-llama"' in path.read_text()
    out = memtui("estimate", "--plan", "job/plan.toml", "--json", cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout)["parameters"]["total"] == plan.model.parameters


def test_a_bad_plan_file_is_one_line(tmp_path: Path) -> None:
    broken = tmp_path / "broken.toml"
    broken.write_text("[model\nref = 'gpt2'\n")
    for path, says in ((broken, "not valid TOML"), (tmp_path / "absent.toml", "cannot read")):
        out = memtui("estimate", "--plan", str(path), "--json")
        assert out.returncode == 2 and out.stdout == ""
        lines = out.stderr.strip().splitlines()
        assert len(lines) == 1 and says in lines[0] and str(path) in lines[0]
