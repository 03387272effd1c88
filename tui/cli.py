"""The ``twin`` command: live TUI by default, plus headless run, validate, sql, replay.

Headless commands never import Textual: the app is imported inside the commands that show it.
Bad input exits with code 2 and one line naming the file, the key and what is wrong.
"""

from __future__ import annotations

import datetime as _dt
import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any, NoReturn

import click

from tui.cli_errors import OneLineErrors
from tui.cli_metrics import METRICS_HELP, start_metrics
from tui.cli_signals import stoppable
from twin import __version__

EXIT_BAD_INPUT = 2


def fail(msg: str, code: int = EXIT_BAD_INPUT) -> NoReturn:
    click.echo(f"twin: error: {msg}", err=True)
    sys.exit(code)


def _guard(fn: Callable[..., Any]) -> Callable[..., Any]:
    """Turn the project's input errors into one clear line and exit code 2."""
    import functools

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        from scenarios.spec import ScenarioError
        from storage.errors import QueryError, StorageError

        try:
            return fn(*args, **kwargs)
        except (ScenarioError, StorageError, QueryError) as e:
            fail(str(e))

    return wrapper


def _default_out(name: str) -> Path:
    """twin-runs/<scenario>-<UTC time to the millisecond>-p<process id>.duckdb: unique for runs
    started in parallel in one directory."""
    now = _dt.datetime.now(_dt.UTC)
    stamp = now.strftime("%Y%m%dT%H%M%S.") + f"{now.microsecond // 1000:03d}Z"
    return Path("twin-runs") / f"{name}-{stamp}-p{os.getpid()}.duckdb"


def _duration_s(hours: float | None, days: float | None) -> int | None:
    from scenarios.spec import ScenarioError, duration_arg

    try:
        return duration_arg(hours, days)
    except ScenarioError as e:
        fail(str(e))


_SET_HELP = "Override a scenario key: KEY=VALUE, e.g. hall.ultraservers=32 or site.climate=hot (repeatable)."


