"""What a new user gets with no `--stack`: on every published run of
benchmarks/published.py, the stack the default rule chooses (memtui/commands/default_stack.py)
is never more often under the measurement by more than 10% than the stack that ran the job, and
a stack whose own loss is the costly one (LitGPT's chunked loss, `OWN`) is not dropped because
memtui's default loss is one it does not run."""

from __future__ import annotations

from pathlib import Path

from benchmark_modules import load_benchmark

from memtui.cli import build_parser
from memtui.commands.default_stack import choose
from memtui.commands.plan_flags import plan_from_args
from memtui.estimator.choices import StackName

ROOT = Path(__file__).resolve().parent.parent
published = load_benchmark("published")


def test_the_default_is_under_no_more_often_than_the_named_stack() -> None:
    named = [published.predict(run) for run in published.RUNS]
    default = [published.predict_default(run) for run in published.RUNS]

    def under(outcomes: list) -> set[str]:  # type: ignore[type-arg]
        return {o.run.id for o in outcomes if o.error < -0.10}

    assert under(default) <= under(named)


def _without_stack(flags: str) -> list[str]:
    words = flags.split()
    at = words.index("--stack")
    return ["estimate", *words[:at], *words[at + 2 :]]


def test_litgpt_is_a_candidate_with_its_own_loss() -> None:
    run = next(r for r in published.RUNS if "--stack litgpt" in r.flags and "--loss" not in r.flags)
    args = build_parser().parse_args(_without_stack(run.flags))
    assert "litgpt" in choose(args, plan_from_args(args), None).why  # weighed with its loss
    # a loss the user names is kept: LitGPT cannot run the full loss, so it is left out
    args = build_parser().parse_args([*_without_stack(run.flags), "--loss", "full"])
    chosen = choose(args, plan_from_args(args), None)
    assert "litgpt" not in chosen.why
    assert chosen.plan.stack is not StackName.litgpt
