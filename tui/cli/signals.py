"""Ctrl-C and SIGTERM for the commands that write a run: one line, the run recorded ``stopped``."""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Iterator
from pathlib import Path

import click


@contextlib.contextmanager
def stoppable(path: Path) -> Iterator[None]:
    """Run the block with SIGTERM handled like Ctrl-C; either ends the command with one line and
    exit code 130 (Ctrl-C) or 143 (SIGTERM, 128 + 15)."""
    from scenarios.runner import Terminated, sigterm_as_interrupt

    try:
        with sigterm_as_interrupt():
            yield
    except KeyboardInterrupt as e:
        what, code = ("terminated (SIGTERM)", 143) if isinstance(e, Terminated) else ("interrupted", 130)
        where = (
            f"telemetry so far is in {path}{_status(path)}" if path.exists() else "no telemetry file written"
        )
        click.echo(f"\ntwin: {what}; {where}", err=True)
        sys.exit(code)


def _status(path: Path) -> str:
    """`` (status 'stopped')`` as the file records it (a signal may arrive after a run completed)."""
    from storage.reader import open_run_file

    try:
        con = open_run_file(path)
        try:
            rows = con.sql("SELECT status FROM runs ORDER BY started_at DESC LIMIT 1").fetchall()
        finally:
            con.close()
    except Exception:
        return ""
    return f" (status '{rows[0][0]}')" if rows else ""
