"""Run hostile SQL through the live console's path against a run being written, one process per
probe (imported by ``tests/test_sandbox.py``; the processes fork from a server that has already
imported DuckDB and the twin, so each probe costs a run, not an interpreter start).

A probe: start a small live run (``Session``), commit some steps, plant links to the canary in the
run's folder of parts (``link.csv``, ``table=factory_ts/link.parquet``), snapshot ``duckdb_settings()``,
run each statement through ``session.writer.user_sql`` (the object the SQL console calls), then
again with only the statement-type check (DuckDB's own sandbox alone), snapshot again, advance and close the run, and read the file back. What comes back is plain data.
"""

from __future__ import annotations

import os
import traceback
from pathlib import Path
from typing import Any

PROBE_TOML = """
name = "probe"
seed = 3
dt_s = 300
duration_h = 1

[hall]
system = "trn3-gen2"
ultraservers = 1
ultraservers_per_row = 1
"""


def probe(args: tuple[str, str, list[str], str]) -> dict[str, Any]:
    """``(scratch dir, run file, statements, canary)`` -> outcome per statement, settings changed,
    final status and rows of the run, and the parts its file lists."""
    scratch, out, stmts, canary = args
    os.chdir(scratch)  # relative paths in the statements land here
    from scenarios.runner import Session
    from scenarios.spec import parse
    from storage.errors import QueryError
    from storage.reader import open_run_file
    from storage.sandbox import UserSql

    res: dict[str, Any] = {"outcomes": [], "changed": [], "status": None, "error": None}
    try:
        spec = parse(PROBE_TOML, "probe.toml")
        s = Session(spec, PROBE_TOML, out, duration_s=3600, flush_interval_s=0.05)
        try:
            s.advance(6)
            s.writer.flush()
            run_parts = Path(f"{out}.parts") / f"run_id={s.writer.run_id}"
            (run_parts / "link.csv").symlink_to(canary)
            (run_parts / "table=factory_ts" / "link.parquet").symlink_to(canary)
            cur = s.writer.cursor()
            before = cur.sql("SELECT name, value FROM duckdb_settings()").fetchall()
            # The console's path, then DuckDB's sandbox alone (only the statement-type check).
            engine_only = UserSql(s.writer.cursor(), s.writer.user_sql.limits, strict=False)
            for key, sandbox in (("outcomes", s.writer.user_sql), ("engine", engine_only)):
                res[key] = []
                for sql in stmts:
                    try:
                        r = sandbox.run(sql, max_rows=50)
                        res[key].append(("ran", _text(r.table)))
                    except QueryError as e:
                        res[key].append(("refused", str(e)))
            after = cur.sql("SELECT name, value FROM duckdb_settings()").fetchall()
            cur.close()
            res["changed"] = sorted(set(before) ^ set(after))
            s.advance(s.total_steps - 6)
        except BaseException:
            s.close("failed")
            raise
        s.close("complete")
        con = open_run_file(out)
        try:
            res["status"], res["steps"] = con.sql(
                "SELECT status, (SELECT count(*) FROM factory_ts) FROM runs"
            ).fetchall()[0]
            res["listed"] = sorted(r[0] for r in con.sql("SELECT path FROM twin_parts").fetchall())
        finally:
            con.close()
    except BaseException:
        res["error"] = traceback.format_exc()
    return res


def _text(table: Any) -> str:
    """Every value of a result as text (for the canary search)."""
    out = []
    for col in table.columns:
        try:
            out.append(str(col.to_pylist()))
        except (OverflowError, ValueError):  # e.g. dates outside Python's range
            out.append(col.to_string(window=10**6))
    return " ".join(out)[:100_000]


def files_under(*dirs: Path) -> dict[str, tuple[int, int]]:
    """Every file below ``dirs`` with its size and modification time [ns]."""
    out: dict[str, tuple[int, int]] = {}
    for d in dirs:
        for p in d.rglob("*"):
            if p.is_file():
                st = p.stat()
                out[str(p)] = (st.st_size, st.st_mtime_ns)
    return out
