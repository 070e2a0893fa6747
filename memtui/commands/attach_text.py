"""`memtui watch --attach`: the training jobs on the GPUs, the plan each was launched with, and
its own budget beside what its processes use now (text, or one JSON object with --json).

The jobs come from `memtui.plans.attach` (psutil: command lines, working folders, the
launchers' environment variables); the plan of a job from its own config files, over
memtui's defaults sized to the GPUs seen. Strings from the processes are printed as plain
text with control characters escaped.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from memtui.estimator.units import SizeUnit, format_size

if TYPE_CHECKING:
    from memtui.telemetry import ClusterSnapshot, SourceInfo


def attach_document(snapshot: ClusterSnapshot, info: SourceInfo) -> dict[str, Any]:
    """Every job with its plan, provenance, budget and live use; and the notes. `info` is the
    source's: only live NVML reads this machine's processes."""
    from memtui.errors import MemtuiError
    from memtui.estimator import Plan, estimate
    from memtui.estimator.model_source import load_model
    from memtui.plans.attach import find_jobs, pids_on_gpus, plan_for
    from memtui.telemetry import SourceKind

    if info.kind is not SourceKind.LOCAL:
        why = f"attach reads this machine's GPU processes (live NVML), not {snapshot.source}'s"
        return {"jobs": [], "notes": [why]}
    found = find_jobs(pids_on_gpus(snapshot))
    base = Plan(model=load_model("meta-llama/Llama-2-7b-hf"))
    memory = next((d.memory_total for d in snapshot.devices if d.memory_total), None)
    if memory:
        base = base.evolve(hardware={"gpu_memory": memory, "gpu_name": "GPU (NVML)"})
    jobs = []
    notes = list(found.notes)
    for job in found.jobs:
        entry: dict[str, Any] = {
            "launcher": job.launch.launcher,
            "script": job.launch.script,
            "root_pid": job.root,
            "pids": list(job.pids),
            "gpus": list(job.devices),
            "cwd": str(job.launch.cwd),
        }
        try:
            plan, imported = plan_for(job, base)
        except MemtuiError as err:
            notes.append(f"{job.label}: {err}")
            continue
        used: dict[str, int] = {}
        for device in snapshot.devices:
            for proc in device.processes or ():
                if proc.pid in job.pids and proc.used_bytes is not None:
                    used[device.label] = used.get(device.label, 0) + proc.used_bytes
        entry.update(
            plan=plan.model_dump(mode="json", exclude={"model": {"architecture"}}),
            provenance=[p.model_dump() for p in imported.provenance],
            assumptions=list(imported.assumptions),
            budget_bytes=estimate(plan).budget.total,
            used_bytes=used,
        )
        jobs.append(entry)
    return {"jobs": jobs, "notes": notes}


def print_attach(
    snapshot: ClusterSnapshot, info: SourceInfo, as_json: bool, unit: SizeUnit = SizeUnit.gb
) -> None:
    doc = attach_document(snapshot, info)
    if as_json:
        print(json.dumps(doc, indent=2), flush=True)
        return
    from rich.console import Console
    from rich.text import Text

    from memtui.text import LINE, shown

    console = Console(highlight=False, soft_wrap=True)

    def say(line: str, style: str = "") -> None:
        console.print(Text(shown(line, LINE), style=style))

    for number, job in enumerate(doc["jobs"], 1):
        plan, hw = job["plan"], job["plan"]["hardware"]
        pids = ",".join(map(str, job["pids"]))
        head = f"job {number}: {job['launcher']} {job['script'] or ''}".rstrip()
        say(f"{head} (pid {pids} on GPU {','.join(job['gpus'])}) in {job['cwd']}", "bold")
        say(
            f"  plan: {plan['model']['name']}, {plan['method']}, {plan['precision']}, "
            f"{plan['optimizer']}, {plan['strategy']} ({plan['stack']}) on {hw['nodes']} x "
            f"{hw['gpus_per_node']} GPUs; micro-batch {plan['micro_batch']} x seq "
            f"{plan['seq_len']} x accum {plan['grad_accum']}"
        )
        for line in job["provenance"]:
            say(f"    {line['field']} = {line['value']}  <- {line['source']}", "dim")
        for note in job["assumptions"]:
            say(f"    assumed: {note}", "dim")
        budget = job["budget_bytes"]
        uses = ", ".join(
            f"GPU {gpu} uses {format_size(used, unit)} ({used / budget:.0%})"
            for gpu, used in sorted(job["used_bytes"].items())
        )
        say(f"  budget {format_size(budget, unit)} per GPU" + (f": {uses}" if uses else ""))
    if not doc["jobs"]:
        say("no training job recognised")
    for note in doc["notes"]:
        say(f"  {note}", "dim")
