"""``twin plan``: the smallest value of a key (e.g. the fleet size) that meets KPI constraints.

Headless: imports neither Textual nor the TUI.
"""

from __future__ import annotations

import json
import sys
from typing import Any

import click

from tui.cli.errors import fail, guard
from tui.cli.options import HOURS


@click.command("plan")
@click.argument("scenario")
@click.option(
    "--minimize",
    "key",
    default="hall.ultraservers",
    show_default=True,
    metavar="KEY",
    help="The integer scenario key to minimize.",
)
@click.option(
    "--maximize",
    "max_key",
    default=None,
    metavar="KEY",
    help="Find the largest value of KEY instead (deployable capacity, e.g. hall.ultraservers under "
    "a fixed power.facility_cap_w).",
)
@click.option(
    "--subject-to",
    "constraints",
    multiple=True,
    required=True,
    metavar='"KPI OP NUMBER"',
    help='A constraint on a KPI of twin compare, e.g. "slo_attainment >= 0.99" (repeatable).',
)
@click.option(
    "--over",
    "over",
    multiple=True,
    metavar="KEY=V1,V2",
    help="Plan each of these values separately, e.g. site.climate=temperate,hot (repeatable).",
)
@click.option(
    "--range", "range_", default="1:64", show_default=True, metavar="LOW:HIGH", help="The values to search."
)
@click.option("--hours", type=HOURS, default=None, help="Simulated hours per run (default: the scenario's).")
@click.option("--seed", type=int, default=None, help="Random seed (default: the scenario's).")
@click.option(
    "--set", "sets", multiple=True, metavar="KEY=VALUE", help="Override a scenario key (repeatable)."
)
@click.option(
    "--method",
    type=click.Choice(["bisect", "sweep"]),
    default="bisect",
    show_default=True,
    help="bisect: assume KPIs monotone in KEY (few runs); sweep: run every value of the range.",
)
@click.option("-j", "--jobs", type=int, default=None, help="Runs in parallel (default: the CPU cores).")
@click.option("--backend", type=click.Choice(["local", "ray"]), default="local", show_default=True)
@click.option(
    "--ray-address", default=None, metavar="ADDR", help="An existing Ray cluster (auto or HOST:PORT)."
)
@click.option("--json", "as_json", is_flag=True, help="Print the answer as JSON.")
@guard
def plan_cmd(
    scenario: str,
    key: str,
    max_key: str | None,
    constraints: tuple[str, ...],
    over: tuple[str, ...],
    range_: str,
    hours: float | None,
    seed: int | None,
    sets: tuple[str, ...],
    method: str,
    jobs: int | None,
    backend: str,
    ray_address: str | None,
    as_json: bool,
) -> None:
    """Find the smallest value of KEY (default: the number of UltraServers) at which SCENARIO
    meets every --subject-to constraint, and say which constraint binds (fails one below).
    With --maximize KEY, the largest value instead (the constraint that binds fails one above):
    the deployable capacity of a fixed power feed. cap_hit_share is the share of time a power
    cap (the feed's rating, power.facility_cap_w, or an oversubscribed tier's,
    power.oversubscription) holds busy chips below full clock.

    \b
    Examples:
      twin plan default --hours 24 --subject-to "slo_attainment >= 0.99" \\
          --subject-to "peak_facility_mw <= 30" --over site.climate=temperate,hot
      # How many UltraServers can a 30 MW substation host, capped at most 1 % of the time?
      twin plan default --hours 24 --maximize hall.ultraservers --range 1:400 \\
          --set power.facility_cap_w=30e6 --subject-to "cap_hit_share <= 0.01"
    """
    from scenarios import overrides
    from scenarios import plan as planning
    from scenarios.spec import duration_arg

    duration_arg(hours, None)  # finite, positive, at most ten years (ScenarioError: one line)
    cons = [planning.parse_constraint(c) for c in constraints]
    lo, hi = planning.parse_range(range_)
    overs = [planning.parse_over(o) for o in over]
    spec, text, origin = overrides.load(scenario, sets)
    progress = _Progress(sys.stderr.isatty() and not as_json)
    key = _planned_key(key, max_key)
    planner = planning.Planner(
        spec,
        text,
        origin,
        key,
        cons,
        overs,
        lo,
        hi,
        hours,
        seed,
        backend,
        jobs,
        ray_address,
        progress,
        maximize=max_key is not None,
    )
    _print_result(_solve(planner, method, backend, jobs, ray_address, progress), method, as_json)


