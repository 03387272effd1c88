"""Output of ``twin sql`` and ``twin run --json``: strict JSON, JSON Lines, CSV, Parquet, text."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import click

from tui.cli.errors import fail


def emit_table(table: Any, fmt: str, out: str | None, max_rows: int, text: Any) -> None:
    """Write a query result in ``fmt`` to ``out`` (``storage.paths.atomic_file``: a temporary file
    renamed into place, nothing left on a failure)
    or to stdout. Parquet is binary: without ``--out`` it goes to stdout only when that is not a
    terminal. ``text`` renders the table format."""
    from storage.formats import write_table

    if fmt == "table" and out is None:
        click.echo(text(table, max_rows))
        return
    if out is None:
        if fmt == "parquet" and sys.stdout.isatty():
            fail("--format parquet writes binary data: give --out FILE or redirect stdout")
        buf = sys.stdout.buffer
        write_table(table, fmt, buf)
        buf.flush()
        return
    from storage.paths import atomic_file

    dest = Path(out)  # checked by the command (``storage.paths.check_output``)
    with atomic_file(dest) as f:
        if fmt == "table":
            f.write((text(table, table.num_rows) + "\n").encode())
        else:
            write_table(table, fmt, f)
    click.echo(f"{table.num_rows:,} rows → {dest}", err=True)


def run_json(result: Any, **extra: Any) -> str:
    """One line of strict JSON for a finished run: file, run id, status, wall time and its KPIs
    (``storage.kpis.KPI_TABLE``'s names and units, as ``twin compare --json`` gives them)."""
    from storage.formats import dumps
    from storage.kpi_table import kpi_record

    return dumps(
        {
            "file": str(result.path),
            "run_id": result.run_id,
            "status": result.status,
            "wall_s": result.wall_s,
            **extra,
            **kpi_record(result.summary),
        }
    )
