"""Estimator and CLI figures of docs/architecture.md, "Measuring and checking", measured in one run.

    python benchmarks/bench_estimator.py [--repeat N]

Prints medians: one full plan evaluation (budget, every strategy, levers, communication, with
and without the largest-micro-batch search), the search for every strategy, the search for
the fastest plan that fits (`memtui plan --fastest` on a 70B plan on 2 x 8 GPUs: how many
plans it estimated, cold and warm), and `memtui estimate --json` as a whole process beside its
floor (`python -c "import pydantic, rich.table"`) and, when DeepSpeed is installed, beside
DeepSpeed's own estimator call.

Cold is a model never seen: the estimator's caches key on an architecture's value, so each
cold run gets an architecture of its own (its vocabulary one token larger per run, the same
work), never a copy that those caches already hold. Warm is the same plan again (the
dashboard redrawing it); "new plan" is a plan never estimated of a warm model (its sequence
one token shorter per run, as after a key press), where only what the plan shares with
earlier ones is remembered.
Figures, not assertions: the machines are shared, so compare the ratios of one run.
"""

from __future__ import annotations

import argparse
import importlib.util
import statistics
import subprocess
import sys
import time
from collections.abc import Callable

from memtui.estimator import Plan, Strategy, estimate
from memtui.estimator.architecture import Architecture
from memtui.estimator.budget import breakdown, max_micro_batch, per_gpu_total
from memtui.estimator.levers import levers
from memtui.estimator.model_source import load_model
from memtui.estimator.plan import ModelSpec

FULL_PLAN_TARGET_S = 1e-3
"""A full plan evaluation (every strategy and every lever, no micro-batch search), warm."""


def median_seconds(fn: Callable[[], object], repeat: int) -> float:
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def process_seconds(argv: list[str], repeat: int) -> float:
    return median_seconds(lambda: subprocess.run(argv, check=True, capture_output=True), repeat)


def unseen(plan: Plan, repeat: int) -> list[Plan]:
    """`repeat` copies of `plan`, each with an architecture no cache holds (built anew, its
    vocabulary 1, 2, ... tokens larger): what a model picked for the first time costs."""
    arch = plan.model.architecture
    return [
        plan.model_copy(
            update={
                "model": ModelSpec.from_architecture(
                    plan.model.name,
                    Architecture.model_validate(
                        {**arch.model_dump(), "vocab_size": arch.vocab_size + 1 + i}
                    ),
                )
            }
        )
        for i in range(repeat)
    ]


def full_evaluation(plan: Plan) -> None:
    """Every strategy and every lever of `plan`, without the micro-batch search."""
    for s in Strategy:
        per_gpu_total(plan, s)
    levers(plan, per_gpu_total(plan), per_gpu_total, breakdown(plan).state.trainable)


