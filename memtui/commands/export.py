"""`memtui export`: the plan as a config its stack accepts, or the user's own config edited.

    memtui export --from ds.json --strategy zero3 -o ds-zero3.json   (ds.json, edited)
    memtui export --from train.yaml --micro-batch 2 --in-place       (train.yaml, edited)
    memtui export --format deepspeed --stack deepspeed --strategy zero3 -o ds.json
    memtui export --format accelerate --from ds.json train.sh -o accelerate.yaml
    memtui export --format torchtune --plan plan.toml --micro-batch 2   (to stdout)
    memtui export --fastest --from ds.json -o ds-fastest.json   (the fastest plan that fits)

The plan is built as `memtui estimate` builds it (every plan flag, --from FILE..., and a saved
--plan). When a --from file is a config of the format written (the format defaults to the
first --from config's), the export is that file with only what the plan changed
(`memtui.plans.roundtrip.edit`: the same keys, order and comments; an unchanged plan gives
the file byte for byte), and the change is printed as a unified diff on stderr. Otherwise (or
with --fresh) it is a new config: the levers the plan has on (checkpointing, offload, an 8-bit
optimizer, micro-batch and accumulation) in the format's own keys. Either way `memtui estimate
--from FILE` reads the file back to the same plan. A file is written atomically, an existing
one only with --force, the input file only with --in-place (else one line, exit 2). The
formats are `memtui.plans.formats.FORMATS`, whose codecs are imported only to write: the
CLI's start must not pay for YAML.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from memtui.commands.plan import add_search_arguments
from memtui.commands.plan_flags import add_plan_arguments, plan_from_args
from memtui.errors import UsageError
from memtui.text import LINE, shown

if TYPE_CHECKING:
    from memtui.estimator.plan import Plan
    from memtui.plans.launch_edit import LaunchOrigin
    from memtui.plans.roundtrip import Origin


def register(sub: Any) -> None:
    from memtui.plans.formats import FORMATS, spoken

    parser = sub.add_parser(
        "export",
        help=f"write the plan as a {spoken(f.title for f in FORMATS.exporting)} config",
        description="Write the plan as a config its stack accepts (reads back to the same plan "
        "with `memtui estimate --from FILE`). A --from config of the format written is "
        "edited: only the keys the plan changed, the change shown as a diff on stderr.",
    )
    parser.add_argument(
        "--format",
        choices=[f.name for f in FORMATS.exporting],
        help="the config to write (default: the format of the first --from config)",
    )
    parser.add_argument("-o", "--output", metavar="FILE", help="write here (default: stdout)")
    parser.add_argument("--force", action="store_true", help="overwrite an existing FILE")
    parser.add_argument(
        "--in-place", action="store_true", help="write the edit over the --from config itself"
    )
    parser.add_argument(
        "--fresh", action="store_true", help="write a new config, not an edit of a --from one"
    )
    add_plan_arguments(parser)
    add_search_arguments(parser)  # --fastest: the winner of `memtui plan --fastest`
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    from memtui.plans.formats import FORMATS, spoken

    plan = plan_from_args(args)
    if args.fastest:
        from memtui.commands.plan import fastest_plan

        plan = fastest_plan(args, plan)
    origin: Origin | LaunchOrigin | None = None if args.fresh else origin_of(args)
    if origin is None and args.format is None and not args.fresh:
        origin = launch_origin_of(args)
    if origin is None and args.format is None:
        raise UsageError(
            "give --format "
            f"({spoken(f.name for f in FORMATS.exporting)}): no --from file is a config "
            "memtui writes"
        )
    if args.in_place and (origin is None or args.output is not None):
        raise UsageError("--in-place edits the --from config: give one, and no -o")
    target = None if args.output is None else Path(args.output)
    if origin and target and target.expanduser().resolve() == origin.file.path:
        raise UsageError(f"{shown(args.output)}: is the --from config; give --in-place to edit it")
    if origin is None:
        fmt, text = f"{args.format} config", FORMATS[args.format].export(plan)
    else:
        written_to = origin.file.shown if args.in_place else args.output
        fmt, text = origin.file.written_as, edited(origin, plan, written_to)
    from memtui.plans.files import write_new

    if args.in_place:
        assert origin is not None
        written = write_new(origin.file.path, text, force=True)
    elif target is None:
        sys.stdout.write(text)
        return 0
    else:
        inputs = [*(args.from_files or ()), *([args.plan] if args.plan else [])]
        written = write_new(target, text, args.force, inputs)
    print(f"wrote {shown(written, LINE)} ({fmt} for the {plan.stack.value} stack)")
    if args.fastest and not args.from_files:
        from memtui.commands.plan import unwritten

        missing = unwritten(args, plan, str(written))
        if missing:  # the format has no key for them: the job sets them elsewhere
            print(f"the {fmt} does not hold the fastest plan's {', '.join(missing)}: "
                  "set them where the job sets them", file=sys.stderr)  # fmt: skip
    return 0


def unwritten(origin: Origin | LaunchOrigin, plan: Plan, text: str) -> list[str]:
    """The plan's fields (`field value`) the edit does not carry: the files, with `text` as
    the edited one, import to another value than `plan` has where `plan` differs from
    what the files said."""
    want, had, got = _flat(plan), _flat(origin.plan), _flat(_readback(origin, text))
    return [
        f"{key} {want[key]}"
        for key in want
        if want[key] != had.get(key) and got.get(key) != want[key]
    ]


def _readback(origin: Origin | LaunchOrigin, text: str) -> Plan:
    """The plan the files import to with `text` as the edited one."""
    from memtui.plans.registry import read_as

    assert origin.files_only is not None
    with read_as(origin.file.path, text):
        return plan_from_args(origin.files_only)


def _unmoved(origin: LaunchOrigin, plan: Plan, text: str) -> None:
    """Refuse (one line) an edit of a launch line that reads back with a field the plan did
    not change read otherwise (a launcher option that also says something else)."""
    want, had, got = _flat(plan), _flat(origin.plan), _flat(_readback(origin, text))
    moved = [key for key in want if want[key] == had.get(key) and got.get(key) != want[key]]
    if moved:
        raise UsageError(
            f"{shown(origin.file.shown, LINE)}: cannot edit it to say the plan: it would read "
            f"{moved[0]} as {shown(str(got.get(moved[0])), 60)}; give --format to write a new "
            "config instead"
        )


def _flat(plan: Plan) -> dict[str, Any]:
    """A plan's fields as dotted keys and plain values (the model by its name)."""
    out: dict[str, Any] = {}

    def walk(prefix: str, value: Any) -> None:
        if isinstance(value, dict):
            for key, inner in value.items():
                walk(f"{prefix}.{key}" if prefix else str(key), inner)
        else:
            out[prefix] = value

    walk("", plan.model_dump(mode="json", exclude={"model"}))
    out["model"] = plan.model.name
    return out


