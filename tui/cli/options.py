"""Options and defaults shared by the commands that run a scenario (`twin`, `twin run`, `twin validate`)."""

from __future__ import annotations

import datetime as _dt
import os
from pathlib import Path
from typing import Any

from tui.cli.errors import fail

SET_HELP = "Override a scenario key: KEY=VALUE, e.g. hall.ultraservers=32 or site.climate=hot (repeatable)."


def default_out(name: str) -> Path:
    """twin-runs/<scenario>-<UTC time to the millisecond>-p<process id>.duckdb: unique for runs
    started in parallel in one directory."""
    now = _dt.datetime.now(_dt.UTC)
    stamp = now.strftime("%Y%m%dT%H%M%S.") + f"{now.microsecond // 1000:03d}Z"
    return Path("twin-runs") / f"{name}-{stamp}-p{os.getpid()}.duckdb"


def duration_s(hours: float | None, days: float | None) -> int | None:
    from scenarios.spec import ScenarioError, duration_arg

    try:
        return duration_arg(hours, days)
    except ScenarioError as e:
        fail(str(e))


def nonempty_path(ctx: Any, param: Any, value: str | None) -> str | None:
    """A click callback: an output path given as an empty string is refused (it would fall back
    to the default output without saying so)."""
    import click

    if value is not None and not value.strip():
        raise click.BadParameter("an empty path; give a file name or leave the option out")
    return value
