"""What the write path stores, row by row: the run's id on every row (a constant the writer and
the live views add, never a column of the batches), the frames' values unchanged, and the tables'
columns and types the same in a finished file and in the live view of a running one."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import duckdb
import numpy as np
import pyarrow.parquet as pq

from storage.live import live_dir
from storage.liveread import open_live
from storage.manifest import MANIFEST
from storage.reader import open_run_file
from storage.schema import columns
from storage.writer import TelemetryWriter
from twin.spec.telemetry import TABLES

NP_TYPES = {
    "int8": np.int8,
    "int32": np.int32,
    "int64": np.int64,
    "float32": np.float32,
    "float64": np.float64,
}


def frame(table: str, n: int, seed: int, t0: int = 0) -> dict[str, Any]:
    """``n`` rows of ``table``'s model columns with distinct values (a NaN in every float column:
    stored as NULL); ``time_s`` counts up from ``t0`` and the first int column after it counts
    rows, so every row has its own key."""
    rng = np.random.default_rng(seed)
    cols: dict[str, Any] = {}
    for c in TABLES[table]:
        if c.name == "run_id":
            continue
        if c.name == "time_s":
            cols[c.name] = t0 + 15 * np.arange(n, dtype=np.int64)
        elif c.dtype == "string":
            cols[c.name] = [f"{c.name}-{seed}-{i}" for i in range(n)]
        elif c.dtype == "bool":
            cols[c.name] = rng.random(n) < 0.5
        elif c.dtype.startswith("float"):
            v = rng.normal(1e3, 5e2, n).astype(NP_TYPES[c.dtype])
            v[n // 2] = np.nan
            cols[c.name] = v
        else:
            cols[c.name] = rng.integers(0, 100, n).astype(NP_TYPES[c.dtype])
    return cols


def run_row(run_id: str) -> dict[str, Any]:
    return {"run_id": run_id, "scenario_name": "rows", "seed": 1, "dt_s": 15}


def assert_rows_equal(
    con: duckdb.DuckDBPyConnection, table: str, run_id: str, cols: dict[str, Any], key: str
) -> None:
    """``table``'s rows of ``run_id`` (ordered by ``key``) are exactly ``cols``, NaN as NULL."""
    got = con.sql(f"SELECT * FROM {table} WHERE run_id = ? ORDER BY {key}", params=[run_id]).to_arrow_table()
    n = len(next(iter(cols.values())))
    assert got.num_rows == n
    order = np.argsort(np.asarray(cols[key]), kind="stable")
    for name, v in cols.items():
        want = [v[i] for i in order]
        have = got.column(name).to_pylist()
        for w, h in zip(want, have, strict=True):
            if isinstance(w, float | np.floating) and np.isnan(w):
                assert h is None, (table, name)
            else:
                assert h == w, (table, name, h, w)


