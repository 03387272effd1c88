"""`twin run`, `twin rerun` and `twin compare`: headless runs and the KPIs of recorded runs."""

from __future__ import annotations

import functools
import sys
from pathlib import Path
from typing import Any

import click

from tui.cli.emit import EMIT_HELP, chunk_hook, start_emit
from tui.cli.errors import fail, guard
from tui.cli.metrics import METRICS_HELP, start_metrics
from tui.cli.options import DAYS, HOURS, SET_HELP, default_out, duration_s, nonempty_path
from tui.cli.signals import stoppable
from tui.cli.summary import summary_text


@click.command("run")
@click.argument("scenario", default="default")
@click.option(
    "--hours", type=HOURS, default=None, help="Simulated hours (default: the scenario's duration_h)."
)
@click.option("--days", type=DAYS, default=None, help="Simulated days.")
@click.option("--seed", type=int, default=None, help="Random seed (default: the scenario's).")
@click.option(
    "--out",
    "-o",
    type=click.Path(dir_okay=False),
    default=None,
    help="Telemetry file (default: twin-runs/<scenario>-<UTC time>-p<pid>.duckdb).",
    callback=nonempty_path,
)
@click.option("--overwrite", is_flag=True, help="Replace --out if it exists.")
@click.option(
    "--json",
    "as_json",
    is_flag=True,
    help="Print the KPI summary as one line of JSON (one line per variant).",
)
@click.option("--metrics-port", type=int, default=None, metavar="PORT", help=METRICS_HELP)
@click.option("--emit", "emits", multiple=True, metavar="SINK[,SINK…]", help=EMIT_HELP)
@click.option("--set", "sets", multiple=True, metavar="KEY=VALUE", help=SET_HELP)
@guard
def run_cmd(
    scenario: str,
    hours: float | None,
    days: float | None,
    seed: int | None,
    out: str | None,
    overwrite: bool,
    as_json: bool,
    metrics_port: int | None,
    emits: tuple[str, ...],
    sets: tuple[str, ...],
) -> None:
    """Simulate SCENARIO headless and record telemetry (SCENARIO: built-in name or TOML path).

    A comparison scenario (one with [[variants]]) runs every variant into its own file
    (OUT-<variant>.duckdb) and prints their KPIs side by side."""
    from scenarios.overrides import load

    spec, text, _ = load(scenario, sets)
    dur = duration_s(hours, days)
    inputs = scenario_inputs(scenario, spec, text)
    metrics = start_metrics(metrics_port)
    try:
        emitters = start_emit(emits, spec)
        try:
            _run_all(spec, text, out, seed, dur, overwrite, as_json, metrics, inputs, emitters)
        finally:
            if emitters:
                emitters.close()
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
    inputs: list[Path],
    emitters: Any = None,
) -> None:
    from storage.paths import check_run_output

    if spec.variants:
        from scenarios.runner import variant_outputs

        base = Path(out) if out else default_out(spec.name)
        paths = []
        plan = variant_outputs(spec, base, seed, overwrite, duration_s=dur)
        for _, vpath in plan:  # every output checked before the first is written
            check_run_output(vpath, inputs, overwrite=overwrite)
        for v, vpath in plan:
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
                emitters=emitters,
            )
            paths.append(str(vpath))
        if not as_json:  # --json: one line per variant (JSON Lines) instead of the table
            _print_compare(paths, as_json)
        return
    path = check_run_output(Path(out) if out else default_out(spec.name), inputs, overwrite=overwrite)
    _run_one(spec, text, path, seed, dur, overwrite, as_json, metrics=metrics, emitters=emitters)


