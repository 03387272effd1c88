"""Telemetry files: round trip, upserts, crash safety, read-only user SQL, refusal of foreign files."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from pathlib import Path

import duckdb
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from scenarios.runner import Session
from storage.errors import QueryError, StorageError
from storage.live import live_dir
from storage.manifest import MANIFEST
from storage.reader import kpi_summary, open_run_file, user_query
from storage.schema import columns
from storage.writer import TelemetryWriter
from tests.conftest import job_history
from twin.spec.telemetry import TABLES


def _query(
    con: duckdb.DuckDBPyConnection, q: str, params: list[object] | None = None
) -> list[tuple[object, ...]]:
    return con.sql(q, params=params or []).fetchall()


def test_frames_round_trip_exactly(tmp_path: Path, small_scenario) -> None:  # type: ignore[no-untyped-def]
    spec, text = small_scenario
    s = Session(spec, text, tmp_path / "rt.duckdb")
    frames = [s.advance(50), s.advance(70)]
    s.close()
    con = open_run_file(tmp_path / "rt.duckdb")
    try:
        for table in ("factory_ts", "ultraserver_ts"):
            got = con.sql(
                f"SELECT * FROM {table} ORDER BY time_s{', ultraserver_id' if table == 'ultraserver_ts' else ''}"
            ).to_arrow_table()
            for col in frames[0][table]:
                want = np.concatenate([f[table][col] for f in frames])
                np.testing.assert_array_equal(got[col].to_numpy(), want, err_msg=f"{table}.{col}")
        assert got.schema.names == [c.name for c in TABLES["ultraserver_ts"]] + ["ts"]
        ((status, sim_t),) = _query(con, "SELECT status, sim_time_s FROM runs")
        assert status == "complete" and sim_t == 120 * spec.dt_s
        # Jobs: one row per job, latest state wins over earlier upserts.
        ((dupes,),) = _query(con, "SELECT count(*) - count(DISTINCT job_id) FROM jobs")
        assert dupes == 0
        states = dict(_query(con, "SELECT job_id, state FROM jobs"))
        assert len(states) == s.sim.jobs.next_id  # every job the run ever had
        hist = job_history(frames)
        assert states == dict(zip(hist["job_id"].tolist(), hist["state"].tolist(), strict=True))
        # Units and descriptions travel with the columns.
        ((comment,),) = _query(
            con,
            "SELECT comment FROM duckdb_columns() WHERE table_name = 'factory_ts' AND column_name = 'it_power_w'",
        )
        assert "[W]" in comment
    finally:
        con.close()


def test_kpi_summary_energy_matches_the_integral(small_run: Path) -> None:
    con = open_run_file(small_run)
    try:
        run_id = _query(con, "SELECT run_id FROM runs")[0][0]
        s = kpi_summary(con, run_id)
        ((fac_j, it_j, dt),) = _query(
            con,
            "SELECT sum(facility_power_w * r.dt_s), sum(it_power_w * r.dt_s), any_value(r.dt_s) FROM factory_ts JOIN runs r USING (run_id)",
        )
        assert s["facility_mwh"] == pytest.approx(fac_j / 3.6e9)
        assert s["it_mwh"] == pytest.approx(it_j / 3.6e9)
        assert s["pue"] == pytest.approx(fac_j / it_j)
        assert s["steps"] == 6 * 3600 // dt
    finally:
        con.close()


KILL_TOML = """
name = "long"
dt_s = 60
duration_h = 87600
[hall]
ultraservers = 4
[[services]]
replicas = 2
"""


def test_sigkill_leaves_a_readable_file_with_the_committed_prefix(tmp_path: Path) -> None:
    scen = tmp_path / "long.toml"
    scen.write_text(KILL_TOML)
    out = tmp_path / "killed.duckdb"
    proc = subprocess.Popen(
        [sys.executable, "-m", "tui.cli", "run", str(scen), "--out", str(out)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    # Kill once the run has committed a few batches, as its readers are told: the manifest of the
    # live view it publishes after every commit (storage.live) counts the commits and the
    # simulated time they hold.
    manifest = live_dir(out) / MANIFEST
    commits, committed_s = 0, 0
    deadline = time.monotonic() + 300  # a guard against a hang only
    try:
        while commits < 2 or committed_s <= 100 * 60:
            assert proc.poll() is None, proc.stderr.read() if proc.stderr else ""
            assert time.monotonic() < deadline, f"{commits} commits seen, up to t={committed_s} s"
            time.sleep(0.05)
            try:
                m = json.loads(manifest.read_text())
            except FileNotFoundError:  # nothing committed yet
                continue
            commits, committed_s = m["seq"], m["committed_s"]
    finally:
        proc.kill()  # SIGKILL
        proc.wait()
        if proc.stderr:
            proc.stderr.close()
    assert proc.returncode == -signal.SIGKILL
    con = open_run_file(out)
    try:
        ((status, sim_t),) = _query(con, "SELECT status, sim_time_s FROM runs")
        assert status == "running"  # shows as not complete
        n, tmax, tmin = _query(con, "SELECT count(*), max(time_s), min(time_s) FROM factory_ts")[0]
        assert n * 60 >= committed_s > 100 * 60 and tmin == 0  # nothing readers were shown is lost
        assert tmax == (n - 1) * 60  # a contiguous prefix: no step missing
        assert sim_t == n * 60  # the run row was committed with the same batch
        ((us_rows,),) = _query(con, "SELECT count(*) FROM ultraserver_ts")
        assert us_rows == 4 * n
    finally:
        con.close()


@pytest.mark.parametrize(
    ("sql", "needle"),
    [
        ("DELETE FROM factory_ts", "read-only"),
        ("DROP TABLE runs", "read-only"),
        ("CREATE TABLE x AS SELECT 1", "read-only"),
        ("COPY factory_ts TO 'out.csv'", "read-only"),
        ("ATTACH 'other.duckdb'", "read-only"),
        ("INSTALL httpfs", "read-only"),
        ("SELECT * FROM read_csv('/etc/passwd')", "disabled"),
        ("SELECT 1; DELETE FROM runs", "read-only"),
        ("SET enable_external_access = true", "read-only"),
    ],
)
def test_user_sql_refuses_writes_and_file_access(small_run: Path, sql: str, needle: str) -> None:
    con = open_run_file(small_run)
    try:
        with pytest.raises(QueryError, match=needle):
            user_query(con, sql)
        ((n,),) = _query(con, "SELECT count(*) FROM runs")
        assert n == 1
    finally:
        con.close()


def test_user_sql_reads(small_run: Path) -> None:
    con = open_run_file(small_run)
    try:
        t = user_query(con, "SELECT count(*) AS n FROM factory_ts")
        assert t.to_pylist() == [{"n": 360}]
        assert user_query(con, "DESCRIBE factory_ts").num_rows == len(columns("factory_ts"))
        with pytest.raises(QueryError, match="does not exist"):
            user_query(con, "SELECT * FROM nope")
    finally:
        con.close()


def test_foreign_and_missing_files_are_refused_clearly(tmp_path: Path) -> None:
    with pytest.raises(StorageError, match="no such file"):
        open_run_file(tmp_path / "missing.duckdb")
    junk = tmp_path / "junk.duckdb"
    junk.write_bytes(b"this is not a database at all" * 100)
    with pytest.raises(StorageError, match="not a DuckDB"):
        open_run_file(junk)
    other = tmp_path / "other.duckdb"
    c = duckdb.connect(str(other))
    c.execute("CREATE TABLE t (a INT)")
    c.close()
    with pytest.raises(StorageError, match="not an AI Factory Twin run"):
        open_run_file(other)


def test_newer_schema_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "future.duckdb"
    w = TelemetryWriter(path, {"run_id": "r"})
    w.close()
    c = duckdb.connect(str(path))
    c.execute("UPDATE twin_meta SET value = '999' WHERE key = 'schema_version'")
    c.close()
    with pytest.raises(StorageError, match="schema v999"):
        open_run_file(path)
    with pytest.raises(StorageError, match="schema v999"):
        TelemetryWriter(path, {"run_id": "r2"})


def _job_frames(n: int, done: float) -> dict[str, dict[str, object]]:
    """``n`` jobs' rows (ids 0..n-1), every value a plain fill, ``done_flop`` = ``done``."""
    cols: dict[str, object] = {}
    for c in TABLES["jobs"][1:]:
        if c.dtype == "string":
            cols[c.name] = ["llama-3.1-70b"] * n
        elif c.dtype == "bool":
            cols[c.name] = np.zeros(n, dtype=bool)
        elif c.name == "job_id":
            cols[c.name] = np.arange(n, dtype=np.int32)
        elif c.dtype.startswith("int"):
            cols[c.name] = np.zeros(n, dtype=c.dtype)
        else:
            cols[c.name] = np.full(n, done if c.name == "done_flop" else 1.0)
    return {"jobs": cols}


