"""Measure one micro-batch and the optimizer step after it from inside a stack's own loop.

A stack (Transformers' Trainer, FSDP2 through accelerate) runs its step as it always does;
the probe is told where the phases meet (`start` before the measured micro-batch's forward,
`after_forward`, `after_backward`, `after_step`) and reads the stack's own objects at the
start: the model's parameters (weights), their `.grad` (gradients), the optimizer's state.
Everything allocated between `start` and `after_step` is followed per storage by the
dispatch tracker and classed by shape (logits), by origin (autocast's weight copies, FSDP's
gathered parameters) or by phase.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

import torch

from memtui.measure.measurement import Measurement
from memtui.measure.tracker import LiveTracker, storage_bytes

ACT, LOGITS, BWD, STEP = "activations", "logits", "backward", "step"
COPIES = "weight copies"
"""bf16 copies of fp32 weights made by autocast (a stack's backward buffers, not activations)."""
GATHERED = "gathered"
LOG_PROBS = "log-probs"
"""Per-token fp32 log-probs of a TRL objective (rows x (seq - 1)), outside the loss head."""
CPU_FOLD = "cpu fold"
"""What TRL's torch fold of the fused head's tiles allocates on CPU, where CUDA runs Triton
kernels that allocate nothing (trl/kernels/chunked_logprob.py `_forward_tile`,
`_backward_tile`, `_addmm_fp32`'s fp32 casts)."""
"""Storages grown in place during the step: FSDP2's unsharded parameters."""


def local(t: torch.Tensor) -> torch.Tensor:
    """The local shard of a DTensor (FSDP2's parameters, gradients and their optimizer
    state), the tensor itself otherwise."""
    return t.to_local() if hasattr(t, "to_local") else t  # type: ignore[no-any-return]


def is_logits(t: torch.Tensor, vocab: int, b: int, s: int) -> bool:
    """Logits-sized: (b, s, V) or (b*s, V), shifted by one token or not; attention scores
    (b, a, s, s) or (b*a, s, s) can have s == V but not these leading dimensions."""
    lead = tuple(t.shape[:-1])
    rows = {(b, s), (b, s - 1), (b * s,), (b * (s - 1),)}
    return bool(t.dim()) and t.shape[-1] == vocab and lead in rows


def optimizer_state(optimizer: Any) -> tuple[list[torch.Tensor], int]:
    """The optimizer's state tensors (local shards) and, apart, the bytes of its per-tensor
    scalars (step counters, Adafactor's RMS). Unwraps accelerate's AcceleratedOptimizer."""
    inner = getattr(optimizer, "optimizer", optimizer)
    tensors, counters = [], 0
    for state in inner.state.values():
        for name, value in state.items():
            if not isinstance(value, torch.Tensor):
                continue
            value = local(value)
            if name == "step" or value.dim() == 0:
                counters += value.untyped_storage().nbytes()
            else:
                tensors.append(value)
    return tensors, counters


class _Tracker(LiveTracker):
    def resized_class(self) -> str:
        return GATHERED


@dataclass
class StepProbe:
    """The measured micro-batch of a stack's step, and the optimizer step after it."""

    vocab: int
    micro_batch: int
    seq_len: int
    autocast_copies: bool = False
    """Class autocast's casts of the parameters apart (fp32 parameters under autocast)."""
    grads_after_backward: bool = False
    """Read the gradients after the backward rather than at the start and count them with
    the static state only (FSDP2: the sharded gradients appear during the measured backward,
    as each unit's reduce-scatter ends)."""
    unsharded: frozenset[tuple[tuple[int, ...], torch.dtype]] = frozenset()
    """Shapes and dtypes of the unsharded trainable parameters (FSDP2): a storage of one of
    them allocated in backward is an unsharded gradient waiting for its reduce-scatter, one
    of the stack's buffers."""
    held: Callable[[torch.nn.Module], Iterable[torch.Tensor]] | None = None
    """Tensors the stack holds over from earlier micro-batches (FSDP2's unsharded gradients
    under no_sync): counted with its buffers from the start."""
    log_prob_tokens: int = 0
    """Class fp32 (micro_batch, log_prob_tokens) storages as per-token log-probs (a TRL
    step: seq_len - 1 for DPO, the completion's length for GRPO); 0: none."""
    buffered: Callable[[Any], Iterable[torch.Tensor]] | None = None
    """Tensors a trainer buffers for later micro-batches (GRPOTrainer's generated batches):
    counted with the log-probs from the start."""
    notes: list[str] = field(default_factory=list)
    tracker: LiveTracker | None = None
    static: dict[str, int] = field(default_factory=dict)
    saved: int = 0
    fb_peak: int = 0
    fb_detail: dict[str, int] = field(default_factory=dict)
    logits: int = 0
    leftover: int = 0
    step_peak: int = 0
    buffers: int = 0
    batch: int = 0
    log_prob_bytes: int = 0
    fold_bytes: int = 0
    done: bool = False
    _trainable: list[torch.Tensor] = field(default_factory=list)

    def _classify(self, t: torch.Tensor, phase: str) -> str:
        if phase == STEP:
            return STEP
        if is_logits(t, self.vocab, self.micro_batch, self.seq_len):
            return LOGITS
        if (
            self.log_prob_tokens
            and t.dtype == torch.float32
            and tuple(t.shape) == (self.micro_batch, self.log_prob_tokens)
        ):
            return LOG_PROBS
        if phase == "forward":
            return ACT
        if (tuple(t.shape), t.dtype) in self.unsharded:
            return GATHERED
        return BWD

    def start(
        self,
        model: torch.nn.Module,
        optimizer: Any,
        batch: Mapping[str, torch.Tensor],
        also_known: Iterable[torch.Tensor] = (),
    ) -> None:
        """Read the static state and start tracking, before the measured forward."""
        params = [local(p) for p in model.parameters()]
        self._trainable = [p for p in model.parameters() if p.requires_grad]
        trainable = [local(p) for p in self._trainable]
        grads = [local(p.grad) for p in model.parameters() if p.grad is not None]
        if len(grads) != len(trainable) and not self.grads_after_backward:
            self.notes.append(
                f"{len(trainable) - len(grads)} trainable parameters had no gradient yet"
            )
        states, counters = optimizer_state(optimizer)
        self.static = {
            "weights": storage_bytes(params),
            "gradients": storage_bytes(grads),
            "optimizer_states": storage_bytes(states),
            "counters": counters,
        }
        buffers = [local(b) for b in model.buffers()]
        known = [*params, *grads, *states, *buffers, *also_known]
        copies = [p for p in params if p.dtype == torch.float32] if self.autocast_copies else []
        self.tracker = _Tracker(
            self._classify, known, copies_of=copies, copy_class=COPIES, apart=(COPIES, GATHERED)
        )
        self.tracker.__enter__()
        for tensor in self.held(model) if self.held else ():
            self.tracker.adopt(tensor, GATHERED)
        for tensor in batch.values():  # the micro-batch the model reads (ids, labels)
            if isinstance(tensor, torch.Tensor):
                self.tracker.adopt(tensor, ACT)
                self.batch += tensor.untyped_storage().nbytes()

    def adopt_buffered(self, trainer: Any) -> None:
        """Count what `trainer` buffers for later micro-batches (`buffered`) as live."""
        assert self.tracker is not None
        for tensor in self.buffered(trainer) if self.buffered else ():
            self.tracker.adopt(tensor, LOG_PROBS)

    def after_forward(self) -> None:
        assert self.tracker is not None
        self.saved = self.tracker.by_class[ACT]
        self.tracker.phase = BWD

    def after_backward(self) -> None:
        t = self.tracker
        assert t is not None
        if self.grads_after_backward:
            grads = [local(p.grad) for p in self._trainable if p.grad is not None]
            for g in grads:
                t.drop(g)
            self.static["gradients"] = storage_bytes(grads)
        self.fb_peak, self.fb_detail = t.peak, dict(t.peak_by_class)
        # what the peak holds beyond the activations' and logits' own peak (0 when that is
        # the peak): the buffers' share, as the estimator's transient term means it
        self.buffers = self.fb_peak - t.rest_peak
        self.logits = t.class_peak[LOGITS]
        self.log_prob_bytes = t.class_peak[LOG_PROBS]
        self.fold_bytes = self.fb_detail.get(CPU_FOLD, 0)
        self.leftover = t.current
        t.phase = STEP
        t.reset_peak()

    def after_step(self) -> None:
        t = self.tracker
        assert t is not None
        self.step_peak = t.peak - self.leftover
        t.__exit__(None, None, None)
        self.done = True

    def measurement(self, master_weights: int = 0) -> Measurement:
        """The measured terms, under the estimator's names."""
        if not self.done:
            raise RuntimeError("the stack never reached the measured optimizer step")
        notes = list(self.notes)
        outlived = self.leftover - self.batch  # the stack still holds its batch, rightly
        if outlived > 1024:
            notes.append(f"{outlived:,} B allocated in forward/backward outlived it")
        return Measurement(
            weights=self.static["weights"],
            gradients=self.static["gradients"],
            master_weights=master_weights,
            optimizer_states=self.static["optimizer_states"],
            optimizer_step_counters=self.static["counters"],
            saved_activations=self.saved,
            logits=self.logits,
            forward_backward_peak=self.fb_peak,
            peak_detail=self.fb_detail,
            step_temporaries=self.step_peak,
            fake=False,
            notes=notes,
            backward_buffers=self.buffers,
            log_probs=self.log_prob_bytes,
            cpu_fold=self.fold_bytes,
        )
