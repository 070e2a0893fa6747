"""A digest of many estimates, to prove a refactor changed no number.

Builds a grid of plans (catalog models of several families, every stack, method, precision,
strategy, checkpointing mode, loss, offload and a few batch shapes), estimates each, and writes
one JSON line per plan (the whole report but its time figures: every term, strategy row,
lever, phase, the communication and each source's text) to the output file, then prints how
many plans were estimated, how many were refused, and a SHA-256 of the file. Run it before
and after a refactor and compare the hashes (or `diff` the files):

    python benchmarks/budget_digest.py --out /tmp/before.jsonl
    python benchmarks/budget_digest.py --out /tmp/after.jsonl

It asserts nothing: numbers are meant to change when a mechanism changes; a refactor's commit
says the two digests were equal.
"""

from __future__ import annotations

import argparse
import hashlib
import itertools
import json
from pathlib import Path

from memtui.estimator import (
    Checkpointing,
    LossKind,
    Method,
    Offload,
    Plan,
    Precision,
    StackName,
    Strategy,
    estimate,
)
from memtui.estimator.model_source import load_model

NOT_MEMORY = {"step_time": True, "levers": {"__all__": {"seconds_change", "percent_change"}}}
"""The report's time figures (`memtui.estimator.step_time`): a digest of the memory budget
leaves them out, so a change of the step-time model leaves it as it was."""

MODELS = (
    "meta-llama/Llama-2-7b-hf",
    "Qwen/Qwen2.5-0.5B",
    "mistralai/Mixtral-8x7B-v0.1",
    "google/gemma-2-2b",
    "openai-community/gpt2",
    "EleutherAI/pythia-410m",
    "13B",
)
SHAPES = ((1, 4096, 1), (4, 1024, 8))  # (micro_batch, seq_len, grad_accum)


def plans() -> list[tuple[str, dict[str, object]]]:
    """Every (model, fields) pair of the grid, valid or not (the refusals are part of it)."""
    out = []
    for model, stack, method, precision, strategy, ckpt, loss, offload, shape in itertools.product(
        MODELS,
        StackName,
        Method,
        Precision,
        Strategy,
        (Checkpointing.none, Checkpointing.full),
        (LossKind.full, LossKind.chunked),
        (Offload.none, Offload.optimizer),
        SHAPES,
    ):
        b, s, ga = shape
        fields: dict[str, object] = {
            "stack": stack,
            "method": method,
            "precision": precision,
            "strategy": strategy,
            "checkpointing": ckpt,
            "loss": loss,
            "offload": offload,
            "micro_batch": b,
            "seq_len": s,
            "grad_accum": ga,
        }
        out.append((model, fields))
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, required=True, help="the JSON-lines file to write")
    args = parser.parse_args()
    specs = {name: load_model(name) for name in MODELS}
    estimated = refused = 0
    with args.out.open("w") as f:
        for model, fields in plans():
            key = {"model": model, **{k: str(v) for k, v in fields.items()}}
            try:
                plan = Plan(model=specs[model], **fields)  # type: ignore[arg-type]
            except ValueError:  # pydantic's ValidationError is one
                refused += 1
                f.write(json.dumps({"plan": key, "refused": True}) + "\n")
                continue
            report = estimate(plan)
            estimated += 1
            budget = report.model_dump(mode="json", exclude=NOT_MEMORY)
            f.write(json.dumps({"plan": key, "report": budget}) + "\n")
    digest = hashlib.sha256(args.out.read_bytes()).hexdigest()
    print(f"{estimated} plans estimated, {refused} refused; sha256 {digest}")


if __name__ == "__main__":
    main()
