"""One real training step, measured: static state by enumeration, the rest by the tracker.

What the step does mirrors the estimator's assumptions (say them, then measure them):
- bf16-mixed: the model holds bf16 weights and gradients; an fp32 master copy of the
  trainable parameters is what the optimizer updates (as DeepSpeed's and Megatron's bf16
  optimizers do). Before the step each bf16 gradient is copied to fp32 (a step temporary),
  after it the master is copied back into the bf16 weights. bf16: pure bf16 parameters and
  optimizer state in the parameter dtype (torch.optim keeps moments like the parameters).
  fp32: everything fp32.
- The measured micro-batch runs with gradients already allocated (an accumulation
  micro-batch, or `zero_grad(set_to_none=False)`), the case where the estimator's sum
  static + activations + logits is reached; a first micro-batch with set_to_none gradients
  peaks lower, by at most the gradient bytes.
- The loss is computed as transformers' Trainer does (`model(..., labels=...)` inside a
  function that returns the loss only, so the model output and its logits are freed before
  backward), unless the plan's loop keeps the output (`--loop accelerate`, `--loop custom`
  with `--loop-keeps-output`): then as such a loop does, `output = model(...)`,
  `output.loss.backward()`, the optimizer step, the output dropped only after it (its logits
  count in the step's temporaries, which they outlive).
- Dropout runs through `aten.native_dropout`, which keeps a 1-byte bool mask as CUDA's fused
  dropout does (CPU's composite dropout would keep a mask in the activation dtype).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

import torch

from memtui.estimator.loops import keeps_output
from memtui.estimator.plan import Method, Optimizer, Plan, Precision
from memtui.measure.build import build_model, dtype_of
from memtui.measure.measurement import Measurement, Unsupported
from memtui.measure.probe import ACT, BWD, LOGITS, STEP, is_logits, optimizer_state
from memtui.measure.tracker import LiveTracker, storage_bytes


def _optimizer(plan: Plan, params: list[torch.Tensor]) -> torch.optim.Optimizer:
    opt = plan.optimizer
    if opt is Optimizer.adamw:
        return torch.optim.AdamW(params, lr=1e-4, foreach=True)
    if opt is Optimizer.sgd:
        return torch.optim.SGD(params, lr=1e-4, foreach=True)
    if opt is Optimizer.sgd_momentum:
        return torch.optim.SGD(params, lr=1e-4, momentum=0.9, foreach=True)
    if opt is Optimizer.adafactor:
        # transformers' Adafactor (no first moment, fp32 factored state) is the one the
        # estimator counts (Shazeer & Stern 2018 as Hugging Face implements it).
        from transformers.optimization import Adafactor

        return Adafactor(params, lr=1e-3, scale_parameter=False, relative_step=False)
    raise Unsupported(
        f"--optimizer {opt.value} is not in torch.optim (bitsandbytes or a Lion package needs "
        "CUDA or is not installed); measure adamw, sgd, sgd-momentum or adafactor"
    )


@contextlib.contextmanager
def native_dropout() -> Iterator[None]:
    """Route F.dropout through aten.native_dropout (1-byte mask, as CUDA keeps it)."""
    import torch.nn.functional as F

    original = F.dropout

    def dropout(x: torch.Tensor, p: float = 0.5, training: bool = True, inplace: bool = False):
        if not training or p == 0.0:
            return x
        return torch.native_dropout(x, p, True)[0]

    F.dropout = dropout  # type: ignore[assignment]
    try:
        yield
    finally:
        F.dropout = original  # type: ignore[assignment]


@contextlib.contextmanager
def _no_padding_under_fake(fake: bool) -> Iterator[None]:
    """Under FakeTensorMode transformers cannot read the (all-ones) padding mask, so it would
    build an s x s causal mask for SDPA (and repeat K and V): tell it what a real run finds,
    that the batch has no padding, so SDPA runs causal without a mask as it does for real."""
    if not fake:
        yield
        return
    from transformers import masking_utils

    original = masking_utils._ignore_causal_mask_sdpa
    packed = getattr(masking_utils, "find_packed_sequence_indices", None)

    def ignore(padding_mask: Any, *args: Any, **kwargs: Any) -> bool:
        return bool(original(None, *args, **kwargs))

    masking_utils._ignore_causal_mask_sdpa = ignore
    if packed is not None:  # nor read the position ids for packed sequences (there are none)
        masking_utils.find_packed_sequence_indices = lambda *a, **k: None
    try:
        yield
    finally:
        masking_utils._ignore_causal_mask_sdpa = original
        if packed is not None:
            masking_utils.find_packed_sequence_indices = packed


def _grad(p: torch.Tensor) -> torch.Tensor:
    """A trainable parameter's gradient (allocated by the warm-up step)."""
    assert p.grad is not None
    return p.grad


