"""The body of ``twin sql``: one query in the sandbox, inside its time and memory limits."""

from __future__ import annotations

import math
import sys
import threading
from typing import Any

import click


def run_user_query(file: str, query: str | None, timeout_s: float, memory: str) -> Any:
    """The query's result table (``None``: no query on a terminal, show the schema). Bad limits
    exit 2 with one line; Ctrl-C stops the query with one line and exit code 130."""
    from storage.live import open_for_reading
    from storage.sandbox import Limits, UserSql, parse_memory
    from tui.cli import fail

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

            from storage.live import Reading
            from storage.parquet_sql import open_parquet

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
        out: dict[str, Any] = {}
        done = threading.Event()

        def work() -> None:
            try:
                out["table"] = sandbox.run(query).table
            except BaseException as e:  # handed to the main thread
                out["error"] = e
            finally:
                done.set()

        # The query runs in a thread so that Ctrl-C reaches the main thread, which interrupts it.
        threading.Thread(target=work, name="twin-sql", daemon=True).start()
        try:
            while not done.wait(0.1):
                pass
        except KeyboardInterrupt:
            while not done.wait(0.05):  # again until it ends: the query may just be starting
                sandbox.interrupt()
            _cancelled()
        if "error" in out:
            raise out["error"]
        return out["table"]
    finally:
        con.close()


def _cancelled() -> None:
    click.echo("twin: query cancelled (Ctrl-C)", err=True)
    sys.exit(130)
