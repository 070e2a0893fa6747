"""What each training objective keeps beside the policy, read from the trainers that run it.

Read from TRL 1.16.0 (trl/trainer/*.py) and vLLM:
- DPO and its variants with a reference (DPOTrainer, loss_type "sigmoid", "ipo", ...):
  DataCollatorForPreference.torch_call stacks every example's prompt + chosen and prompt +
  rejected sequences into one batch, [chosen; rejected]: 2b sequences a step, each at most
  DPOConfig.max_length (1024) tokens. `_compute_loss` runs the policy on it and the reference
  on the same batch under torch.no_grad. The reference: with a PeftModel and no ref_model,
  DPOTrainer.__init__ keeps none and `_compute_loss` runs the policy inside
  `use_adapter(model, None)` (trl/trainer/utils.py: PeftModel.disable_adapter), the base with
  the adapter off; otherwise a second model loaded in the policy's dtype
  (create_model_from_path(..., dtype=self.model.dtype)), prepared like it (prepare_deepspeed /
  prepare_fsdp: sharded like the policy). precompute_ref_log_probs scores the dataset before
  training (`_precompute_ref_logps`) and keeps no reference.
- ORPO, SimPO and CPO: the chosen and rejected sequences concatenated, no reference.
- KTO (KTOTrainer): one completion per example against a reference; the KL batch of
  mismatched completions runs under torch.no_grad (no saved tensors).
- Reward modelling (RewardTrainer): AutoModelForSequenceClassification with num_labels=1,
  chosen and rejected in one batch (compute_loss: torch.chunk(outputs.logits, 2)); the score
  head gives b x s x 1 scores, no vocabulary logits.
- GRPO (GRPOTrainer): a reference only when beta != 0 (GRPOTrainer.__init__: `if self.beta
  == 0.0: self.ref_model = None`, and none under PEFT: the adapter is disabled); GRPOConfig
  .beta defaults to 0.0 in TRL 1.16 (0.04 in the first releases with GRPO). Each process
  generates per_device_train_batch_size x steps_per_generation completions (GRPOConfig
  .__post_init__: generation_batch_size = per_device x processes x steps_per_generation,
  steps_per_generation defaulting to gradient_accumulation_steps) and buffers them for the
  steps that train on them.
- RLOO (RLOOTrainer): GRPO's books, beta 0.05 by default. Reward functions that name a model
  (both trainers load it as AutoModelForSequenceClassification) are not counted.
- PPO (trl/experimental PPOTrainer): policy, reference and a frozen reward model, and a value
  model trained beside the policy (one optimizer over both), each taken to have the policy's
  architecture.
- The log-probs of the preference and online losses (DPOTrainer, GRPOTrainer
  `_get_per_token_logps_and_entropies`) go through TRL's fused LM head (memtui's fused loss
  on the trainer stack; the full loss stands for the trainers that take whole logits)
  (trl/trainer/utils.py add_fused_lm_head, trl/kernels/chunked_logprob.py
  ChunkedLogProbFunction): the b x s x V logits are never whole, the head runs on tiles of
  4096 tokens x 32768 vocabulary rows and its backward accumulates fp32 gradients.
- vLLM colocated: the engine takes gpu_memory_utilization x the card, weights, profiled
  activations and KV cache together (vllm/v1/worker/gpu_worker.py
  Worker.determine_available_memory, vLLM commit 0012cf69: the KV cache is
  total_gpu_memory x gpu_memory_utilization - the profiled peak). Sleep mode level 2 (TRL
  generation/vllm_generation.py: llm.sleep(level=2) after generating) frees weights and
  KV cache while the trainer steps. Server mode runs on other GPUs. Without vLLM, TRL calls
  the policy's own `generate`, whose KV cache holds every generated sequence's keys and
  values in the compute dtype.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

from memtui.errors import PlanError
from memtui.estimator.choices import (
    LossKind,
    Method,
    Objective,
    Precision,
    RefModel,
    StackName,
    VllmMode,
)
from memtui.estimator.units import ceil_div

if TYPE_CHECKING:
    from memtui.estimator.activations import Setup
    from memtui.estimator.architecture import Architecture


class _Card(Protocol):
    @property
    def gpus(self) -> int: ...
    @property
    def gpu_memory(self) -> int: ...


class _Model(Protocol):
    @property
    def architecture(self) -> Architecture: ...


class Plan(Protocol):
    """The fields of a plan the objective's books read (`memtui.estimator.plan.Plan`, which
    calls `check_objective`: a protocol, not an import)."""

    @property
    def model(self) -> _Model: ...
    @property
    def hardware(self) -> _Card: ...
    @property
    def objective(self) -> Objective: ...
    @property
    def ref_model(self) -> RefModel: ...
    @property
    def method(self) -> Method: ...
    @property
    def precision(self) -> Precision: ...
    @property
    def stack(self) -> StackName: ...
    @property
    def loss(self) -> LossKind: ...
    @property
    def beta(self) -> float | None: ...
    @property
    def precompute_ref_log_probs(self) -> bool: ...
    @property
    def micro_batch(self) -> int: ...
    @property
    def grad_accum(self) -> int: ...
    @property
    def seq_len(self) -> int: ...
    @property
    def tp(self) -> int: ...
    @property
    def num_generations(self) -> int: ...
    @property
    def max_prompt_length(self) -> int: ...
    @property
    def max_completion_length(self) -> int: ...
    @property
    def vllm_mode(self) -> VllmMode: ...
    @property
    def vllm_gpu_memory_utilization(self) -> float: ...
    @property
    def vllm_sleep_mode(self) -> bool: ...


@dataclass(frozen=True)
class ObjectiveSpec:
    """What an objective's trainer keeps."""

    pairs: bool = False
    """Chosen and rejected sequences in one batch: 2 sequences per example."""
    reference: bool = False
    """Keeps a reference model (unless it is the adapter-disabled base or precomputed)."""
    online: bool = False
    """Generates its completions (prompt + completion tokens)."""
    value_model: bool = False
    """Trains a value model beside the policy."""
    reward_model: bool = False
    """Scores completions with a frozen reward model."""
    classification: bool = False
    """A sequence-classification head (num_labels scores) instead of the vocabulary logits."""
    log_probs: bool = False
    """Its loss reads per-token log-probs through TRL's fused LM head."""
    head_outputs: int = 1
    """The fp32 per-token outputs its trainer asks TRL's fused head for (add_fused_lm_head
    `outputs=`; is_top1, a bool, is left with the activations): the policy's, and the
    adapter-disabled reference's, which is the same patched model."""
    metric_bytes: int = 0
    """Bytes per token of the per-token metric the step computes beside the loss."""


