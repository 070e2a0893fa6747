"""The kinds of per-GPU memory a budget is made of: one enum, so a term is never a string.

Each kind carries what every layer needs to show it: the label a person reads, a short label
for narrow bars, and the theme variable its colour comes from (themes/*.toml define them).
The order of the enum is the order of the budget, bottom of the bar first.
"""

from __future__ import annotations

from enum import Enum


class TermKind(str, Enum):
    """One line of the per-GPU budget; the value is its key in `--json`."""

    weights = "weights"
    gradients = "gradients"
    master_weights = "master_weights"
    optimizer_states = "optimizer_states"
    activations = "activations"
    logits = "logits"
    transient = "transient"
    overhead = "overhead"

    def __str__(self) -> str:
        return self.value

    @property
    def label(self) -> str:
        """What a person reads: 'Optimizer states'."""
        return _LABELS[self][0]

    @property
    def short(self) -> str:
        """At most five characters, for the legend of narrow bars."""
        return _LABELS[self][1]

    @property
    def theme_variable(self) -> str:
        """The theme variable that colours this term's part of a bar."""
        return "term-" + self.value.replace("_", "-")

    @property
    def static(self) -> bool:
        """Part of the static training state (weights, gradients, master, optimizer)."""
        return self in STATIC_TERMS


_LABELS = {
    TermKind.weights: ("Weights", "wts"),
    TermKind.gradients: ("Gradients", "grad"),
    TermKind.master_weights: ("Master weights", "mst"),
    TermKind.optimizer_states: ("Optimizer states", "opt"),
    TermKind.activations: ("Activations", "act"),
    TermKind.logits: ("Logits and loss", "logit"),
    TermKind.transient: ("Transient buffers", "tmp"),
    TermKind.overhead: ("Runtime overhead", "ovh"),
}
STATIC_TERMS = frozenset(
    {TermKind.weights, TermKind.gradients, TermKind.master_weights, TermKind.optimizer_states}
)
