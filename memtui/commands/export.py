"""`memtui export --format FORMAT`: the plan as a config its stack accepts.

    memtui export --format deepspeed --stack deepspeed --strategy zero3 -o ds.json
    memtui export --format accelerate --from ds.json train.sh -o accelerate.yaml
    memtui export --format torchtune --plan plan.toml --micro-batch 2   (to stdout)

The plan is built as `memtui estimate` builds it (every plan flag, --from FILE..., and a saved
--plan). The levers the plan has on (checkpointing, offload, an 8-bit optimizer, micro-batch
and accumulation) are written in the format's own keys; `memtui estimate --from FILE` reads
the file back to the same plan. A file is written atomically and an existing one only with
--force (else one line, exit 2). The formats are `memtui.plans.formats.FORMATS`, whose codecs
are imported only to write: the CLI's start must not pay for YAML.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from memtui.commands.plan_flags import add_plan_arguments, plan_from_args
from memtui.text import LINE, shown


def register(sub: Any) -> None:
    from memtui.plans.formats import FORMATS, spoken

    parser = sub.add_parser(
        "export",
        help=f"write the plan as a {spoken(f.title for f in FORMATS.exporting)} config",
        description="Write the plan as a config its stack accepts (reads back to the same plan "
        "with `memtui estimate --from FILE`).",
    )
    parser.add_argument("--format", required=True, choices=[f.name for f in FORMATS.exporting])
    parser.add_argument("-o", "--output", metavar="FILE", help="write here (default: stdout)")
    parser.add_argument("--force", action="store_true", help="overwrite an existing FILE")
    add_plan_arguments(parser)
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    from memtui.plans.formats import FORMATS

    plan = plan_from_args(args)
    text = FORMATS[args.format].export(plan)
    if args.output is None:
        sys.stdout.write(text)
        return 0
    from memtui.plans.files import write_new

    inputs = [*(args.from_files or ()), *([args.plan] if args.plan else [])]
    written = write_new(Path(args.output), text, args.force, inputs)
    print(f"wrote {shown(written, LINE)} ({args.format} config for the {plan.stack.value} stack)")
    return 0
