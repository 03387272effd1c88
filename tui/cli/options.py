"""Options and defaults shared by the commands that run a scenario (`twin`, `twin run`, `twin validate`)."""

from __future__ import annotations

import datetime as _dt
import os
import re
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from tui.cli.errors import fail

SET_HELP = "Override a scenario key: KEY=VALUE, e.g. hall.ultraservers=32 or site.climate=hot (repeatable)."


def default_out(name: str) -> Path:
    """twin-runs/<scenario>-<UTC time to the millisecond>-p<process id>.duckdb: unique for runs
    started in parallel in one directory."""
    now = _dt.datetime.now(_dt.UTC)
    stamp = now.strftime("%Y%m%dT%H%M%S.") + f"{now.microsecond // 1000:03d}Z"
    return Path("twin-runs") / f"{name}-{stamp}-p{os.getpid()}.duckdb"


# A number with an optional unit, as ``twin export --from`` takes it (90m, 6h, 2d).
_SPAN = re.compile(r"^\s*([-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?)\s*([smhd]?)\s*$")
_UNIT_S = {"s": 1, "m": 60, "h": 3600, "d": 86400}


# click's ParamType is generic in its type hints only in recent releases (pyproject accepts 8.1,
# whose class cannot be subscripted): the parameters for the checker, the plain class at run time.
if TYPE_CHECKING:
    _FloatParam = click.ParamType[float, Any]
else:
    _FloatParam = click.ParamType


class Span(_FloatParam):
    """``--hours``/``--days``: a number in the option's unit (``unit``: h or d) or a number with a
    unit of its own (``90m``, ``2h``, ``1.5d``, ``7200s``); converted to a float in the option's
    unit. Anything else that is a float (nan, inf) passes on for ``duration_arg``'s checks."""

    name = "NUMBER[s|m|h|d]"

    def __init__(self, unit: str) -> None:
        self.unit = unit

    def convert(self, value: Any, param: Any, ctx: Any) -> float:
        if isinstance(value, int | float):
            return float(value)
        m = _SPAN.match(str(value))
        if m is not None:
            return float(m.group(1)) * _UNIT_S[m.group(2) or self.unit] / _UNIT_S[self.unit]
        try:
            return float(value)
        except ValueError:
            self.fail(f"{value!r}: not a duration (a number, or one with a unit: 90m, 2h, 1.5d)", param, ctx)


HOURS = Span("h")
DAYS = Span("d")


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
