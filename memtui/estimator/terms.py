"""The kinds of per-GPU memory a budget is made of, each declared once, so a term is never a
string.

A term's declaration (a `Declaration` in `TermKind`'s body) holds everything every layer needs:
the label a person reads, a short label for narrow bars, its colour in a dark and a light theme
(the theme variable `term-<key>`; a theme file may override it), whether it is part of the
static training state, whether PyTorch's caching allocator holds it, whether it grows with the
micro-batch, where its number comes from when a stack does not say more, and the hook that
computes its bytes from a stack's books (`Books`). The budget, `--json`, the theme defaults,
the dashboard's colours and the snapshot attribution all read the declarations; the order of
the body is the order of the budget, bottom of the bar first.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any, ClassVar, NamedTuple

if TYPE_CHECKING:
    from pydantic import GetCoreSchemaHandler
    from pydantic_core import CoreSchema

    from memtui.estimator.activations import Setup
    from memtui.estimator.objectives import ObjectiveBytes
    from memtui.estimator.plan import Plan
    from memtui.estimator.runtime import Runtime
    from memtui.estimator.state import StaticState
    from memtui.estimator.transient import Transient


class Books(NamedTuple):
    """What a stack's books hold for one plan and strategy: every term's bytes are read from
    it (`memtui.estimator.stacks.base.BookStack.breakdown` fills it in, twice per breakdown
    on the hot path: a named tuple, the cheapest frozen record to make)."""

    plan: Plan
    state: StaticState
    """The static state per GPU, after sharding."""
    setup: Setup
    """How the stack runs the model (saved-tensor widths, LoRA, loss)."""
    activations: int
    """Saved activations at the backward's peak, bytes per GPU."""
    logits: int
    """The loss's logits buffers at that peak, bytes per GPU."""
    transient: Transient
    """Communication buffers and the optimizer step's temporaries, by phase."""
    objective: ObjectiveBytes
    """What the training objective keeps beside the policy (reference, generator...)."""
    around: Runtime | None = None
    """The runtime around the allocator's tensors: None while the allocator's terms are
    computed, since it is computed from their sum."""

    @property
    def runtime(self) -> Runtime:
        """The runtime overhead around the allocator's terms; only a term outside the
        allocator (`allocated=False`) can read it."""
        if self.around is None:
            raise LookupError(
                "a term the allocator holds cannot read the runtime: it is computed from them"
            )
        return self.around


class Declaration:
    """One term, as `TermKind`'s body declares it: `weights = Declaration(...)` makes the
    term `TermKind.weights` (key "weights") in the order of the body."""

    def __init__(
        self,
        label: str,
        short: str,
        *,
        dark: str,
        light: str | None = None,
        source: str,
        bytes: Callable[[Books], int],
        static: bool = False,
        allocated: bool = True,
        per_sample: bool = False,
    ) -> None:
        self.label = label
        self.short = short
        self.dark = dark
        self.light = dark if light is None else light
        self.source = source
        self.bytes = bytes
        self.static = static
        self.allocated = allocated
        self.per_sample = per_sample
        self._kind: TermKind | None = None

    def __set_name__(self, owner: type[TermKind], name: str) -> None:
        self._kind = owner.declare(name, self)
        # the term itself in its place: `TermKind.weights` is then a plain class attribute,
        # not a call of `__get__` on every read of the estimator's hot path
        setattr(owner, name, self._kind)

    if TYPE_CHECKING:  # for mypy only: at run time `__set_name__` put the term in its place

        def __get__(self, instance: object, owner: type | None = None) -> TermKind: ...


