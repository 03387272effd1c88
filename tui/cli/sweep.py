"""``twin sweep``: run a sweep file's points on a process pool or on Ray; report on the results.

Headless: imports neither Textual nor the TUI.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import click

from tui.cli.errors import fail, guard


@click.command("sweep")
@click.argument("target", type=click.Path())
@click.option(
    "--out",
    "-o",
    "out",
    type=click.Path(file_okay=False),
    default=None,
    help="Sweep directory: results.parquet, points/ (what is finished), runs/ (run files).",
)
@click.option("-j", "--jobs", type=int, default=None, help="Runs in parallel (default: the CPU cores).")
@click.option(
    "--backend",
    type=click.Choice(["local", "ray"]),
    default="local",
    show_default=True,
    help="local: a process pool on this machine; ray: Ray tasks (pip install 'ai-factory-twin[ray]').",
)
@click.option(
    "--ray-address",
    default=None,
    metavar="ADDR",
    help="An existing Ray cluster (auto or HOST:PORT); default: a local Ray started for the sweep.",
)
@click.option("--no-files", is_flag=True, help="Keep only the KPI rows, not each run's telemetry file.")
@click.option(
    "--runs-dir",
    type=click.Path(file_okay=False),
    default=None,
    help="Where run files go (default: DIR/runs); on a cluster, storage every node can write.",
)
@click.option("--retry-failed", is_flag=True, help="Run the points that failed before again.")
@click.option(
    "--overwrite",
    is_flag=True,
    help="Write into a folder a sweep did not make (its results.parquet is replaced); never /, a "
    "system folder or your home folder.",
)
@click.option("--report", is_flag=True, help="Print the results sorted by a KPI and the Pareto front.")
@click.option(
    "--sort",
    "sort_kpi",
    default=None,
    metavar="KPI[:min|max]",
    help="Report order (default: the first --pareto KPI).",
)
@click.option(
    "--pareto",
    default="usd_per_mtok:min,slo_attainment:max",
    show_default=True,
    metavar="KPI[:min|max],KPI[:min|max]",
    help="The two KPIs of the report's Pareto front.",
)
@click.option(
    "--top", type=int, default=20, show_default=True, help="Rows of the sorted table in the report."
)
@guard
def sweep_cmd(
    target: str,
    out: str | None,
    jobs: int | None,
    backend: str,
    ray_address: str | None,
    no_files: bool,
    runs_dir: str | None,
    retry_failed: bool,
    overwrite: bool,
    report: bool,
    sort_kpi: str | None,
    pareto: str,
    top: int,
) -> None:
    """Run every point of a sweep file TARGET into --out DIR (finished points are kept: run it
    again to resume), or with --report and a sweep directory TARGET, report on its results.

    At most 100,000 runs (points x seeds) per sweep. DIR is the sweep's own: one sweep at a time
    (a second is refused while the first runs); a folder a sweep did not make is refused unless
    empty or --overwrite. SIGINT/SIGTERM stop the runs in flight (recorded as stopped, their run
    files closed `stopped`), keep what finished and exit 130/143; the stopped points run again on
    resume. A worker process dies with the sweep however the sweep ends.

    \b
    Examples:
      twin sweep examples/sweep-fleet.toml --out fleet -j 2
      twin sweep examples/sweep-fleet.toml --out fleet --backend ray --ray-address auto
      twin sweep --report fleet --pareto usd_per_mtok,slo_attainment
      twin sql fleet/results.parquet "SELECT * FROM results ORDER BY usd_per_mtok LIMIT 5"
    """
    from scenarios import sweep as sweeps

    objectives = _objectives(pareto, sort_kpi)
    if top < 1:
        fail("--top must be positive")
    tp = Path(target)
    if tp.is_dir():
        if not report:
            fail(f"{tp}: a directory; give a sweep file to run, or --report to report on a sweep directory")
        click.echo(report_text(tp / "results.parquet", *objectives, top))
        return
    out_dir = _check_outputs(tp, out, runs_dir, no_files)
    sw = sweeps.load_sweep(tp)
    outcome = _run(sw, out_dir, backend, jobs, ray_address, not no_files, runs_dir, retry_failed, overwrite)
    _print_outcome(outcome, objectives if report else None, top)


def _check_outputs(tp: Path, out: str | None, runs_dir: str | None, no_files: bool) -> Path:
    """The sweep's folder (--out), refused when missing or the sweep file itself; --runs-dir
    checked as an output folder. One line and exit code 2 for a bad one."""
    if runs_dir and no_files:
        fail("give --runs-dir or --no-files, not both")
    if out is None:
        fail("--out DIR is required to run a sweep (where results and finished points are kept)")
    from storage.paths import check_output

    # The sweep folder's own rules (scenarios.sweep: a new or empty folder, or one a sweep made -
    # its sweep.json - and never the root, home or a system folder; locked while in use) apply
    # once the sweep file is read; here only: the folder is not the sweep file itself.
    if Path(out).resolve() == tp.resolve():
        fail(f"--out {out}: that is the sweep file")
    if runs_dir:
        check_output(
            runs_dir, [tp], what="--runs-dir", kind="dir", resumable=lambda _: None, make_parent=True
        )
    return Path(out)


def _print_outcome(
    outcome: Any, objectives: tuple[tuple[str, str], tuple[str, str], tuple[str, str]] | None, top: int
) -> None:
    """What the sweep ran and where its results are (stderr), the report on ``objectives`` if
    given (--report); exit code 1 when a run failed."""
    from scenarios import sweep as sweeps

    assert outcome.results is not None
    rows, _ = sweeps.read_results(outcome.results)
    failed = sum(r["status"] == "failed" for r in rows)
    click.echo(
        f"{outcome.total:,} runs ({outcome.skipped:,} already done, {outcome.ran:,} ran, {failed:,} failed) "
        f"→ {outcome.results}",
        err=True,
    )
    click.echo(f'Query: twin sql {outcome.results} "SELECT * FROM results ORDER BY point, seed"', err=True)
    if objectives is not None:
        click.echo(report_text(outcome.results, *objectives, top))
    if failed:
        fail(
            f"{failed:,} run(s) failed; their error is in the results' error column "
            "(--retry-failed runs them again)",
            code=1,
        )


def _run(
    sw: Any,
    out_dir: Path,
    backend: str,
    jobs: int | None,
    ray_address: str | None,
    files: bool,
    runs_dir: str | None,
    retry_failed: bool,
    overwrite: bool,
) -> Any:
    """Run the sweep's points with a progress display; Ctrl-C or SIGTERM stop the runs in flight,
    keep what finished and exit 130 / 143."""
    from scenarios import sweep as sweeps
    from scenarios.runner import Terminated, sigterm_as_interrupt

    state = _Progress(backend)
    try:
        with sigterm_as_interrupt():
            outcome = sweeps.run_sweep(
                sw,
                out_dir,
                backend=backend,
                jobs=jobs,
                ray_address=ray_address,
                files=files,
                runs_dir=Path(runs_dir) if runs_dir else None,
                retry_failed=retry_failed,
                on_start=state.start,
                on_result=state.result,
                overwrite=overwrite,
                on_validate=state.validating,
                on_warning=state.warn,
            )
    except KeyboardInterrupt as e:
        state.close()
        what, code = ("terminated (SIGTERM)", 143) if isinstance(e, Terminated) else ("interrupted", 130)
        stopped = f", {state.stopped:,} stopped in flight (recorded as stopped)" if state.stopped else ""
        click.echo(
            f"\ntwin: {what}: {state.done - state.stopped:,} run(s) finished and kept in {out_dir}"
            f"{stopped}; run the same command again to go on",
            err=True,
        )
        sys.exit(code)
    state.close()
    return outcome


def _objectives(
    pareto: str, sort_kpi: str | None
) -> tuple[tuple[str, str], tuple[str, str], tuple[str, str]]:
    from scenarios.sweep import parse_objective

    parts = [p for p in pareto.split(",")]
    if len(parts) != 2:
        fail(f"--pareto {pareto!r}: expected two KPIs, e.g. usd_per_mtok:min,slo_attainment:max")
    a, b = (parse_objective(p, "--pareto") for p in parts)
    s = parse_objective(sort_kpi, "--sort") if sort_kpi else a
    return s, a, b


class _Progress:
    """A progress bar on a terminal (points done, failed, ETA); one line per point otherwise."""

    # A sweep of at least this many points shows its validation's progress.
    VALIDATE_SHOWN = 2000

    def __init__(self, backend: str) -> None:
        self.backend = backend
        self.bar: Any = None
        self.n = self.done = self.failed = self.stopped = 0
        self.shown = -1  # the validation's last percentage shown
        self.warned = 0

    def validating(self, done: int, total: int) -> None:
        """Validation progress: one line rewritten on a terminal, else a line every 10 %."""
        if total < self.VALIDATE_SHOWN:
            return
        pct = 100 * done // total
        if sys.stderr.isatty():
            if pct != self.shown:
                click.echo(f"\rvalidating {done:,}/{total:,} checks ({pct} %)", err=True, nl=done == total)
        elif pct // 10 != self.shown // 10 or (done == total and self.shown != 100):
            click.echo(f"validating: {done:,}/{total:,} checks ({pct} %)", err=True)
        self.shown = pct

    def warn(self, msg: str) -> None:
        """A point file that is not the sweep's: one line each (the first 20, then a count)."""
        self.warned += 1
        if self.warned <= 20:
            click.echo(f"twin: warning: {msg}", err=True)
        elif self.warned == 21:
            click.echo("twin: warning: more point files like these; their points run again", err=True)

    def start(self, todo: int, skipped: int) -> None:
        self.n = todo
        if skipped:
            click.echo(f"{skipped:,} run(s) already done; {todo:,} to go", err=True)
        if todo and sys.stderr.isatty():
            self.bar = click.progressbar(
                length=todo, label=self._label(), file=sys.stderr, show_eta=True, show_pos=True
            )
            self.bar.__enter__()

    def _label(self) -> str:
        return f"sweep ({self.backend}): failed {self.failed}"

    def result(self, task: Any, row: dict[str, Any]) -> None:
        self.done += 1
        self.stopped += row["status"] == "stopped"
        self.failed += row["status"] == "failed"
        if self.bar is not None:
            self.bar.label = self._label()
            self.bar.update(1)
        else:
            err = f"  {row['error']}" if row.get("error") else ""
            took = f" in {row['wall_s']:.1f} s" if row.get("wall_s") is not None else ""
            click.echo(f"[{self.done}/{self.n}] {task.key} {row['status']}{took}{err}", err=True)

    def close(self) -> None:
        if self.bar is not None:
            self.bar.__exit__(None, None, None)
            self.bar = None


