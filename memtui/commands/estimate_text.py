"""Human output of `memtui estimate`: the verdict block first (it fits or not, the headroom, the
plan, the stack and versions it assumed, the error band), then the detail as rich tables, in GB
(10^9 bytes) or GiB (2^30, `--unit gib`), said on every header."""

from __future__ import annotations

from typing import TYPE_CHECKING

from rich.console import Console
from rich.markup import escape
from rich.table import Table
from rich.text import Text

from memtui.estimator.objectives import OBJECTIVE_TERMS, objective_line, spec_of
from memtui.estimator.report import LeverState, Verdict
from memtui.estimator.units import SizeUnit, format_count
from memtui.text import LINE, shown

if TYPE_CHECKING:
    from memtui.estimator import Plan, Report
    from memtui.estimator.report import StepTime, TokensTime


def _num(n: int, unit: SizeUnit) -> str:
    """Bytes as a bare number in `unit`, two decimals (the unit is said beside it)."""
    return f"{n / unit.scale:,.2f}"


def _parameters(plan: Plan, report: Report) -> str:
    """The model's parameters counted as the model picker counts them (the base model, without
    adapters: its catalog figure), the adapters apart, and what trains."""
    base = plan.model.parameters
    adapters = report.parameters.total - base
    apart = f", {format_count(adapters)} of adapters apart" if adapters else ""
    trainable = format_count(report.parameters.trainable)
    return f"{format_count(base)} parameters (base model{apart}), {trainable} trainable"


def _versions(plan: Plan) -> str:
    """Each framework's version, those from one source together: 'torch 2.13, transformers
    5.24 (not given: the release the stacks read); trl current (...)'."""
    by_source: dict[str, list[str]] = {}
    for package, version, source in plan.versions.assumed():
        by_source.setdefault(source, []).append(f"{package.value} {version or 'current'}")
    return "; ".join(f"{', '.join(names)} ({source})" for source, names in by_source.items())


def print_verdict(
    plan: Plan,
    report: Report,
    console: Console,
    unit: SizeUnit = SizeUnit.gb,
    gpu_assumption: str | None = None,
    why_stack: str = "",
) -> None:
    """The verdict block, a few lines a 24-row terminal shows whole: the verdict and headroom
    (with the stack, `why_stack` when memtui chose it, and `gpu_assumption`, the GPU count it
    rests on when assumed), the plan in one line, the error band, the versions and what the
    estimate assumed."""
    b, hw = report.budget, plan.hardware
    u = unit.value
    colour = {Verdict.fits: "green", Verdict.may_not_fit: "yellow"}.get(b.verdict, "red")
    peak = "" if b.peak_phase == "training step" else f" (peak in {b.peak_phase})"
    how = f"; {escape(why_stack)}" if why_stack else ""
    line = (
        f"[bold {colour}]{b.verdict.value}[/] (stack: {report.stack}{how}): "
        f"headroom {_num(b.headroom, unit)} {u} per GPU{peak}"
    )
    if gpu_assumption:
        line += f" [yellow]assumed: {escape(gpu_assumption)}[/]"
    console.print(line, soft_wrap=True)
    console.print(
        Text(f"  {plan.model.name}", style="bold")
        + Text(
            f": {_parameters(plan, report)}; {plan.method.value}, {plan.precision.value}, "
            f"{plan.optimizer.value}, {plan.strategy.value} on {hw.nodes} x {hw.gpus_per_node} "
            f"x {hw.gpu_name} ({_num(hw.gpu_memory, unit)} {u} each)"
        )
    )
    figure = max(b.total, b.peak_bytes)
    said = f"  peak {_num(figure, unit)} {u} per GPU of {_num(b.capacity, unit)} {u}"
    if b.band is not None:
        top = _num(b.band.top(figure), unit)
        said += f"; {escape(str(b.band))}: up to {top} {u} per GPU"
    console.print(said, highlight=False)
    console.print(Text(f"  versions: {shown(_versions(plan), LINE)}", style="dim"))
    for note in report.assumptions:
        console.print(Text(f"  assumed: {shown(note, LINE)}", style="dim"))