SPECS: dict[Objective, ObjectiveSpec] = {
    Objective.sft: ObjectiveSpec(),
    # DPOTrainer.__init__: outputs=("log_probs", "entropy", "mean_logits", "is_top1") for the
    # policy; _compute_loss: the entropy metric's product `per_token_entropy * mask`
    Objective.dpo: ObjectiveSpec(
        pairs=True, reference=True, log_probs=True, head_outputs=3, metric_bytes=4
    ),
    Objective.ipo: ObjectiveSpec(
        pairs=True, reference=True, log_probs=True, head_outputs=3, metric_bytes=4
    ),
    Objective.orpo: ObjectiveSpec(pairs=True, log_probs=True),
    Objective.simpo: ObjectiveSpec(pairs=True, log_probs=True),
    Objective.cpo: ObjectiveSpec(pairs=True, log_probs=True),
    # KTOTrainer.__init__: outputs=("log_probs", "entropy", "mean_logits"); _compute_loss (as
    # DPO's): the entropy metric's product
    Objective.kto: ObjectiveSpec(reference=True, log_probs=True, head_outputs=3, metric_bytes=4),
    Objective.reward: ObjectiveSpec(pairs=True, classification=True),
    Objective.ppo: ObjectiveSpec(
        reference=True, online=True, value_model=True, reward_model=True, log_probs=True
    ),
    # GRPOTrainer / RLOOTrainer.__init__: add_fused_lm_head(outputs=("log_probs", "entropy"))
    Objective.rloo: ObjectiveSpec(reference=True, online=True, log_probs=True, head_outputs=2),
    Objective.grpo: ObjectiveSpec(reference=True, online=True, log_probs=True, head_outputs=2),
}

DEFAULT_BETA = {Objective.grpo: 0.0, Objective.rloo: 0.05}
"""The KL coefficient's defaults in TRL 1.16 (trl/trainer/grpo_config.py GRPOConfig.beta,
rloo_config.py RLOOConfig.beta); DPOConfig.beta and the others' 0.1."""
REWARD_LABELS = 1
"""RewardTrainer's num_labels: one score per sequence."""
FUSED_TOKEN_CHUNK = 4096
"""trl/kernels/chunked_logprob.py TOKEN_CHUNK_SIZE: tokens per tile of the fused LM head."""
FUSED_VOCAB_CHUNK = 32768
"""trl/trainer/utils.py _CHUNKED_LOGPROB_CHUNK_SIZE: vocabulary rows per tile."""


