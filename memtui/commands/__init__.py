"""Subcommands of the `memtui` CLI.

Each module exposes `register(subparsers)` and a `run(args) -> int`. Modules import only
argparse-level things at the top so that `memtui estimate` never pays for Textual or pynvml.
"""