def print_detail(
    plan: Plan,
    report: Report,
    console: Console,
    unit: SizeUnit = SizeUnit.gb,
    tokens: TokensTime | None = None,
) -> None:
    """What the verdict rests on: the shape, the budget term by term, the runtime overhead,
    the phases, every strategy, the levers, the communication and the step time (`tokens`:
    the time to train a number of tokens, `--tokens`)."""
    b, hw = report.budget, plan.hardware
    u = unit.value
    arch = plan.model.architecture
    console.print()
    if plan.objective.value != "sft":
        console.print(f"objective {plan.objective.value}: {objective_line(plan)}")
    console.print(
        f"micro-batch {plan.micro_batch} x seq {plan.seq_len} x accum {plan.grad_accum}, "
        f"{plan.attention.value} attention, checkpointing {plan.checkpointing.value}, "
        f"{arch.num_layers} layers; static state {report.bytes_per_param:.2f} B/param"
    )

    terms = Table(title="Per-GPU budget", title_justify="left")
    terms.add_column("Term")
    terms.add_column(u, justify="right")
    terms.add_column("Source", overflow="fold")
    for t in b.terms:
        if t.bytes or t.key.value not in OBJECTIVE_TERMS:  # an objective's unused models: off
            terms.add_row(t.label, _num(t.bytes, unit), t.source)
    terms.add_row(
        "[bold]Total[/]",
        f"[bold]{_num(b.total, unit)}[/]",
        f"as nvidia-smi shows it; tensors (max_memory_allocated) {_num(b.allocated, unit)} {u}, "
        f"reserved {_num(b.reserved, unit)} {u}, static {_num(b.static, unit)} {u}",
    )
    terms.add_row("Capacity", _num(b.capacity, unit), hw.gpu_name)
    console.print(terms)
    if spec_of(plan).online:
        generator = b.term("generator")
        console.print(
            f"Trainer's share {_num(b.total - generator, unit)} {u}, generator's share "
            f"{_num(generator, unit)} {u} per GPU during the training step (vLLM: "
            f"{plan.vllm_mode.value})"
        )
    console.print(
        "Runtime overhead: "
        + ", ".join(
            f"{r.name} {_num(r.bytes, unit)} {u} ({r.where})" for r in report.runtime if r.bytes
        )
    )
    phases = Table(title="Phases (busiest GPU, CPU RAM per node)", title_justify="left")
    for col in ("Phase", f"GPU {u}", f"CPU RAM {u}", "What"):
        phases.add_column(col, justify="left" if col in ("Phase", "What") else "right")
    for phase in report.phases:
        phases.add_row(
            phase.name,
            _num(phase.gpu_bytes, unit),
            _num(phase.cpu_bytes_per_node, unit),
            phase.source,
        )
    console.print(phases)

    strat = Table(title="Strategies (per GPU)", title_justify="left")
    for col in ("Strategy", "B/param/GPU", f"Static {u}", f"Total {u}", "Fits", "Max micro-batch"):
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
            _num(row.per_gpu_static, unit),
            _num(row.per_gpu_total, unit),
            "yes" if row.fits else ("static only" if row.fits_static else "no"),
            str(row.max_micro_batch),
        )
    console.print(strat)
    for why, names in refused.items():
        console.print(f"n/a ({', '.join(names)}): {why}", markup=False)

    levers = Table(title="Levers, the largest saving first", title_justify="left")
    for col in ("Lever", f"Saves {u}", "Step time", "Cost", "State"):
        right = col.startswith("Saves") or col == "Step time"
        levers.add_column(col, justify="right" if right else "left")
    for lever in report.levers:
        saves = _num(lever.saves_bytes, unit) if lever.state is LeverState.pending else "-"
        # a lever not applicable costs nothing: why it is not, in the cost's place
        levers.add_row(
            lever.name, saves, lever.time_text, lever.why or lever.cost, lever.state.value
        )
    console.print(levers)
    c = report.communication
    console.print(
        f"Communication: {_num(c.bytes_per_gpu_per_step, unit)} {u} per GPU per step, "
        f"{c.relative_to_ddp:.2f}x DDP, about {c.seconds_per_step:.2f} s on the links"
        + (
            f" ({_num(c.tensor_parallel_bytes, unit)} {u} of it tensor parallel)"
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
