"""A real TRL trainer step on CPU (`memtui measure --stack trainer --objective
dpo|reward|grpo`).

The estimator's objective books (memtui/estimator/objectives.py) are held to TRL 1.16's own
trainers with their configs, told only what the plan says, on a model built from a config
(random init, no downloads) and a tokenizer built on the spot (a word-level vocabulary of the
model's size, so that no file is fetched). The measured micro-batch and step are the ones
`memtui measure --stack trainer` measures (memtui/measure/trainer.py: the same subclass tells
the probe where the phases meet). What the plan maps to, beyond trainer.py's mapping:
- dpo: prompt + chosen and prompt + rejected sequences of exactly the plan's seq_len tokens
  (DPOConfig.max_length = seq_len), per_device_train_batch_size = the micro-batch (the
  collator makes 2b rows); the reference is a second model built from the same config in the
  policy's dtype for a full fine-tune (`ref_model=`), and for LoRA none (DPOTrainer disables
  the adapter); `precompute_ref_log_probs` from the plan.
- reward: RewardTrainer on AutoModelForSequenceClassification (num_labels 1), the same
  chosen and rejected texts (RewardConfig.max_length = seq_len).
- grpo: GRPOTrainer with Transformers' generate (use_vllm False), num_generations,
  max_completion_length and beta from the plan, prompts of max_prompt_length tokens,
  completions forced to their full length, a reward function of the completions' lengths.
- gradient_checkpointing as the plan says (TRL's configs default it to True).
TRL 1.16's DPOTrainer and GRPOTrainer always run its fused LM head (add_fused_lm_head), so
those plans are estimated with `--loss fused`. CPU is not CUDA in the head: without Triton,
TRL's kernels fold each tile with torch ops (`_forward_tile`, `_backward_tile`) and cast
`_addmm_fp32`'s operands to fp32, temporaries the CUDA kernels do not make: they are
measured apart and left out of the compared peak (benchmarks/cuda_check.py runs the same
steps on a GPU).
"""

from __future__ import annotations

import contextlib
import functools
from collections.abc import Iterator
from typing import Any

import torch

from memtui.estimator.choices import Checkpointing, LossKind, Method, Objective, Precision
from memtui.estimator.objectives import REWARD_LABELS
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
MEASURED_OBJECTIVES = (Objective.dpo, Objective.reward, Objective.grpo)
"""The objectives with a CPU runner here; the others are refused with a reason."""


def check_objective_plan(plan: Plan) -> None:
    """Raise Unsupported (one line) for what this TRL step cannot run on CPU."""
    if plan.objective not in MEASURED_OBJECTIVES:
        measured = ", ".join(o.value for o in MEASURED_OBJECTIVES)
        raise Unsupported(
            f"--objective {plan.objective.value} is not measured on CPU ({measured} are)"
        )
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


PAD, EOS = "<pad>", "</s>"
"""The tokenizer's special tokens (ids 0 and 1): never a substring of a word "t<id>", which
special tokens would be split out of before the words are looked up."""


def _tokenizer(vocab: int) -> Any:
    """A word-level tokenizer over the model's whole vocabulary: PAD, EOS and "t2".."t<V-1>"."""
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    words = {PAD: 0, EOS: 1, **{f"t{i}": i for i in range(2, vocab)}}
    tokenizer = Tokenizer(models.WordLevel(words, unk_token=PAD))
    tokenizer.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    return PreTrainedTokenizerFast(tokenizer_object=tokenizer, pad_token=PAD, eos_token=EOS)


def _preference_data(plan: Plan, vocab: int, samples: int) -> Any:
    """Random prompt, chosen and rejected texts whose prompt + completion is exactly seq_len
    tokens, each completion ending with the EOS the trainers would otherwise append as text
    (dpo_trainer.py / reward_trainer.py `add_eos`: glued to the last word, which this
    tokenizer would read as one unknown word)."""
    from datasets import Dataset

    prompt = plan.seq_len // 2
    completion = plan.seq_len - prompt - 1

    def text(n: int) -> str:
        return " ".join(f"t{int(i)}" for i in torch.randint(2, vocab, (n,)))

    rows = []
    for _ in range(samples):
        chosen, rejected = (f" {text(completion)} {EOS}" for _ in range(2))
        rows.append({"prompt": text(prompt), "chosen": chosen, "rejected": rejected})
    return Dataset.from_list(rows)


def measure_trl(config: dict[str, Any], plan: Plan) -> tuple[Plan, Measurement]:
    """One real TRL step for `plan`, measured on CPU, and the plan as TRL 1.16 runs it (its
    fused LM head for the preference losses)."""
    from dataclasses import replace

    measured, reference = _run(config, plan)
    fused = plan.objective in (Objective.dpo, Objective.grpo)  # add_fused_lm_head in __init__
    ran = plan.evolve(loss=LossKind.fused) if fused else plan
    return ran, replace(measured, reference_model=reference)


def _run(config: dict[str, Any], plan: Plan) -> tuple[Measurement, int]:
    """The measured step and the reference model's bytes."""
    from memtui.measure.step import native_dropout

    check_objective_plan(plan)
    samples = plan.micro_batch * ACCUMULATION * STEPS
    with native_dropout(), torch.random.fork_rng(), _quiet():
        torch.manual_seed(0)
        if plan.objective is Objective.reward:
            return _reward(config, plan, samples), 0
        if plan.objective is Objective.grpo:
            return _grpo(config, plan)
        return _dpo(config, plan, samples)


