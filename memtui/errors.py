"""Errors memtui reports as one line a user understands, never as a traceback.

Every layer raises a `MemtuiError` (or a subclass) for bad input: `PlanError` from the
estimator, `SourceError` from telemetry, `UsageError` (and the plans' `ConfigError`, the
forensics' `SnapshotError`) for a flag or a file. The CLI prints it on stderr and exits 2, the
dashboard shows it in a notification and keeps running. A message says what is wrong; `hint`,
when given, says what to do instead (printed after it: "message; hint"). `one_line` turns any
exception (pydantic's ValidationError included) into that one line.
"""

from __future__ import annotations


class MemtuiError(ValueError):
    """Bad input found after parsing: `str()` is one line (what is wrong), `hint` what to do.

    A ValueError, so code that validates plans (pydantic validators, the settings cycle)
    treats it like any other rejected value."""

    def __init__(self, message: str, hint: str = "") -> None:
        super().__init__(message)
        self.message = message
        self.hint = hint

    def __str__(self) -> str:
        return f"{self.message}; {self.hint}" if self.hint else self.message


class UsageError(MemtuiError):
    """A bad flag value or input file: one line on stderr, exit code 2."""


class PlanError(MemtuiError):
    """A plan, model or size the estimator cannot take as given: a broken cross-field rule, a
    stack that cannot run the plan, a value past its bound (raised inside pydantic validators
    too, where it becomes one error of a ValidationError)."""


class SourceError(MemtuiError):
    """A telemetry source's option that cannot be used (a bad URL, host list, credential file,
    synthetic node): the source is not opened."""


def one_line(err: BaseException) -> str:
    """Any error as one line a user understands (a pydantic ValidationError: its first error,
    with the field it is about)."""
    from pydantic import ValidationError  # lazy: pydantic is imported by whoever raised it

    if isinstance(err, ValidationError):
        first = err.errors()[0]
        where = ".".join(str(p) for p in first["loc"])
        msg = str(first["msg"]).removeprefix("Value error, ")
        return f"{where}: {msg}" if where else msg
    text = str(err)
    return text.splitlines()[0] if text else type(err).__name__
