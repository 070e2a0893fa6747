"""What every training stack returns and offers: the `Breakdown` of one plan's per-GPU
memory and the `Stack` protocol (see `memtui.estimator.stacks`)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

from memtui.estimator.terms import TermKind

if TYPE_CHECKING:
    from memtui.estimator.choices import Strategy
    from memtui.estimator.plan import Plan
    from memtui.estimator.state import StaticState
    from memtui.estimator.transient import Transient


@dataclass(frozen=True)
class Breakdown:
    """One plan's per-GPU bytes for one strategy, term by term; their sum is the peak."""

    terms: Mapping[TermKind, int]
    """Every TermKind, bytes per GPU."""
    state: StaticState
    """The static state behind the first four terms (and the CPU RAM offload needs)."""
    transient: Transient
    """The buffers behind the transient term, by phase."""

    @property
    def total(self) -> int:
        return sum(self.terms.values())

    @property
    def per_sample(self) -> int:
        """Bytes that grow with the micro-batch (activations and logits)."""
        return self.terms[TermKind.activations] + self.terms[TermKind.logits]

    @property
    def fixed(self) -> int:
        """Bytes that do not grow with the micro-batch: the state, the runtime and the
        buffers of the forward/backward phase."""
        t = self.transient
        return self.state.total + self.terms[TermKind.overhead] + t.persistent + t.backward


class Stack(Protocol):
    """What `estimate` needs from a training stack."""

    name: str
    """Its key (`--stack`)."""
    label: str
    """What a person reads next to the verdict."""

    def breakdown(self, plan: Plan, strategy: Strategy) -> Breakdown:
        """Every term's bytes per GPU for `plan` run with `strategy` (the hot path: the
        lever list and the micro-batch search call it many times)."""
        ...

    def sources(self, plan: Plan, breakdown: Breakdown) -> Mapping[TermKind, str]:
        """Where each term's number comes from, for the report (called once per plan)."""
        ...