def measure_step(config: dict[str, Any], plan: Plan, *, fake: bool = False) -> Measurement:
    """Build the model of `config` for `plan` and measure one training step (one GPU)."""
    if plan.method is Method.qlora:
        raise Unsupported("QLoRA needs bitsandbytes on CUDA; measure --method lora instead")
    if plan.tp > 1:
        raise Unsupported("tensor parallelism is not measured (one process, --tp 1)")
    if fake:
        from torch._subclasses.fake_tensor import FakeTensorMode

        mode: Any = FakeTensorMode(allow_non_fake_inputs=True)
    else:
        mode = contextlib.nullcontext()
    with mode, native_dropout(), _no_padding_under_fake(fake), torch.random.fork_rng():
        torch.manual_seed(0)
        return _measure(config, plan, fake)


def _measure(config: dict[str, Any], plan: Plan, fake: bool) -> Measurement:
    model: Any = build_model(config, plan, fake=fake)
    params: list[torch.Tensor] = list(model.parameters())
    trainable = [p for p in params if p.requires_grad]
    mixed = plan.precision is Precision.bf16_mixed
    master = [p.detach().float() for p in trainable] if mixed else []
    for m in master:
        m.requires_grad_(True)
    optimizer = _optimizer(plan, master if mixed else trainable)
    vocab = int(model.get_output_embeddings().weight.shape[0])
    b, s = plan.micro_batch, plan.seq_len
    ids = torch.randint(0, vocab, (b, s))

    def optimizer_step() -> None:
        if mixed:
            for m, p in zip(master, trainable, strict=True):
                m.grad = _grad(p).float()  # the fp32 gradient copy the master update needs
        optimizer.step()
        if mixed:
            with torch.no_grad():
                for m, p in zip(master, trainable, strict=True):
                    p.copy_(m)
                    m.grad = None

    # Warm-up: gradients allocated and optimizer state created, as in any step after the first.
    for p in trainable:
        p.grad = torch.zeros_like(p)
    optimizer_step()
    states, counters = optimizer_state(optimizer)

    def classify(t: torch.Tensor, phase: str) -> str:
        if phase == STEP:
            return STEP
        if is_logits(t, vocab, b, s):
            return LOGITS
        return ACT if phase == "forward" else BWD

    def loss_fn(batch: torch.Tensor) -> torch.Tensor:
        return model(input_ids=batch, labels=batch).loss  # the output (and logits) die here

    keeps = keeps_output(plan.stack, plan.loop, plan.loop_keeps_output)

    known = [*params, *(_grad(p) for p in trainable), *master, *states, ids]
    tracker = LiveTracker(classify, known)
    with tracker:
        for p in trainable:
            _grad(p).zero_()
        batch = ids.clone()  # the batch, allocated like a data loader's (the ids are saved)
        output = model(input_ids=batch, labels=batch) if keeps else None
        loss = output.loss if output is not None else loss_fn(batch)
        saved = tracker.by_class[ACT]
        tracker.phase = BWD
        loss.backward()
        del loss, batch
        fb_peak, fb_detail = tracker.peak, dict(tracker.peak_by_class)
        logits_peak = tracker.class_peak[LOGITS]
        kept = storage_bytes([output.logits]) if output is not None else 0
        leftover = tracker.current - kept
        tracker.phase = STEP
        tracker.reset_peak()
        optimizer_step()
        step_peak = tracker.peak - leftover
        del output
    notes = []
    if leftover:
        notes.append(f"{leftover:,} B allocated in forward/backward outlived the step")
    return Measurement(
        weights=storage_bytes(params),
        gradients=storage_bytes(_grad(p) for p in trainable),
        master_weights=storage_bytes(master),
        optimizer_states=storage_bytes(states),
        optimizer_step_counters=counters,
        saved_activations=saved,
        logits=logits_peak,
        forward_backward_peak=fb_peak,
        peak_detail=fb_detail,
        step_temporaries=step_peak,
        fake=fake,
        notes=notes,
    )


__all__ = ["Measurement", "Unsupported", "dtype_of", "measure_step"]