def scenario_inputs(arg: str, spec: Any, text: str) -> list[Path]:
    """The files a run reads: the scenario file (when ``arg`` is one) and every file it names
    (the scenario keys of type ``path``: weather, prices, carbon, traces), which no output may
    replace."""
    import tomllib

    from scenarios.facts import FACTS

    found: list[Path] = []
    if Path(arg).is_file():
        found.append(Path(arg))
    keys = {(f.section, f.key) for f in FACTS if f.type == "path"}
    base = getattr(spec, "_base_dir", None)

    def walk(node: Any, section: str) -> None:
        if isinstance(node, list):
            for item in node:
                walk(item, section)
        elif isinstance(node, dict):
            for k, v in node.items():
                if (section, k) in keys and isinstance(v, str):
                    try:
                        p = Path(v).expanduser()
                    except RuntimeError:  # ~user of no user: the scenario's check names it
                        continue
                    found.append(p if p.is_absolute() or base is None else Path(base) / p)
                else:
                    walk(v, f"{section}.{k}" if section else k)

    try:
        walk(tomllib.loads(text), "")
    except tomllib.TOMLDecodeError:
        pass  # a built-in scenario's text is checked TOML; nothing to add otherwise
    return found


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
    emitters: Any = None,
) -> None:
    from scenarios.runner import run

    if metrics:
        metrics.set_run(scenario=spec.name, file=str(path))
    on_chunk = chunk_hook(metrics, emitters)
    hook: dict[str, Any] = {"on_chunk": on_chunk} if on_chunk else {}

    from tui.cli.scenario import warn_at_ready

    total_s = dur if dur is not None else int(round(spec.duration_h * 3600))
    steps = -(-total_s // spec.dt_s)
    warm = spec.warmup_steps()

    # Once the model is built (a refusal stays one line).
    hook["on_ready"] = functools.partial(warn_at_ready, spec, dur)
    show = sys.stderr.isatty() and not as_json
    with stoppable(path):
        if show:
            with click.progressbar(
                length=warm + steps,
                label=f"{spec.name}: " + (f"{warm:,} warm-up + " if warm else "") + f"{steps:,} steps",
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
        from tui.cli.formats import run_json

        click.echo(run_json(result, **({"variant": variant} if variant else {})))
        return
    click.echo(summary_text(result, s))


@click.command("rerun")
@click.argument("file", type=click.Path(dir_okay=False))
@click.option(
    "--out",
    "-o",
    type=click.Path(dir_okay=False),
    default=None,
    help="Telemetry file of the re-run (default: FILE-rerun.duckdb).",
    callback=nonempty_path,
)
@click.option("--overwrite", is_flag=True, help="Replace --out if it exists.")
@click.option(
    "--check/--no-check",
    default=True,
    show_default=True,
    help="Compare the re-run's telemetry with the original's, row by row.",
)
@guard
def rerun_cmd(file: str, out: str | None, overwrite: bool, check: bool) -> None:
    """Re-run a recording headless: its scenario, seed and duration, with the what-ifs an operator
    injected live applied at the times they were recorded. The telemetry comes out identical."""
    from scenarios.runner import read_recording, rerun, same_telemetry
    from storage.paths import check_run_output
    from storage.recording import reading

    src = Path(file)
    dest = Path(out) if out else src.with_name(f"{src.stem}-rerun{src.suffix or '.duckdb'}")
    with reading(src):
        read_recording(src)  # the recording checked (``storage.recording``) before anything is written
    check_run_output(dest, [src], overwrite=overwrite)
    with stoppable(dest):
        result = rerun(src, dest, overwrite=overwrite)
    click.echo(f"re-ran {src} → {dest}: {result.steps:,} steps in {result.wall_s:,.1f} s")
    if check:
        with reading(src):
            diff = same_telemetry(src, dest, ("factory_ts", "ultraserver_ts", "chip_ts"))
        if diff:
            fail(f"telemetry differs from the recording in: {', '.join(diff)}", code=1)
        click.echo("telemetry identical to the recording (factory_ts, ultraserver_ts, chip_ts)")


@click.command("compare")
@click.argument("runs", nargs=-1, required=True, type=click.Path(dir_okay=False))
@click.option("--json", "as_json", is_flag=True, help="Print the KPIs as JSON.")
@guard
def compare_cmd(runs: tuple[str, ...], as_json: bool) -> None:
    """Print the KPIs of recorded RUNS side by side (each a telemetry file; its latest run); one
    file prints that run's KPIs.

    Energy, cost, PUE, WUE, CUE, tokens, J/token, $ per million tokens, training FLOP delivered,
    throttled hours and more; with two runs, a ratio column (second / first)."""
    _print_compare(list(runs), as_json)


def _print_compare(runs: list[str], as_json: bool) -> None:
    cols, texts = _compare_columns(runs)
    if as_json:
        from storage.formats import dumps
        from storage.kpi_table import kpi_record

        click.echo(dumps({label: kpi_record(kp) for label, kp in cols}))
        return
    _print_compare_table(cols)
    _print_tdp_range(texts, [k for _, kp in cols for k in kp.get("systems", {})])


def _compare_columns(runs: list[str]) -> tuple[list[tuple[str, dict[str, Any]]], list[str]]:
    """Each run's column (its label and KPIs) and its scenario text, the latest run of each file."""
    from storage.kpis import run_kpis
    from storage.liveread import open_for_reading
    from storage.reader import latest_run_id
    from storage.recording import reading as reading_errors

    cols: list[tuple[str, dict[str, Any]]] = []
    texts: list[str] = []
    for path in runs:
        reading = open_for_reading(path)
        con = reading.con
        if reading.in_progress:
            click.echo(reading.note, err=True)
        try:
            with reading_errors(path):
                run_id = latest_run_id(con)
                found = con.sql(
                    "SELECT scenario_name, scenario_toml FROM runs WHERE run_id = ?", params=[run_id]
                ).fetchall()
                if not found:
                    from storage.errors import StorageError

                    raise StorageError(f"{path}: holds no row for its run {run_id!r} (damaged or edited)")
                name, text = found[0]
                texts.append(text or "")
                cols.append((f"{name} ({Path(path).name})", run_kpis(con, run_id)))
        finally:
            con.close()
    return cols, texts


def _print_compare_table(cols: list[tuple[str, dict[str, Any]]]) -> None:
    """The KPI table: a column per run, with a ratio column for two runs."""
    from storage.kpi_table import COMPARE_ROWS, SYSTEM_ROWS

    width = max(14, *(len(label) for label, _ in cols))
    lw = max(len(label) for _, label, _ in (*COMPARE_ROWS, *SYSTEM_ROWS))
    header = f"{'KPI':<{lw}}" + "".join(f" {label:>{width}}" for label, _ in cols)
    if len(cols) == 2:
        header += f" {'ratio':>8}"
    click.echo(header)
    click.echo("-" * len(header))
    if any(kp.get("overrides") for _, kp in cols):
        # What each run changed of its scenario (``--set``), one line per override.
        sets = [kp.get("overrides") or [] for _, kp in cols]
        for i in range(max(map(len, sets))):
            label = "overrides (--set)" if i == 0 else ""
            click.echo(
                f"{label:<{lw}}"
                + "".join(f" {(s[i] if i < len(s) else ('none' if i == 0 else '')):>{width}}" for s in sets)
            )
    for key, label, form in COMPARE_ROWS:
        vals = [kp.get(key) for _, kp in cols]
        line = f"{label:<{lw}}" + "".join(f" {('–' if v is None else form.format(v)):>{width}}" for v in vals)
        if len(cols) == 2:
            a, b = vals
            ratio = f"{b / a:.3f}" if isinstance(a, int | float) and isinstance(b, int | float) and a else "–"
            line += f" {ratio:>8}"
        click.echo(line)
    _print_systems(cols, width, lw)


def _print_systems(cols: list[tuple[str, dict[str, Any]]], width: int, lw: int) -> None:
    """Mixed floors: per system, its share of the work and its cost per unit of work."""
    from storage.kpi_table import SYSTEM_ROWS

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
                f"{label:<{lw}}"
                + "".join(f" {('–' if v is None else form.format(v)):>{width}}" for v in vals)
            )


def _print_tdp_range(texts: list[str], system_keys: list[str]) -> None:
    """Runs that put Trainium3 against a GPU (``system_keys``: the systems of every run): the
    routing answer for the first run's work at each end of the Trainium3 power range
    (``twin.work.sensitivity``), as AWS publishes no TDP."""
    from scenarios.spec import ScenarioError, parse
    from twin.spec import catalog
    from twin.work import sensitivity

    keys = [k for i, k in enumerate(system_keys) if k in catalog.SYSTEMS and k not in system_keys[:i]]
    systems = [(catalog.SYSTEMS[k], catalog.accelerator_for(catalog.SYSTEMS[k])) for k in keys]
    if not texts or not sensitivity.compared(systems):
        return
    try:
        p = parse(texts[0], "run").to_params()
    except (ScenarioError, ValueError):  # a run recorded from an older scenario text
        return
    points = sensitivity.tdp_range(p, systems)
    if not points:
        return
    tdps = sensitivity.TRN3_TDP_RANGE_W
    click.echo(
        "-- Trainium3 power range: AWS publishes no TDP (700 W derived from its efficiency claim, "
        "900 W the earlier assumption)"
    )
    click.echo(
        "   per TDP: Trainium3's figure over the best GPU's (IT J per unit of work for `energy`, $ for "
        "`cheapest`; < 1: Trainium3 better), then the system the policy picks"
    )
    click.echo(
        f"{'work':<28} {'policy':<9}"
        + "".join(f" {f'{t:,.0f} W':>8}" for t in tdps)
        + "   system picked at "
        + " / ".join(f"{t:,.0f} W" for t in tdps)
    )
    rows: dict[tuple[str, str], dict[float, sensitivity.Point]] = {}
    for pt in points:
        rows.setdefault((pt.work, pt.policy), {})[pt.tdp_w] = pt
    for (work, policy), by_tdp in rows.items():
        ratios = "".join(f" {by_tdp[t].trn3_over_gpu:>8.2f}" if t in by_tdp else f" {'–':>8}" for t in tdps)
        picks = " / ".join(by_tdp[t].best if t in by_tdp else "–" for t in tdps)
        click.echo(f"{work:<28} {policy:<9}{ratios}   {picks}")