def test_a_campus_sized_jobs_upsert_fits_the_run_databases_memory_limit(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A campus writes every waiting job again and again (their waits move on). 150,000 jobs in
    one flush, twice queued before it and once more after, under a 40 MB database limit (one
    INSERT OR REPLACE over them all needs several times that): every job is committed once, with
    its newest row."""
    import storage.writer as W

    monkeypatch.setattr(W, "WRITER_MEMORY", "40MB")
    n = 150_000
    w = TelemetryWriter(
        tmp_path / "j.duckdb", {"run_id": "campus-s0-20261201T000000.000Z-p1-1"}, if_exists="replace"
    )
    w.write(_job_frames(n, 1.0), 60)
    w.write(_job_frames(n, 2.0), 120)  # same jobs again, newer: one row each, these values
    w.flush()
    w.write(_job_frames(n, 3.0), 180)
    w.close()
    con = duckdb.connect(str(tmp_path / "j.duckdb"), read_only=True)
    rows, keys, lo, hi = con.sql(
        "SELECT count(*), count(DISTINCT job_id), min(done_flop), max(done_flop) FROM jobs"
    ).fetchall()[0]
    status = con.sql("SELECT status FROM runs").fetchall()[0][0]
    con.close()
    assert (rows, keys, lo, hi, status) == (n, n, 3.0, 3.0, "complete")


def test_a_failed_write_names_its_cause_and_keeps_what_was_committed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An upsert too big for the database's memory (chunking turned off here) fails the run with
    the database's own reason, not the aborted transaction it leaves behind; the commits before
    it stay readable and the run is marked failed."""
    import storage.writer as W

    monkeypatch.setattr(W, "WRITER_MEMORY", "24MB")
    monkeypatch.setattr(W, "UPSERT_CHUNK_ROWS", 10**9)
    path = tmp_path / "f.duckdb"
    w = TelemetryWriter(path, {"run_id": "r"}, if_exists="replace")
    w.write(_job_frames(100, 1.0), 60)
    w.flush()
    w.write(_job_frames(400_000, 2.0), 120)
    with pytest.raises(StorageError) as err:
        w.flush()
    with pytest.raises(StorageError):  # closing says it again, after marking the run failed
        w.close()
    msg = str(err.value)
    assert "Out of Memory" in msg and "aborted" not in msg and "\n" not in msg
    con = duckdb.connect(str(path), read_only=True)
    rows = con.sql("SELECT count(*), max(done_flop) FROM jobs").fetchall()[0]
    status = con.sql("SELECT status FROM runs").fetchall()[0][0]
    con.close()
    assert rows == (100, 1.0) and status == "failed"


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(["a", "b"]), st.integers(0, 5)), min_size=0, max_size=40))
def test_latest_per_key_keeps_each_keys_last_row_in_arrival_order(keys: list[tuple[str, int]]) -> None:
    import pyarrow as pa

    from storage.upsert import latest_per_key

    tb = pa.table(
        {"run_id": [k[0] for k in keys], "job_id": [k[1] for k in keys], "pos": list(range(len(keys)))}
    )
    got = latest_per_key(tb, ("run_id", "job_id")).column("pos").to_pylist()
    last = {k: i for i, k in enumerate(keys)}  # brute force: a dict keeps the last position of each key
    assert got == sorted(last.values())