def spec_of(plan: Plan) -> ObjectiveSpec:
    return SPECS[plan.objective]


def beta_of(plan: Plan) -> float:
    """The KL coefficient the trainer runs with (GRPO's default 0.0, RLOO's 0.05, DPO's 0.1)."""
    if plan.beta is not None:
        return plan.beta
    return DEFAULT_BETA.get(plan.objective, 0.1)


def keeps_reference(plan: Plan) -> bool:
    """A reference model scores the batch during the step (a copy or the disabled adapter)."""
    spec = spec_of(plan)
    if not spec.reference or plan.ref_model is RefModel.none:
        return False
    if plan.objective in DEFAULT_BETA and beta_of(plan) == 0.0:
        return False  # GRPOTrainer / RLOOTrainer.__init__: beta 0.0 loads no reference
    return not (plan.precompute_ref_log_probs and not spec.online)


def reference_is_copy(plan: Plan) -> bool:
    """The reference is a second model in GPU memory (not the adapter-disabled base)."""
    if not keeps_reference(plan):
        return False
    if plan.ref_model is RefModel.auto:
        return plan.method is Method.full  # TRL: a PeftModel with no ref_model disables it
    return plan.ref_model is RefModel.copy


def check_objective(plan: Plan) -> None:
    """The objective's rules (called by `Plan.check_rules`); raises PlanError."""
    spec = spec_of(plan)
    if plan.ref_model is RefModel.adapter_disabled and plan.method is Method.full:
        raise PlanError(
            "--ref-model adapter-disabled needs LoRA or QLoRA: a full fine-tune has no adapter "
            "to disable (use copy or --precompute-ref-log-probs)"
        )
    if plan.ref_model in (RefModel.copy, RefModel.adapter_disabled) and not spec.reference:
        raise PlanError(f"--objective {plan.objective.value} keeps no reference model")
    if plan.precompute_ref_log_probs and spec.online:
        # an objective without a reference has nothing to precompute: the setting is moot
        raise PlanError(
            "--precompute-ref-log-probs is for offline objectives (dpo, ipo, kto): online RL "
            "scores completions generated during training"
        )
    if spec.online:
        # GRPOConfig.__post_init__: the generation batch splits into groups of num_generations
        batch = plan.micro_batch * plan.hardware.gpus * plan.grad_accum
        if batch % plan.num_generations:
            raise PlanError(
                f"the generation batch (micro-batch x GPUs x grad accum = {batch}) must be "
                f"divisible by num_generations ({plan.num_generations})"
            )


def trained_shape(plan: Plan) -> tuple[int, int]:
    """(tokens per sequence, sequences) of one micro-batch's forward as the trainer runs it."""
    spec = spec_of(plan)
    if spec.online:
        return plan.max_prompt_length + plan.max_completion_length, plan.micro_batch
    return plan.seq_len, plan.micro_batch * (2 if spec.pairs else 1)


def generated_rows(plan: Plan) -> int:
    """Completions one process generates at a time: per_device_train_batch_size x
    steps_per_generation (its default: gradient_accumulation_steps)."""
    return plan.micro_batch * plan.grad_accum


def scored_architecture(plan: Plan) -> Architecture | None:
    """The model a classification objective trains (None: the plan's own): RewardTrainer
    loads AutoModelForSequenceClassification with num_labels=1 (reward_trainer.py
    RewardTrainer.__init__), the backbone with a score head and no lm_head."""
    if not spec_of(plan).classification:
        return None
    arch = plan.model.architecture
    # built anew, not model_copy'd: its cached tensors and parameter count would carry over
    fields = {name: getattr(arch, name) for name in type(arch).model_fields}
    return type(arch)(**{**fields, "score_labels": REWARD_LABELS})


def fused_lm_head(plan: Plan) -> bool:
    """The step runs TRL's fused LM head (the trainer stack with the fused loss: TRL 1.16's
    own trainers, dpo_trainer.py / grpo_trainer.py __init__ add_fused_lm_head)."""
    return bool(
        spec_of(plan).log_probs and plan.stack is StackName.trainer and plan.loss is LossKind.fused
    )


