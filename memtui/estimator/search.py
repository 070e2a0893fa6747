"""The fastest plan that fits: a search over what the plan's stack can run, ranked by step time.

The searched choices are `SEARCHED`: the strategy, the tensor-parallel degree, offload, the
optimizer state's dtype (only where the caller allows it: bf16 moments change the numerics),
the loss kernel, the checkpointing mode, and the micro-batch with the gradient accumulation
that keeps the global batch (micro-batch x accumulation x data-parallel GPUs, in sequences)
the plan has. A choice the caller names in `fixed` keeps the plan's value; every other one
takes each value the stack's record allows (`memtui.estimator.capabilities.CAPABILITIES`),
and a candidate is kept only when `Plan.check_rules` accepts it (the stack's own refusals,
parameter offload needing sharded parameters, whole heads per tensor-parallel rank) and when
the top of the error band of its largest phase fits the card (`memtui.estimator.budget.
band_top`: what a FITS verdict means). The model, the method, the optimizer, the precision,
the stack and the hardware are never changed: they are the job the user asked about.

Pruning, none of which can drop the fastest plan that fits:
- the static state (weights, gradients, master weights, optimizer state) does not depend on
  the activation choices: when its band top alone exceeds the card, the activation choices
  of that strategy, degree, offload and dtype are not tried;
- the activations and logits grow with the micro-batch and nothing else does (the premise of
  `memtui.estimator.budget.max_micro_batch`), so micro-batches are tried from the smallest
  and a checkpointing mode that does not fit one is not tried at a larger one;
- of the checkpointing modes that fit a micro-batch only the one that recomputes least is
  timed: the others add work and change nothing else, slower plans of the same choices;
- HSDP on a single node shards over the same GPUs as FSDP's full sharding: not tried twice;
- the state dtype is tried only for an optimizer whose moments take the plan's dtype (not
  8-bit, factored or bitsandbytes' fp32 state);
- a plan that is a faster one under another strategy's name (the same peak and seconds,
  every other choice equal: ZeRO-3 and FSDP on the generic stack, any strategy on one
  data-parallel GPU) is listed once;
- the static state of each (strategy, degree, offload, dtype) is memoised by the stacks
  (`Plan.state_key`), so the activation choices re-use it.

The ranking is a parameter (`Timing`; `STEP_TIME` is memtui's step-time model,
`memtui.estimator.step_time`): the search sorts by its seconds per optimizer step (the global
batch is the same for every candidate, so these are comparable), then by headroom.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Generic, TypeVar

from memtui.estimator.budget import band_top, breakdown
from memtui.estimator.capabilities import CAPABILITIES
from memtui.estimator.choices import Checkpointing, StateDtype
from memtui.estimator.optimizers import optimizer_spec
from memtui.estimator.phases import phases
from memtui.estimator.plan import Plan
from memtui.estimator.report import StepTime
from memtui.estimator.step_time import step_time
from memtui.estimator.strategies import strategy_spec

T = TypeVar("T")

SEARCHED = (
    "strategy",
    "tp",
    "offload",
    "optimizer_state_dtype",
    "loss",
    "checkpointing",
    "micro_batch",
    "grad_accum",
)
"""The plan fields the search moves, each unless it is fixed."""


@dataclass(frozen=True)
class Timing(Generic[T]):
    """How the search prices a plan: `of` gives the step-time model's answer for a plan,
    `seconds` reads its seconds per optimizer step."""

    of: Callable[[Plan], T]
    seconds: Callable[[T], float]


STEP_TIME: Timing[StepTime] = Timing(of=step_time, seconds=lambda t: t.seconds)
"""The step-time model (`memtui.estimator.step_time`): what `memtui plan --fastest` and the
dashboard rank by."""


@dataclass(frozen=True)
class Candidate(Generic[T]):
    """One plan that fits with the top of its error band."""

    plan: Plan
    peak: int
    """Bytes per GPU of its largest phase (the training step, loading or saving)."""
    top: int
    """The largest true peak the error band allows for `peak`, bytes per GPU."""
    timing: T
    """The step-time model's answer for the plan."""
    seconds: float
    """Seconds per optimizer step."""

    @property
    def headroom(self) -> int:
        """capacity - peak, bytes per GPU (as the budget's headroom)."""
        return self.plan.hardware.gpu_memory - self.peak

    def changes(self, base: Plan) -> dict[str, object]:
        """The searched fields whose value differs from `base`'s."""
        return {
            name: getattr(self.plan, name)
            for name in SEARCHED
            if getattr(self.plan, name) != getattr(base, name)
        }


