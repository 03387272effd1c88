"""``twin report FILE [FILE …] --out report.html``: the incident timeline, plots, KPIs (and job events
on request) as one HTML file."""

from __future__ import annotations

import contextlib
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
    from storage.liveread import open_for_reading
    from storage.paths import atomic_dir, atomic_file, check_output
    from storage.reader import latest_run_id
    from storage.recording import reading as reading_errors
    from storage.report import load_run
    from storage.report_html import render_html

    inputs = [Path(f) for f in files]
    dest = check_output(out, inputs, overwrite=overwrite, what="--out")
    png = None
    if png_dir is not None:
        png = check_output(
            png_dir, inputs, overwrite=overwrite, what="--png", kind="dir", replaceable=_png_dir_problem
        )
        if _same_place(png, dest):
            fail(f"--png {png}: is --out {dest}")
    runs = []
    for f in files:
        reading = open_for_reading(f)
        try:
            with reading_errors(f):
                if reading.in_progress:
                    click.echo(reading.note, err=True)
                runs.append(load_run(reading.con, latest_run_id(reading.con), f, reading.note, job_events))
        finally:
            reading.close()
    # Everything is made under temporary names beside its target and renamed into place at the
    # end, the plots' folder and then the page: a failure (a full disk, a read-only file system)
    # leaves neither the page nor any plot.
    with atomic_file(dest) as fh:
        with atomic_dir(png) if png is not None else contextlib.nullcontext(None) as png_tmp:
            page = render_html(runs, png_tmp)
            fh.write(page.encode("utf-8"))
            fh.flush()  # a full disk shows here, before the plots are put in place
    click.echo(f"report → {dest}" + (f"  (PNG plots in {png})" if png else ""))


def _same_place(a: Path, b: Path) -> bool:
    return a.resolve() == b.resolve()


def _png_dir_problem(d: Path) -> str | None:
    """Why the folder ``d`` is not an earlier report's plots, to be replaced (``None``: it is)."""
    for f in d.iterdir():
        if f.is_symlink() or not f.is_file() or f.suffix != ".png":
            return f"holds {f.name}, so it is not a folder of report plots"
    return None
