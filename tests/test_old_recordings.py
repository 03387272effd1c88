"""Recordings that travel and age: a recording moved or copied with its parts folder reads the same
from every command and every connection of the replay (its cursors included), and a file of every
schema version this project has written (v1-v10: time series as DuckDB tables, fewer columns and
tables) opens read-only in ``sql``, ``report``, ``compare``, ``export`` and the replay, read as
this version's schema (``storage.reader.presentation_sql``), the file left byte for byte as it was.

The old files are built here from a current recording, laid out as each version laid them out:
the tables its migrations created (``storage.schema.migrations`` up to that version), without the
columns and tables later versions added (``storage.schema``'s ``ADDED_IN`` and ``V*_COLUMNS``),
holding the rows of the recording."""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any

import duckdb
import pytest

from storage.parts import PART_TABLES, parts_dir
from storage.reader import cursor, kpi_summary, latest_run_id, open_run_file
from storage.schema import (
    ADDED_IN,
    COST_COLUMNS,
    V5_COLUMNS,
    V6_COLUMNS,
    V7_COLUMNS,
    V8_COLUMNS,
    V9_COLUMNS,
    columns,
    migrations,
)
from tests.test_outputs_safety import TOML, copy_recording, invoke
from twin.spec.telemetry import SCHEMA_VERSION, TABLES

# The schema versions before the parts (v11): every one this project has written.
OLD_VERSIONS = list(range(1, SCHEMA_VERSION))


