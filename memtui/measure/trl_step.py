"""A real TRL trainer step on CPU (`memtui measure --stack trainer --objective dpo`).

The estimator's objective books (memtui/estimator/objectives.py) are held to TRL 1.16's own
`trl.DPOTrainer` with a `DPOConfig`, told only what the plan says, on a model built from a
config (random init, no downloads) and a tokenizer built on the spot (a word-level
vocabulary of the model's size, so that no file is fetched). The measured micro-batch and
step are the ones `memtui measure --stack trainer` measures (memtui/measure/trainer.py: the
same subclass tells the probe where the phases meet). What the plan maps to, beyond
trainer.py's mapping:
- dpo: prompt + chosen and prompt + rejected sequences of exactly the plan's seq_len tokens
  (DPOConfig.max_length = seq_len), per_device_train_batch_size = the micro-batch (the
  collator makes 2b rows); the reference is a second model built from the same config in the
  policy's dtype for a full fine-tune (`ref_model=`), and for LoRA none (DPOTrainer disables
  the adapter); `precompute_ref_log_probs` from the plan. TRL 1.16 always runs its fused LM
  head, so the plan is estimated with `--loss fused`.
- gradient_checkpointing as the plan says (TRL's configs default it to True).
CPU is not CUDA in the head: without Triton, TRL's kernels fold each tile with torch ops
(`_forward_tile`, `_backward_tile`) that make fp32 temporaries of the tile, which the CUDA
kernel does not (benchmarks/cuda_check.py must confirm the head there). Reward modelling and
GRPO are not run here yet (`Unsupported`).
"""

from __future__ import annotations

import contextlib
import functools
from collections.abc import Iterator
from typing import Any

import torch

from memtui.estimator.choices import LossKind, Method, Objective, Precision
from memtui.estimator.plan import Plan
from memtui.measure.build import hf_model
from memtui.measure.measurement import Measurement, Unsupported
from memtui.measure.probe import CPU_FOLD, LOGITS, StepProbe
from memtui.measure.tracker import storage_bytes
from memtui.measure.trainer import (
    ACCUMULATION,
    STEPS,
    _quiet,
    check_trainer_plan,
    lora_config,
)

CPU_FOLDS = ("_forward_tile", "_backward_tile", "_addmm_fp32")
"""trl/kernels/chunked_logprob.py's CPU stand-ins for its Triton kernels (TRL 1.16)."""
MEASURED_OBJECTIVES = (Objective.dpo,)
"""The objectives with a CPU runner here; the others are refused with a reason."""


def check_objective_plan(plan: Plan) -> None:
    """Raise Unsupported (one line) for what this TRL step cannot run on CPU."""
    if plan.objective not in MEASURED_OBJECTIVES:
        raise Unsupported(f"--objective {plan.objective.value} is not measured on CPU (dpo is)")
    if plan.precision is not Precision.bf16:
        raise Unsupported("TRL's trainers are measured in bf16 (--precision bf16)")
    check_trainer_plan(plan.evolve(loss=LossKind.full))


@contextlib.contextmanager
def head_as_logits(probe: StepProbe) -> Iterator[None]:
    """Class every storage TRL's fused LM head allocates (trl/kernels/chunked_logprob.py
    ChunkedLogProbFunction.forward and .backward: its tiles, fp32 statistics and gradient
    accumulators) with the logits, the estimator's loss-head term, whatever its shape; and
    what its torch fold of the tiles allocates on CPU (`_forward_tile`, `_backward_tile`, the
    fp32 casts of `_addmm_fp32`, each looked up as a module global at call time) apart, as
    CPU-only: on CUDA the Triton kernels and torch.addmm(out_dtype=float32) allocate none."""
    from trl.kernels import chunked_logprob

    function = chunked_logprob.ChunkedLogProbFunction
    methods = {name: function.__dict__[name] for name in ("forward", "backward")}
    folds = {name: getattr(chunked_logprob, name) for name in CPU_FOLDS}

    def classed(fn: Any, cls: str) -> Any:
        @functools.wraps(fn)
        def inner(*args: Any, **kwargs: Any) -> Any:
            tracker = probe.tracker if not probe.done else None
            if tracker is None:
                return fn(*args, **kwargs)
            before, tracker.inside = tracker.inside, cls
            try:
                return fn(*args, **kwargs)
            finally:
                tracker.inside = before

        return inner

    for name, method in methods.items():
        setattr(function, name, staticmethod(classed(method.__func__, LOGITS)))
    for name, fold in folds.items():
        setattr(chunked_logprob, name, classed(fold, CPU_FOLD))
    try:
        yield
    finally:
        for name, method in methods.items():
            setattr(function, name, method)
        for name, fold in folds.items():
            setattr(chunked_logprob, name, fold)


