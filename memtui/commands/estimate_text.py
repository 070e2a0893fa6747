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
    from memtui.estimator.report import StepTime, TokensTime


def _gb(n: int) -> str:
    return f"{n / GB:,.2f}"


def print_report(
    plan: Plan,
    report: Report,
    console: Console | None = None,
    gpu_assumption: str | None = None,
    why_stack: str = "",
    tokens: TokensTime | None = None,
) -> None:
    """The report as rich tables; `gpu_assumption`: the GPU count the verdict rests on,
    assumed; `why_stack` is how the stack was chosen when the user named none
    (`memtui.commands.default_stack`), said on the verdict line; `tokens`: the time to
    train a number of tokens (`--tokens`)."""
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

    levers = Table(title="Levers", title_justify="left")
    for col in ("Lever", "Saves GB", "Step time", "Cost", "State"):
        levers.add_column(col, justify="right" if col in ("Saves GB", "Step time") else "left")
    for lever in report.levers:
        levers.add_row(
            lever.name,
            "-" if lever.applied else _gb(lever.saves_bytes),
            lever.time_text,
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
    _print_step_time(console, report.step_time, tokens)


def _duration(seconds: float) -> str:
    """Seconds as the largest units that read well: 42.0 s, 3 min 12 s, 5 h 07 min, 2 d 3 h."""
    if seconds < 60:
        return f"{seconds:.2f} s"
    minutes, sec = divmod(round(seconds), 60)
    if minutes < 60:
        return f"{minutes} min {sec:02d} s"
    hours, minutes = divmod(minutes, 60)
    if hours < 48:
        return f"{hours} h {minutes:02d} min"
    days, hours = divmod(hours, 24)
    return f"{days} d {hours} h"


def _print_step_time(console: Console, step: StepTime, tokens: TokensTime | None) -> None:
    assumed = " (assumed: nearest preset by compute capability)" if step.card_assumed else ""
    console.print(
        f"Step time on {step.card}{assumed}: {_duration(step.seconds)} per optimizer step, "
        f"{_duration(step.micro_step_seconds)} per micro-step, "
        f"{step.tokens_per_second_per_gpu:,.0f} tokens/s per GPU, MFU {100 * step.mfu:.1f}% "
        f"of {step.peak_flops / 1e12:,.1f} TFLOPS dense",
        highlight=False,
    )
    parts = Table(title="Step time by part (per optimizer step)", title_justify="left")
    for col in ("Part", "Seconds", "Share", "Source"):
        parts.add_column(col, justify="right" if col in ("Seconds", "Share") else "left")
    for part in step.parts:
        if part.seconds:
            share = f"{100 * part.seconds / step.seconds:.1f}%"
            parts.add_row(part.kind.value, f"{part.seconds:.3f}", share, part.source)
    console.print(parts)
    for note in step.not_modelled:
        console.print(Text(f"not timed: {note}", style="dim"))
    if tokens is not None:
        console.print(
            f"{format_count(tokens.tokens)} tokens: {tokens.steps:,} optimizer steps, "
            f"about {_duration(tokens.seconds)}",
            highlight=False,
        )
