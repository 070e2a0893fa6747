"""Human output of `memtui estimate`: rich tables in GB (10^9 bytes), said on every header."""

from __future__ import annotations

from typing import TYPE_CHECKING

from rich.console import Console
from rich.markup import escape
from rich.table import Table
from rich.text import Text

from memtui.estimator.objectives import OBJECTIVE_TERMS, objective_line, spec_of
from memtui.estimator.report import Verdict
from memtui.estimator.units import GB, format_count
from memtui.text import LINE, shown

if TYPE_CHECKING:
    from memtui.estimator import Plan, Report


def _gb(n: int) -> str:
    return f"{n / GB:,.2f}"


def print_report(
    plan: Plan,
    report: Report,
    console: Console | None = None,
    gpu_assumption: str | None = None,
    why_stack: str = "",
) -> None:
    """The report as rich tables; `gpu_assumption`: the GPU count the verdict rests on,
    assumed; `why_stack` is how the stack was chosen when the user named none
    (`memtui.commands.default_stack`), said on the verdict line."""
    console = console or Console()
    b, hw = report.budget, plan.hardware
    arch = plan.model.architecture
    console.print(
        Text(plan.model.name, style="bold")
        + Text(
            f": {format_count(report.parameters.total)} parameters "
            f"({format_count(report.parameters.trainable)} trainable), {plan.method.value}, "
            f"{plan.precision.value}, {plan.optimizer.value}, {plan.strategy.value} on "
            f"{hw.nodes} x {hw.gpus_per_node} x {hw.gpu_name} ({hw.gpu_memory / GB:.1f} GB "
            f"each); stack: {report.stack}"
        )
    )
    if plan.objective.value != "sft":
        console.print(f"objective {plan.objective.value}: {objective_line(plan)}")
    console.print(
        f"micro-batch {plan.micro_batch} x seq {plan.seq_len} x accum {plan.grad_accum}, "
        f"{plan.attention.value} attention, checkpointing {plan.checkpointing.value}, "
        f"{arch.num_layers} layers; static state {report.bytes_per_param:.2f} B/param"
    )
    for note in report.assumptions:
        console.print(Text(f"assumed: {shown(note, LINE)}", style="dim"))
    versions = ", ".join(
        f"{package.value} {version or 'current'} ({source})"
        for package, version, source in plan.versions.assumed()
    )
    console.print(Text(f"versions: {shown(versions, LINE)}", style="dim"))

    terms = Table(title="Per-GPU budget", title_justify="left")
    terms.add_column("Term")
    terms.add_column("GB", justify="right")
    terms.add_column("Source", overflow="fold")
    for t in b.terms:
        if t.bytes or t.key.value not in OBJECTIVE_TERMS:  # an objective's unused models: off
            terms.add_row(t.label, _gb(t.bytes), t.source)
    terms.add_row(
        "[bold]Total[/]",
        f"[bold]{_gb(b.total)}[/]",
        f"as nvidia-smi shows it; tensors (max_memory_allocated) {_gb(b.allocated)} GB, "
        f"reserved {_gb(b.reserved)} GB, static {_gb(b.static)} GB",
    )
    terms.add_row("Capacity", _gb(b.capacity), hw.gpu_name)
    console.print(terms)
    if spec_of(plan).online:
        generator = b.term("generator")
        console.print(
            f"Trainer's share {_gb(b.total - generator)} GB, generator's share {_gb(generator)} "
            f"GB per GPU during the training step (vLLM: {plan.vllm_mode.value})"
        )
    console.print(
        "Runtime overhead: "
        + ", ".join(f"{r.name} {_gb(r.bytes)} GB ({r.where})" for r in report.runtime if r.bytes)
    )
    phases = Table(title="Phases (busiest GPU, CPU RAM per node)", title_justify="left")
    for col in ("Phase", "GPU GB", "CPU RAM GB", "What"):
        phases.add_column(col, justify="left" if col in ("Phase", "What") else "right")
    for phase in report.phases:
        phases.add_row(
            phase.name, _gb(phase.gpu_bytes), _gb(phase.cpu_bytes_per_node), phase.source
        )
    console.print(phases)
    colour = {Verdict.fits: "green", Verdict.may_not_fit: "yellow"}.get(b.verdict, "red")
    verdict = f"[{colour}]{b.verdict.value}[/]"
    peak = "" if b.peak_phase == "training step" else f" (peak in {b.peak_phase})"
    how = f"; {escape(why_stack)}" if why_stack else ""
    line = f"{verdict} (stack: {report.stack}{how}): headroom {_gb(b.headroom)} GB per GPU{peak}"
    if gpu_assumption:
        console.print(f"{line} [yellow]assumed: {escape(gpu_assumption)}[/]", soft_wrap=True)
    else:
        console.print(line)
    if b.band is not None:
        top = b.band.top(max(b.total, b.peak_bytes))
        console.print(f"  {escape(str(b.band))}: up to {_gb(top)} GB per GPU", highlight=False)

    strat = Table(title="Strategies (per GPU)", title_justify="left")
    for col in ("Strategy", "B/param/GPU", "Static GB", "Total GB", "Fits", "Max micro-batch"):
        strat.add_column(col, justify="left" if col == "Strategy" else "right")
    refused: dict[str, list[str]] = {}  # why -> the strategies refused for it
    for row in report.strategies:
        mark = "*" if row.strategy is plan.strategy else ""
        if not row.applicable:  # the stack cannot run it: no figures, the reason below
            strat.add_row(f"{row.strategy.value}{mark}", "-", "-", "-", "n/a", "-")
            why = row.note.replace(f", not {row.strategy.value}", "")
            refused.setdefault(why, []).append(row.strategy.value)
            continue
        strat.add_row(
            f"{row.strategy.value}{mark}",
            f"{row.per_gpu_static / plan.model.parameters:.2f}",
            _gb(row.per_gpu_static),
            _gb(row.per_gpu_total),
            "yes" if row.fits else ("static only" if row.fits_static else "no"),
            str(row.max_micro_batch),
        )
    console.print(strat)
    for why, names in refused.items():
        console.print(f"n/a ({', '.join(names)}): {why}", markup=False)

    levers = Table(title="Levers, in the order to pull them", title_justify="left")
    for col in ("Lever", "Saves GB", "Cost", "State"):
        levers.add_column(col, justify="right" if col == "Saves GB" else "left")
    for lever in report.levers:
        levers.add_row(
            lever.name,
            "-" if lever.applied else _gb(lever.saves_bytes),
            lever.cost,
            "on" if lever.applied else "pending",
        )
    console.print(levers)
    c = report.communication
    console.print(
        f"Communication: {_gb(c.bytes_per_gpu_per_step)} GB per GPU per step, "
        f"{c.relative_to_ddp:.2f}x DDP, about {c.seconds_per_step:.2f} s on the links"
        + (
            f" ({_gb(c.tensor_parallel_bytes)} GB of it tensor parallel)"
            if c.tensor_parallel_bytes
            else ""
        )
    )