def _tokenizer(vocab: int) -> Any:
    """A word-level tokenizer over the model's whole vocabulary: "t0" pads, "t1" ends."""
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    words = Tokenizer(models.WordLevel({f"t{i}": i for i in range(vocab)}, unk_token="t0"))
    words.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    return PreTrainedTokenizerFast(tokenizer_object=words, pad_token="t0", eos_token="t1")


def _preference_data(plan: Plan, vocab: int, samples: int) -> Any:
    """Random prompt, chosen and rejected texts whose prompt + completion (+ EOS, which the
    trainers append) is exactly seq_len tokens."""
    from datasets import Dataset

    prompt = plan.seq_len // 2
    completion = plan.seq_len - prompt - 1

    def text(n: int) -> str:
        return " ".join(f"t{int(i)}" for i in torch.randint(2, vocab, (n,)))

    rows = []
    for _ in range(samples):
        chosen, rejected = " " + text(completion), " " + text(completion)
        rows.append({"prompt": text(prompt), "chosen": chosen, "rejected": rejected})
    return Dataset.from_list(rows)


def measure_trl(config: dict[str, Any], plan: Plan) -> tuple[Plan, Measurement]:
    """One real TRL step for `plan`, measured on CPU, and the plan as TRL 1.16 runs it (its
    fused LM head for the preference losses)."""
    from dataclasses import replace

    measured, reference = _run(config, plan)
    ran = plan.evolve(loss=LossKind.fused) if plan.objective is Objective.dpo else plan
    return ran, replace(measured, reference_model=reference)


def _run(config: dict[str, Any], plan: Plan) -> tuple[Measurement, int]:
    """The measured step and the reference model's bytes."""
    from memtui.measure.step import native_dropout
    from memtui.measure.trainer import run_trainer

    check_objective_plan(plan)
    samples = plan.micro_batch * ACCUMULATION * STEPS
    with native_dropout(), torch.random.fork_rng(), _quiet():
        torch.manual_seed(0)
        from trl import DPOConfig, DPOTrainer

        common = {"gradient_checkpointing": plan.checkpointing.value == "full"}
        model: Any = hf_model(config, plan, torch.bfloat16)
        vocab = int(model.get_output_embeddings().weight.shape[0])
        reference = None
        kwargs: dict[str, Any] = {"processing_class": _tokenizer(vocab)}
        if plan.method is Method.lora:
            # as `trl dpo --use_peft` does: DPOTrainer wraps the model itself, and its
            # reference is the base with the adapter disabled (given a PeftModel instead, it
            # adds a frozen "ref" copy of the adapter: DPOTrainer.__init__ add_adapter("ref"))
            kwargs["peft_config"] = lora_config(plan, config["model_type"])
        elif not plan.precompute_ref_log_probs:
            reference = hf_model(config, plan, torch.bfloat16)
        kwargs["ref_model"] = reference
        probe = StepProbe(
            vocab, 2 * plan.micro_batch, plan.seq_len, autocast_copies=True, log_probs=True
        )
        with head_as_logits(probe):
            run_trainer(model, plan, vocab, probe, base=DPOTrainer, bf16=True,
                        config_class=DPOConfig, data=_preference_data(plan, vocab, samples),
                        trainer_kwargs=kwargs,
                        max_length=plan.seq_len,
                        precompute_ref_log_probs=plan.precompute_ref_log_probs,
                        **common)  # fmt: skip
        ref_bytes = storage_bytes(reference.parameters()) if reference is not None else 0
    return probe.measurement(), ref_bytes
