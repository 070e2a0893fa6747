"""What the estimator returns: frozen pydantic models, bytes as integers everywhere."""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum
from typing import TYPE_CHECKING, Any

from pydantic import ConfigDict, Field, computed_field

from memtui.estimator.choices import Strategy
from memtui.estimator.error_band import ErrorBand
from memtui.estimator.frozen import Frozen
from memtui.estimator.terms import TermKind

if TYPE_CHECKING:
    from memtui.estimator.plan import Plan


class Term(Frozen):
    """One line of the per-GPU budget."""

    key: TermKind
    """Which term (its label, short label and colour come with it)."""
    bytes: int
    """Bytes per GPU."""
    source: str
    """Where the number comes from: the formula and its paper, seed or library."""

    @property
    def label(self) -> str:
        """What a person reads: 'Optimizer states'."""
        return self.key.label


class Verdict(str, Enum):
    """The answer to "will it fit", with the published runs' error band around the figure."""

    fits = "FITS"
    """The top of the band fits: even the most under-predicted published run of this kind
    would fit."""
    may_not_fit = "MAY NOT FIT"
    """The figure fits, the top of the band does not."""
    does_not_fit = "DOES NOT FIT"


class Budget(Frozen):
    """The per-GPU memory budget of one plan."""

    terms: tuple[Term, ...]
    """Every TermKind once, in the order they are declared."""
    static: int
    """Weights + gradients + master weights + optimizer states, bytes per GPU."""
    total: int
    """Every term, bytes per GPU: the predicted peak as nvidia-smi shows it (reserved + the
    CUDA context, NCCL and managed memory); the verdict compares it with the card."""
    allocated: int
    """The tensors' peak, what torch.cuda.max_memory_allocated would report."""
    reserved: int
    """allocated + the caching allocator's reserve: torch.cuda.max_memory_reserved."""
    capacity: int
    """Bytes per GPU the card has (NVML's total)."""
    headroom: int
    """capacity - total (negative when it does not fit)."""
    fits: bool
    """Every phase fits the card (the training step, loading, saving)."""
    fits_static: bool
    """The static state alone fits (the 13B analysis's first question, docs/references.md)."""
    cpu_ram: int
    """CPU RAM per GPU needed by offload, bytes."""
    peak_phase: str = "training step"
    """The phase with the largest GPU peak (the verdict's)."""
    peak_bytes: int = 0
    """That phase's GPU bytes (the training step's `total` unless another phase is larger)."""
    band: ErrorBand | None = None
    """How far published runs of this kind were from memtui's figure (`memtui.estimator.
    error_band`)."""
    verdict: Verdict = Verdict.does_not_fit
    """FITS only when the top of the band fits, MAY NOT FIT when the card falls inside it."""

    def term(self, key: TermKind | str) -> int:
        """Bytes of the term `key`; a string that names no term raises ValueError (a
        misspelt key must not read as 0)."""
        kind = TermKind(key)
        return next(t.bytes for t in self.terms if t.key is kind)


class StrategyEntry(Frozen):
    """One strategy's figures, all else in the plan unchanged."""

    applicable: bool = True
    """False when the plan's stack or settings cannot run this strategy (its figures are 0)."""
    note: str = ""
    """Why it is not applicable."""
    per_gpu_static: int
    per_gpu_total: int
    fits: bool
    fits_static: bool
    max_micro_batch: int
    """Largest micro-batch that fits with this strategy (0: not even 1)."""


class StrategyRow(StrategyEntry):
    """One strategy of the side-by-side table."""

    strategy: Strategy


class LeverState(str, Enum):
    """Where a lever stands for the plan: `--json`'s `state`, the text's and the screen's
    State column."""

    applied = "applied"
    """On in the plan already: it saves nothing more."""
    pending = "pending"
    """Off, and pulling it saves `saves_bytes` (always more than 0: a lever that saves
    nothing is not offered)."""
    not_applicable = "not applicable"
    """Off, and there is nothing to pull on this plan (`why` says what)."""