class _Registry(type):
    """TermKind's metaclass: the class is the registry of terms. Iterating it gives every
    declared term in the budget's order and `len` counts them, as an Enum's class does; the
    groups the estimator's hot path asks for are kept ahead of it."""

    _declared: dict[str, TermKind]
    _order: tuple[TermKind, ...] = ()
    held_by_allocator: tuple[TermKind, ...] = ()
    """The terms in PyTorch's caching allocator (`allocated`), in the budget's order."""
    beside_allocator: tuple[TermKind, ...] = ()
    """The others, whose hooks may read the runtime computed around the first."""
    growing_with_batch: tuple[TermKind, ...] = ()
    """The `per_sample` terms, which the largest micro-batch is solved from."""
    allocator_hooks: tuple[tuple[TermKind, Callable[[Books], int]], ...] = ()
    """`held_by_allocator` with each term's `bytes` hook, read once by the hot path."""
    outside_hooks: tuple[tuple[TermKind, Callable[[Books], int]], ...] = ()
    """`beside_allocator` with each term's `bytes` hook."""

    def __iter__(cls) -> Iterator[TermKind]:
        return iter(cls._order)

    def __len__(cls) -> int:
        return len(cls._order)

    def _changed(cls) -> None:
        cls._order = tuple(cls._declared.values())
        cls.held_by_allocator = tuple(k for k in cls._order if k.allocated)
        cls.beside_allocator = tuple(k for k in cls._order if not k.allocated)
        cls.growing_with_batch = tuple(k for k in cls._order if k.per_sample)
        cls.allocator_hooks = tuple((k, k.bytes) for k in cls.held_by_allocator)
        cls.outside_hooks = tuple((k, k.bytes) for k in cls.beside_allocator)