@dataclass(frozen=True)
class Search(Generic[T]):
    """The ranked plans that fit and what the search looked at."""

    base: Plan
    ranked: tuple[Candidate[T], ...]
    """The fastest first (ties: the larger headroom first), at most `keep` of them."""
    fitting: int
    """Distinct candidates that fit (before keeping the first `keep`)."""
    estimated: int
    """Candidate plans whose budget was computed."""
    refused: int
    """Candidate plans the stack's or the plan's rules refuse."""
    fixed: frozenset[str]
    """The searched fields held at the plan's value."""
    global_batch: int
    """Sequences per optimizer step, kept by every candidate."""


def strategy_words(plan: Plan) -> str:
    """How the plan's strategy holds the state, in the 13B analysis's words (docs/
    references.md): what it shards over how many GPUs, and per-block wrapping where the
    parameters are sharded (memtui.estimator.transient.communication_buffers: the block being
    computed and the prefetched one gathered)."""
    spec = strategy_spec(plan.strategy)
    n = spec.shard_count(plan)
    gpus = f"{n} GPU" + ("s" if n > 1 else "")
    if spec.shards_weights:
        where = f"inside each node ({gpus})" if spec.hybrid else f"over {gpus}"
        how = f"full sharding {where}, per-block wrapping"
    elif spec.shards_gradients:
        how = f"gradients and optimizer state sharded over {gpus}"
    elif spec.shards_optimizer:
        how = f"optimizer state sharded over {gpus}"
    else:
        how = "every GPU a whole replica"
    tp = f", tensor parallel over {plan.tp} GPUs" if plan.tp > 1 else ""
    return f"{plan.strategy.value} ({how}{tp})"


def _values(plan: Plan, name: str, fixed: frozenset[str], values: Iterator[object]) -> list[object]:
    """The values to try for `name`: the plan's own when fixed, else the plan's first and
    then the others (each once)."""
    own = getattr(plan, name)
    if name in fixed:
        return [own]
    return list(dict.fromkeys([own, *values]))


def _divisors(n: int) -> list[int]:
    return [d for d in range(1, n + 1) if n % d == 0]


def _distinct(found: list[Candidate[T]]) -> list[Candidate[T]]:
    """`found` without a plan that is an earlier one under another strategy's name: the same
    peak and seconds with every other choice equal (ZeRO-3 and FSDP on the generic stack, any
    strategy on one data-parallel GPU, where nothing is sharded)."""
    seen: set[tuple[object, ...]] = set()
    out = []
    for c in found:
        p = c.plan
        key = (c.peak, c.seconds, *(getattr(p, name) for name in SEARCHED if name != "strategy"))
        if key not in seen:
            seen.add(key)
            out.append(c)
    return out


RECOMPUTE = (Checkpointing.none, Checkpointing.selective, Checkpointing.full)
"""The checkpointing modes, least recomputed first."""


def _activation_choices(
    static: Plan,
    losses: list[object],
    modes: list[object],
    batches: list[int],
    per_rank: int,
    timing: Timing[T],
) -> tuple[list[Candidate[T]], int, int]:
    """The loss, checkpointing and micro-batch choices over `static` that fit: (candidates,
    plans estimated, plans refused). Per micro-batch only the mode that recomputes least
    among those that fit is timed: recomputing adds work and changes nothing else
    (Korthikanti et al. 2022 sec. 5: one more forward of what it does not keep), so the
    others are slower plans of the same choices."""
    capacity = static.hardware.gpu_memory
    ordered = sorted(modes, key=RECOMPUTE.index)  # type: ignore[arg-type]
    found: list[Candidate[T]] = []
    estimated = refused = 0
    for loss in losses:
        over: set[object] = set()  # modes a smaller micro-batch did not fit: nor does this
        for b in batches:
            for mode in ordered:
                if mode in over:
                    continue
                candidate = static.model_copy(
                    update={
                        "loss": loss,
                        "checkpointing": mode,
                        "micro_batch": b,
                        "grad_accum": per_rank // b,
                    }
                )
                try:
                    candidate.check_rules()
                except ValueError:
                    refused += 1
                    continue
                estimated += 1
                t = breakdown(candidate)
                top = band_top(candidate, peak := max(p.gpu_bytes for p in phases(candidate, t)))
                if top > capacity:
                    over.add(mode)  # a larger micro-batch holds more
                    continue
                answer = timing.of(candidate)
                found.append(Candidate(candidate, peak, top, answer, timing.seconds(answer)))
                break  # the modes after it recompute more: slower, the rest the same
    return found, estimated, refused