def test_a_new_file_has_the_schema_the_migrations_build() -> None:
    """A new file gets this version's schema at once (``storage.schema.new_file_sql``), not by
    replaying every migration from v1: the same objects, the same columns in the same order with
    the same types and comments, and the same keys as the replay gives (the time series as views
    over parts instead of tables)."""
    import duckdb

    from storage.database import init_schema
    from storage.parts import PART_TABLES
    from storage.schema import migrations

    new = duckdb.connect()
    init_schema(new)
    replayed = duckdb.connect()
    for stmts in migrations():
        for s in stmts:
            replayed.execute(s)

    def catalog(con: duckdb.DuckDBPyConnection) -> dict[str, list[tuple[object, ...]]]:
        return {
            "columns": con.sql(
                "SELECT table_name, column_index, column_name, data_type, comment FROM duckdb_columns() "
                "WHERE database_name = current_database() ORDER BY table_name, column_index"
            ).fetchall(),
            "objects": con.sql(
                "SELECT table_name FROM duckdb_tables() WHERE database_name = current_database() UNION ALL "
                "SELECT view_name FROM duckdb_views() WHERE database_name = current_database() "
                "AND NOT internal ORDER BY 1"
            ).fetchall(),
            "keys": con.sql(
                "SELECT table_name, constraint_type, constraint_column_names::VARCHAR FROM duckdb_constraints() "
                "WHERE database_name = current_database() AND constraint_type = 'PRIMARY KEY' ORDER BY 1"
            ).fetchall(),
        }

    got, want = catalog(new), catalog(replayed)
    assert got["columns"] == want["columns"] and got["objects"] == want["objects"]
    assert got["keys"] == want["keys"]
    views = {r[0] for r in new.sql("SELECT view_name FROM duckdb_views() WHERE NOT internal").fetchall()}
    assert set(PART_TABLES) <= views and "factory_ts" in PART_TABLES


