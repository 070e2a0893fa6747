"""What one measured training step found, under the estimator's term names (torch-free, so
the comparison and the command's output never import torch)."""

from __future__ import annotations

from dataclasses import dataclass, field

from memtui.errors import MemtuiError


class Unsupported(MemtuiError):
    """The plan asks for something that cannot run here (a CUDA-only optimizer, QLoRA)."""


@dataclass
class Measurement:
    """Bytes measured for one training step, under the estimator's term names."""

    weights: int
    gradients: int
    master_weights: int
    optimizer_states: int
    optimizer_step_counters: int
    saved_activations: int
    """Storages allocated in forward (not logits-sized) still alive when backward starts."""
    logits: int
    """Peak of the live logits-sized storages (logits, fp32 upcast, log-probs, gradients)."""
    forward_backward_peak: int
    """Peak live bytes above the static state in forward + backward."""
    peak_detail: dict[str, int]
    """Live bytes per class at that peak."""
    step_temporaries: int
    """Peak live bytes above the static state during the optimizer step."""
    fake: bool
    notes: list[str] = field(default_factory=list)
    backward_buffers: int = 0
    """Live bytes at the forward/backward peak that a stack keeps apart from activations:
    autocast's bf16 copies of fp32 weights, FSDP2's gathered parameters (the estimator's
    transient buffers of the backward phase)."""
    world_size: int = 1
    """Processes the step ran in (FSDP2 over CPU processes); the bytes are one rank's."""
    reference_model: int = 0
    """The reference model's weights beside the policy (a TRL preference step)."""
    log_probs: int = 0
    """Peak of the live per-token log-probs outside the loss head (a TRL step)."""
    cpu_fold: int = 0
    """Live bytes at the forward/backward peak that only CPU allocates: TRL's torch fold of
    its fused head's tiles (CUDA's Triton kernels allocate none)."""

    @property
    def static(self) -> int:
        return self.weights + self.gradients + self.master_weights + self.optimizer_states

    @property
    def activations(self) -> int:
        """Saved activations plus what the forward/backward peak holds beyond them and the
        logits (the layer rebuilt by checkpointing, backward temporaries): the bytes the
        activations add to the peak, which is what the estimator's term means."""
        extra = (
            self.forward_backward_peak
            - self.saved_activations
            - self.logits
            - self.backward_buffers
            - self.log_probs
            - self.cpu_fold
        )
        return self.saved_activations + max(0, extra)

    @property
    def peak(self) -> int:
        """The step's peak as CUDA would see it: static state + max(forward/backward less
        the CPU-only fold temporaries, optimizer step)."""
        return self.static + max(self.forward_backward_peak - self.cpu_fold, self.step_temporaries)