class _Progress:
    """The planner's ``on_run``: counts the runs done, shown on a terminal's stderr line."""

    def __init__(self, show: bool) -> None:
        self.show = show
        self.runs = 0

    def __call__(self, n: int) -> None:
        self.runs = n
        if self.show:
            click.echo(f"\r{n} run(s) done", err=True, nl=False)


def _solve(
    planner: Any, method: str, backend: str, jobs: int | None, ray_address: str | None, progress: _Progress
) -> Any:
    """The planner's result by ``method``; a failed run exits 1, an interrupt 130."""
    from scenarios import execution
    from scenarios import plan as planning

    try:
        with execution.backend_session(backend, jobs, ray_address):  # one Ray for every round
            result = planner.bisect() if method == "bisect" else planner.sweep_range()
    except planning.RunFailed as e:
        fail(str(e), code=1)
    except KeyboardInterrupt:
        click.echo(f"\ninterrupted after {progress.runs} run(s)", err=True)
        sys.exit(130)
    if progress.show:
        click.echo("", err=True)
    return result


def _planned_key(key: str, max_key: str | None) -> str:
    """The key planned (``--maximize``'s, or ``--minimize``'s), checked plannable; giving both
    fails."""
    if max_key is not None:
        if click.get_current_context().get_parameter_source("key") != click.core.ParameterSource.DEFAULT:
            fail("give --minimize or --maximize, not both")
        key = max_key
    _check_plannable(key, "--maximize" if max_key is not None else "--minimize")
    return key


def _print_result(result: Any, method: str, as_json: bool) -> None:
    """The answer as text or JSON; exit code 1 when no value meets the constraints."""
    if as_json:
        click.echo(json.dumps(_as_dict(result), indent=2, default=str))
    else:
        click.echo(_text(result, method))
    if result.answer is None:
        sys.exit(1)


# Integer keys that are no quantity to plan: the run's random seed, its time step and the calendar
# day it starts on (a KPI is not monotone in them), and how often telemetry is written.
_NOT_PLANNABLE = {
    "seed": "the random seed",
    "dt_s": "the time step",
    "site.start_day_of_year": "the start day",
}


def _check_plannable(key: str, option: str = "--minimize") -> None:
    """Refuse a KEY of ``option`` (--minimize or --maximize) that is not an integer quantity of the
    scenario (one line naming the option, exit 2)."""
    import re

    from scenarios import facts as F

    path = re.sub(r"\[\d+\]", "", key.strip())
    f = F.fact(path)
    verb = option.lstrip("-")
    hint = (
        f"{verb} an integer quantity such as hall.ultraservers, services[0].replicas or cooling.chiller_units"
    )
    if f is None:
        fail(f"{option} {key}: unknown key (not a scenario key); {hint}")
    if f.type != "int":
        fail(f"{option} {key}: not a whole-number key ({f.type}); {hint}")
    if path in _NOT_PLANNABLE or f.section == "telemetry":
        what = _NOT_PLANNABLE.get(path, "a telemetry interval")
        fail(f"{option} {key}: {what} is not a quantity to plan; {hint}")


def _as_dict(result: Any) -> dict[str, Any]:
    return {
        "key": result.key,
        "constraints": [str(c) for c in result.constraints],
        "answer": result.answer,
        "objective": "maximize" if result.maximize else "minimize",
        "runs": result.runs,
        "cases": [
            {
                "case": c.case,
                "answer": c.answer,
                "why": c.why,
                "binding": [str(b) for b in c.binding],
                "warning": c.warning or None,
                "idle": c.idle or None,
            }
            for c in result.cases
        ],
    }


def _text(result: Any, method: str) -> str:
    lines = [
        f"{'Largest' if result.maximize else 'Smallest'} {result.key} meeting {' and '.join(map(str, result.constraints))}:"
    ]
    for c in result.cases:
        ans = "none" if c.answer is None else str(c.answer)
        lines.append(f"  {c.label}: {ans}  ({c.why})")
        if c.warning:
            lines.append(f"    warning: {c.warning}")
        if c.idle:
            lines.append(f"    note: at {c.answer} {c.idle}")
    if len(result.cases) > 1:
        lines.append(f"  every case: {'none' if result.answer is None else result.answer}")
    lines.append(f"{result.runs} run(s), {'bisection' if method == 'bisect' else 'every value of the range'}")
    return "\n".join(lines)