class Lever(Frozen):
    """A change that saves memory, with what it saves for this plan and what it costs."""

    name: str
    saves_bytes: int
    """Bytes per GPU saved against the current plan (0 unless pending)."""
    cost: str
    state: LeverState = LeverState.pending
    why: str = ""
    """Why it is not applicable (empty in the other states)."""
    seconds_change: float | None = None
    """How much longer one optimizer step takes with the lever pulled, seconds (negative:
    faster); None for a lever not pending. The plan re-timed by `memtui.estimator.step_time`."""
    percent_change: float | None = None
    """The same as a percentage of this plan's step time."""

    @computed_field  # type: ignore[prop-decorator]
    @property
    def applied(self) -> bool:
        """Already on in the plan (the `applied` key scripts read since before `state`)."""
        return self.state is LeverState.applied

    @property
    def time_text(self) -> str:
        """The step-time change as shown on every surface: "+0.76 s (+28.4%)"; "-" when on."""
        if self.seconds_change is None or self.percent_change is None:
            return "-"
        return f"{self.seconds_change:+.2f} s ({self.percent_change:+.1f}%)"

    @property
    def bytes_per_percent(self) -> float:
        """Bytes saved per percent of step time lost: the "GB saved per % slower" order. A
        lever that costs no time (or saves it) is infinitely efficient."""
        if self.percent_change is None or self.percent_change <= 0:
            return float("inf") if self.saves_bytes else 0.0
        return self.saves_bytes / self.percent_change


class StepPartKind(str, Enum):
    """One part of a training step's time (`memtui.estimator.step_time`): every part runs
    once per micro-step but the optimizer and step_communication, once per optimizer step
    (contention: both)."""

    forward = "forward"
    """Matmuls, attention and elementwise kernels of the forward passes (a reference model's
    too)."""
    backward = "backward"
    recompute = "recompute"
    """Activation checkpointing's extra forward work in backward."""
    loss = "loss"
    """The cross-entropy's elementwise passes over the logits."""
    dequantization = "dequantization"
    """QLoRA's NF4 weights expanded to 16 bits before each use."""
    communication = "communication"
    """Collectives of every micro-step not hidden behind compute (ZeRO-3/FSDP gathers and
    reduce-scatters, tensor parallelism)."""
    offload = "offload"
    """Host-link copies of every micro-step not hidden behind compute."""
    optimizer = "optimizer"
    """The optimizer step (on the GPU, or on the CPU with its copies under offload)."""
    step_communication = "step_communication"
    """Collectives at the accumulation boundary not hidden behind the last backward."""
    contention = "contention"
    """Compute slowed while hidden collectives run: NCCL's blocks hold part of the SMs
    (every micro-step's gathers and reduce-scatters, and the boundary's all-reduce)."""


@dataclass(frozen=True)
class StepPart:
    """Seconds one part of the step takes per optimizer step, and where the figure comes
    from."""

    kind: StepPartKind
    seconds: float
    source: str