def fastest_search(repeat: int) -> None:
    """`memtui plan --fastest`'s search for a 70B full fine-tune on 2 x 8 H100: cold (a model
    never seen: no static state memoised) and warm, and how many plans it looked at."""
    from memtui.estimator.plan import Hardware
    from memtui.estimator.search import STEP_TIME, search

    plan = Plan(
        model=load_model("meta-llama/Meta-Llama-3-70B"),
        hardware=Hardware(gpus_per_node=8, nodes=2),
        micro_batch=2,
        grad_accum=8,
    )
    copies = iter(unseen(plan, repeat))
    cold = median_seconds(lambda: search(next(copies), STEP_TIME), repeat)
    found = search(plan, STEP_TIME)
    warm = median_seconds(lambda: search(plan, STEP_TIME), repeat)
    print("\n## The fastest plan that fits (median of", repeat, "searches)")
    print(
        f"Llama-3-70B full, 2 x 8 H100, global batch {found.global_batch}: "
        f"{found.estimated} plans estimated, {found.refused} refused, {found.fitting} fit; "
        f"cold {cold * 1e3:.1f} ms, warm {warm * 1e3:.1f} ms (target: under 1 s)"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=200, help="in-process repetitions")
    parser.add_argument("--process-repeat", type=int, default=15, help="process repetitions")
    args = parser.parse_args()

    plans = {
        "Llama-3-8B, 8 x H100, FSDP, full ckpt": Plan(
            model=load_model("meta-llama/Meta-Llama-3-8B"), checkpointing="full"
        ),
        "Mixtral-8x7B, 8 x H100, ZeRO-3, LoRA": Plan(
            model=load_model("mistralai/Mixtral-8x7B-v0.1"), strategy="zero3", method="lora"
        ),
        "Llama-2-13B, 8 x H100, DDP": Plan(
            model=load_model("meta-llama/Llama-2-13b-hf"), strategy="ddp"
        ),
    }
    print("## In-process (median)")
    print(
        f"{'plan':<42} {'cold':>12} {'estimate()':>12} {'no search':>12} {'new plan':>12} "
        f"{'search x7':>12}"
    )
    worst = 0.0
    for name, plan in plans.items():
        # cold: a model never seen (nothing memoised), as after picking a model
        copies = iter(unseen(plan, args.repeat))
        cold = median_seconds(lambda c=copies: estimate(next(c)), args.repeat)
        estimate(plan)  # warm caches as the UI would after the first frame
        full = median_seconds(lambda p=plan: estimate(p), args.repeat)
        search = median_seconds(
            lambda p=plan: [max_micro_batch(p, s) for s in Strategy], args.repeat
        )
        evaluation = median_seconds(lambda p=plan: full_evaluation(p), args.repeat)
        worst = max(worst, evaluation)
        fresh = iter(
            [plan.model_copy(update={"seq_len": plan.seq_len - 1 - i}) for i in range(args.repeat)]
        )
        new = median_seconds(lambda f=fresh: full_evaluation(next(f)), args.repeat)
        print(
            f"{name:<42} {cold * 1e3:>9.3f} ms {full * 1e3:>9.3f} ms "
            f"{evaluation * 1e3:>9.3f} ms {new * 1e3:>9.3f} ms {search * 1e3:>9.3f} ms"
        )
    print(
        "targets: full plan evaluation (no search) < 1 ms warm; search for every strategy "
        "< 20 ms (cold and estimate() include the search)"
    )
    print(
        f"full plan evaluation, warm: {worst * 1e3:.3f} ms for the slowest plan, "
        f"{worst / FULL_PLAN_TARGET_S:.2f} x the 1 ms target"
    )

    fastest_search(max(3, args.repeat // 20))

    print("\n## Whole process (median of", args.process_repeat, "runs)")
    floor = process_seconds(
        [sys.executable, "-c", "import pydantic, rich.table"], args.process_repeat
    )
    cli = process_seconds(
        [
            sys.executable,
            "-m",
            "memtui",
            "estimate",
            "--model",
            "meta-llama/Meta-Llama-3-8B",
            "--json",
        ],
        args.process_repeat,
    )
    # `import pydantic` is lazy; defining the first model pulls in pydantic's schema machinery,
    # which any pydantic-based CLI pays. Shown as a second, stricter floor.
    model_floor = process_seconds(
        [
            sys.executable,
            "-c",
            "import rich.table\nfrom pydantic import BaseModel\nclass M(BaseModel):\n x: int",
        ],
        args.process_repeat,
    )
    print(f"floor: python -c 'import pydantic, rich.table'   {floor * 1e3:8.1f} ms")
    print(f"floor + one pydantic model defined             {model_floor * 1e3:8.1f} ms")
    print(
        f"memtui estimate --json                          {cli * 1e3:8.1f} ms"
        f"  ({cli / floor:.2f} x floor, target <= 1.3 x; "
        f"{cli / model_floor:.2f} x the pydantic-model floor)"
    )
    if importlib.util.find_spec("deepspeed"):
        peer = process_seconds(
            [
                sys.executable,
                "-c",
                "from deepspeed.runtime.zero.stage3 import "
                "estimate_zero3_model_states_mem_needs_all_cold as f; "
                "f(total_params=8_030_261_248, largest_layer_params=525_336_576, "
                "num_gpus_per_node=8, num_nodes=1)",
            ],
            args.process_repeat,
        )
        print(
            f"DeepSpeed estimate_zero3_..._all_cold          {peer * 1e3:8.1f} ms"
            f"  (memtui is {peer / cli:.1f} x faster)"
        )
    else:
        print("DeepSpeed not installed: its estimator call is not run beside memtui")


if __name__ == "__main__":
    main()