def test_two_runs_in_one_file_carry_their_own_id_on_every_row(tmp_path: Path) -> None:
    """Two runs appended to one file: each table holds each run's rows with that run's id and the
    values of its frames; a job written twice in a run keeps its latest row, once per run."""
    f = tmp_path / "two.duckdb"
    given: dict[str, dict[str, dict[str, Any]]] = {}
    for k, rid in enumerate(("run-a", "run-b")):
        w = TelemetryWriter(f, run_row(rid), if_exists="append" if k else "error")
        us = frame("ultraserver_ts", 40, seed=k)
        first_jobs = frame("jobs", 6, seed=10 + k)
        first_jobs["job_id"] = np.arange(6, dtype=np.int32)
        later_jobs = frame("jobs", 6, seed=20 + k)
        later_jobs["job_id"] = np.arange(6, dtype=np.int32)
        w.write({"ultraserver_ts": us, "jobs": first_jobs}, 300)
        w.flush()  # the first rows of the jobs are committed before they are written again
        w.write({"jobs": later_jobs}, 600)
        w.close()
        given[rid] = {"ultraserver_ts": us, "jobs": later_jobs}
    # Each run's time series are Parquet parts in its own folder beside the file, without run_id
    # (the folder's name carries it); the jobs stay in the file.
    for rid in given:
        parts = sorted(
            (tmp_path / "two.duckdb.parts" / f"run_id={rid}" / "table=ultraserver_ts").glob("*.parquet")
        )
        assert parts and "run_id" not in pq.read_schema(parts[0]).names
        assert sum(pq.ParquetFile(q).metadata.num_rows for q in parts) == 40
        assert not (tmp_path / "two.duckdb.parts" / f"run_id={rid}" / "table=jobs").exists()
    con = open_run_file(f)  # sets the parts' folder as DuckDB's file search path
    try:
        assert con.sql("SELECT run_id, count(*) FROM ultraserver_ts GROUP BY 1 ORDER BY 1").fetchall() == [
            ("run-a", 40),
            ("run-b", 40),
        ]
        assert con.sql("SELECT count(*) FROM ultraserver_ts WHERE run_id IS NULL").fetchall() == [(0,)]
        assert con.sql("SELECT run_id, count(*) FROM jobs GROUP BY 1 ORDER BY 1").fetchall() == [
            ("run-a", 6),
            ("run-b", 6),
        ]
        for rid, tables in given.items():
            assert_rows_equal(con, "ultraserver_ts", rid, tables["ultraserver_ts"], "time_s")
            assert_rows_equal(con, "jobs", rid, tables["jobs"], "job_id")
    finally:
        con.close()


def test_the_live_view_shows_the_runs_rows_as_the_file_stores_them(tmp_path: Path) -> None:
    """While a run writes, its live view has every table with the file's columns and types, the
    run's id on every row (its parts do not store it) and the frames' values; after the run the
    file shows the same rows."""
    f = tmp_path / "live.duckdb"
    w = TelemetryWriter(f, run_row("run-live"), if_exists="error", live=True)
    chips = frame("chip_ts", 30, seed=3)
    factory = frame("factory_ts", 5, seed=4)
    try:
        w.write({"chip_ts": chips, "factory_ts": factory}, 75)
        w.flush()
        # The sidecar holds the manifest; it names the run's folder of the recording's parts.
        assert sorted(q.name for q in live_dir(f).iterdir()) == [MANIFEST]
        part = next(
            (tmp_path / "live.duckdb.parts" / "run_id=run-live" / "table=chip_ts").glob("part-*.parquet")
        )
        assert "run_id" not in pq.read_schema(part).names
        r = open_live(f)
        try:
            assert_rows_equal(r.con, "chip_ts", "run-live", chips, "time_s")
            assert_rows_equal(r.con, "factory_ts", "run-live", factory, "time_s")
            live_types = {
                t: r.con.sql(f"SELECT column_name, column_type FROM (DESCRIBE {t})").fetchall()
                for t in TABLES
            }
        finally:
            r.close()
    finally:
        w.close()
    assert not live_dir(f).exists()  # the sidecar goes with the run; the parts stay
    con = open_run_file(f)
    try:
        assert_rows_equal(con, "chip_ts", "run-live", chips, "time_s")
        for t in TABLES:
            file_types = con.sql(f"SELECT column_name, column_type FROM (DESCRIBE {t})").fetchall()
            assert sorted(file_types) == sorted(live_types[t]), t
            assert {n for n, _ in file_types} == {c.name for c in columns(t)}, t
    finally:
        con.close()


def test_a_commit_with_nothing_before_the_first_rows_leaves_every_row_readable(tmp_path: Path) -> None:
    """A flush with nothing to store (before the first frames, as the writer's timer does) makes
    the views before the run has any part; the rows committed later are still read: each
    table's count equals what was written, in the finished file and in a second run appended to
    it (whose views must take both runs)."""
    path = tmp_path / "empty-first.duckdb"
    written = {"factory_ts": 5, "ultraserver_ts": 7}
    runs: list[str] = []
    for run_id in ("first", "second"):
        w = TelemetryWriter(path, run_row(run_id), if_exists="append")
        w.flush()  # nothing queued: a commit of the run row alone
        w.write({t: frame(t, n, seed=3) for t, n in written.items()}, 100)
        w.flush()
        w.write({t: frame(t, n, seed=4, t0=1000) for t, n in written.items()}, 200)
        w.close()
        runs.append(run_id)
        con = open_run_file(path)
        try:
            for t, n in written.items():
                got = dict(con.sql(f"SELECT run_id, count(*) FROM {t} GROUP BY 1").fetchall())
                assert got == {r: 2 * n for r in runs}, (t, run_id)
        finally:
            con.close()