@dataclass(frozen=True)
class StepTime:
    """How long one step of the plan takes on its card (`memtui.estimator.step_time.
    step_time`). A plain frozen dataclass: the lever list and the plan search build
    hundreds."""

    seconds: float
    """One optimizer step (every micro-step of the accumulation, the optimizer, the
    collectives at the boundary), seconds: the sum of `parts`."""
    micro_step_seconds: float
    """One micro-step's forward, backward and what comes with it, seconds."""
    tokens_per_second_per_gpu: float
    """Tokens trained per second per GPU (a tensor-parallel group shares its tokens)."""
    mfu: float
    """Model FLOPs utilisation: the trained model's forward and backward FLOPs per second
    (no recompute; attention counted whole, PaLM's appendix B) over the card's dense peak."""
    tokens_per_step: int
    """Tokens the whole job trains per optimizer step."""
    model_flops: float
    """Per GPU per optimizer step: the trained model's forward and backward FLOPs."""
    hardware_flops: float
    """Per GPU per optimizer step: every FLOP executed (recompute, a reference's forward,
    causal attention's skipped half left out)."""
    peak_flops: float
    """The card's dense peak for the plan's matmul dtype, FLOP/s."""
    card: str
    """The card whose figures were used."""
    card_assumed: bool
    """The plan's card named no preset: `card` is the nearest by compute capability."""
    parts: tuple[StepPart, ...]
    not_modelled: tuple[str, ...] = ()
    """What the step does that the figure leaves out (the generation of online RL...)."""

    def part(self, kind: StepPartKind) -> float:
        """Seconds of part `kind` per optimizer step (0 when the plan has none)."""
        return sum(p.seconds for p in self.parts if p.kind is kind)

    def steps_for_tokens(self, tokens: int) -> int:
        """Optimizer steps that train `tokens` tokens (a partial last step still runs)."""
        return -(-tokens // self.tokens_per_step)

    def seconds_for_tokens(self, tokens: int) -> float:
        """Seconds the whole job needs to train `tokens` tokens, in whole steps."""
        return self.steps_for_tokens(tokens) * self.seconds


class Communication(Frozen):
    """Bytes each GPU sends per optimizer step, and how long the links need for them."""

    bytes_per_gpu_per_step: int
    relative_to_ddp: float
    seconds_per_step: float
    detail: str
    tensor_parallel_bytes: int = 0
    """Of bytes_per_gpu_per_step, what tensor parallelism's activation collectives send."""


class RuntimeLine(Frozen):
    """One part of the runtime overhead: where it lives decides which total counts it."""

    name: str
    bytes: int
    where: str
    """allocated (a tensor of the allocator), reserved (the allocator's cache) or outside
    (the CUDA context, NCCL, managed memory)."""
    source: str


class PhaseLine(Frozen):
    """One phase of the job: its peak on the busiest GPU and in CPU RAM per node."""

    name: str
    gpu_bytes: int
    cpu_bytes_per_node: int
    source: str


class Parameters(Frozen):
    total: int
    trainable: int


class Report(Frozen):
    """Everything memtui says about a plan."""

    parameters: Parameters
    bytes_per_param: float
    """Static bytes per model parameter before sharding (16 for mixed-precision AdamW)."""
    budget: Budget
    strategies: tuple[StrategyRow, ...]
    levers: tuple[Lever, ...]
    communication: Communication
    runtime: tuple[RuntimeLine, ...]
    """The runtime overhead term, part by part."""
    phases: tuple[PhaseLine, ...]
    """The training step, model loading and checkpoint saving."""
    stack: str
    """The stack that runs the plan (its label)."""
    max_micro_batch: int
    """Largest micro-batch that fits with the plan's strategy."""
    assumptions: tuple[str, ...]
    """Things the estimate had to assume (for example a shape for a bare parameter count)."""
    step_time: StepTime
    """How long one step takes (`memtui.estimator.step_time`)."""


class TokensTime(Frozen):
    """How long training a number of tokens takes with the plan (`memtui estimate
    --tokens`)."""

    tokens: int
    steps: int
    """Optimizer steps that train them (the last one whole)."""
    seconds: float

    @classmethod
    def of(cls, step: StepTime, tokens: int) -> TokensTime:
        return cls(
            tokens=tokens,
            steps=step.steps_for_tokens(tokens),
            seconds=step.seconds_for_tokens(tokens),
        )


class Provenance(Frozen):
    """Where one plan field came from when the plan was read from a job's config files
    (`memtui estimate --from FILE`)."""

    field: str
    """The plan field: strategy, micro_batch, hardware.gpus_per_node..."""
    value: str
    source: str
    """'file:key' (several, comma-separated, for a field decided from more than one)."""


class VersionLine(Frozen):
    """One framework's version in `--json` (None: not given and no release named)."""

    version: str | None
    source: str


class EstimateDocument(Frozen):
    """What `memtui estimate --json` prints: one object, bytes as integers. README.md lists
    every key; scripts and CI gates read it, so keys are only ever added."""

    # built at its first use (`estimate --json`), not when the dashboard imports the
    # estimator: its validator and serializer cost ~2 ms of a start it never uses
    model_config = ConfigDict(defer_build=True)

    model: str
    parameters: Parameters
    bytes_per_param: float
    per_gpu: dict[str, int]
    """Every term by its key, plus `static`, `allocated`, `reserved` and `total`."""
    sources: dict[str, str]
    """Where each term's number comes from."""
    capacity: int
    headroom: int
    fits: bool
    fits_static: bool
    cpu_ram_per_gpu: int
    stack: str
    runtime: tuple[RuntimeLine, ...]
    phases: tuple[PhaseLine, ...]
    peak_phase: str
    cpu_ram_per_node: int
    """The largest CPU RAM any phase needs on one node, bytes."""
    strategies: dict[str, StrategyEntry]
    communication: Communication
    levers: tuple[Lever, ...]
    max_micro_batch: int
    assumptions: tuple[str, ...]
    plan: dict[str, Any]
    """The plan's inputs (the model by name: its architecture is not repeated)."""
    provenance: tuple[Provenance, ...] = ()
    """With --from: each field the files decided and the file and key it came from."""
    ignored: tuple[str, ...] = ()
    """With --from: the files' memory settings memtui does not size, and what it did instead."""
    versions: dict[str, VersionLine] = Field(default_factory=dict)
    """Each framework's version the stack's books followed, and where it came from."""
    verdict: Verdict = Verdict.does_not_fit
    """FITS, MAY NOT FIT (the card falls inside the band) or DOES NOT FIT."""
    band: ErrorBand | None = None
    """The published runs' residuals around the figure: low, high, n, runs_of."""
    stack_choice: str = ""
    """How the stack was chosen when the user named none (empty: named by a flag or the
    job's files)."""
    step_time: StepTime | None = None
    """How long one step takes: `seconds` (per optimizer step), `micro_step_seconds`,
    `tokens_per_second_per_gpu`, `mfu`, the FLOPs, and each part with its source."""
    time_for_tokens: TokensTime | None = None
    """With --tokens N: the steps and seconds that train N tokens."""

    @classmethod
    def of(
        cls,
        plan: Plan,
        report: Report,
        provenance: tuple[Provenance, ...] = (),
        imported_assumptions: tuple[str, ...] = (),
        ignored: tuple[str, ...] = (),
    ) -> EstimateDocument:
        budget = report.budget
        per_gpu = {t.key.value: t.bytes for t in budget.terms}
        totals = {
            "static": budget.static,
            "allocated": budget.allocated,
            "reserved": budget.reserved,
            "total": budget.total,
        }
        return cls(
            model=plan.model.name,
            parameters=report.parameters,
            bytes_per_param=report.bytes_per_param,
            per_gpu={**per_gpu, **totals},
            sources={t.key.value: t.source for t in budget.terms},
            capacity=budget.capacity,
            headroom=budget.headroom,
            fits=budget.fits,
            fits_static=budget.fits_static,
            cpu_ram_per_gpu=budget.cpu_ram,
            stack=report.stack,
            runtime=report.runtime,
            phases=report.phases,
            peak_phase=budget.peak_phase,
            cpu_ram_per_node=max(p.cpu_bytes_per_node for p in report.phases),
            strategies={row.strategy.value: row for row in report.strategies},
            communication=report.communication,
            levers=report.levers,
            max_micro_batch=report.max_micro_batch,
            assumptions=report.assumptions + imported_assumptions,
            plan=plan.model_dump(mode="json", exclude={"model": {"architecture"}}),
            provenance=provenance,
            ignored=ignored,
            verdict=budget.verdict,
            band=budget.band,
            step_time=report.step_time,
            versions={
                package.value: VersionLine(version=version, source=source)
                for package, version, source in plan.versions.assumed()
            },
        )
