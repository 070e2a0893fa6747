"""The CLI a user reads on a 24-row terminal: the verdict block first, `--check` as a CI gate,
sizes that never read a bare number as bytes, one unit convention (`--unit`), catalog ids
whole at 80 columns, "did you mean", parameters counted as the picker counts them, and the
levers' states. Each runs the installed command's code path (`python -m memtui`)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from cli_helpers import ROOT, memtui, watch
from fake_nvml.harness import FakeNvml, GiB, node
from reference_plans import ANALYSIS_13B_FLAGS

from memtui.estimator.catalog import lookup
from memtui.estimator.units import format_count

MiB = 2**20
ANALYSIS_13B_ZERO3 = (*ANALYSIS_13B_FLAGS, "--strategy", "zero3")
CONFIGS = Path(__file__).resolve().parent / "plans_configs"


def _run(*args: str, **env: str) -> subprocess.CompletedProcess[str]:
    """`python -m memtui ARGS` with `env` added to this environment."""
    extra = {"PYTHONPATH": str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""), **env}
    return subprocess.run(
        [sys.executable, "-m", "memtui", *args],
        capture_output=True,
        text=True,
        env={**os.environ, **extra},
        cwd=ROOT,
        timeout=120,
    )


def _json(*flags: str) -> dict:
    out = memtui("estimate", *flags, "--json")
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout)


def test_the_verdict_block_comes_first_with_headroom_stack_versions_and_band() -> None:
    out = memtui("estimate", "--model", "meta-llama/Llama-2-7b-hf", "--gpus", "8")
    assert out.returncode == 0, out.stderr
    doc = _json("--model", "meta-llama/Llama-2-7b-hf", "--gpus", "8")
    lines = out.stdout.splitlines()
    assert lines[0].startswith(f"{doc['verdict']} (stack: {doc['stack']}; no --stack: ")
    headroom = f"headroom {doc['headroom'] / 1e9:,.2f} GB per GPU"
    assert headroom in lines[0]
    # the block, the plan, the band and the versions within the first ten lines of 80 columns
    block = " ".join(" ".join(lines[:10]).split())
    assert "meta-llama/Llama-2-7b-hf: 6.74B parameters (base model)" in block
    assert f"of {doc['capacity'] / 1e9:,.2f} GB" in block
    assert "published runs of this kind (" in block and "up to" in block
    assert "versions: torch 2.13, transformers 5.24" in block
    # the detail after it: the budget table is below the block, and the verdict not repeated
    assert lines.index(next(ln for ln in lines if ln.startswith("Per-GPU budget"))) > 4
    assert sum("headroom" in line for line in lines) == 1


def test_the_verdict_comes_before_what_the_job_files_set() -> None:
    out = memtui("estimate", "--from", "accelerate/deepspeed_file.yaml", cwd=CONFIGS)
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    verdict = next(i for i, line in enumerate(lines) if "headroom" in line)
    files = next(i for i, line in enumerate(lines) if line.startswith("From accelerate/"))
    assert verdict == 0 and files > verdict


def test_check_exits_1_when_the_plan_does_not_fit_and_0_when_it_does() -> None:
    # the 13B analysis (docs/references.md): 52 GB of static state per GPU on ZeRO-3 with
    # 4,096 tokens of activations beside it does not fit 80 GB; with 512 tokens the figure fits
    big = memtui("estimate", *ANALYSIS_13B_ZERO3, "--check")
    assert big.returncode == 1 and big.stdout.startswith("DOES NOT FIT")
    assert memtui("estimate", *ANALYSIS_13B_ZERO3, "--check", "--json").returncode == 1
    assert memtui("estimate", *ANALYSIS_13B_ZERO3).returncode == 0  # no gate without --check
    small = memtui("estimate", *ANALYSIS_13B_ZERO3, "--seq-len", "512", "--check", "--json")
    assert small.returncode == 0 and json.loads(small.stdout)["fits"] is True


def test_a_bare_number_asks_for_its_unit_and_a_card_number_is_the_card() -> None:
    for flag in ("--gpu-memory", "--gpu"):
        out = memtui("estimate", flag, "24", "--json")
        assert out.returncode == 2 and out.stdout == ""
        assert "'24' has no unit; say 24GB (10^9 bytes), 24GiB (2^30 bytes)" in out.stderr
    card = _json("--gpu", "4090")
    assert card["capacity"] == 24564 * MiB  # the RTX 4090 preset, NVML's memory.total
    assert card["plan"]["hardware"]["gpu_name"] == "RTX 4090 24GB"
    assert _json("--gpu-memory", "24GB")["capacity"] == 24 * 10**9


def test_unknown_gpu_and_model_names_get_a_did_you_mean() -> None:
    gpu = memtui("estimate", "--gpu", "h100-sx", "--json")
    assert gpu.returncode == 2 and "did you mean h100-sxm" in gpu.stderr
    assert len(gpu.stderr.strip().splitlines()) == 1
    for typo in ("meta-llama/Llama-2-7b", "Llama-2-7b"):
        model = _run("estimate", "--model", typo, "--json", HF_HUB_OFFLINE="1")
        assert model.returncode == 2, model.stderr
        assert "did you mean meta-llama/Llama-2-7b-hf" in model.stderr, model.stderr
        assert len(model.stderr.strip().splitlines()) == 1
    far = _run("estimate", "--model", "zz/qqqqqq", "--json", HF_HUB_OFFLINE="1")
    assert far.returncode == 2 and "did you mean" not in far.stderr


def test_unit_gib_says_gib_on_every_size_of_estimate() -> None:
    flags = ("--model", "meta-llama/Llama-2-7b-hf", "--gpus", "8")
    doc = _json(*flags)
    out = memtui("estimate", *flags, "--unit", "gib")
    assert out.returncode == 0, out.stderr
    text = " ".join(out.stdout.split())
    assert f"headroom {doc['headroom'] / GiB:,.2f} GiB per GPU" in text
    assert f"({doc['plan']['hardware']['gpu_memory'] / GiB:,.2f} GiB each)" in text
    assert "Saves GiB" in text and "Static GiB" in text and "GPU GiB" in text
    assert "(GiB per GPU: fsdp1 " in text  # the stack choice's figures too
    assert memtui("estimate", *flags, "--unit", "GiB").stdout == out.stdout  # any case
    assert " GB " not in text and "GB per GPU" not in text


def test_watch_shows_gb_by_default_as_estimate_does(fake_nvml: FakeNvml) -> None:
    fake_nvml.write(node(1, used=30 * GiB))
    out = watch("--once", env=fake_nvml.env())
    assert out.returncode == 0, out.stderr
    # 30 GiB used of NVML's 81,559 MiB, 512 MiB reserved: in GB (10^9) and MB (10^6)
    assert "32.2 GB" in out.stdout and "85.5 GB" in out.stdout and "537 MB" in out.stdout
    assert "GiB" not in out.stdout
    gib = watch("--once", "--unit", "gib", env=fake_nvml.env())
    assert "30.0 GiB" in gib.stdout and "79.6 GiB" in gib.stdout and "512 MiB" in gib.stdout


def test_models_keeps_every_id_whole_at_80_columns() -> None:
    ids = [
        name
        for row in json.loads(memtui("models", "--json").stdout)
        for name in (row["repo_id"], *row["aliases"])
    ]
    out = _run("models", COLUMNS="80")
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    assert all(len(line.rstrip()) <= 80 for line in lines)
    first_words = {line.split()[0] for line in lines if line.strip()} | {
        line.split()[1] for line in lines if line.startswith("  = ")
    }
    assert set(ids) <= first_words, set(ids) - first_words  # each id whole, at a line's start
    assert "left out at 80 columns: params, vocab" in " ".join(out.stdout.split())


def test_estimate_counts_parameters_as_the_picker_does_adapters_apart() -> None:
    flags = ("--model", "meta-llama/Llama-3.2-1B", "--method", "lora", "--gpus", "1")
    doc = _json(*flags)
    out = memtui("estimate", *flags)
    assert out.returncode == 0, out.stderr
    entry = lookup("meta-llama/Llama-3.2-1B")
    assert entry is not None
    # the picker lists format_count(entry.published_parameters): the base model alone
    base = format_count(entry.published_parameters)
    adapters = doc["parameters"]["total"] - entry.published_parameters
    assert adapters == doc["parameters"]["trainable"] > 0
    text = " ".join(out.stdout.split())
    assert f"{base} parameters (base model, {format_count(adapters)} of adapters apart)" in text


def _levers(*flags: str) -> list[dict]:
    return _json(*flags)["levers"]


def test_shard_further_on_ddp_is_never_applied() -> None:
    # the Trainer runs DDP only: nothing further to shard, said so
    trainer = _levers("--stack", "trainer", "--strategy", "ddp", "--gpus", "4")
    shard = next(lv for lv in trainer if lv["name"].startswith("Shard further"))
    assert shard["state"] == "not applicable" and shard["applied"] is False
    assert "shards no further than ddp" in shard["why"]
    # FSDP1 runs DDP (NO_SHARD) and FSDP: the lever is FSDP, priced by a re-run with it
    flags = ("--stack", "fsdp1", "--strategy", "ddp", "--gpus", "4")
    fsdp = next(lv for lv in _levers(*flags) if lv["name"].startswith("Shard further"))
    assert fsdp["name"] == "Shard further (fsdp)" and fsdp["state"] == "pending"
    before = _json(*flags)["per_gpu"]["total"]
    after = _json("--stack", "fsdp1", "--strategy", "fsdp", "--gpus", "4")["per_gpu"]["total"]
    assert fsdp["saves_bytes"] == before - after > 0
    # on full sharding it is applied
    full = _levers("--stack", "fsdp1", "--strategy", "fsdp", "--gpus", "4")
    assert next(lv for lv in full if lv["name"].startswith("Shard"))["state"] == "applied"


def test_levers_that_save_nothing_are_not_offered_and_the_rest_go_by_saving() -> None:
    # DDP on one GPU: sharding further (ZeRO-1) saves nothing; micro-batch 1 cannot be halved
    plan = ("--model", "meta-llama/Llama-3.2-1B", "--gpus", "1", "--stack", "generic",
            "--strategy", "ddp")  # fmt: skip
    levers = _levers(*plan)
    names = {lv["name"]: lv for lv in levers}
    assert not any(name.startswith("Shard further") for name in names)
    assert all(lv["saves_bytes"] > 0 for lv in levers if lv["state"] == "pending")
    small = names["Smaller micro-batch"]
    assert small["state"] == "not applicable" and small["why"] == "the micro-batch is 1 already"
    saves = [lv["saves_bytes"] for lv in levers if lv["state"] == "pending"]
    assert saves == sorted(saves, reverse=True)
    out = _run("estimate", *plan, COLUMNS="200")
    rows = [line.split("│") for line in out.stdout.splitlines() if line.startswith("│")]
    cells = {row[1].strip(): [cell.strip() for cell in row[2:6]] for row in rows}
    # the text's lever table: the saving, the step-time change, the cost (why, when not
    # applicable) and the state
    assert cells["Smaller micro-batch"] == [
        "-", "-", "the micro-batch is 1 already", "not applicable"]  # fmt: skip
    assert cells["FlashAttention"][0] == "-" and cells["FlashAttention"][3] == "applied"
    first = levers[0]
    time = f"{first['seconds_change']:+.2f} s ({first['percent_change']:+.1f}%)"
    assert cells[first["name"]] == [f"{saves[0] / 1e9:.2f}", time, first["cost"], "pending"]
    assert "Levers, the largest saving first" in out.stdout


async def test_the_dashboard_lever_list_says_on_and_not_applicable_with_why() -> None:
    from ui_helpers import llama_plan, region_text

    from memtui.estimator import Precision, StackName, Strategy, estimate
    from memtui.ui import make_app
    from memtui.ui.widgets.lever_list import LeverList

    # the Trainer runs DDP only: "Shard further" has nothing to pull, said with why
    plan = llama_plan().evolve(
        stack=StackName.trainer, strategy=Strategy.ddp, precision=Precision.bf16
    )
    report = estimate(plan)
    app = make_app(plan, None)
    async with app.run_test(size=(200, 60)) as pilot:
        await pilot.pause()
        shown = region_text(app, app.screen.query_one(LeverList))
    lines = [line.strip("│ ") for line in shown.splitlines() if line.startswith("│")][1:]
    rows = {line.split("  ")[0]: line for line in lines}
    shard = rows["Shard further"]
    assert (
        " n/a " in shard and "shards no further than ddp" in shard and "(not applicable)" in shard
    )
    assert " on " in rows["FlashAttention"]
    pending = [lever for lever in report.levers if lever.state.value == "pending"]
    assert " 0.0 " not in shown and all(lever.saves_bytes > 0 for lever in pending)
    # the largest saving first, as in `memtui estimate`
    assert list(rows)[: len(pending)] == [lever.name for lever in pending]