@click.group(
    cls=OneLineErrors, invoke_without_command=True, context_settings={"help_option_names": ["-h", "--help"]}
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
)
@click.option("--metrics-port", type=int, default=None, metavar="PORT", help=METRICS_HELP)
@click.option("--set", "sets", multiple=True, metavar="KEY=VALUE", help=_SET_HELP)
@click.pass_context
def main(
    ctx: click.Context,
    scenario: str,
    seed: int | None,
    out: str | None,
    metrics_port: int | None,
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
    _live(scenario, seed, out, metrics_port, sets)


@_guard
def _live(
    scenario: str,
    seed: int | None,
    out: str | None,
    metrics_port: int | None = None,
    sets: tuple[str, ...] = (),
) -> None:
    from scenarios.overrides import load
    from scenarios.runner import Session

    spec, text, _ = load(scenario, sets)
    path = Path(out) if out else _default_out(spec.name)
    metrics = start_metrics(metrics_port)
    session = Session(
        spec,
        text,
        path,
        seed=seed,
        duration_s=spec.longest_run_s(),
        on_chunk=metrics.update if metrics else None,
    )
    if metrics:
        metrics.set_run(run_id=session.run_id, scenario=spec.name, file=str(path))
    from tui.app import TwinApp

    app = TwinApp(session=session)
    try:
        app.run()
    finally:
        session.close("stopped")
        if metrics:
            metrics.close()
    click.echo(f"Session recorded to {path}  (twin sql {path} / twin replay {path})")
    if app.terminated:
        click.echo("twin: terminated (SIGTERM); the session is recorded 'stopped'", err=True)
        sys.exit(143)


@main.command("run")
@click.argument("scenario", default="default")
@click.option(
    "--hours", type=float, default=None, help="Simulated hours (default: the scenario's duration_h)."
)
@click.option("--days", type=float, default=None, help="Simulated days.")
@click.option("--seed", type=int, default=None, help="Random seed (default: the scenario's).")
@click.option(
    "--out",
    "-o",
    type=click.Path(dir_okay=False),
    default=None,
    help="Telemetry file (default: twin-runs/<scenario>-<UTC time>-p<pid>.duckdb).",
)
@click.option("--overwrite", is_flag=True, help="Replace --out if it exists.")
@click.option(
    "--json",
    "as_json",
    is_flag=True,
    help="Print the KPI summary as one line of JSON (one line per variant).",
)
@click.option("--metrics-port", type=int, default=None, metavar="PORT", help=METRICS_HELP)
@click.option("--set", "sets", multiple=True, metavar="KEY=VALUE", help=_SET_HELP)
@_guard
def run_cmd(
    scenario: str,
    hours: float | None,
    days: float | None,
    seed: int | None,
    out: str | None,
    overwrite: bool,
    as_json: bool,
    metrics_port: int | None,
    sets: tuple[str, ...],
) -> None:
    """Simulate SCENARIO headless and record telemetry (SCENARIO: built-in name or TOML path).

    A comparison scenario (one with [[variants]]) runs every variant into its own file
    (OUT-<variant>.duckdb) and prints their KPIs side by side."""
    from scenarios.overrides import load

    spec, text, _ = load(scenario, sets)
    dur = _duration_s(hours, days)
    metrics = start_metrics(metrics_port)
    try:
        _run_all(spec, text, out, seed, dur, overwrite, as_json, metrics)
    finally:
        if metrics:
            metrics.close()


def _run_all(
    spec: Any,
    text: str,
    out: str | None,
    seed: int | None,
    dur: int | None,
    overwrite: bool,
    as_json: bool,
    metrics: Any,
) -> None:
    if spec.variants:
        from scenarios.runner import variant_outputs

        base = Path(out) if out else _default_out(spec.name)
        paths = []
        for v, vpath in variant_outputs(spec, base, seed, overwrite, duration_s=dur):
            click.echo(f"— variant {v.name} → {vpath}", err=True)
            _run_one(
                v,
                text,
                vpath,
                seed,
                dur,
                overwrite,
                as_json=as_json,
                quiet=not as_json,
                variant=v.name,
                metrics=metrics,
            )
            paths.append(str(vpath))
        if not as_json:  # --json: one line per variant (JSON Lines) instead of the table
            _print_compare(paths, as_json)
        return
    path = Path(out) if out else _default_out(spec.name)
    _run_one(spec, text, path, seed, dur, overwrite, as_json, metrics=metrics)


def _run_one(
    spec: Any,
    text: str,
    path: Path,
    seed: int | None,
    dur: int | None,
    overwrite: bool,
    as_json: bool,
    quiet: bool = False,
    variant: str | None = None,
    metrics: Any = None,
) -> None:
    from scenarios.runner import run

    if metrics:
        metrics.set_run(scenario=spec.name, file=str(path))
    hook = {"on_chunk": metrics.update} if metrics else {}

    total_s = dur if dur is not None else int(round(spec.duration_h * 3600))
    steps = -(-total_s // spec.dt_s)
    show = sys.stderr.isatty() and not as_json
    with stoppable(path):
        if show:
            with click.progressbar(
                length=steps,
                label=f"{spec.name}: {steps:,} steps",
                file=sys.stderr,
                show_eta=True,
                show_percent=True,
            ) as bar:
                result = run(
                    spec,
                    text,
                    path,
                    seed=seed,
                    duration_s=dur,
                    overwrite=overwrite,
                    progress=bar.update,
                    **hook,
                )
        else:
            result = run(spec, text, path, seed=seed, duration_s=dur, overwrite=overwrite, **hook)
    s = result.summary
    if quiet:
        return
    if as_json:
        from tui.cli_formats import run_json

        click.echo(run_json(result, **({"variant": variant} if variant else {})))
        return
    click.echo(_summary_text(result, s))


def _speed(days: float, wall_s: float) -> str:
    """Simulated time per wall second, in the unit that keeps it readable (a campus runs about
    an hour of site time a second, a small hall days)."""
    r = days / max(wall_s, 1e-9)
    if r >= 1:
        return f"{r:,.1f} sim-days/s"
    return f"{r * 24:,.2f} sim-h/s" if r * 24 >= 0.1 else f"{r * 1440:,.2f} sim-min/s"


def _summary_text(result: Any, s: dict[str, Any]) -> str:
    from tui import fmt

    days = result.sim_s / 86400
    tokens = s["tokens"] or 0.0
    lines = [
        f"Run {result.run_id}  ({result.status})",
        f"  file              {result.path}",
        f"  simulated         {days:,.2f} days in {result.wall_s:,.1f} s wall ({_speed(days, result.wall_s)})",
        f"  facility energy   {fmt.energy_mwh(s['facility_mwh'])}   IT {fmt.energy_mwh(s['it_mwh'])}"
        f"   cooling {fmt.energy_mwh(s['cooling_mwh'])}   losses {fmt.energy_mwh(s['loss_mwh'])}",
        f"  PUE               {s['pue']:.3f}" if s["pue"] else "  PUE               –",
        f"  peak facility     {fmt.power(s['peak_facility_w'])}",
        f"  busy chips        {fmt.pct(s['busy_fraction'])}",
        f"  tokens served     {fmt.si(tokens)} ({fmt.si(s.get('tokens_per_day'))}/day)"
        f"   dropped requests {fmt.si(s['requests_dropped'])}   SLO met {fmt.pct(s.get('slo_attainment'))}",
        f"  per token         {fmt.si(s.get('j_per_token'), 'J')}   ${s['usd_per_mtok']:.3f} per M tokens (electricity)"
        if s.get("usd_per_mtok") is not None
        else "  per token         –",
        f"  training delivered {fmt.si(s['training_flop'], 'FLOP')}   jobs done {s['jobs_done']}"
        f" of {s.get('jobs_submitted')}   goodput {fmt.pct(s.get('goodput'))}",
        f"  queue wait        p50 {fmt.duration(s['wait_p50_s'])}   p90 {fmt.duration(s.get('wait_p90_s'))}"
        f"   p99 {fmt.duration(s.get('wait_p99_s'))}",
        f"  failures          {s.get('failures') or 0} (+{s.get('failures_injected') or 0} injected)"
        f"   preemptions {s.get('preemptions') or 0}   work lost {fmt.pct(s.get('lost_fraction'))}",
        f"  cost              {fmt.money(s['cost_usd'])} electricity   CO2 {s['co2_t']:,.1f} t",
        f"  cost of ownership {fmt.money(s.get('total_cost_usd'))}: capital {fmt.money(s.get('capex_usd'))}"
        f"   energy {fmt.money(s.get('energy_cost_usd'))}   cooling {fmt.money(s.get('cooling_cost_usd'))}"
        f"   other {fmt.money(s.get('other_cost_usd'))}",
        f"  unit costs        {fmt.money(s.get('usd_per_chip_hour'))}/chip-h   {fmt.money(s.get('usd_per_mtok_all_in'))}"
        f"/M tokens all-in   {fmt.money(s.get('usd_per_eflop'))}/EFLOP of batch work",
        f"  hottest chip      {fmt.temp(s['max_chip_temp_c'])}",
        f"Explore: twin sql {result.path}   |   twin replay {result.path}",
    ]
    return "\n".join(lines)


@main.command("validate")
@click.argument("scenario")
@click.option(
    "--hours", type=float, default=None, help="Check for a run of this many hours (as `twin run --hours`)."
)
@click.option("--days", type=float, default=None, help="Check for a run of this many days.")
@click.option("--seed", type=int, default=None, help="Check with this seed (as `twin run --seed`).")
@click.option("--set", "sets", multiple=True, metavar="KEY=VALUE", help=_SET_HELP)
@_guard
def validate_cmd(
    scenario: str, hours: float | None, days: float | None, seed: int | None, sets: tuple[str, ...]
) -> None:
    """Check a scenario file (or built-in name) without running it: the same checks as `twin run`
    (keys, hall size, event targets, files, run length), nothing written."""
    from tui.cli_schema import validate_scenario

    validate_scenario(scenario, _duration_s(hours, days), seed, sets)


@main.command("schema")
def schema_cmd() -> None:
    """Print the JSON Schema of scenario files (for editors): twin schema > scenario.schema.json"""
    from tui.cli_schema import print_schema

    print_schema()


@main.command("scenarios")
def scenarios_cmd() -> None:
    """List the built-in scenarios."""
    from scenarios.spec import builtin_names, load

    for name in builtin_names():
        spec, _, _ = load(name)
        click.echo(f"{name:<16} {spec.description}")


@main.command("hardware")
@click.option("--sources", is_flag=True, help="Also print where every number comes from.")
def hardware_cmd(sources: bool) -> None:
    """List the hardware catalog: per-chip and per-system figures with their sources.

    Tags: OFF vendor documentation, OFF-2 vendor claim via press, 3P third party, DER derived,
    ASM assumption (override it in a scenario's [hardware] section). * marks an assumed TDP."""
    from twin import catalog

    def pf(x: float) -> str:
        return f"{x / 1e15:,.0f}" if x >= 1e18 else f"{x / 1e15:,.3g}"

    click.echo(click.style("Accelerators (dense peak per chip)", bold=True))
    click.echo(
        f"  {'key':<10} {'name':<41} {'BF16 PF':>8} {'FP8 PF':>7} {'FP4 PF':>7} {'HBM GiB':>8} {'TB/s':>5} {'TDP W':>7}"
    )
    for a in catalog.ACCELERATORS.values():
        bf16 = pf(a.peak("bf16")) if a.supports("bf16") else "–"
        fp4 = pf(a.peak_flops["fp4"]) if "fp4" in a.peak_flops else "(fp8)"
        tdp = f"{a.tdp_w:,.0f}{'*' if a.tdp_assumed else ' '}"
        click.echo(
            f"  {a.key:<10} {a.name:<41} {bf16:>8} {pf(a.peak('fp8')):>7} {fp4:>7} "
            f"{a.hbm_bytes / 2**30:>8,.0f} {a.hbm_bw_bytes_s / 1e12:>5.1f} {tdp:>7}"
        )
        if sources:
            for k, v in a.sources.items():
                click.echo(f"      {k}: {v}")
    click.echo()
    click.echo(click.style("Systems (scale-up domains)", bold=True))
    click.echo(
        f"  {'key':<12} {'name':<42} {'chips':>5} {'srv':>4} {'racks':>5} {'FP8 PF':>7} {'HBM TiB':>8} {'full kW':>8} {'liquid':>6}"
    )
    for s in catalog.SYSTEMS.values():
        a = catalog.accelerator_for(s)
        click.echo(
            f"  {s.key:<12} {s.name:<42} {s.chips:>5} {s.servers:>4} {s.racks:>5} "
            f"{pf(catalog.system_peak_flops(s, a, 'fp8')):>7} {s.chips * a.hbm_bytes / 2**40:>8,.1f} "
            f"{catalog.system_full_load_it_w(s, a) / 1e3:>8,.1f} {s.liquid_fraction:>6.0%}"
        )
        if sources:
            for k, v in s.sources.items():
                click.echo(f"      {k}: {v}")


@main.command("sql")
@click.argument("file", type=click.Path(dir_okay=False))
@click.argument("query", required=False)
@click.option(
    "--format",
    "fmt_",
    type=click.Choice(["table", "csv", "json", "jsonl", "parquet"]),
    default="table",
    show_default=True,
    help="json: one array of row objects; jsonl: one object per line; NULL is null, never NaN. "
    "parquet needs --out or a redirected stdout.",
)
@click.option(
    "--out",
    "-o",
    "out",
    type=click.Path(dir_okay=False),
    default=None,
    help="Write the result to this file (replaced atomically) instead of stdout.",
)
@click.option("--max-rows", type=int, default=200, show_default=True, help="Rows shown in table format.")
@click.option(
    "--timeout",
    "timeout_s",
    type=float,
    default=60.0,
    show_default=True,
    help="Time limit of the query [s]; it is stopped there.",
)
@click.option(
    "--memory-limit",
    "memory",
    default="2GB",
    show_default=True,
    help="Memory the query may use (e.g. 512MB, 4GB).",
)
@_guard
def sql_cmd(
    file: str, query: str | None, fmt_: str, out: str | None, max_rows: int, timeout_s: float, memory: str
) -> None:
    """Query a telemetry FILE with read-only SQL (QUERY, or stdin; no QUERY on a terminal lists
    the tables and their columns with units). The file is opened in a sandbox: no other file,
    extension or setting is reachable. A file a run is still writing answers with what is
    committed so far. Ctrl-C stops a running query. A .parquet FILE (a sweep's results.parquet)
    is the view `results`."""
    from tui.cli_sql import run_user_query

    if query is None and file.endswith(".parquet") and sys.stdin.isatty():
        query = "DESCRIBE results"
    table = run_user_query(file, query, timeout_s, memory)
    if table is None:
        _print_schema()
        return
    from tui.cli_formats import emit_table

    emit_table(table, fmt_, out, max_rows, _table_text)


def _print_schema() -> None:
    from storage.schema import columns
    from twin.telemetry import TABLES

    for table in TABLES:
        click.echo(click.style(table, bold=True))
        for c in columns(table):
            unit = f"[{c.unit}]" if c.unit else ""
            click.echo(f"  {c.name:<26} {c.dtype:<8} {unit:<10} {c.description}")


def _table_text(table: Any, max_rows: int) -> str:
    names = table.column_names
    rows = table.slice(0, max_rows).to_pylist()

    def cell(v: Any) -> str:
        if v is None:
            return "NULL"
        if isinstance(v, float):
            return f"{v:.6g}"
        return str(v)

    data = [[cell(r[n]) for n in names] for r in rows]
    widths = [min(40, max([len(n)] + [len(d[i]) for d in data])) for i, n in enumerate(names)]

    def fit(v: str, w: int) -> str:
        """``v`` in ``w`` columns; cut text ends with "…" (use --format csv/json for whole values)."""
        return v.ljust(w) if len(v) <= w else v[: w - 1] + "…"

    out = [
        "  ".join(fit(n, w) for n, w in zip(names, widths, strict=True)),
        "  ".join("-" * w for w in widths),
    ]
    out += ["  ".join(fit(v, w) for v, w in zip(d, widths, strict=True)) for d in data]
    more = table.num_rows - len(rows)
    out.append(f"({table.num_rows:,} rows{f', {more:,} not shown' if more > 0 else ''})")
    return "\n".join(out)


@main.command("rerun")
@click.argument("file", type=click.Path(dir_okay=False))
@click.option(
    "--out",
    "-o",
    type=click.Path(dir_okay=False),
    default=None,
    help="Telemetry file of the re-run (default: FILE-rerun.duckdb).",
)
@click.option("--overwrite", is_flag=True, help="Replace --out if it exists.")
@click.option(
    "--check/--no-check",
    default=True,
    show_default=True,
    help="Compare the re-run's telemetry with the original's, row by row.",
)
@_guard
def rerun_cmd(file: str, out: str | None, overwrite: bool, check: bool) -> None:
    """Re-run a recording headless: its scenario, seed and duration, with the what-ifs an operator
    injected live applied at the times they were recorded. The telemetry comes out identical."""
    from scenarios.runner import rerun, same_telemetry

    src = Path(file)
    dest = Path(out) if out else src.with_name(f"{src.stem}-rerun{src.suffix or '.duckdb'}")
    with stoppable(dest):
        result = rerun(src, dest, overwrite=overwrite)
    click.echo(f"re-ran {src} → {dest}: {result.steps:,} steps in {result.wall_s:,.1f} s")
    if check:
        diff = same_telemetry(src, dest, ("factory_ts", "ultraserver_ts", "chip_ts"))
        if diff:
            fail(f"telemetry differs from the recording in: {', '.join(diff)}", code=1)
        click.echo("telemetry identical to the recording (factory_ts, ultraserver_ts, chip_ts)")


@main.command("compare")
@click.argument("runs", nargs=-1, required=True, type=click.Path(dir_okay=False))
@click.option("--json", "as_json", is_flag=True, help="Print the KPIs as JSON.")
@_guard
def compare_cmd(runs: tuple[str, ...], as_json: bool) -> None:
    """Print the KPIs of recorded RUNS side by side (each a telemetry file; its latest run).

    Energy, cost, PUE, WUE, CUE, tokens, J/token, $ per million tokens, training FLOP delivered,
    throttled hours and more; with two runs, a ratio column (second / first)."""
    if len(runs) < 2:
        fail("give at least two telemetry files to compare")
    _print_compare(list(runs), as_json)


def _print_compare(runs: list[str], as_json: bool) -> None:
    from storage.kpis import COMPARE_ROWS, run_kpis
    from storage.live import open_for_reading
    from storage.reader import latest_run_id

    cols: list[tuple[str, dict[str, Any]]] = []
    for path in runs:
        reading = open_for_reading(path)
        con = reading.con
        if reading.in_progress:
            click.echo(reading.note, err=True)
        try:
            run_id = latest_run_id(con)
            name = next(
                iter(con.sql("SELECT scenario_name FROM runs WHERE run_id = ?", params=[run_id]).fetchall())
            )[0]
            cols.append((f"{name} ({Path(path).name})", run_kpis(con, run_id)))
        finally:
            con.close()
    if as_json:
        from storage.formats import dumps

        click.echo(dumps({label: {k: v for k, v in kp.items() if k != "jobs"} for label, kp in cols}))
        return
    width = max(14, *(len(label) for label, _ in cols))
    header = f"{'KPI':<30}" + "".join(f" {label:>{width}}" for label, _ in cols)
    if len(cols) == 2:
        header += f" {'ratio':>8}"
    click.echo(header)
    click.echo("-" * len(header))
    for key, label, form in COMPARE_ROWS:
        vals = [kp.get(key) for _, kp in cols]
        line = f"{label:<30}" + "".join(f" {('–' if v is None else form.format(v)):>{width}}" for v in vals)
        if len(cols) == 2:
            a, b = vals
            ratio = f"{b / a:.3f}" if isinstance(a, int | float) and isinstance(b, int | float) and a else "–"
            line += f" {ratio:>8}"
        click.echo(line)
    _print_systems(cols, width)


def _print_systems(cols: list[tuple[str, dict[str, Any]]], width: int) -> None:
    """Mixed floors: per system, its share of the work and its cost per unit of work."""
    from storage.kpis import SYSTEM_ROWS

    systems: list[str] = []
    for _, kp in cols:
        systems += [s for s in kp.get("systems", {}) if s not in systems]
    if not any(len(kp.get("systems", {})) > 1 for _, kp in cols):
        return
    for sysname in systems:
        click.echo(f"-- {sysname}")
        for key, label, form in SYSTEM_ROWS:
            vals = [kp.get("systems", {}).get(sysname, {}).get(key) for _, kp in cols]
            click.echo(
                f"{label:<30}" + "".join(f" {('–' if v is None else form.format(v)):>{width}}" for v in vals)
            )


@main.command("replay")
@click.argument("file", type=click.Path(dir_okay=False))
@_guard
def replay_cmd(file: str) -> None:
    """Show a recorded run in the TUI with a time scrubber."""
    from storage.live import open_for_reading
    from storage.reader import latest_run_id

    reading = open_for_reading(file, snapshot=True)
    con = reading.con
    if reading.in_progress:
        click.echo(reading.note, err=True)
    run_id = latest_run_id(con)
    from tui.app import TwinApp

    TwinApp(replay_con=con, replay_run_id=run_id, replay_path=file).run()
    con.close()
    if reading.in_progress:  # again after the screen is restored
        click.echo(reading.note.replace("showing", "showed"), err=True)


def _register(cmd: click.Command) -> None:
    """Add a command whose body lives in its own module, with the input-error guard."""
    assert cmd.callback is not None
    cmd.callback = _guard(cmd.callback)
    main.add_command(cmd)


from tui.cli_export import export_cmd  # noqa: E402
from tui.cli_report import report_cmd  # noqa: E402

_register(export_cmd)
_register(report_cmd)

from tui.cli_plan import plan_cmd  # noqa: E402
from tui.cli_sweep import sweep_cmd  # noqa: E402

main.add_command(sweep_cmd)  # guarded in their module
main.add_command(plan_cmd)

if __name__ == "__main__":
    main()