def head_bytes(plan: Plan, arch: Architecture, setup: Setup, seq: int, rows: int) -> int | None:
    """The loss head's peak bytes where the objective changes it (None: the stack's logits).

    Reward: the score head's b x s x 1 outputs.
    TRL's fused LM head (the trainer stack with the fused loss: TRL 1.16's own trainers;
    LLaMA-Factory's CustomDPOTrainer.concatenated_forward and older TRL take the whole fp32
    logits, the full loss's buffers for 2b rows): at the end of its backward, the fp32 gradient
    of the hidden states and the copy of it the backward returns, one tile in the compute
    dtype, the fp32 per-token statistics and, when the lm_head trains, its fp32 gradient
    accumulator and the copy of it the backward returns. The hidden states and labels it
    keeps from the forward are the activations' (`Setup.head_keeps_input`)."""
    spec = spec_of(plan)
    if spec.classification:
        # LlamaForSequenceClassification.forward (transformers 5.24): score(hidden_states),
        # b x s x num_labels in the compute dtype, of which each row's last token is pooled;
        # RewardTrainer.compute_loss reads only the pooled b x 1
        return ceil_div(setup.compute_bytes * REWARD_LABELS * rows * seq, setup.tp)
    if not fused_lm_head(plan):
        return None
    tokens = rows * max(1, seq - 1)
    h = arch.hidden_size
    # mm_buf is a whole tile whatever the vocabulary: (min(N, 4096), 32768)
    tile = min(tokens, FUSED_TOKEN_CHUNK) * FUSED_VOCAB_CHUNK
    # a trained lm_head: its fp32 gradient accumulator and the copy in the weight's dtype
    # that ChunkedLogProbFunction.backward returns (grad_weight.to(weight.dtype))
    head_grad = (4 + setup.compute_bytes) * arch.vocab_size * h if plan.method is Method.full else 0
    total = (
        # grad_hidden, accumulated in fp32, and grad_hidden.to(hidden.dtype) returned beside
        # it (kernels/chunked_logprob.py ChunkedLogProbFunction.backward)
        (4 + setup.compute_bytes) * tokens * h
        + setup.compute_bytes * tile  # mm_buf
        + (4 + 4) * tokens  # log_z and the log-probs (or the entropy)
        + head_grad
    )
    return ceil_div(total, setup.tp)


@dataclass(frozen=True)
class ObjectiveBytes:
    """What an objective holds beside the policy, bytes per GPU."""

    reference: int = 0
    value_model: int = 0
    reward_model: int = 0
    log_probs: int = 0
    generator: int = 0
    """The generation engine's bytes during the training step."""
    generation: int = 0
    """Its bytes during the generation phase (the phases table)."""


NOTHING = ObjectiveBytes()


def objective_bytes(plan: Plan, frozen_copy: int, trained_state: int) -> ObjectiveBytes:
    """The objective's terms for `plan`: `frozen_copy` is one frozen copy of the model per
    GPU (in the policy's dtype, sharded like its weights), `trained_state` the policy's static
    state per GPU (a value model trained beside it keeps as much)."""
    spec = spec_of(plan)
    if plan.objective is Objective.sft:
        return NOTHING
    seq, rows = trained_shape(plan)
    arch = plan.model.architecture
    log_prob_sets = 1 + (1 if keeps_reference(plan) else 0)
    generator = generation = 0
    if spec.online:
        gen_rows = generated_rows(plan)
        completion = plan.max_completion_length
        # GRPOTrainer._prepare_inputs buffers the generation batch (split_tensor_dict into
        # steps_per_generation micro-batches): the other micro-batches' prompt and completion
        # ids and masks (int64 each; the measured one's ids are the activations' token ids),
        # every row's advantage and, with a reference, its per-token log-probs (fp32); the
        # micro-batch's own fused-head outputs (outputs=("log_probs", "entropy"), fp32)
        log_probs = (
            16 * (gen_rows - rows) * seq
            + 4 * gen_rows
            + 4 * gen_rows * completion * (log_prob_sets - 1)
            + 4 * spec.head_outputs * rows * completion
        )
        # vllm/v1/worker/utils.py request_memory (vLLM commit 0027b027): the engine's budget is
        # ceil(total x gpu_memory_utilization), weights, profiled activations, the CUDA-graph
        # estimate and the KV cache inside it (gpu_worker.py determine_available_memory: the
        # KV cache is requested_memory - non_kv_cache_memory - the CUDA-graph estimate)
        share = math.ceil(plan.vllm_gpu_memory_utilization * plan.hardware.gpu_memory)
        if plan.vllm_mode is VllmMode.colocate:
            generation = share
            generator = 0 if plan.vllm_sleep_mode else share
        elif plan.vllm_mode is VllmMode.none:
            generation = kv_cache_bytes(arch, plan.precision.activation_bytes, gen_rows, seq)
            # the last position's logits, upcast to fp32 for sampling
            generation += 4 * gen_rows * arch.vocab_size
    elif spec.log_probs:
        # the fused head scores seq - 1 positions (add_fused_lm_head `_fused_forward`:
        # hidden_states[:, :-1]), each output masked into a new fp32 tensor (masked_fill); a
        # reference copy's head returns its log_probs alone (add_fused_lm_head's default), the
        # adapter-disabled base the policy's outputs
        ref = 0
        if reference_is_copy(plan):
            ref = 4
        elif keeps_reference(plan):
            ref = 4 * spec.head_outputs
        per_token = 4 * spec.head_outputs + spec.metric_bytes + ref
        log_probs = rows * max(1, seq - 1) * per_token
    else:
        log_probs = 0
    return ObjectiveBytes(
        reference=frozen_copy if reference_is_copy(plan) else 0,
        value_model=trained_state if spec.value_model else 0,
        reward_model=frozen_copy if spec.reward_model else 0,
        log_probs=ceil_div(log_probs, plan.tp),
        generator=generator,
        generation=generation,
    )


