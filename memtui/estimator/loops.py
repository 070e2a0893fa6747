"""The training loop around the model: what it keeps alive through backward.

A stack runs its own loop (`Loop.auto`): transformers' Trainer for the stacks that train a
transformers model through it (trainer, fsdp1, fsdp2, deepspeed), torchtune's recipes, LitGPT's
fit; the generic stack's textbook step keeps nothing beyond the loss. A plan may name another
loop for a transformers model: accelerate's examples' loop or a hand-written one (`custom`),
whose choices are the plan's flags. A leaf module (it imports only the choices).
"""

from __future__ import annotations

from dataclasses import dataclass

from memtui.errors import PlanError
from memtui.estimator.capabilities import CAPABILITIES
from memtui.estimator.choices import Loop, StackName


@dataclass(frozen=True)
class LoopShape:
    """What one loop keeps alive."""

    keeps_output: bool
    """The model output (its logits) is still referenced during backward."""
    source: str
    through_step: bool = False
    """The output is still referenced during the optimizer step after the backward."""


LOOPS: dict[Loop, LoopShape] = {
    Loop.trainer: LoopShape(
        keeps_output=False,
        source="transformers trainer.py Trainer.training_step: compute_loss returns the loss "
        "alone, the outputs dropped before accelerator.backward (4.38 to 5.24)",
    ),
    Loop.accelerate: LoopShape(
        keeps_output=True,
        source="accelerate examples/nlp_example.py: outputs = model(**batch); loss = "
        "outputs.loss; accelerator.backward(loss); optimizer.step()",
        through_step=True,
    ),
    Loop.custom: LoopShape(
        keeps_output=True,
        source="a hand-written loop: the output kept through backward and the optimizer step "
        "as --loop-keeps-output says",
        through_step=True,
    ),
    Loop.torchtune: LoopShape(
        keeps_output=True,
        source="torchtune recipes' train(): the logits referenced through backward "
        "(lora_finetune_single_device.py)",
    ),
    Loop.litgpt: LoopShape(
        keeps_output=True,
        source="LitGPT fit(): the logit chunks referenced through backward and the optimizer "
        "step, until the next forward returns (litgpt/finetune/lora.py, 5895df10 on)",
        through_step=True,
    ),
}
"""Every loop but auto, by name."""


TRANSFORMERS_LOOPS = frozenset({Loop.trainer, Loop.accelerate, Loop.custom})
"""The loops that run a transformers model (its own gradient_checkpointing_enable)."""
_TRANSFORMERS_STACKS = frozenset(
    s for s, caps in CAPABILITIES.items() if caps.own_loop is Loop.trainer
)


def loop_for(stack: StackName, loop: Loop) -> Loop | None:
    """The loop that runs a plan of `stack` (auto: the stack's own); PlanError for a loop the
    stack's model code cannot run under."""
    if loop is Loop.auto:
        return CAPABILITIES[stack].own_loop
    if loop in TRANSFORMERS_LOOPS and stack in _TRANSFORMERS_STACKS | {StackName.generic}:
        return loop
    if loop is CAPABILITIES[stack].own_loop:
        return loop
    own = CAPABILITIES[stack].own_loop
    raise PlanError(
        f"the {stack.value} stack runs {own.value if own else 'no'} loop, not {loop.value}"
        + (
            ""
            if stack in _TRANSFORMERS_STACKS
            else "; loops trainer, accelerate and custom "
            "train a transformers model (stacks trainer, fsdp1, fsdp2, deepspeed, generic)"
        )
    )


def keeps_output(stack: StackName, loop: Loop, custom_keeps: bool) -> bool:
    """Whether the plan's loop holds the model output through backward."""
    chosen = loop_for(stack, loop)
    if chosen is None:
        return False
    if chosen is Loop.custom:
        return custom_keeps
    return LOOPS[chosen].keeps_output


def output_through_step(stack: StackName, loop: Loop, custom_keeps: bool) -> bool:
    """Whether the plan's loop still holds the model output during the optimizer step."""
    if not keeps_output(stack, loop, custom_keeps):
        return False
    chosen = loop_for(stack, loop)
    return chosen is not None and LOOPS[chosen].through_step