@pytest.fixture(scope="module")
def recording(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from scenarios.runner import run
    from scenarios.spec import parse

    out = tmp_path_factory.mktemp("rec") / "a" / "r.duckdb"
    out.parent.mkdir()
    run(parse(TOML, "tiny.toml"), TOML, out, duration_s=3600)
    return out


def added_after(version: int) -> set[tuple[str, str]]:
    """The (table, column) pairs of tables a file of ``version`` has that later versions added."""
    out: set[tuple[str, str]] = set()
    if version < 2:  # calendar time: runs.start and every first-release time series' ts
        out |= {(t, c.name) for t in TABLES if t not in ADDED_IN for c in columns(t)[len(TABLES[t]) :]}
    if version < 4:
        out |= {("factory_ts", c) for c in COST_COLUMNS}
    steps = ((5, V5_COLUMNS), (7, V7_COLUMNS), (8, V8_COLUMNS), (9, V9_COLUMNS))
    for v, pairs in steps:
        if version < v:
            out |= set(pairs)
    if version < 6:
        out |= {(t, c) for t, names in V6_COLUMNS.items() for c in names}
    return out


def old_file(src: Path, dest: Path, version: int) -> Path:
    """``src`` (a current recording) as a file of schema ``version`` would hold it."""
    con = duckdb.connect(str(dest))
    for stmts in migrations()[:version]:
        for s in stmts:
            con.execute(s)
    # A version's own summary views read its own columns: these (this version's) would not bind.
    for view in ("run_summary", "cost_by_day", "system_summary"):
        con.execute(f"DROP VIEW IF EXISTS {view}")
    for table, col in sorted(added_after(version)):
        con.execute(f"ALTER TABLE IF EXISTS {table} DROP COLUMN IF EXISTS {col}")
    con.execute(
        "INSERT OR REPLACE INTO twin_meta VALUES ('schema_version', ?), ('format', 'ai-factory-twin')",
        [str(version)],
    )
    con.execute(f"ATTACH '{src}' AS src (READ_ONLY)")
    have = {
        str(t): []
        for (t,) in con.sql(
            "SELECT table_name FROM duckdb_tables() WHERE database_name = ?", params=[dest.stem]
        ).fetchall()
    }
    for t, c in con.sql(
        "SELECT table_name, column_name FROM duckdb_columns() WHERE database_name = ? ORDER BY column_index",
        params=[dest.stem],
    ).fetchall():
        if str(t) in have:
            have[str(t)].append(str(c))
    for table, cols in have.items():
        if table in TABLES:
            names = ", ".join(cols)
            con.execute(
                f'INSERT INTO "{dest.stem}".main.{table} ({names}) SELECT {names} FROM src.main.{table}'
            )
    con.execute("DETACH src")
    con.close()
    return dest


def digest(p: Path) -> str:
    return hashlib.sha256(p.read_bytes()).hexdigest()


@pytest.fixture(scope="module")
def old_files(recording: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[int, Path]:
    d = tmp_path_factory.mktemp("old")
    return {v: old_file(recording, d / f"v{v}.duckdb", v) for v in OLD_VERSIONS}


def test_the_fixtures_hold_each_versions_layout(old_files: dict[int, Path]) -> None:
    """The old files are what the versions wrote: their time series are tables, the tables a later
    version added are absent, a column a later version added is missing."""
    for v, f in old_files.items():
        con = duckdb.connect(str(f), read_only=True)
        try:
            tables = {str(r[0]) for r in con.sql("SELECT table_name FROM duckdb_tables()").fetchall()}
            factory = {
                str(r[0])
                for r in con.sql(
                    "SELECT column_name FROM duckdb_columns() WHERE table_name = 'factory_ts'"
                ).fetchall()
            }
            n = con.sql("SELECT count(*) FROM factory_ts").fetchall()[0][0]
        finally:
            con.close()
        assert n == 12  # an hour at 300 s steps
        assert set(PART_TABLES) - tables == {t for t, added in ADDED_IN.items() if added > v}
        assert ("heat_stored_w" in factory) == (v >= 8) and ("ts" in factory) == (v >= 2)


@pytest.mark.parametrize("version", OLD_VERSIONS)
def test_every_read_command_opens_an_old_file_read_only(
    version: int, old_files: dict[int, Path], recording: Path, tmp_path: Path
) -> None:
    f = old_files[version]
    before = digest(f)
    code, out, err = invoke("sql", f, "SELECT count(*) AS n, max(time_s) AS t FROM factory_ts")
    assert code == 0 and "12" in out and "3300" in out, err
    # Every table of this version answers with every column of this version.
    con = open_run_file(f)
    try:
        for table in TABLES:
            got = [str(r[0]) for r in con.sql(f"DESCRIBE {table}").fetchall()]
            assert got == [c.name for c in columns(table)], table
        # The energy of a step is in every version: the whole-run KPIs of both files agree on it.
        run_id = latest_run_id(con)
        old = kpi_summary(con, run_id)
    finally:
        con.close()
    con = open_run_file(recording)
    try:
        new = kpi_summary(con, run_id)
    finally:
        con.close()
    assert old["facility_mwh"] == pytest.approx(new["facility_mwh"], rel=1e-12)
    if version == SCHEMA_VERSION - 1:  # every column of this version's time series: every KPI
        # (a sum over a table and over parts may add in another order: equal to the last bits)
        assert old.keys() == new.keys()
        for k, v in new.items():
            assert old[k] == (pytest.approx(v, rel=1e-12) if isinstance(v, float) else v), k
    code, out, err = invoke("report", f, "--out", tmp_path / "r.html")
    assert code == 0 and (tmp_path / "r.html").stat().st_size > 0, err
    code, out, err = invoke("compare", f, recording)
    assert code == 0, err
    code, out, err = invoke("export", f, tmp_path / "pq")
    assert code == 0 and any((tmp_path / "pq").iterdir()), err
    assert digest(f) == before
    assert not [p for p in f.parent.iterdir() if p.name.startswith(f.name + ".")]  # nothing beside it


def test_an_old_file_replays(old_files: dict[int, Path], recording: Path) -> None:
    """The replay's feed, its panels' cursors and its SQL console read an old file as this schema."""
    from tui.console.core import Console

    con = open_run_file(recording)
    try:
        rows = con.sql("SELECT count(*) FROM row_ts").fetchall()[0][0]
    finally:
        con.close()
    assert rows > 0

    for v in (1, 9, 10):
        con = open_run_file(old_files[v])
        try:
            console = Console(
                on_tick=lambda *a: None,
                on_panels=lambda *a: None,
                replay_con=con,
                replay_run_id=latest_run_id(con),
                replay_path=str(old_files[v]),
            )
            assert console.replay is not None and console.replay.n == 12
            cur = console.new_cursor()
            try:
                assert cur.sql("SELECT count(heat_stored_w), count(*) FROM factory_ts").fetchall() == [
                    (12 if v >= 8 else 0, 12)
                ]
                assert cur.sql("SELECT count(*) FROM row_ts").fetchall() == [(rows if v >= 3 else 0,)]
            finally:
                cur.close()
            res = console.user_sql.run("SELECT facility_mwh FROM run_summary")
            assert res.table.num_rows == 1
        finally:
            con.close()


def moved(recording: Path, tmp_path: Path) -> Path:
    """``mv a/r.duckdb a/r.duckdb.parts b/``: the recording in another folder, the old one gone."""
    b = tmp_path / "b"
    b.mkdir()
    return copy_recording(recording, b / recording.name)


def test_a_moved_recording_reads_from_every_cursor(recording: Path, tmp_path: Path) -> None:
    """A recording moved with its parts folder: the replay's panel cursors and SQL console read
    the parts where they are now (a cursor is a connection of its own, which the connection's
    temporary views did not reach), and the stored summary views too."""
    from tui.console.core import Console

    # Read from the copy, the views stored in it name the parts of the original, outside the
    # only folder the reader may read.
    b = moved(recording, tmp_path)
    con = open_run_file(b)
    try:
        expect = con.sql("SELECT count(*), sum(it_power_w) FROM factory_ts").fetchall()
        assert expect[0][0] == 12
        console = Console(
            on_tick=lambda *a: None,
            on_panels=lambda *a: None,
            replay_con=con,
            replay_run_id=latest_run_id(con),
            replay_path=str(b),
        )
        cur = console.new_cursor()
        try:
            assert cur.sql("SELECT count(*), sum(it_power_w) FROM factory_ts").fetchall() == expect
            assert cur.sql("SELECT count(*) FROM run_summary").fetchall() == [(1,)]
        finally:
            cur.close()
        res = console.user_sql.run("SELECT count(*) AS n FROM ultraserver_ts")
        assert res.table.column("n").to_pylist()[0] > 0
        assert con.sql("SELECT count(*) FROM run_summary").fetchall() == [(1,)]
    finally:
        con.close()


def test_a_cursor_of_a_plain_connection_is_a_cursor(recording: Path) -> None:
    con = open_run_file(recording)
    try:
        cur: Any = cursor(con)
        assert cur.sql("SELECT count(*) FROM factory_ts").fetchall() == [(12,)]
        cur.close()
    finally:
        con.close()
    assert parts_dir(recording).is_dir()
