"""Estimator and CLI figures of docs/architecture.md, "Measuring and checking", measured in one run.

    python benchmarks/bench_estimator.py [--repeat N]

Prints medians: one full plan evaluation (budget, every strategy, levers, communication, with
and without the largest-micro-batch search), the search for every strategy, the search for
the fastest plan that fits (`memtui plan --fastest` on a 70B plan on 2 x 8 GPUs: how many
plans it estimated, cold and warm), and `memtui estimate --json` as a whole process beside its
floor (`python -c "import pydantic, rich.table"`) and, when DeepSpeed is installed, beside
DeepSpeed's own estimator call.
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
from memtui.estimator.budget import max_micro_batch
from memtui.estimator.levers import levers
from memtui.estimator.model_source import load_model


def median_seconds(fn: Callable[[], object], repeat: int) -> float:
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def process_seconds(argv: list[str], repeat: int) -> float:
    return median_seconds(lambda: subprocess.run(argv, check=True, capture_output=True), repeat)


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
    copies = iter(
        [plan.model_copy(update={"model": plan.model.model_copy(deep=True)}) for _ in range(repeat)]
    )
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
        "13B bare count, 4 x 80 GB, DDP": Plan(
            model=load_model("meta-llama/Llama-2-13b-hf"), strategy="ddp"
        ),
    }
    print("## In-process (median)")
    print(f"{'plan':<42} {'cold':>12} {'estimate()':>12} {'no search':>12} {'search x7':>12}")
    for name, plan in plans.items():
        # cold: a model never seen (nothing memoised), as after picking a model
        copies = iter(
            [
                plan.model_copy(update={"model": plan.model.model_copy(deep=True)})
                for _ in range(args.repeat)
            ]
        )
        cold = median_seconds(lambda c=copies: estimate(next(c)), args.repeat)
        estimate(plan)  # warm caches as the UI would after the first frame
        full = median_seconds(lambda p=plan: estimate(p), args.repeat)
        search = median_seconds(
            lambda p=plan: [max_micro_batch(p, s) for s in Strategy], args.repeat
        )

        def no_search(p: Plan = plan) -> None:
            from memtui.estimator.budget import breakdown, per_gpu_total

            for s in Strategy:
                per_gpu_total(p, s)
            levers(p, per_gpu_total(p), per_gpu_total, breakdown(p).state.trainable)

        evaluation = median_seconds(no_search, args.repeat)
        print(
            f"{name:<42} {cold * 1e3:>9.3f} ms {full * 1e3:>9.3f} ms "
            f"{evaluation * 1e3:>9.3f} ms {search * 1e3:>9.3f} ms"
        )
    print(
        "targets: full plan evaluation < 1 ms; search for every strategy < 20 ms "
        "(cold and estimate() include the search)"
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