def origin_of(args: argparse.Namespace) -> Origin | None:
    """The --from config the export edits (of --format, else the first config; of --format,
    also one a --from launch script names), with the plan the files alone import to (over
    --plan or memtui's defaults, without the flags)."""
    if not getattr(args, "from_files", None):
        return None
    from memtui.plans.roundtrip import Origin, config_file

    fmt = getattr(args, "format", None)
    file = config_file(list(args.from_files), fmt, Path.cwd())
    if file is None and fmt is not None:  # a config a --from launch script names
        from memtui.plans.launch_edit import launch_file

        launch = launch_file(list(args.from_files), Path.cwd())
        if launch is not None:
            file = config_file(launch.configs(), fmt, Path.cwd())
    if file is None:
        return None
    return Origin(file, plan_from_args(_files_only(args)), _files_only(args))


def launch_origin_of(args: argparse.Namespace) -> LaunchOrigin | None:
    """The --from launch script the export edits (the first), with the plan the files alone
    import to."""
    from memtui.plans.launch_edit import LaunchOrigin, launch_file

    file = launch_file(list(args.from_files or ()), Path.cwd())
    if file is None:
        return None
    # --model / --params say which model the line's id is (one memtui cannot resolve
    # offline): the model of both plans, never an edit of the line's model argument
    files_only = _files_only(args, "model", "params")
    return LaunchOrigin(file, plan_from_args(files_only), files_only)


def _files_only(args: argparse.Namespace, *kept: str) -> argparse.Namespace:
    """Every flag unset but --from, --plan and `kept`: the plan the files say, as
    plan_and_import builds it."""
    keep = {name: getattr(args, name, None) for name in ("from_files", "plan", *kept)}
    return argparse.Namespace(**{**dict.fromkeys(vars(args)), **keep})


def edited(origin: Origin | LaunchOrigin, plan: Plan, output: str | None) -> str:
    """`origin`'s file edited to say `plan`; the change printed on stderr as a diff, and what
    the plan changed that the edited file still does not say."""
    from memtui.plans import launch_edit, roundtrip

    held: dict[str, Any] = {}
    if isinstance(origin, roundtrip.Origin):
        # what a --from launch line overrides stays as the file has it: the line wins
        held = launch_edit.overridden(list(getattr(origin.files_only, "from_files", None)
                                           or ()), Path.cwd())  # fmt: skip
        kept = {k: getattr(origin.plan, k) for k in held if k in type(plan).model_fields}
        change = roundtrip.edit(origin, plan.evolve(**kept) if kept else plan)
    else:
        change = launch_edit.edit(origin, plan)
        _unmoved(origin, plan, change.text)
    name = shown(origin.file.shown, LINE)
    for note in change.notes:
        print(f"{name}: {shown(note, LINE)}", file=sys.stderr)
    missing = unwritten(origin, plan, change.text) if origin.files_only is not None else []
    on_the_line = [m for m in missing if m.split(" ", 1)[0] in held]
    for item in on_the_line:
        fact = held[item.split(" ", 1)[0]]
        line = fact.origin.split(":", 1)[0]
        print(f"{name}: not written: {shown(item, LINE)}: {shown(fact.origin, LINE)} overrides "
              f"it, and the line wins over the file (`memtui export --from {shown(line, LINE)}` "
              "edits the line)", file=sys.stderr)  # fmt: skip
        missing.remove(item)
    if missing:
        print(
            f"{name}: not written, no key of this {origin.file.title} says it: "
            f"{shown(', '.join(missing), LINE)} (set it where the job sets it, e.g. its "
            "training script or another --from config)",
            file=sys.stderr,
        )
    if not change.changed:
        said = (
            "nothing the plan changed is a key of it"
            if missing or on_the_line
            else "the plan is the file's own"
        )
        print(f"{name}: unchanged ({said})", file=sys.stderr)
    for line in change.diff(origin.file.shown, output or "(stdout)"):
        # the file's own text: a control character in it is shown escaped, never sent raw
        # (a tab, harmless, as it is: tab-indented files stay readable)
        sys.stderr.write("\t".join(shown(part, LINE) for part in line[:-1].split("\t")) + "\n")
    return change.text
