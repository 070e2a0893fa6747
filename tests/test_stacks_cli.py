"""`--stack` as a user meets it on the command line: plans a stack cannot run are refused in
one line (exit 2), flags not given adapt to the stack, and the output names the stack."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from memtui.cli import main
from memtui.estimator.capabilities import CAPABILITIES


def memtui(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "memtui", *args], capture_output=True, text=True)


def estimate_json(capsys: pytest.CaptureFixture[str], *flags: str) -> dict:
    assert main(["estimate", *flags, "--json"]) == 0
    return json.loads(capsys.readouterr().out)


@pytest.mark.parametrize(
    ("flags", "says"),
    [
        # LitGPT runs DDP or Fabric's FSDPStrategy, never DeepSpeed's ZeRO-2
        (["--stack", "litgpt", "--strategy", "zero2"], "the litgpt stack runs ddp, fsdp"),
        (["--stack", "deepspeed", "--strategy", "fsdp"], "the deepspeed stack runs zero1"),
        # Trainer's bf16=True is autocast over the loaded dtype: no separate fp32 master
        (["--stack", "trainer", "--precision", "bf16-mixed"], "not bf16-mixed"),
        (["--stack", "litgpt", "--loss", "full"], "not full"),  # chunked_cross_entropy only
        (["--stack", "deepspeed", "--loss", "chunked"], "not chunked"),
        (["--stack", "trainer", "--offload", "optimizer"], "not optimizer"),  # DDP: none
        # torchtune's optimizer_in_bwd is its own; Trainer has no such option
        (["--stack", "trainer", "--optimizer-in-backward"], "optimizer in backward"),
        (["--stack", "litgpt", "--checkpointing", "full", "--activation-offload"], "offload"),
        (["--stack", "torchtune", "--gpus", "8", "--strategy", "ddp"], "shard with FSDP"),
    ],
)
def test_a_plan_the_stack_cannot_run_exits_2_with_one_line(flags, says):
    out = memtui("estimate", *flags, "--json")
    assert out.returncode == 2, out.stdout[:200]
    assert out.stdout == ""
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1, out.stderr
    assert says in lines[0]


@pytest.mark.parametrize("stack", list(CAPABILITIES))
def test_stack_alone_adapts_the_flags_not_given_and_json_names_it(capsys, stack):
    data = estimate_json(capsys, "--stack", stack.value, "--gpus", "8")
    assert data["stack"] == CAPABILITIES[stack].label
    assert data["plan"]["stack"] == stack.value
    assert data["plan"]["strategy"] in {s.value for s in CAPABILITIES[stack].strategies}
    assert data["plan"]["precision"] in {p.value for p in CAPABILITIES[stack].precisions}
    assert data["plan"]["loss"] in {loss.value for loss in CAPABILITIES[stack].losses}
    refused = {k for k, row in data["strategies"].items() if not row["applicable"]}
    runs = {s.value for s in CAPABILITIES[stack].strategies}
    assert refused >= {s for s in data["strategies"] if s not in runs}
    per_gpu = data["per_gpu"]
    assert per_gpu["allocated"] <= per_gpu["reserved"] <= per_gpu["total"]
    assert [p["name"] for p in data["phases"]] == [
        "training step",
        "model loading",
        "checkpoint saving",
    ]


def test_text_output_names_the_stack_beside_the_verdict_and_marks_what_it_cannot_run():
    out = memtui("estimate", "--stack", "litgpt", "--gpus", "2", "--method", "lora")
    assert out.returncode == 0, out.stderr
    verdict = next(line for line in out.stdout.splitlines() if "FIT" in line)
    assert "(stack: LitGPT)" in verdict
    rows = {line.split()[1].rstrip("*"): line for line in out.stdout.splitlines()
            if line.startswith("│")}  # fmt: skip
    assert "n/a" in rows["zero2"] and "n/a" not in rows["fsdp"]
    assert (
        "n/a (zero1, zero2, zero3, fsdp-shard-grad-op, hsdp): the litgpt stack runs ddp, fsdp"
        in (" ".join(out.stdout.split()))
    )
    generic = memtui("estimate", "--gpus", "2", "--stack", "generic")
    assert "(stack: generic)" in next(ln for ln in generic.stdout.splitlines() if "FIT" in ln)
    assert "n/a" not in generic.stdout  # the generic stack runs every strategy
    # no --stack: the most demanding framework stack that runs the plan, said with why
    chosen = " ".join(memtui("estimate", "--gpus", "2").stdout.split())
    assert "(stack: FSDP1 (FullyShardedDataParallel); no --stack: the most demanding of" in chosen
