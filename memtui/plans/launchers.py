"""Which launcher started a training process, and which config files and arguments it gave.

Pure: a command line (argv as a list), the process's working folder and its environment in,
a `Launch` out (or None). Recognised, with their own option syntax:
- `torchrun` and `python -m torch.distributed.run` / `torch.distributed.launch` (torch
  2.13 distributed/run.py get_args_parser: --nproc-per-node, --nnodes, --standalone, -m...);
- `accelerate launch` and `python -m accelerate.commands.launch` (accelerate 1.15
  commands/launch.py launch_command_parser: --config_file, --num_processes, --use_fsdp,
  --fsdp_*, --use_deepspeed, --deepspeed_config_file, --zero_stage, --mixed_precision...);
- `deepspeed` (deepspeed/launcher/runner.py: --num_gpus, --num_nodes, --include) and its
  per-node `python -m deepspeed.launcher.launch --world_info=...`;
- `tune run RECIPE --config FILE key=value...` (torchtune/_cli/run.py; torchrun options
  before the recipe) and its workers `python .../recipes/RECIPE.py --config FILE`;
- `axolotl train CONFIG [--key value...]` (axolotl/cli/main.py) and `python -m
  axolotl.cli.train CONFIG`;
- `llamafactory-cli train CONFIG [key=value...]` (llamafactory/cli.py) and its torchrun
  workers `python .../llamafactory/launcher.py CONFIG`;
- `trl sft|dpo|grpo|kto|reward|rloo ...` (trl 1.16 cli/commands/training.py: accelerate
  launch options and `--accelerate_config` mixed with the script's, `--config` a YAML);
- any `python script.py --deepspeed ds.json --per_device_train_batch_size 4 ...`: the
  Trainer's arguments (or one .json/.yaml argument: HfArgumentParser's config file, or
  TrlParser's `--config FILE`, trl 1.16 scripts/utils.py:321).
GPUs per node: the launcher's option, else its default: torchrun's `--nproc-per-node` is 1
(torch 2.13 distributed/run.py:433, also read from PET_NPROC_PER_NODE); `gpu`/`auto`,
`accelerate launch` without a config or `--num_processes` (commands/launch.py:1308-1324),
`deepspeed` without `--num_gpus`/`--include` (launcher/runner.py:467-472), `llamafactory-cli`
without NPROC_PER_NODE (LLaMA-Factory cli.py: NNODES default 1, NPROC_PER_NODE default the
device count) and a script started by `python` alone (one process; the Trainer's
nn.DataParallel over every visible GPU, transformers 5.24 trainer.py:2680) use every GPU
of the node: `gpus_default` says so and the command layer counts them.
Relative paths resolve against the process's working folder. Workers started by torchrun
carry WORLD_SIZE and LOCAL_WORLD_SIZE, accelerate's carry ACCELERATE_* / FSDP_* variables:
`environment_facts` reads them.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

#: torchrun options that take no value (torch/distributed/run.py get_args_parser)
_TORCHRUN_FLAGS = frozenset(
    {"--standalone", "--no-python", "--no_python", "-m", "--module", "--run-path", "--run_path"}
)
#: accelerate launch options that take no value (commands/launch.py launch_command_parser)
_ACCELERATE_FLAGS = frozenset(
    {
        "--cpu", "--multi_gpu", "--tpu", "--ipex", "--use_deepspeed", "--use_fsdp",
        "--use_megatron_lm", "--use_xpu", "-m", "--module", "--no_python", "-q", "--quiet",
        "--debug", "--same_network", "--tpu_use_cluster", "--tpu_use_sudo",
        "--downcast_bf16", "--enable_cpu_affinity", "--use_parallelism_config",
        "--dynamo_use_fullgraph", "--dynamo_use_dynamic", "--dynamo_use_regional_compilation",
    }
)  # fmt: skip
#: deepspeed runner options that take no value (launcher/runner.py parse_args)
_DEEPSPEED_FLAGS = frozenset(
    {
        "--no_ssh", "--no_ssh_check", "--force_multi", "--save_pid", "--enable_each_rank_log",
        "--module", "--no_python", "--no_local_rank", "--elastic_training",
        "--bind_cores_to_rank", "--enable_numa",
    }
)  # fmt: skip
_PYTHON = re.compile(r"python[0-9.]*$")
#: Launchers are console scripts: a process shows them as `python /venv/bin/torchrun ...`
_LAUNCHER_SCRIPTS = frozenset(
    {"torchrun", "accelerate", "deepspeed", "tune", "axolotl", "llamafactory-cli", "lmf", "trl"}
)
#: The most processes per node a launch may ask for (a Plan's gpus_per_node bound)
MAX_GPUS_PER_NODE = 1024
#: `trl` subcommands that train (trl 1.16 cli/commands/__init__.py get_commands)
TRL_COMMANDS = frozenset({"sft", "dpo", "grpo", "kto", "reward", "rloo", "distillation"})
_EVERY_GPU = "every GPU of the node"


@dataclass(frozen=True)
class ConfigRef:
    """A config file a launch names."""

    path: Path
    where: str
    """Which argument named it: '--config_file', 'tune run --config'."""
    kind: str | None = None
    """Its format when the argument says it (deepspeed, accelerate, axolotl...)."""
    builtin: str | None = None
    """A torchtune config given by name (llama3_1/8B_lora), not a path."""


@dataclass(frozen=True)
class Launch:
    """What a recognised command line says about its job."""

    launcher: str
    """torchrun, accelerate launch, deepspeed, tune run, axolotl train, llamafactory-cli
    train, or python (a script started directly)."""
    argv: tuple[str, ...]
    cwd: Path
    script: str | None = None
    """The training script, module or recipe."""
    configs: tuple[ConfigRef, ...] = ()
    script_args: tuple[str, ...] = ()
    """The script's own arguments (the Trainer's, when it is a Trainer script)."""
    overrides: tuple[str, ...] = ()
    """key=value overrides of the config (tune run, llamafactory-cli, axolotl's options)."""
    override_words: tuple[str, ...] = ()
    """Each override as the line writes it (`--micro_batch_size 4`), when not the same."""
    launcher_settings: dict[str, tuple[Any, str]] = field(default_factory=dict)
    """Plan facts the launcher's own options give: key -> (value, option)."""
    accelerate_flags: dict[str, Any] = field(default_factory=dict)
    """`accelerate launch` options, as accelerate config keys (they override its file)."""
    every_gpu: str | None = None
    """Why the launch starts one process per GPU of the node, when it gives no count."""

    @property
    def label(self) -> str:
        """How messages name this launch: the launcher and its script."""
        return f"{self.launcher} {self.script}" if self.script else self.launcher


def recognise(
    argv: Sequence[str], cwd: Path, env: Mapping[str, str] | None = None
) -> Launch | None:
    """The launch `argv` is, or None when it is no training launch memtui knows."""
    env = env or {}
    argv = list(argv)
    if not argv:
        return None
    program = os.path.basename(argv[0])
    rest = argv[1:]
    if _PYTHON.match(program):
        return _python(argv, rest, cwd, env)
    if program == "torchrun":
        return _torchrun(argv, rest, cwd, "torchrun", env)
    if program == "accelerate" and rest[:1] == ["launch"]:
        return _accelerate(argv, rest[1:], cwd, env)
    if program == "deepspeed":
        return _deepspeed(argv, rest, cwd)
    if program == "tune" and rest[:1] == ["run"]:
        return _tune(argv, rest[1:], cwd)
    if program == "axolotl" and rest[:1] in (["train"], ["preprocess"]):
        return _axolotl(argv, rest[1:], cwd)
    if program in ("llamafactory-cli", "lmf") and rest[:1] == ["train"]:
        return _llamafactory(argv, rest[1:], cwd, "llamafactory-cli train", env)
    if program == "trl" and rest[:1] and rest[0] in TRL_COMMANDS:
        return _trl(argv, rest[0], rest[1:], cwd, env)
    return None


def _path(cwd: Path, text: str) -> Path:
    path = Path(os.path.expanduser(text))
    return Path(os.path.normpath(path if path.is_absolute() else cwd / path))


def _options(tokens: list[str], flags: frozenset[str]) -> tuple[dict[str, str | bool], list[str]]:
    """A launcher's options up to its script: ({--option: value or True}, the rest)."""
    options: dict[str, str | bool] = {}
    i = 0
    while i < len(tokens) and tokens[i].startswith("-"):
        token = tokens[i]
        name, eq, value = token.partition("=")
        if eq:
            options[name] = value
        elif name in flags:
            options[name] = True
        elif i + 1 < len(tokens):
            options[name] = tokens[i + 1]
            i += 1
        i += 1
    return options, tokens[i:]


def _opt(options: Mapping[str, Any], *names: str) -> tuple[Any, str] | None:
    """The first of `names` given (dashes and underscores alike), with the spelling used."""
    for name in names:
        for spelling in (name, name.replace("_", "-"), name.replace("-", "_")):
            if spelling in options:
                return options[spelling], spelling
    return None


def _count(value: Any, where: str) -> int:
    """A process count a launcher option gives (one line when it is no sane count)."""
    from memtui.plans.facts import ConfigError
    from memtui.text import shown

    text = str(value).strip()
    # isdigit() alone takes "²", which int() refuses; 4 digits at most: int() of a 4,300-digit
    # string raises
    if not (text.isascii() and text.isdigit() and len(text) <= 4) or not (
        1 <= int(text) <= MAX_GPUS_PER_NODE
    ):
        raise ConfigError(
            f"{where} {shown(text, 40)}: not a process count (1 to {MAX_GPUS_PER_NODE})"
        )
    return int(text)


def _world(
    options: Mapping[str, Any], launcher: str, env: Mapping[str, str] | None = None,
    default: bool = False,
) -> tuple[dict[str, tuple[Any, str]], str | None]:  # fmt: skip
    """(GPUs per node and nodes, why every GPU of the node) from torchrun-style options, or
    torchrun's PET_* variables (its `env` action reads PET_NPROC_PER_NODE, PET_NNODES), and
    with `default` torchrun's one process when no count is given."""
    env = env or {}
    out: dict[str, tuple[Any, str]] = {}
    every = None
    nproc = _opt(options, "--nproc_per_node", "--nproc-per-node")
    if nproc is None and env.get("PET_NPROC_PER_NODE"):
        nproc = (env["PET_NPROC_PER_NODE"], "PET_NPROC_PER_NODE")
    if nproc is None:
        if default:
            out["hardware.gpus_per_node"] = (1, f"{launcher} --nproc-per-node (default 1)")
    elif str(nproc[0]).strip().lower() in ("gpu", "auto"):
        every = f"{launcher} {nproc[1]} {nproc[0]}: {_EVERY_GPU}"
    elif str(nproc[0]).strip().lower() != "cpu":
        where = f"{launcher} {nproc[1]}"
        out["hardware.gpus_per_node"] = (_count(nproc[0], where), where)
    nnodes = _opt(options, "--nnodes")
    if nnodes is None and env.get("PET_NNODES"):
        nnodes = (env["PET_NNODES"], "PET_NNODES")
    if nnodes is not None:
        # elastic "MIN:MAX": sized for the most nodes it may run on
        top = str(nnodes[0]).split(":")[-1]
        where = f"{launcher} {nnodes[1]}"
        out["hardware.nodes"] = (_count(top, where), where)
    return out, every


def _script(
    argv: list[str], rest: list[str], cwd: Path, launcher: str, settings: dict[str, Any],
    module: bool = False, **extra: Any,
) -> Launch:  # fmt: skip
    """A launcher whose remaining tokens are a training script (or module) and its args."""
    configs = tuple(extra.pop("configs", ()))
    if not rest:
        return Launch(launcher, tuple(argv), cwd, configs=configs, launcher_settings=settings,
                      **extra)  # fmt: skip
    target, args = rest[0], rest[1:]
    if module:
        inner = _module(target, args, cwd, argv, launcher)
        if inner is not None:
            return _with(inner, launcher_settings={**settings, **inner.launcher_settings},
                         configs=configs + inner.configs, **extra)  # fmt: skip
    else:
        inner = _file_script(target, args, cwd, argv)
        if inner is not None:
            return _with(inner, launcher_settings={**settings, **inner.launcher_settings},
                         configs=configs + inner.configs, **extra)  # fmt: skip
    return Launch(launcher, tuple(argv), cwd, target, configs + _trainer_configs(args, cwd),
                  tuple(args), launcher_settings=settings, **extra)  # fmt: skip


def _with(launch: Launch, **changes: Any) -> Launch:
    from dataclasses import replace

    return replace(launch, **changes)


def _trainer_configs(args: list[str], cwd: Path) -> tuple[ConfigRef, ...]:
    """A script's config files: HfArgumentParser's single .json/.yaml argument, and
    DeepSpeed's --deepspeed_config (deepspeed.add_config_arguments)."""
    refs = []
    if (
        len(args) >= 1
        and args[0].endswith((".json", ".yaml", ".yml"))
        and not args[0].startswith("-")
    ):
        refs.append(ConfigRef(_path(cwd, args[0]), "script argument"))
    for i, token in enumerate(args):
        name, eq, value = token.partition("=")
        if name in ("--deepspeed_config", "--config"):
            value = value if eq else (args[i + 1] if i + 1 < len(args) else "")
            if name == "--deepspeed_config" and value:
                refs.append(ConfigRef(_path(cwd, value), "--deepspeed_config", "deepspeed"))
            elif value.endswith((".yaml", ".yml")):  # TrlParser.parse_args_and_config
                refs.append(ConfigRef(_path(cwd, value), "--config", "trl"))
    return tuple(refs)


def _python(argv: list[str], rest: list[str], cwd: Path, env: Mapping[str, str]) -> Launch | None:
    # the interpreter's own options (-u, -O, -X opt, -W arg) come before -m or the script
    i = 0
    while i < len(rest) and rest[i].startswith("-") and rest[i] not in ("-m", "-c"):
        i += 2 if rest[i] in ("-X", "-W") else 1
    if i >= len(rest) or rest[i] == "-c":
        return None
    if rest[i] == "-m":
        if i + 1 >= len(rest):
            return None
        return _module(rest[i + 1], rest[i + 2 :], cwd, argv, "python -m", env)
    if os.path.basename(rest[i]) in _LAUNCHER_SCRIPTS:
        inner = recognise(rest[i:], cwd, env)
        if inner is not None:
            return _with(inner, argv=tuple(argv))
    return _file_script(rest[i], rest[i + 1 :], cwd, argv) or _plain(
        argv, rest[i], rest[i + 1 :], cwd
    )


def _module(
    name: str, args: list[str], cwd: Path, argv: list[str], launcher: str,
    env: Mapping[str, str] | None = None,
) -> Launch | None:  # fmt: skip
    if name in ("torch.distributed.run", "torch.distributed.launch"):
        return _torchrun(argv, args, cwd, f"python -m {name}", env)
    if name == "accelerate.commands.launch":
        return _accelerate(argv, args, cwd, env or {})
    if name == "deepspeed.launcher.runner":
        return _deepspeed(argv, args, cwd)
    if name == "deepspeed.launcher.launch":  # the per-node launcher: its options, then script
        options, rest = _options(args, frozenset({"--no_python", "--no_local_rank", "--module",
                                                  "--enable_each_rank_log"}))  # fmt: skip
        return _script(argv, rest, cwd, "deepspeed", {}, module="--module" in options)
    if name == "torchtune._cli.tune" and args[:1] == ["run"]:
        return _tune(argv, args[1:], cwd)
    if name in ("axolotl.cli.train", "axolotl.cli.preprocess"):
        return _axolotl(argv, args, cwd)
    if name in ("llamafactory.launcher", "llamafactory.cli"):
        return _llamafactory(argv, args[1:] if args[:1] == ["train"] else args, cwd,
                             "llamafactory-cli train")  # fmt: skip
    if launcher == "python -m":
        return _plain(argv, name, args, cwd)
    return None


def _plain(argv: list[str], script: str, args: list[str], cwd: Path) -> Launch | None:
    """A script started directly: a training launch only with the Trainer's arguments (or
    one config file argument, HfArgumentParser's), not any Python program."""
    from memtui.plans.trainer_args import KNOWN

    configs = _trainer_configs(args, cwd)
    named = {t[2:].partition("=")[0].replace("-", "_") for t in args if t.startswith("--")}
    if not configs and not named & KNOWN:
        return None
    every = f"python without a launcher: one process, nn.DataParallel over {_EVERY_GPU}"
    return Launch("python", tuple(argv), cwd, script, configs, tuple(args), every_gpu=every)


def _file_script(script: str, args: list[str], cwd: Path, argv: list[str]) -> Launch | None:
    """Launchers' workers recognised by their script's path."""
    path = Path(script)
    if path.name == "launcher.py" and path.parent.name == "llamafactory":
        return _llamafactory(argv, args, cwd, "llamafactory-cli train")
    if path.parent.name == "recipes" and path.stem.endswith(("_single_device", "_distributed")):
        return _tune(argv, [path.stem, *args], cwd, worker=True)
    return None


def _torchrun(
    argv: list[str], rest: list[str], cwd: Path, launcher: str, env: Mapping[str, str] | None = None
) -> Launch:
    options, rest = _options(rest, _TORCHRUN_FLAGS)
    settings, every = _world(options, launcher, env, default=True)
    if options.get("--standalone") and "hardware.nodes" not in settings:
        settings["hardware.nodes"] = (1, f"{launcher} --standalone")
    module = bool(_opt(options, "-m", "--module"))
    return _script(argv, rest, cwd, launcher, settings, module=module, every_gpu=every)


def _accelerate(argv: list[str], rest: list[str], cwd: Path, env: Mapping[str, str]) -> Launch:
    options, rest = _options(rest, _ACCELERATE_FLAGS)
    configs: list[ConfigRef] = []
    given = _opt(options, "--config_file", "--config-file")
    if given is not None:
        configs.append(ConfigRef(_path(cwd, str(given[0])), f"accelerate launch {given[1]}",
                                 "accelerate"))  # fmt: skip
    else:
        default = default_accelerate_config(env)
        if default.is_file():
            configs.append(ConfigRef(default, "accelerate's default config", "accelerate"))
    flags: dict[str, Any] = {}
    kinds = {"--use_fsdp": "FSDP", "--use_deepspeed": "DEEPSPEED", "--multi_gpu": "MULTI_GPU"}
    for option, kind in kinds.items():
        if options.get(option) is True:
            flags["distributed_type"] = kind
    for name, value in options.items():
        key = name.lstrip("-").replace("-", "_")
        if key in ("num_processes", "num_machines", "mixed_precision"):
            flags[key] = value
        elif key.startswith("fsdp_"):
            flags.setdefault("fsdp_config", {})[key] = value
        elif key in ("deepspeed_config_file", "zero_stage", "offload_optimizer_device",
                     "offload_param_device", "gradient_accumulation_steps"):  # fmt: skip
            flags.setdefault("deepspeed_config", {})[key] = value
        elif key.startswith("parallelism_config_"):
            flags.setdefault("parallelism_config", {})[key] = value
    module = bool(_opt(options, "-m", "--module"))
    every = None
    if "num_processes" in flags:
        flags["num_processes"] = _count(flags["num_processes"], "accelerate launch --num_processes")
    elif not configs:
        every = f"accelerate launch without a config or --num_processes: {_EVERY_GPU}"
    return _script(argv, rest, cwd, "accelerate launch", {}, module=module,
                   accelerate_flags=flags, configs=tuple(configs), every_gpu=every)  # fmt: skip


def default_accelerate_config(env: Mapping[str, str]) -> Path:
    """accelerate's default config file for a process with environment `env`
    (commands/config/config_args.py: $HF_HOME/accelerate/default_config.yaml)."""
    home = env.get("HOME") or os.path.expanduser("~")
    cache = env.get("XDG_CACHE_HOME") or os.path.join(home, ".cache")
    hf_home = env.get("HF_HOME") or os.path.join(cache, "huggingface")
    return Path(os.path.expanduser(hf_home)) / "accelerate" / "default_config.yaml"


def _deepspeed(argv: list[str], rest: list[str], cwd: Path) -> Launch:
    options, rest = _options(rest, _DEEPSPEED_FLAGS)
    settings: dict[str, tuple[Any, str]] = {}
    gpus = _opt(options, "--num_gpus", "--num-gpus")
    if gpus is not None and str(gpus[0]).isdigit():
        settings["hardware.gpus_per_node"] = (int(gpus[0]), f"deepspeed {gpus[1]}")
    include = _opt(options, "--include", "-i")
    if include is not None:  # "localhost:0,1@host2:0,1": GPUs of the first host
        first = str(include[0]).split("@")[0]
        slots = first.split(":", 1)[-1].split(",") if ":" in first else []
        if slots:
            settings["hardware.gpus_per_node"] = (len(slots), f"deepspeed {include[1]}")
    nodes = _opt(options, "--num_nodes", "--num-nodes")
    if nodes is not None and str(nodes[0]).isdigit():
        settings["hardware.nodes"] = (int(nodes[0]), f"deepspeed {nodes[1]}")
    every = None
    if "hardware.gpus_per_node" in settings:
        value, where = settings["hardware.gpus_per_node"]
        settings["hardware.gpus_per_node"] = (_count(value, where), where)
    else:
        every = f"deepspeed without --num_gpus or --include: {_EVERY_GPU}"
    return _script(argv, rest, cwd, "deepspeed", settings, module="--module" in options,
                   every_gpu=every)  # fmt: skip


def _tune(argv: list[str], rest: list[str], cwd: Path, worker: bool = False) -> Launch:
    options, rest = _options(rest, _TORCHRUN_FLAGS)
    settings, every = _world(options, "tune run")
    recipe = rest[0] if rest else None
    configs: list[ConfigRef] = []
    overrides: list[str] = []
    i = 1
    while i < len(rest):
        token = rest[i]
        if token in ("--config", "-c") and i + 1 < len(rest):
            configs.append(_tune_config(rest[i + 1], cwd))
            i += 2
            continue
        if token.startswith("--config="):
            configs.append(_tune_config(token.partition("=")[2], cwd))
        elif "=" in token and not token.startswith("-"):
            overrides.append(token)
        i += 1
    if recipe and recipe.endswith("_single_device"):
        settings["hardware.gpus_per_node"] = (1, "tune run (single-device recipe)")
        settings["hardware.nodes"] = (1, "tune run (single-device recipe)")
    return Launch("tune run", tuple(argv), cwd, recipe, tuple(configs),
                  overrides=tuple(overrides), launcher_settings=settings,
                  every_gpu=every)  # fmt: skip


def _tune_config(text: str, cwd: Path) -> ConfigRef:
    """A file, or the name of a config torchtune ships (llama3_1/8B_lora)."""
    path = _path(cwd, text)
    if text.endswith((".yaml", ".yml")) or path.exists():
        return ConfigRef(path, "tune run --config", "torchtune")
    return ConfigRef(path, "tune run --config", "torchtune", builtin=text)


def _axolotl(argv: list[str], rest: list[str], cwd: Path) -> Launch:
    settings: dict[str, tuple[Any, str]] = {}
    if "--" in rest:  # axolotl cli/main.py: what follows `--` goes to its launcher
        cut = rest.index("--")
        rest, launcher_args = rest[:cut], rest[cut + 1 :]
        options, _ = _options(launcher_args, _TORCHRUN_FLAGS | _ACCELERATE_FLAGS)
        given = _opt(options, "--num_processes", "--num-processes")
        if given is not None:
            where = f"axolotl train -- {given[1]}"
            settings["hardware.gpus_per_node"] = (_count(given[0], where), where)
        elif _opt(options, "--nproc_per_node", "--nproc-per-node") or _opt(options, "--nnodes"):
            settings, _ = _world(options, "axolotl train --")
    config = next((t for t in rest if not t.startswith("-")), None)
    overrides, words = [], []
    i = 0
    while i < len(rest):
        token = rest[i]
        if token.startswith("--") and token not in ("--launcher",):
            key, eq, value = token[2:].partition("=")
            word = token
            if not eq and i + 1 < len(rest) and not rest[i + 1].startswith("--"):
                value, i = rest[i + 1], i + 1
                word = f"{token} {value}"
            elif not eq and key.startswith("no-"):
                # a boolean field's `--flag/--no-flag` (axolotl cli/utils/args.py
                # add_options_from_config: one click option per config field)
                key, value = key[3:], "false"
            elif not eq:
                value = "true"
            overrides.append(f"{key.replace('-', '_')}={value}")
            words.append(word)
        elif token == "--launcher":
            i += 1
        i += 1
    configs = (ConfigRef(_path(cwd, config), "axolotl train", "axolotl"),) if config else ()
    return Launch("axolotl train", tuple(argv), cwd, config, configs,
                  overrides=tuple(overrides), override_words=tuple(words),
                  launcher_settings=settings)  # fmt: skip


def _llamafactory(
    argv: list[str], rest: list[str], cwd: Path, launcher: str,
    env: Mapping[str, str] | None = None,
) -> Launch:  # fmt: skip
    """LLaMA-Factory's cli.py main: torchrun over NNODES (default 1) x NPROC_PER_NODE
    (default the device count) when FORCE_TORCHRUN is set or there is more than one GPU."""
    env = env or {}
    config = next((t for t in rest if t.endswith((".yaml", ".yml", ".json"))), None)
    overrides = tuple(t for t in rest if "=" in t and not t.startswith("-"))
    configs = (ConfigRef(_path(cwd, config), launcher, "llamafactory"),) if config else ()
    settings: dict[str, tuple[Any, str]] = {}
    every = None
    if env.get("NPROC_PER_NODE"):
        where = "env NPROC_PER_NODE"
        settings["hardware.gpus_per_node"] = (_count(env["NPROC_PER_NODE"], where), where)
    elif "launcher.py" not in " ".join(argv):  # a worker: WORLD_SIZE says it
        every = f"{launcher} without NPROC_PER_NODE: {_EVERY_GPU}"
    if env.get("NNODES"):
        settings["hardware.nodes"] = (_count(env["NNODES"], "env NNODES"), "env NNODES")
    return Launch(launcher, tuple(argv), cwd, config, configs, overrides=overrides,
                  launcher_settings=settings, every_gpu=every)  # fmt: skip


def _trl(argv: list[str], command: str, rest: list[str], cwd: Path,
         env: Mapping[str, str]) -> Launch:  # fmt: skip
    """`trl COMMAND ARGS` (trl 1.16 cli/commands/training.py): TrlParser takes the script's
    arguments and `--config`; what no TRL dataclass has goes to `accelerate launch`, with
    `--accelerate_config NAME|FILE` as its `--config_file` (cli/accelerate_config.py: a file,
    else a config TRL ships in trl/accelerate_configs)."""
    launch_args: list[str] = []
    script_args: list[str] = []
    i = 0
    while i < len(rest):
        token = rest[i]
        name, eq, _ = token.partition("=")
        key = name.lstrip("-").replace("-", "_")
        if not token.startswith("--") or key not in _TRL_LAUNCH_OPTIONS:
            script_args.append(token)
            i += 1
            continue
        value = rest[i + 1] if not eq and i + 1 < len(rest) else None
        if f"--{key}" in _ACCELERATE_FLAGS or (value or "").startswith("--"):
            value = None
        if key == "accelerate_config" and (eq or value is not None):
            found = _trl_accelerate_config(token.partition("=")[2] if eq else str(value), cwd)
            launch_args += ["--config_file", found]
        else:
            launch_args += [token] if value is None else [token, value]
        i += 1 if value is None else 2
    inner = _accelerate(argv, [*launch_args, f"{command}.py", *script_args], cwd, env)
    return _with(inner, launcher=f"trl {command}", script=command)


#: `accelerate launch` options a `trl` command line may carry (accelerate 1.15
#: commands/launch.py launch_command_parser; TRL's own `--accelerate_config`)
_TRL_LAUNCH_OPTIONS = frozenset(
    {
        "accelerate_config", "config_file", "num_processes", "num_machines", "mixed_precision",
        "multi_gpu", "use_deepspeed", "use_fsdp", "gpu_ids", "machine_rank", "main_process_ip",
        "main_process_port", "zero_stage", "offload_optimizer_device", "offload_param_device",
        "deepspeed_config_file", "dynamo_backend", "num_cpu_threads_per_process",
    }
)  # fmt: skip


def _trl_accelerate_config(value: str, cwd: Path) -> str:
    """`--accelerate_config`: a file, else the config of that name TRL ships (found without
    importing TRL), else the name as a path (the error then names it)."""
    if _path(cwd, value).is_file():
        return value
    from importlib.util import find_spec

    try:
        spec = find_spec("trl")
    except (ImportError, ValueError):
        spec = None
    for folder in (spec.submodule_search_locations or []) if spec else []:
        shipped = Path(folder) / "accelerate_configs" / f"{value}.yaml"
        if shipped.is_file():
            return str(shipped)
    return value


def environment_settings(env: Mapping[str, str]) -> dict[str, tuple[Any, str]]:
    """Plan facts a worker's environment gives: torchrun's WORLD_SIZE / LOCAL_WORLD_SIZE
    (torch/distributed/elastic/agent/server/api.py sets them for every worker) and
    PYTORCH_CUDA_ALLOC_CONF's expandable_segments."""
    out: dict[str, tuple[Any, str]] = {}
    world, local = env.get("WORLD_SIZE", ""), env.get("LOCAL_WORLD_SIZE", "")
    if local.isdigit() and int(local) > 0:
        out["hardware.gpus_per_node"] = (int(local), "env LOCAL_WORLD_SIZE")
        if world.isdigit() and int(world) % int(local) == 0:
            out["hardware.nodes"] = (int(world) // int(local), "env WORLD_SIZE")
    elif world.isdigit() and int(world) > 0:
        out["world_size"] = (int(world), "env WORLD_SIZE")
    if "expandable_segments:true" in env.get("PYTORCH_CUDA_ALLOC_CONF", "").lower():
        out["expandable_segments"] = (True, "env PYTORCH_CUDA_ALLOC_CONF")
    return out
