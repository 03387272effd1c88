"""``twin export FILE DIR``: a recording as hive-partitioned Parquet."""

from __future__ import annotations

import click

from tui.cli.errors import fail, guard


@click.command("export")
@click.argument("file", type=click.Path(dir_okay=False))
@click.argument("dest", metavar="DIR", type=click.Path(file_okay=False))
@click.option(
    "--tables", default=None, metavar="T1,T2", help="Comma-separated tables to export (default: every table)."
)
@click.option(
    "--from",
    "t_from",
    default=None,
    metavar="TIME",
    help="Only rows from this time on: seconds since the start (3600, 90m, 6h, 2d) or an "
    "ISO 8601 date-time with a zone (2026-01-06T00:00:00Z).",
)
@click.option("--to", "t_to", default=None, metavar="TIME", help="Only rows before this time (same forms).")
@click.option(
    "--overwrite", is_flag=True, help="Replace DIR if it holds an earlier export (and nothing else)."
)
@guard
def export_cmd(
    file: str, dest: str, tables: str | None, t_from: str | None, t_to: str | None, overwrite: bool
) -> None:
    """Write every table of a telemetry FILE as hive-partitioned Parquet under DIR
    (DIR/table=<table>/day=<YYYY-MM-DD>/part-<n>.parquet) with units and descriptions in the
    Parquet metadata; readable by pyarrow datasets, DuckDB, polars, pandas and Spark."""
    from pathlib import Path

    from storage.export import check_dest, check_window, export, parse_bound
    from storage.liveread import open_for_reading
    from storage.reader import latest_run_id
    from storage.recording import reading as reading_errors

    names = [t.strip() for t in tables.split(",") if t.strip()] if tables is not None else None
    if names is not None and not names:
        fail("--tables: give at least one table")
    lo = parse_bound(t_from, "--from") if t_from is not None else None
    hi = parse_bound(t_to, "--to") if t_to is not None else None
    check_window(lo, hi, (t_from, t_to))
    check_dest(dest, [Path(file)], overwrite)  # before the recording is even opened
    reading = open_for_reading(file)
    try:
        with reading_errors(file):
            latest_run_id(reading.con)
            if reading.in_progress:
                click.echo(reading.note, err=True)
            counts = export(reading.con, dest, names, lo, hi, overwrite=overwrite)
    finally:
        reading.close()
    for table, n in counts.items():
        click.echo(f"{table:<16} {n:>12,} rows")
    click.echo(
        f"→ {dest}  (e.g. duckdb: SELECT * FROM read_parquet('{dest}/table=factory_ts/*/*.parquet', "
        "hive_partitioning = true))"
    )
