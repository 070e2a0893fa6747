"""benchmarks/throughput.py: the published throughput runs are whole, cited and plannable."""

from __future__ import annotations

import importlib.util
import re
import sys
from pathlib import Path
from typing import Any

import pytest

from memtui.estimator.hardware import GPUS
from memtui.estimator.plan import Plan

ROOT = Path(__file__).resolve().parent.parent
_SPEC = importlib.util.spec_from_file_location("throughput", ROOT / "benchmarks" / "throughput.py")
assert _SPEC is not None and _SPEC.loader is not None
throughput = importlib.util.module_from_spec(_SPEC)
sys.modules["throughput"] = throughput
_SPEC.loader.exec_module(throughput)

# the script is loaded from its file, so its types reach mypy as Any
RUNS = throughput.RUNS
IDS = [r.id for r in RUNS]
# a source is a repository path at a commit ("owner/repo path @hex") or a page address
_SOURCE = re.compile(r"^([\w.-]+/[\w.-]+ \S+ @[0-9a-f]{7,40}\b.*|https?://\S+)$")


def test_at_least_thirty_runs_are_compared() -> None:
    assert len(RUNS) >= 40
    assert len(throughput.compared()) >= 30


def test_ids_are_unique() -> None:
    assert len(set(IDS)) == len(IDS)


@pytest.mark.parametrize("run", RUNS, ids=IDS)
def test_every_run_has_a_source_and_a_quote_with_its_figure(run: Any) -> None:
    assert _SOURCE.match(run.source), run.source
    assert run.quote.strip()
    # the quoted line holds the published figure, as printed (thousands separators aside)
    printed = {f"{run.figure:g}", f"{run.figure:.2f}", f"{run.figure:,.0f}", f"{run.figure:.1f}"}
    assert any(p in run.quote for p in printed), (run.figure, run.quote)
    assert run.figure > 0


@pytest.mark.parametrize("run", RUNS, ids=IDS)
def test_every_run_builds_its_whole_plan(run: Any) -> None:
    plan = throughput.plan_for(run)
    assert isinstance(plan, Plan)
    config = run.config
    assert plan.hardware.gpus == config.total_gpus
    assert plan.hardware.gpu_name == GPUS[config.card].name
    assert plan.method.value == config.method
    assert plan.precision.value == config.precision
    assert plan.optimizer.value == config.optimizer
    assert plan.strategy.value == config.strategy
    assert (plan.micro_batch, plan.seq_len, plan.grad_accum) == (
        config.micro_batch,
        config.seq_len,
        config.grad_accum,
    )
    assert plan.checkpointing.value == config.checkpointing
    assert plan.stack.value == config.stack


@pytest.mark.parametrize("run", RUNS, ids=IDS)
def test_per_gpu_throughput_divides_a_job_figure_by_its_gpus(run: Any) -> None:
    per_gpu = run.tokens_per_second_per_gpu
    if run.per is throughput.Per.gpu:
        assert per_gpu == run.figure
    elif run.per is throughput.Per.step:
        # a step time: each data-parallel GPU's own tokens of one optimizer step over it
        c = run.config
        assert "--tp" not in c.extra
        assert per_gpu * run.figure == pytest.approx(c.micro_batch * c.seq_len * c.grad_accum)
    else:
        assert per_gpu * run.config.total_gpus == pytest.approx(run.figure)


def test_listed_runs_say_why() -> None:
    listed = throughput.listed()
    assert listed and all(len(r.cannot) > 20 for r in listed)


def test_the_report_prints_an_error_for_every_compared_run() -> None:
    text, outcomes = throughput.report()
    assert [o.run.id for o in outcomes] == [r.id for r in throughput.compared()]
    rows = {line.split(" | ")[0].lstrip("| ").split(" ")[0]: line for line in text.splitlines()}
    for o in outcomes:
        assert o.predicted > 0
        # the row shows the measured and predicted figures and the step-time error
        row = rows[o.run.id]
        assert f"{o.run.tokens_per_second_per_gpu:,.0f}" in row
        assert f"{o.error:+.1%}" in row
    for run in throughput.listed():
        assert f"- {run.id} (" in text
    assert "| all | " in text


def test_the_error_is_the_step_time_error() -> None:
    run = next(r for r in throughput.compared() if r.over is throughput.Over.optimizer_steps)
    o = throughput.outcome(run)
    tokens_per_gpu = o.step.tokens_per_step / o.plan.hardware.gpus
    measured_seconds = tokens_per_gpu / o.run.tokens_per_second_per_gpu
    assert o.error == pytest.approx(o.step.seconds / measured_seconds - 1)


def test_a_median_micro_step_figure_is_compared_without_the_optimizer_step() -> None:
    run = next(r for r in throughput.compared() if r.over is throughput.Over.micro_steps)
    o = throughput.outcome(run)
    tokens = o.plan.micro_batch * o.plan.seq_len
    assert o.predicted == pytest.approx(tokens / o.step.micro_step_seconds)
