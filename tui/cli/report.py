"""``twin report FILE [FILE …] --out report.html``: the incident timeline, plots, KPIs (and job events
on request) as one HTML file."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

import click

from tui.cli.errors import fail, guard


@click.command("report")
@click.argument("files", nargs=-1, required=True, type=click.Path(dir_okay=False))
@click.option(
    "--out",
    "-o",
    required=True,
    type=click.Path(dir_okay=False),
    help="HTML file to write (self-contained: plots as inline SVG).",
)
@click.option(
    "--png",
    "png_dir",
    type=click.Path(file_okay=False),
    default=None,
    help="Also write every plot as a PNG into this directory.",
)
@click.option(
    "--job-events",
    is_flag=True,
    help="Also list the routine job events (job_start, job_end, …) after the KPIs.",
)
@click.option("--overwrite", is_flag=True, help="Replace --out if it exists.")
@guard
def report_cmd(
    files: tuple[str, ...], out: str, png_dir: str | None, job_events: bool, overwrite: bool
) -> None:
    """Write a self-contained HTML report of telemetry FILES: the incident timeline first (the
    scenario's and operator's events, thermal trips and recoveries, failures, throttling and caps,
    alarms raised and cleared), then power, PUE, cooling, utilisation, temperatures, queue,
    tokens/s, cost and CO2 over time with the incident's events marked, and the KPI table; several
    files side by side, each plot on one y-axis range across them."""
    from storage.live import open_for_reading
    from storage.reader import latest_run_id
    from storage.report import load_run, render_html
    from tui.cli.formats import umask as _umask

    dest = Path(out)
    if dest.exists() and not overwrite:
        fail(f"--out {dest}: already exists (pass --overwrite to replace it)")
    if not dest.parent.is_dir():
        fail(f"--out {dest}: no such directory {dest.parent}")
    png = Path(png_dir) if png_dir else None
    if png is not None and png.exists() and not png.is_dir():
        fail(f"--png {png}: not a directory")
    runs = []
    for f in files:
        reading = open_for_reading(f)
        try:
            if reading.in_progress:
                click.echo(reading.note, err=True)
            runs.append(load_run(reading.con, latest_run_id(reading.con), f, reading.note, job_events))
        finally:
            reading.close()
    if png is not None:
        png.mkdir(parents=True, exist_ok=True)
    page = render_html(runs, png)
    fd, tmp = tempfile.mkstemp(dir=dest.parent, prefix=f".{dest.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(page)
        os.chmod(tmp, 0o666 & ~_umask())  # as an ordinary new file, not mkstemp's 0600
        os.replace(tmp, dest)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    click.echo(f"report → {dest}" + (f"  (PNG plots in {png})" if png else ""))
