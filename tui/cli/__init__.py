"""The ``twin`` command: live TUI by default, plus headless run, validate, sql, replay.

Headless commands never import Textual: the app is imported inside the commands that show it.
Bad input exits with code 2 and one line naming the file, the key and what is wrong; every other
error is classified once by the group (``tui.cli.errors``: 74 I/O or environment, 70 a bug).

One module per command group; every command reports bad input through ``tui.cli.errors``.
"""

from __future__ import annotations

import click

from tui.cli.emit import EMIT_HELP
from tui.cli.errors import EXIT_CODES_HELP, OneLineErrors
from tui.cli.export import export_cmd
from tui.cli.ingest import ingest_cmd
from tui.cli.live import live, replay_cmd
from tui.cli.metrics import METRICS_HELP
from tui.cli.options import SET_HELP, nonempty_path
from tui.cli.plan import plan_cmd
from tui.cli.report import report_cmd
from tui.cli.runs import compare_cmd, rerun_cmd, run_cmd
from tui.cli.scenario import hardware_cmd, scenarios_cmd, schema_cmd, validate_cmd
from tui.cli.sql import sql_cmd
from tui.cli.sweep import sweep_cmd
from twin import __version__


@click.group(
    cls=OneLineErrors,
    invoke_without_command=True,
    context_settings={"help_option_names": ["-h", "--help"]},
    epilog=EXIT_CODES_HELP,
)
@click.version_option(__version__, "--version", prog_name="twin")
@click.option(
    "--scenario",
    "-s",
    default="default",
    show_default=True,
    help="Built-in scenario name or path to a scenario TOML file.",
)
@click.option("--seed", type=int, default=None, help="Random seed (default: the scenario's).")
@click.option(
    "--out",
    type=click.Path(dir_okay=False),
    default=None,
    help="Telemetry file to record the live session to (default: twin-runs/<scenario>-<UTC time>-p<pid>.duckdb).",
    callback=nonempty_path,
)
@click.option("--metrics-port", type=int, default=None, metavar="PORT", help=METRICS_HELP)
@click.option("--emit", "emits", multiple=True, metavar="SINK[,SINK…]", help=EMIT_HELP)
@click.option("--set", "sets", multiple=True, metavar="KEY=VALUE", help=SET_HELP)
@click.pass_context
def main(
    ctx: click.Context,
    scenario: str,
    seed: int | None,
    out: str | None,
    metrics_port: int | None,
    emits: tuple[str, ...],
    sets: tuple[str, ...],
) -> None:
    """AI Factory Twin: a digital twin of an AI factory (Trainium3 UltraServers, power, cooling,
    site and workload).

    Run without a command to watch the factory live in the terminal; the session is recorded to a
    DuckDB file you can query with `twin sql` or replay with `twin replay`.

    \b
    Examples:
      twin                                   live TUI on the default scenario
      twin run default --days 7 --out week.duckdb
      twin sql week.duckdb "SELECT avg(pue) FROM factory_ts"
      twin replay week.duckdb
    """
    if ctx.invoked_subcommand is not None:
        return
    live(scenario, seed, out, metrics_port, sets, emits)


for _cmd in (
    run_cmd,
    validate_cmd,
    schema_cmd,
    scenarios_cmd,
    hardware_cmd,
    sql_cmd,
    rerun_cmd,
    compare_cmd,
    replay_cmd,
    export_cmd,
    report_cmd,
    sweep_cmd,
    plan_cmd,
    ingest_cmd,
):
    main.add_command(_cmd)

__all__ = ["main"]
