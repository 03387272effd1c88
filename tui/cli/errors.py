"""Errors of the ``twin`` commands, in the project's one-line form: every command reports bad input
through ``fail`` (or ``guard``, which turns the project's input errors into ``fail``).


Click prints a usage block and a hint for a bad option value or a missing argument; the project's
rule for bad input is exit code 2 and one line naming the argument and the problem. This group
class does that for every command, and leaves everything else to Click.
"""

from __future__ import annotations

import functools
import sys
from collections.abc import Callable
from typing import Any, NoReturn

import click


class OneLineErrors(click.Group):
    def main(
        self,
        args: Any = None,
        prog_name: str | None = None,
        complete_var: str | None = None,
        standalone_mode: bool = True,
        **extra: Any,
    ) -> Any:
        if not standalone_mode:
            return super().main(args, prog_name, complete_var, standalone_mode, **extra)
        try:
            rv = super().main(args, prog_name, complete_var, standalone_mode=False, **extra)
        except click.ClickException as e:
            hint = " (see twin --help)" if isinstance(e, click.UsageError) else ""
            click.echo(f"twin: error: {' '.join(e.format_message().split())}{hint}", err=True)
            sys.exit(e.exit_code)
        except click.Abort:
            click.echo("Aborted!", err=True)
            sys.exit(1)
        sys.exit(rv if isinstance(rv, int) else 0)


EXIT_BAD_INPUT = 2


def fail(msg: str, code: int = EXIT_BAD_INPUT) -> NoReturn:
    """One line ``twin: error: ...`` on stderr, then exit ``code`` (2: bad input)."""
    click.echo(f"twin: error: {msg}", err=True)
    sys.exit(code)


def guard(fn: Callable[..., Any]) -> Callable[..., Any]:
    """Turn the project's input errors into one clear line and exit code 2."""

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        from scenarios.spec import ScenarioError
        from storage.errors import QueryError, StorageError

        try:
            return fn(*args, **kwargs)
        except (ScenarioError, StorageError, QueryError) as e:
            fail(str(e))

    return wrapper