class TermKind(str, metaclass=_Registry):
    """One line of the per-GPU budget; the string is its key in `--json`. `TermKind(key)`
    gives the declared term and raises ValueError for any other string."""

    _declared: ClassVar[dict[str, TermKind]] = {}

    value: str
    label: str
    """What a person reads: 'Optimizer states'."""
    short: str
    """At most five characters, for the legend of narrow bars."""
    dark: str
    """Its colour in a dark theme (the default of its theme variable)."""
    light: str
    """Its colour in a light theme."""
    source: str
    """Where its number comes from, shown unless the plan's stack says more."""
    bytes: Callable[[Books], int]
    """Its bytes per GPU, from the stack's books."""
    static: bool
    """Part of the static training state (weights, gradients, master, optimizer)."""
    allocated: bool
    """Held in PyTorch's caching allocator (the runtime overhead is computed around the sum
    of these terms; a snapshot's blocks can be attributed to them)."""
    per_sample: bool
    """Grows linearly with the micro-batch (the largest micro-batch is solved from these)."""

    # the built-in terms, bottom of the bar first
    weights = Declaration(
        "Weights",
        "wts",
        dark="#5f87ff",
        light="#0050c8",
        source="the weights in their dtype (memtui.estimator.state.generic_layout, ZeRO paper "
        "sec. 3)",
        bytes=lambda b: b.state.weights,
        static=True,
    )
    gradients = Declaration(
        "Gradients",
        "grad",
        dark="#af87ff",
        light="#7040c0",
        source="one gradient per trainable parameter (memtui.estimator.state.gradient_bytes)",
        bytes=lambda b: b.state.gradients,
        static=True,
    )
    master_weights = Declaration(
        "Master weights",
        "mst",
        dark="#d75fd7",
        light="#a0209a",
        source="fp32 copy of the trainable parameters (Micikevicius et al. 2018)",
        bytes=lambda b: b.state.master_weights,
        static=True,
    )
    optimizer_states = Declaration(
        "Optimizer states",
        "opt",
        dark="#ff875f",
        light="#c04a10",
        source="memtui.estimator.optimizers.OptimizerSpec.state_bytes",
        bytes=lambda b: b.state.optimizer_states,
        static=True,
    )
    reference_model = Declaration(
        "Reference model",
        "ref",
        dark="#5fafd7",
        light="#2a6f9a",
        source="a frozen copy of the model in its dtype, sharded like its weights; 0 for the "
        "adapter-disabled PEFT base or precomputed log-probs (memtui.estimator.objectives)",
        bytes=lambda b: b.objective.reference,
    )
    value_model = Declaration(
        "Value model",
        "val",
        dark="#d787af",
        light="#a0406a",
        source="PPO's value model, trained beside the policy (memtui.estimator.objectives)",
        bytes=lambda b: b.objective.value_model,
    )
    reward_model = Declaration(
        "Reward model",
        "rwd",
        dark="#afaf87",
        light="#6a6a30",
        source="the frozen reward model that scores completions (memtui.estimator.objectives)",
        bytes=lambda b: b.objective.reward_model,
    )
    activations = Declaration(
        "Activations",
        "act",
        dark="#5fd7af",
        light="#008a6a",
        source="saved tensors of every layer (Korthikanti et al. 2022)",
        bytes=lambda b: b.activations,
        per_sample=True,
    )
    logits = Declaration(
        "Logits and loss",
        "logit",
        dark="#d7d75f",
        light="#8a7a00",
        source="the loss's fp32 logits buffers (memtui.estimator.activations.logits_bytes)",
        bytes=lambda b: b.logits,
        per_sample=True,
    )
    log_probs = Declaration(
        "Log-prob buffers",
        "lgp",
        dark="#d7af5f",
        light="#8a6000",
        source="per-token log-probs of the policy and the reference, and online RL's buffered "
        "generation batch (memtui.estimator.objectives)",
        bytes=lambda b: b.objective.log_probs,
        per_sample=True,
    )
    transient = Declaration(
        "Transient buffers",
        "tmp",
        dark="#87afaf",
        light="#4a7a7a",
        source="communication buffers and step temporaries (memtui.estimator.transient)",
        # above static + activations at the step's peak: backward or the optimizer step
        bytes=lambda b: b.transient.peak_extra(b.activations + b.logits),
    )
    overhead = Declaration(
        "Runtime overhead",
        "ovh",
        dark="#808080",
        light="#707070",
        source="cuBLAS workspace, allocator reserve, CUDA context, NCCL "
        "(memtui.estimator.runtime.runtime)",
        bytes=lambda b: b.runtime.total,
        allocated=False,
    )
    generator = Declaration(
        "Generator (vLLM)",
        "gen",
        dark="#ff5f87",
        light="#c0204a",
        source="colocated vLLM's gpu_memory_utilization x the card while the trainer steps "
        "(memtui.estimator.objectives)",
        bytes=lambda b: b.objective.generator,
        allocated=False,
    )

    def __new__(cls, key: str) -> TermKind:
        try:
            return cls._declared[key]
        except KeyError:
            raise ValueError(f"{key!r} is not a valid TermKind") from None

    @classmethod
    def declare(cls, key: str, declaration: Declaration) -> TermKind:
        """Add the term `key` after every declared one (TermKind's body calls it through
        `Declaration`; `declared` adds one for a while)."""
        if key in cls._declared:
            raise ValueError(f"the term {key!r} is declared already")
        kind = str.__new__(cls, key)
        kind.value = key
        for name in ("label", "short", "dark", "light", "source", "bytes", "static",
                     "allocated", "per_sample"):  # fmt: skip
            setattr(kind, name, getattr(declaration, name))
        cls._declared[key] = kind
        cls._changed()
        return kind

    def __str__(self) -> str:
        return self.value

    def __repr__(self) -> str:
        return f"<TermKind.{self.value}>"

    # one object per term, like an Enum member's: copies and pickles are the term itself
    def __reduce__(self) -> tuple[type[TermKind], tuple[str]]:
        return TermKind, (self.value,)

    def __copy__(self) -> TermKind:
        return self

    def __deepcopy__(self, memo: dict[int, Any]) -> TermKind:
        return self

    @property
    def theme_variable(self) -> str:
        """The theme variable that colours this term's part of a bar."""
        return "term-" + self.value.replace("_", "-")

    def colour(self, dark: bool) -> str:
        """Its default colour in a dark or a light theme."""
        return self.dark if dark else self.light

    @classmethod
    def __get_pydantic_core_schema__(
        cls, source: type[Any], handler: GetCoreSchemaHandler
    ) -> CoreSchema:
        # a model field of this type takes a term or its key, and dumps as the key
        from pydantic_core import core_schema

        return core_schema.no_info_plain_validator_function(
            cls, serialization=core_schema.to_string_ser_schema()
        )


@contextmanager
def declared(key: str, declaration: Declaration) -> Iterator[TermKind]:
    """The term `key`, added after every other for the duration of the block, then removed:
    a term tried without editing this file (tests/test_term_registry.py)."""
    kind = TermKind.declare(key, declaration)
    try:
        yield kind
    finally:
        del TermKind._declared[key]
        TermKind._changed()