def _cell(v: Any) -> str:
    if v is None:
        return "–"
    if isinstance(v, float):
        return f"{v:.6g}"
    return str(v)


def _table(rows: list[dict[str, Any]], cols: list[str]) -> list[str]:
    data = [[_cell(r.get(c)) for c in cols] for r in rows]
    widths = [max([len(c)] + [len(d[i]) for d in data]) for i, c in enumerate(cols)]
    out = ["  ".join(c.rjust(w) for c, w in zip(cols, widths, strict=True))]
    out += ["  ".join(v.rjust(w) for v, w in zip(d, widths, strict=True)) for d in data]
    return out


def report_text(path: Path, sort: tuple[str, str], a: tuple[str, str], b: tuple[str, str], top: int) -> str:
    """The sweep's points (seed means) sorted by one KPI, and the Pareto front of two."""
    from scenarios.sweep import IDLE_BUSY, SCALE_HINT, by_point, idle_note, pareto_front, read_results

    if not path.exists():
        fail(f"{path}: no such results file (run the sweep first)")
    rows, params = read_results(path)
    pts = by_point(rows, params)
    failed = sum(r["status"] == "failed" for r in rows)
    pending = sum(r["status"] == "pending" for r in rows)
    kpis = list(
        dict.fromkeys(
            [
                sort[0],
                a[0],
                b[0],
                "usd_per_mtok",
                "slo_attainment",
                "pue",
                "peak_facility_mw",
                "busy_fraction",
            ]
        )
    )
    cols = ["point", *params, "seeds", *kpis]
    known = [p for p in pts if p.get(sort[0]) is not None]
    known.sort(key=lambda r: r[sort[0]], reverse=sort[1] == "max")
    lines = [
        f"{path}: {len(rows):,} runs, {len(pts):,} points complete, {failed:,} failed runs, {pending:,} pending",
        "",
        f"Sorted by {sort[0]} ({'largest' if sort[1] == 'max' else 'smallest'} first; mean over seeds)"
        + (f", top {top} of {len(known):,}" if len(known) > top else ""),
        *_table(known[:top], cols),
        "",
    ]
    idle = [p for p in pts if idle_note(p.get("busy_fraction"))]
    if idle:
        lines += [
            f"note: {len(idle):,} of {len(pts):,} points left the hall mostly idle (busy chips below "
            f"{IDLE_BUSY:.0%}, e.g. {idle[0]['point']}): {SCALE_HINT}",
            "",
        ]
    front = pareto_front(pts, a, b)
    lines.append(f"Pareto front: {a[0]} ({a[1]}) vs {b[0]} ({b[1]}): {len(front)} of {len(pts):,} points")
    lines += _table(front, ["point", *params, a[0], b[0]])
    return "\n".join(lines)
