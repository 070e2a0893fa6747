"""Human output of `memtui plan --fastest`: the ranked plans side by side, in GB (10^9 bytes)
and seconds, said on every header."""

from __future__ import annotations

from typing import TYPE_CHECKING

from rich.console import Console
from rich.table import Table
from rich.text import Text

from memtui.estimator.search import SEARCHED, strategy_words
from memtui.estimator.units import GB
from memtui.text import LINE, shown

if TYPE_CHECKING:
    from memtui.estimator.plan import Plan
    from memtui.estimator.report import StepTime
    from memtui.estimator.search import Search


def _gb(n: int) -> str:
    return f"{n / GB:,.1f}"


def print_search(
    found: Search[StepTime], why_stack: str = "", console: Console | None = None
) -> None:
    """The search's ranked plans as a table, the winner in words, the plan as given under
    them."""
    from memtui.estimator import estimate
    from memtui.estimator.error_band import band_for

    console = console or Console()
    base = found.base
    hw = base.hardware
    console.print(
        Text(shown(base.model.name, LINE), style="bold")
        + Text(
            f": {base.method.value}, {base.precision.value}, {base.optimizer.value} on "
            f"{hw.nodes} x {hw.gpus_per_node} x {shown(hw.gpu_name, LINE)} "
            f"({hw.gpu_memory / GB:.1f} GB each); stack: {base.stack.value}"
        )
    )
    if why_stack:
        console.print(Text(shown(why_stack, LINE), style="dim"))
    kept = ", ".join(name for name in SEARCHED if name in found.fixed) or "none"
    console.print(
        f"global batch {found.global_batch} sequences of {base.seq_len} tokens, kept; "
        f"kept as their flags gave them: {kept}"
    )
    band = band_for(base.stack, base.method)
    console.print(
        f"{found.estimated} plans estimated, {found.refused} refused by the stack's rules, "
        f"{found.fitting} fit with the top of the error band"
        + (f" ({band})" if band is not None else "")
    )
    if found.ranked:
        moments = any(
            c.plan.optimizer_state_dtype is not base.optimizer_state_dtype for c in found.ranked
        )
        console.print(_table(found, moments))
        best = found.ranked[0]
        console.print(
            Text("fastest: ", style="bold")
            + Text(
                f"{strategy_words(best.plan)}; {_choices(best.plan)}: {_gb(best.peak)} GB per "
                f"GPU ({_gb(best.top)} GB at the band's top), {best.seconds:.3g} s per "
                "optimizer step"
            )
        )
    report = estimate(base)
    given = report.budget
    console.print(
        f"as given: {base.strategy.value}, {_choices(base)}: {given.verdict.value} "
        f"({_gb(max(given.total, given.peak_bytes))} GB per GPU), "
        f"{report.step_time.seconds:.3g} s per optimizer step"
    )
    if found.ranked:
        console.print(
            Text(
                "write the fastest: memtui export --fastest with the same flags (and --format "
                "or --from)",
                style="dim",
            )
        )


def _choices(plan: Plan) -> str:
    return (
        f"tp {plan.tp}, micro-batch {plan.micro_batch} x accumulate {plan.grad_accum}, "
        f"checkpointing {plan.checkpointing.value}, loss {plan.loss.value}, offload "
        f"{plan.offload.value}, moments {plan.optimizer_state_dtype.value}"
    )


def _table(found: Search[StepTime], moments: bool) -> Table:
    table = Table(box=None, pad_edge=False, header_style="bold", padding=(0, 0, 0, 1))
    left = ["#", "strategy", "tp", "mb x acc", "ckpt", "loss", "offload"]
    for header in left + (["moments"] if moments else []):
        table.add_column(header, no_wrap=True)
    for header in ("peak GB", "room GB", "s/step", "vs #1"):
        table.add_column(header, justify="right", no_wrap=True)
    first = found.ranked[0].seconds
    for rank, c in enumerate(found.ranked, 1):
        p = c.plan
        cells = [
            str(rank),
            p.strategy.value,
            str(p.tp),
            f"{p.micro_batch} x {p.grad_accum}",
            p.checkpointing.value,
            p.loss.value,
            p.offload.value,
            *([p.optimizer_state_dtype.value] if moments else []),
            _gb(c.peak),
            _gb(c.headroom),
            f"{c.seconds:.3g}",
            f"{c.seconds / first - 1:+.1%}" if rank > 1 else "",
        ]
        table.add_row(*cells)
    return table
