"""`memtui plan --fastest`: the fastest plans that fit, side by side, and how to write the winner.

    memtui plan --fastest --model meta-llama/Meta-Llama-3-70B --gpus 8 --nodes 2
    memtui plan --fastest --from ds.json train.sh --json
    memtui export --fastest --from ds.json -o ds-fastest.json     (the winner, as the job's file)

The plan is built as `memtui estimate` builds it (every plan flag, --from FILE..., --plan, and
the stack chosen by its rule when none is named). `memtui.estimator.search.search` then moves
what the plan's stack can run: strategy, tensor parallelism, offload, loss kernel,
checkpointing, micro-batch with the accumulation that keeps the global batch, and with
--search-state-dtype the optimizer moments' dtype. A searched choice whose own flag was given
is kept as given (`memtui.commands.plan_flags.given_fields`); the values the --from files or a
--plan file set are where the search starts, not choices it keeps. Every plan shown fits with
the top of its error band (a FITS verdict), ranked by seconds per optimizer step.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import TYPE_CHECKING, Any

from memtui.commands.plan_flags import add_plan_arguments, given_fields, plan_and_import
from memtui.errors import UsageError

if TYPE_CHECKING:
    from memtui.estimator.plan import Plan
    from memtui.estimator.report import StepTime
    from memtui.estimator.search import Candidate, Search


def add_search_arguments(parser: argparse.ArgumentParser) -> None:
    """--fastest and what the search may move beyond the plan's own choices (`memtui plan`,
    `memtui export`)."""
    parser.add_argument(
        "--fastest",
        action="store_true",
        help="the fastest plan that fits with the top of the error band: strategy, tensor "
        "parallelism, offload, loss, checkpointing, micro-batch x accumulation (the global "
        "batch kept) searched over what the stack runs; a searched choice given as a flag "
        "is kept",
    )
    parser.add_argument(
        "--search-state-dtype",
        action="store_true",
        help="--fastest may also keep the optimizer moments in bf16 (changes the numerics: "
        "only where the run tolerates it)",
    )


def register(sub: Any) -> None:
    parser = sub.add_parser(
        "plan",
        help="search the plans that fit: --fastest, ranked by step time",
        description="Search the plans that fit the GPUs with the top of the error band and "
        "rank them (--fastest: by seconds per optimizer step). `memtui export --fastest` "
        "with the same flags writes the winner.",
    )
    add_plan_arguments(parser)
    add_search_arguments(parser)
    parser.add_argument("--top", type=int, default=5, metavar="N", help="plans shown (5)")
    parser.add_argument("--json", action="store_true", help="print one JSON object (bytes)")
    parser.set_defaults(run=run)


def fastest(args: argparse.Namespace, plan: Plan, keep: int = 1) -> Search[StepTime]:
    """The search over `plan`, keeping the searched choices the flags gave."""
    from memtui.estimator.search import SEARCHED, STEP_TIME, search

    fixed = given_fields(args) & frozenset(SEARCHED)
    return search(plan, STEP_TIME, fixed, args.search_state_dtype, keep)


def _none_fit(found: Search[StepTime]) -> str:
    kept = ", ".join(sorted(found.fixed)) or "none"
    return (
        f"no plan fits with the top of the error band ({found.estimated} estimated); "
        f"choices kept as given: {kept}: drop their flags, allow --search-state-dtype, or "
        "add GPUs"
    )


def fastest_plan(args: argparse.Namespace, plan: Plan) -> Plan:
    """The winner of the search over `plan` (`memtui export --fastest`); a UsageError when
    nothing fits."""
    found = fastest(args, plan)
    if not found.ranked:
        raise UsageError(_none_fit(found))
    return found.ranked[0].plan


def unwritten(args: argparse.Namespace, winner: Plan, written: str) -> list[str]:
    """The winner's searched choices the config `written` does not carry: the file read back
    (with the other flags) to a plan that differs there (`memtui export --fastest`; a
    DeepSpeed config holds no checkpointing or loss kernel, a Trainer's argument does)."""
    from memtui.estimator.search import SEARCHED

    back = plan_and_import(argparse.Namespace(**{**vars(args), "from_files": [written]}))[0]
    return [
        f"{name} {getattr(getattr(winner, name), 'value', getattr(winner, name))}"
        for name in SEARCHED
        if getattr(back, name) != getattr(winner, name)
    ]


def run(args: argparse.Namespace) -> int:
    if not args.fastest:
        raise UsageError("give --fastest (the plans that fit, ranked by step time)")
    if args.top < 1:
        raise UsageError(f"--top {args.top}: show at least 1 plan")
    from memtui.commands.default_stack import choose

    chosen = choose(args, *plan_and_import(args))
    plan = chosen.plan
    found = fastest(args, plan, args.top)
    if args.json:
        print(json.dumps(_document(found, chosen.why), indent=2))
    else:
        from memtui.commands.plan_text import print_search

        print_search(found, chosen.why)
    if not found.ranked:
        print(f"memtui plan: {_none_fit(found)}", file=sys.stderr)
        return 1
    return 0


def _entry(candidate: Candidate[StepTime], base: Plan, rank: int) -> dict[str, Any]:
    from memtui.estimator import estimate
    from memtui.estimator.report import EstimateDocument

    document = EstimateDocument.of(candidate.plan, estimate(candidate.plan))
    return {
        "rank": rank,
        "changes": {k: getattr(v, "value", v) for k, v in candidate.changes(base).items()},
        "plan": document.plan,
        "budget": {
            "per_gpu": document.per_gpu,
            "peak": candidate.peak,
            "band_top": candidate.top,
            "capacity": document.capacity,
            "headroom": document.headroom,
            "verdict": document.verdict.value,
            "peak_phase": document.peak_phase,
        },
        # as `memtui estimate --json` writes it
        "step_time": document.model_dump(mode="json", include={"step_time"})["step_time"],
    }


def _document(found: Search[StepTime], why_stack: str) -> dict[str, Any]:
    """What `memtui plan --fastest --json` prints: bytes as integers, seconds as floats."""
    from memtui.estimator.error_band import band_for

    base = found.base
    band = band_for(base.stack, base.method)
    return {
        "model": base.model.name,
        "stack": base.stack.value,
        "stack_choice": why_stack,
        "global_batch": found.global_batch,
        "seq_len": base.seq_len,
        "fixed": sorted(found.fixed),
        "band": band.model_dump(mode="json") if band is not None else None,
        "searched": {
            "estimated": found.estimated,
            "refused": found.refused,
            "fitting": found.fitting,
        },
        "plans": [_entry(c, base, rank) for rank, c in enumerate(found.ranked, 1)],
    }