def kv_cache_bytes(arch: Architecture, width: int, rows: int, tokens: int) -> int:
    """Transformers' DynamicCache for `rows` sequences of `tokens`: keys and values of every
    layer in `width` bytes (cache_utils.py DynamicLayer.update concatenates them)."""
    return width * rows * tokens * arch.num_layers * (arch.kv_width + arch.v_width)


def objective_sources(plan: Plan, goal: ObjectiveBytes) -> dict[str, str]:
    """The report's source line of each objective term for `plan`, by term key (empty for
    SFT: the declarations' own lines)."""
    if plan.objective is Objective.sft:
        return {}
    spec = spec_of(plan)
    seq, rows = trained_shape(plan)
    name = plan.objective.value
    if reference_is_copy(plan):
        ref = "a frozen copy in the policy's dtype, sharded like its weights"
    elif keeps_reference(plan):
        ref = "none: the PEFT base with the adapter disabled (TRL use_adapter(model, None))"
    elif spec.reference and plan.precompute_ref_log_probs:
        ref = "none: reference log-probs precomputed before training"
    else:
        ref = f"none: {name} keeps no reference" + (
            " (beta 0)" if plan.objective in DEFAULT_BETA else ""
        )
    out = {
        "reference_model": ref,
        "activations": f"{name}: {rows} sequences of {seq} tokens per micro-batch"
        + (" (chosen and rejected)" if spec.pairs else "")
        + (" (prompt + completion)" if spec.online else ""),
        "log_probs": f"{name}: fp32 per-token log-probs"
        + (", the buffered generation batch" if spec.online else ""),
    }
    if spec.classification:
        out["logits"] = f"score head: {rows} x {seq} x {REWARD_LABELS} scores, no vocabulary logits"
    elif fused_lm_head(plan):
        out["logits"] = "TRL's fused LM head: tiles of the logits, fp32 hidden-state gradient"
    if spec.value_model:
        out["value_model"] = "PPO's value model, the policy's architecture, trained like it"
    if spec.reward_model:
        out["reward_model"] = "a frozen reward model, the policy's architecture and dtype"
    if spec.online:
        out["generator"] = {
            VllmMode.colocate: f"vLLM colocated: {plan.vllm_gpu_memory_utilization:.0%} of the "
            "card (vllm/v1/worker/gpu_worker.py determine_available_memory)"
            + ("; asleep while the trainer steps" if plan.vllm_sleep_mode else ""),
            VllmMode.server: "vLLM server on other GPUs: none on the trainer's",
            VllmMode.none: "Transformers' generate: its KV cache only while generating",
        }[plan.vllm_mode]
    return out


OBJECTIVE_TERMS = frozenset(
    {"reference_model", "value_model", "reward_model", "log_probs", "generator"}
)
"""The terms only some objectives hold (a report may leave them out where they are 0)."""


def objective_line(plan: Plan) -> str:
    """One line saying how the objective's trainer runs the step."""
    seq, rows = trained_shape(plan)
    spec = spec_of(plan)
    parts = [f"{rows} sequences of {seq} tokens per micro-batch"]
    if spec.reference:
        parts.append(
            "reference: "
            + (
                "copy"
                if reference_is_copy(plan)
                else "adapter-disabled base"
                if keeps_reference(plan)
                else "none"
            )
        )
    if spec.online:
        parts.append(
            f"{plan.num_generations} generations per prompt, {generated_rows(plan)} completions "
            f"generated per GPU, vLLM {plan.vllm_mode.value}, beta {beta_of(plan):g}"
        )
    return "; ".join(parts)