def test_a_file_started_from_the_process_template_reads_as_one_built_from_scratch(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The second new file of a process starts as a copy of the first's checkpointed schema
    (``storage.database._template``), without running the schema's statements again; a reader sees
    the same objects, columns, types, comments, keys, views and rows as in a file built from
    scratch, and both use the small blocks of ``BLOCK_SIZE``."""
    import storage.database as w

    monkeypatch.setattr(w, "_TEMPLATES", {})  # this process has made no file yet
    # One step of factory_ts: zeros but its time (120 s) and IT power (1.5 MW).
    step = {c.name: np.zeros(1, dtype=c.dtype) for c in TABLES["factory_ts"] if c.dtype != "string"}
    step.update(time_s=np.array([120]), it_power_w=np.array([1.5e6]))

    def record(name: str) -> Path:
        path = tmp_path / name
        writer = TelemetryWriter(path, {"run_id": "r1", "scenario_name": "s", "seed": 1, "dt_s": 60})
        writer.write({"factory_ts": step}, 180)
        writer.close()
        return path

    scratch = record("scratch.duckdb")
    assert w._template() is not None

    def no_schema(*_: object, **__: object) -> None:
        raise AssertionError("a file started from the template ran the schema's statements")

    monkeypatch.setattr(w, "init_schema", no_schema)
    copied = record("copied.duckdb")

    def seen(path: Path) -> dict[str, list[tuple[object, ...]]]:
        con = open_run_file(path)
        try:
            db = "database_name = current_database()"
            return {
                "columns": con.sql(
                    "SELECT table_name, column_index, column_name, data_type, comment FROM duckdb_columns() "
                    f"WHERE {db} ORDER BY ALL"
                ).fetchall(),
                "views": con.sql(
                    f"SELECT view_name, replace(sql, ?, 'FILE') FROM duckdb_views() WHERE {db} AND NOT internal "
                    "ORDER BY ALL",
                    params=[path.name],
                ).fetchall(),
                "keys": con.sql(
                    "SELECT table_name, constraint_type, constraint_column_names::VARCHAR "
                    f"FROM duckdb_constraints() WHERE {db} ORDER BY ALL"
                ).fetchall(),
                "runs": con.sql(
                    "SELECT * EXCLUDE (started_at, finished_at) FROM runs ORDER BY ALL"
                ).fetchall(),
                "meta": con.sql("SELECT * FROM twin_meta WHERE key <> 'parts_dir' ORDER BY ALL").fetchall(),
                "parts": con.sql("SELECT * FROM twin_parts ORDER BY ALL").fetchall(),
                "rows": con.sql("SELECT time_s, it_power_w FROM factory_ts").fetchall(),
                "block": con.sql("SELECT block_size FROM pragma_database_size()").fetchall(),
            }
        finally:
            con.close()

    a, b = seen(scratch), seen(copied)
    assert a == b
    assert a["rows"] == [(120, 1.5e6)] and a["block"] == [(w.BLOCK_SIZE,)]
    assert sum(1 for r in a["columns"] if r[4]) > 200  # the comments came along