def _dpo(config: dict[str, Any], plan: Plan, samples: int) -> tuple[Measurement, int]:
    from trl import DPOConfig, DPOTrainer

    from memtui.measure.trainer import run_trainer

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
        vocab,
        2 * plan.micro_batch,
        plan.seq_len,
        autocast_copies=True,
        log_prob_tokens=plan.seq_len - 1,
    )
    with head_as_logits(probe):
        run_trainer(model, plan, vocab, probe, base=DPOTrainer, bf16=True,
                    config_class=DPOConfig, data=_preference_data(plan, vocab, samples),
                    trainer_kwargs=kwargs,
                    max_length=plan.seq_len,
                    precompute_ref_log_probs=plan.precompute_ref_log_probs,
                    gradient_checkpointing=plan.checkpointing is Checkpointing.full)  # fmt: skip
    ref_bytes = storage_bytes(reference.parameters()) if reference is not None else 0
    return probe.measurement(), ref_bytes


def _reward(config: dict[str, Any], plan: Plan, samples: int) -> Measurement:
    """RewardTrainer on AutoModelForSequenceClassification (num_labels=1, as
    RewardTrainer.__init__ loads a model named by path): chosen and rejected in one batch,
    the score head's (2b, s, 1) scores classed as the loss head's."""
    from trl import RewardConfig, RewardTrainer

    from memtui.measure.trainer import run_trainer

    model: Any = hf_model(config, plan, torch.bfloat16, score_labels=REWARD_LABELS)
    vocab = int(model.get_input_embeddings().weight.shape[0])
    kwargs: dict[str, Any] = {"processing_class": _tokenizer(vocab)}
    if plan.method is Method.lora:
        kwargs["peft_config"] = lora_config(plan, config["model_type"])
    probe = StepProbe(vocab, 2 * plan.micro_batch, plan.seq_len, autocast_copies=True)
    with score_as_logits(probe, model.score):
        run_trainer(model, plan, vocab, probe, base=RewardTrainer, bf16=True,
                    config_class=RewardConfig, data=_preference_data(plan, vocab, samples),
                    trainer_kwargs=kwargs, max_length=plan.seq_len,
                    gradient_checkpointing=plan.checkpointing is Checkpointing.full)  # fmt: skip
    return probe.measurement()


def _grpo(config: dict[str, Any], plan: Plan) -> tuple[Measurement, int]:
    """GRPOTrainer with Transformers' generate (use_vllm False): prompts of
    max_prompt_length tokens, num_generations completions each forced to
    max_completion_length tokens (generation_kwargs min_new_tokens), a reward function that
    reads nothing but the completions' lengths; the measured micro-batch is the second of a
    generation batch (steps_per_generation = gradient_accumulation_steps), its buffered
    completions counted with the log-probs."""
    from datasets import Dataset
    from trl import GRPOConfig, GRPOTrainer

    from memtui.estimator.objectives import beta_of
    from memtui.measure.trainer import run_trainer

    model: Any = hf_model(config, plan, torch.bfloat16)
    vocab = int(model.get_output_embeddings().weight.shape[0])
    prompts = [
        " ".join(f"t{int(i)}" for i in torch.randint(2, vocab, (plan.max_prompt_length,)))
        for _ in range(plan.micro_batch * ACCUMULATION * STEPS)
    ]

    def reward(completions: list[str], **_: Any) -> list[float]:
        return [float(len(c) % 7) for c in completions]

    kwargs: dict[str, Any] = {"processing_class": _tokenizer(vocab), "reward_funcs": reward}
    if plan.method is Method.lora:
        kwargs["peft_config"] = lora_config(plan, config["model_type"])
    completion = plan.max_completion_length
    seq = plan.max_prompt_length + completion
    probe = StepProbe(
        vocab,
        plan.micro_batch,
        seq,
        autocast_copies=True,
        log_prob_tokens=completion,
        buffered=lambda trainer: [
            t
            for batch in trainer._buffered_inputs or ()
            for t in batch.values()
            if isinstance(t, torch.Tensor)
        ],
    )
    data = Dataset.from_list([{"prompt": p} for p in prompts])
    grpo: dict[str, Any] = {
        "num_generations": plan.num_generations,
        "max_completion_length": completion,
        "beta": beta_of(plan),
        "generation_kwargs": {"min_new_tokens": completion},
        "gradient_checkpointing": plan.checkpointing is Checkpointing.full,
    }
    with head_as_logits(probe):
        trainer = run_trainer(
            model,
            plan,
            vocab,
            probe,
            base=GRPOTrainer,
            bf16=True,
            config_class=GRPOConfig,
            data=data,
            trainer_kwargs=kwargs,
            **grpo,
        )
    reference = getattr(trainer, "ref_model", None)
    ref_bytes = storage_bytes(reference.parameters()) if reference is not None else 0
    return probe.measurement(), ref_bytes


@contextlib.contextmanager
def score_as_logits(probe: StepProbe, score: torch.nn.Module) -> Iterator[None]:
    """Class what the score head allocates in forward (its (2b, s, 1) scores) with the
    logits: by the module, not by shape, since RMSNorm's fp32 statistics are (2b, s, 1) too.
    PEFT wraps the head in place (modules_to_save), so its hooks stay on the module run."""

    def enter(*_: Any) -> None:
        if probe.tracker is not None and not probe.done:
            probe.tracker.inside = LOGITS

    def leave(*_: Any) -> None:
        if probe.tracker is not None:
            probe.tracker.inside = None

    handles = [score.register_forward_pre_hook(enter), score.register_forward_hook(leave)]
    try:
        yield
    finally:
        for handle in handles:
            handle.remove()