def test_batches_turn_nan_into_null_and_keep_every_other_value_as_pandas_semantics_do() -> None:
    # The writer's conversion takes a float column as it is when it holds no NaN and masks its
    # NaNs otherwise; the reference is Arrow's own NaN-as-null conversion of the same arrays. Each
    # column gets one of: clean, a NaN, +inf and -inf (their sum is NaN, yet no value is), both.
    import pyarrow as pa

    from storage.batches import batch_arrow
    from storage.schema import batch_schema

    for table in ("ultraserver_ts", "factory_ts", "chip_ts"):
        cols = frame(table, 64, seed=3)
        floats = [c.name for c in TABLES[table] if c.dtype.startswith("float")]
        for k, name in enumerate(floats):
            v = np.asarray(cols[name]).copy()
            v[v.size // 2] = v[0]  # no NaN unless this column's case puts one
            if k % 4 in (1, 3):
                v[5] = np.nan
            if k % 4 in (2, 3):
                v[7], v[9] = np.inf, -np.inf
            cols[name] = v
        got = batch_arrow(table, cols)
        schema = batch_schema(table)
        for name in floats:
            want = pa.array(cols[name], type=schema.field(name).type, from_pandas=True)
            assert got.column(name).combine_chunks().equals(want), (table, name)
            assert got.column(name).null_count == int(np.isnan(cols[name]).sum())
        assert any(np.isinf(cols[n]).any() for n in floats) and any(np.isnan(cols[n]).any() for n in floats)


def test_a_long_run_reopens_its_database_and_keeps_every_row(tmp_path: Path, monkeypatch: Any) -> None:
    """Every ``RECYCLE_COMMITS`` commits the writer checkpoints and reopens the run's database (what
    DuckDB holds per jobs upsert goes back); the jobs keep their latest rows, the user's SQL goes
    on on the new connection, and a writer that handed a reader cursor out keeps its connection."""
    import storage.writer as writer_mod

    monkeypatch.setattr(writer_mod, "RECYCLE_COMMITS", 3)
    f = tmp_path / "long.duckdb"
    w = TelemetryWriter(f, run_row("long"), if_exists="error")
    latest: dict[int, dict[str, Any]] = {}
    for k in range(7):  # seven commits: reopened after the 3rd and the 6th
        jobs = frame("jobs", 5, seed=100 + k)
        jobs["job_id"] = np.arange(2 * k, 2 * k + 5, dtype=np.int32)  # three of five seen before
        for i, jid in enumerate(jobs["job_id"]):
            latest[int(jid)] = {name: v[i] for name, v in jobs.items()}
        w.write({"jobs": jobs}, 300 * (k + 1))
        w.flush()
        assert w.user_sql.run("SELECT count(*) FROM jobs").table.column(0).to_pylist() == [len(latest)]
    assert w.reopened == 2
    w.close()
    want = {name: [latest[j][name] for j in sorted(latest)] for name in next(iter(latest.values()))}
    con = open_run_file(f)
    try:
        assert_rows_equal(con, "jobs", "long", want, "job_id")
    finally:
        con.close()

    held = TelemetryWriter(tmp_path / "held.duckdb", run_row("held"), if_exists="error")
    cur = held.cursor()
    for k in range(4):
        held.write({"jobs": frame("jobs", 2, seed=k)}, 300 * (k + 1))
        held.flush()
    assert held.reopened == 0
    assert cur.sql("SELECT count(*) FROM runs").fetchall() == [(1,)]
    cur.close()
    held.close()
