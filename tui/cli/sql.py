"""`twin sql`: one query in the sandbox, inside its time and memory limits."""

from __future__ import annotations

import math
import signal
import sys
import threading
from typing import TYPE_CHECKING, Any

import click

from tui.cli.errors import fail, guard

if TYPE_CHECKING:
    from storage.sandbox import UserSql


def run_user_query(file: str, query: str | None, timeout_s: float, memory: str) -> Any:
    """The query's result table (``None``: no query on a terminal, show the schema). Bad limits
    exit 2 with one line; Ctrl-C stops the query with one line and exit code 130."""
    from storage.liveread import open_for_reading
    from storage.sandbox import Limits, UserSql, parse_memory

    if not (math.isfinite(timeout_s) and 0 < timeout_s <= 86400 * 7):
        fail(f"--timeout: {timeout_s!r} must be a number of seconds in (0, 604800]")
    try:
        limits = Limits(timeout_s=timeout_s, memory_bytes=parse_memory(memory))
    except ValueError as e:
        fail(f"--memory-limit: {e}")
    if query is None and sys.stdin.isatty():
        return None
    try:
        if query is None:
            query = sys.stdin.read()
        if file.endswith(".parquet"):  # a sweep's results.parquet, as the view `results`
            from pathlib import Path

            from storage.liveread import Reading
            from storage.parquet_sql import open_parquet
            from storage.recording import check_regular_file

            check_regular_file(file, "Parquet")  # a pipe would block the open
            reading = Reading(open_parquet(file, limits), Path(file))
        else:
            reading = open_for_reading(file, limits=limits)
    except KeyboardInterrupt:
        _cancelled()
    con = reading.con
    if reading.in_progress:
        click.echo(reading.note, err=True)
    try:
        sandbox = UserSql(con, limits, strict=False)
        sql: str = query or ""  # read from stdin above when not given
        return _run_interruptibly(sandbox, sql)
    finally:
        con.close()


def _run_interruptibly(sandbox: UserSql, sql: str) -> Any:
    """Run ``sql`` in ``sandbox`` on a thread of its own and return its result table (or raise
    its error); Ctrl-C interrupts the query, waits for it to end and exits 130 with one line."""
    out: dict[str, Any] = {}
    done = threading.Event()

    def work() -> None:
        try:
            out["table"] = sandbox.run(sql).table
        except BaseException as e:  # handed to the main thread
            out["error"] = e
        finally:
            done.set()

    # The query runs in a thread so that Ctrl-C reaches the main thread, which interrupts it.
    # Ctrl-C is held while the thread starts (it inherits the mask, so it never takes the
    # signal) and arrives inside the try: the connection is never closed under a running query.
    thread = threading.Thread(target=work, name="twin-sql", daemon=True)
    held = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})
    try:
        try:
            thread.start()
        finally:
            signal.pthread_sigmask(signal.SIG_SETMASK, held)
        while not done.wait(0.1):
            pass
    except KeyboardInterrupt:
        while not done.wait(0.05):  # again until it ends: the query may just be starting
            sandbox.interrupt()
        _cancelled()
    if "error" in out:
        raise out["error"]
    return out["table"]


def _cancelled() -> None:
    click.echo("twin: query cancelled (Ctrl-C)", err=True)
    sys.exit(130)


@click.command("sql")
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
    help="Write the result to this file (written in full, then put in place) instead of stdout.",
)
@click.option("--overwrite", is_flag=True, help="Replace --out if it exists.")
@click.option(
    "--max-rows",
    type=click.IntRange(min=0),
    default=200,
    show_default=True,
    help="Rows shown in table format (0: the header and the row count).",
)
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
@guard
def sql_cmd(
    file: str,
    query: str | None,
    fmt_: str,
    out: str | None,
    overwrite: bool,
    max_rows: int,
    timeout_s: float,
    memory: str,
) -> None:
    """Query a telemetry FILE with read-only SQL (QUERY, or stdin; no QUERY on a terminal lists
    the tables and their columns with units). The file is opened in a sandbox: no other file,
    extension or setting is reachable. A file a run is still writing answers with what is
    committed so far. Ctrl-C stops a running query. A .parquet FILE (a sweep's results.parquet)
    is the view `results`."""
    if out is not None:  # before the query runs: never onto the file it reads
        from storage.paths import check_output

        check_output(out, [file], overwrite=overwrite)
    if query is None and file.endswith(".parquet") and sys.stdin.isatty():
        query = "DESCRIBE results"
    table = run_user_query(file, query, timeout_s, memory)
    if table is None:
        _print_schema()
        return
    from tui.cli.formats import emit_table

    emit_table(table, fmt_, out, max_rows, _table_text)


def _print_schema() -> None:
    from storage.schema import columns
    from twin.spec.telemetry import TABLES

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
