"""Errors that the CLI reports as one line instead of a traceback."""


class UsageError(Exception):
    """A bad flag value or input file found after parsing: one line on stderr, exit code 2."""