def search(
    plan: Plan,
    timing: Timing[T],
    fixed: frozenset[str] = frozenset(),
    allow_state_dtype: bool = False,
    keep: int = 5,
) -> Search[T]:
    """The plans that fit `plan`'s GPUs with the top of their error band, fastest first."""
    unknown = fixed - set(SEARCHED)
    if unknown:
        raise ValueError(f"not searched, cannot be fixed: {', '.join(sorted(unknown))}")
    caps = CAPABILITIES[plan.stack]
    hw = plan.hardware
    capacity = hw.gpu_memory
    global_batch = plan.micro_batch * plan.grad_accum * plan.data_parallel
    strategies = _values(
        plan,
        "strategy",
        fixed,
        # HSDP on one node is full sharding over the same GPUs
        (s for s in caps.strategies if not (strategy_spec(s).hybrid and hw.nodes == 1)),
    )
    # tensor parallelism inside a node, where its all-reduces run over NVLink (Narayanan et
    # al. 2021, sec. 3.3: "tensor model parallelism ... within a multi-GPU server"); powers of
    # two as Megatron-LM's configurations use
    degrees = _values(plan, "tp", fixed, (t for t in (1, 2, 4, 8, 16) if t <= hw.gpus_per_node))
    offloads = _values(plan, "offload", fixed, iter(caps.offloads))
    spec = optimizer_spec(plan.optimizer)
    takes_dtype = spec.layout == "dense" and spec.moments > 0 and spec.moment_width is None
    dtypes = _values(
        plan,
        "optimizer_state_dtype",
        fixed if allow_state_dtype and takes_dtype else fixed | {"optimizer_state_dtype"},
        iter(StateDtype),
    )
    losses = _values(plan, "loss", fixed, iter(caps.losses))
    modes = _values(plan, "checkpointing", fixed, iter(Checkpointing))

    found: list[Candidate[T]] = []
    estimated = refused = 0
    for strategy in strategies:
        for tp in degrees:
            assert isinstance(tp, int)
            data_parallel = hw.gpus // tp if hw.gpus % tp == 0 else 0
            if not data_parallel or global_batch % data_parallel:
                continue  # the global batch cannot be kept over these GPUs
            per_rank = global_batch // data_parallel
            batches = [
                b
                for b in _divisors(per_rank)
                if ("micro_batch" not in fixed or b == plan.micro_batch)
                and ("grad_accum" not in fixed or per_rank // b == plan.grad_accum)
            ]
            if not batches:
                continue
            for offload in offloads:
                for dtype in dtypes:
                    static = plan.model_copy(
                        update={
                            "strategy": strategy,
                            "tp": tp,
                            "offload": offload,
                            "optimizer_state_dtype": dtype,
                            "micro_batch": batches[-1],
                            "grad_accum": per_rank // batches[-1],
                        }
                    )
                    try:
                        static.check_rules()
                    except ValueError:
                        refused += 1
                        continue
                    estimated += 1
                    if band_top(static, breakdown(static).state.total) > capacity:
                        continue  # no activation choice makes the state smaller
                    more, seen, no = _activation_choices(
                        static, losses, modes, batches, per_rank, timing
                    )
                    found += more
                    estimated += seen
                    refused += no
    found.sort(key=lambda c: (c.seconds, -c.headroom))
    ranked = _distinct(found)
    return Search(
        base=plan,
        ranked=tuple(ranked[:keep]),
        fitting=len(ranked),
        estimated=estimated,
        refused=refused,
        fixed=fixed,
        global_batch=global_batch,
    )
