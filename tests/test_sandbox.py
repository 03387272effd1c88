"""The SQL sandbox: hostile SQL through the live console's path cannot read or write a file, change
a setting or stop the run; ``twin sql`` has a time and memory limit and Ctrl-C ends a query.

The attack set is generated from DuckDB's own catalog (every table function, pragma, setting and
every scalar or aggregate function taking text, called with a canary file's path) plus the
statements that touch files (COPY, ATTACH, EXPORT, IMPORT, INSTALL, LOAD, secrets, …) and the
attacks found against the console before it had a sandbox. Each probe runs in its own process
against a run being written (``tests/sandbox_probe.py``)."""

from __future__ import annotations

import multiprocessing
import os
import secrets
import signal
import subprocess
import sys
from collections import Counter
from pathlib import Path
from typing import Any

import duckdb
import pytest

from storage.errors import QueryError
from storage.reader import open_run_file, user_query
from storage.sandbox import Limits, parse_memory
from tests import sandbox_probe
from tests.sandbox_probe import files_under

TWIN = str(Path(sys.executable).parent / "twin")

# Found against the console's name-scanning guard on the writer's unrestricted connection.
KNOWN = [
    "SELECT * FROM json_execute_serialized_sql(json_serialize_sql('SELECT * FROM read_text(''{canary}'')'))",
    "SELECT * FROM histogram_values('{canary}', a)",
    "CALL enable_logging(storage='file', storage_path='{scratch}/log')",
    "SELECT * FROM enable_logging(storage='file', storage_path='{scratch}/log')",
    "SELECT write_log('x', level := 'error', log_type := 'x')",
    "SELECT * FROM enable_logging(storage='file', storage_path='{canary}')",
    "SELECT * FROM ducklake_snapshots('x')",
    "SELECT * FROM checkpoint()",
    "SELECT * FROM force_checkpoint()",
    "SELECT * FROM enable_profiling()",
    "CALL enable_profiling()",
    "PRAGMA enable_profiling",
    "SELECT * FROM query('SELECT * FROM read_text(''{canary}'')')",
    "SELECT * FROM read_text('{canary}')",
    "FROM '{canary}'",
    "SUMMARIZE '{canary}'",
    "DESCRIBE '{canary}'",
    "SELECT * FROM read_blob('{canary}')",
    "PRAGMA json_execute_serialized_sql(json_serialize_sql('SELECT * FROM read_text(''{canary}'')'))",
]

STATEMENTS = [
    "COPY factory_ts TO '{scratch}/out.csv'",
    "COPY (SELECT 1) TO '{scratch}/out.parquet' (FORMAT parquet)",
    "COPY factory_ts FROM '{canary}'",
    "EXPORT DATABASE '{scratch}/export'",
    "IMPORT DATABASE '{scratch}'",
    "ATTACH '{scratch}/new.duckdb' AS n",
    "ATTACH ':memory:' AS m",
    "ATTACH '{canary}' AS c (READ_ONLY)",
    "DETACH memory",
    "USE memory",
    "INSTALL httpfs",
    "FORCE INSTALL json",
    "LOAD httpfs",
    "LOAD '{scratch}/evil.duckdb_extension'",
    "CREATE SECRET s (TYPE s3, KEY_ID 'a', SECRET 'b')",
    "CREATE PERSISTENT SECRET p (TYPE s3, KEY_ID 'a', SECRET 'b')",
    "CHECKPOINT",
    "FORCE CHECKPOINT",
    "VACUUM",
    "ANALYZE",
    "BEGIN TRANSACTION",
    "SET VARIABLE v = 1",
    "CREATE MACRO evil(x) AS x",
    "CREATE TEMP TABLE t AS SELECT 1",
    "INSERT INTO runs (run_id) VALUES ('x')",
    "UPDATE runs SET status = 'failed'",
    "DELETE FROM factory_ts",
    "DROP TABLE jobs",
    "ALTER TABLE runs ADD COLUMN x INT",
    "PREPARE p AS SELECT 1",
    "SELECT 1; CHECKPOINT",
    "EXPLAIN ANALYZE SELECT * FROM read_text('{canary}')",
    "SELECT * FROM glob('{scratch}/*')",
    "SELECT * FROM duckdb_secrets()",
    "SELECT * FROM duckdb_logs",
    "SELECT current_setting('temp_directory')",
    "SELECT * FROM 'x.csv'",
    "SELECT * FROM read_csv('{canary}', header = false, columns = {{'a': 'VARCHAR'}})",
    # The recording's parts folder: DuckDB's file access reaches it, nothing may go beyond or into it.
    "SELECT * FROM read_text('{parts}/../../canary/canary.csv')",
    "SELECT * FROM read_text('{parts}/*/link.csv')",
    "SELECT * FROM read_csv('{parts}/*/table=factory_ts/link.parquet')",
    "SELECT * FROM read_text('{parts}/*/table=factory_ts/*')",
    "SELECT * FROM read_text('../canary/canary.csv')",
    "COPY (SELECT 1) TO '{parts}/w.csv'",
    "COPY factory_ts TO '{parts}/run_id=x' (FORMAT parquet, PARTITION_BY (time_s))",
    "SELECT * FROM glob('{parts}/**')",
]


def _catalog() -> dict[str, list[str]]:
    con = duckdb.connect()
    try:
        rows = con.sql(
            "SELECT DISTINCT function_name, function_type, list_contains(parameter_types, 'VARCHAR') "
            "FROM duckdb_functions() ORDER BY 1"
        ).fetchall()
        settings = [r[0] for r in con.sql("SELECT name FROM duckdb_settings() ORDER BY name").fetchall()]
    finally:
        con.close()
    table = sorted({n for n, t, _ in rows if t in ("table", "table_macro")})
    pragma = sorted({n for n, t, _ in rows if t == "pragma"})
    text = sorted({n for n, t, v in rows if t in ("scalar", "aggregate", "macro") and v and n.isidentifier()})
    return {"table": table, "pragma": pragma, "text": text, "settings": settings}


def _probes() -> list[tuple[str, list[str]]]:
    """(name, statements) per probe process: each known attack and file statement alone, the
    generated calls in groups (one run each; a group shares the before/after checks)."""
    cat = _catalog()
    out: list[tuple[str, list[str]]] = [(f"known-{i}", [s]) for i, s in enumerate(KNOWN)]
    out += [(f"statements-{i // 5}", STATEMENTS[i : i + 5]) for i in range(0, len(STATEMENTS), 5)]
    generated: list[str] = []
    for f in cat["table"]:
        generated += [
            f"SELECT * FROM {f}()",
            f"SELECT * FROM {f}('{{canary}}')",
            f"SELECT * FROM {f}('{{canary}}', '{{scratch}}/w-{f}')",
            f"SELECT * FROM {f}('{{canary}}', '{{parts}}/w-{f}')",
        ]
    for f in cat["pragma"]:
        generated += [f"PRAGMA {f}", f"PRAGMA {f}('{{canary}}')", f"CALL {f}('{{scratch}}/w-{f}')"]
    for n in cat["settings"]:
        generated += [
            f"SET {n} = '{{scratch}}/w-{n}'",
            f"SET GLOBAL {n} = 1",
            f"SET {n} = false",
            f"RESET {n}",
            f"PRAGMA {n} = '{{scratch}}/w-{n}'",
        ]
    generated += [f"SELECT {f}('{{canary}}')" for f in cat["text"]]
    size = 160
    out += [(f"generated-{i // size}", generated[i : i + size]) for i in range(0, len(generated), size)]
    return out


@pytest.fixture(scope="module")
def pool() -> Any:
    ctx = multiprocessing.get_context("forkserver")
    ctx.set_forkserver_preload(
        [
            "duckdb",
            "numpy",
            "pyarrow",
            "scenarios.runner",
            "scenarios.spec",
            "storage.reader",
            "tests.sandbox_probe",
        ]
    )
    with ctx.Pool(processes=2, maxtasksperchild=1) as p:
        yield p


def test_hostile_sql_through_the_live_console(tmp_path: Path, pool: Any) -> None:
    secret = secrets.token_hex(16)
    canary_dir = tmp_path / "canary"
    canary_dir.mkdir()
    canary = canary_dir / "canary.csv"
    canary.write_text(f"a\n{secret}\n")
    canary_before = files_under(canary_dir)
    probes = _probes()
    jobs = []
    for i, (_, stmts) in enumerate(probes):
        scratch, runs = tmp_path / f"s{i}", tmp_path / f"r{i}"
        scratch.mkdir()
        runs.mkdir()
        out = runs / "live.duckdb"
        sql = [s.format(canary=canary, scratch=scratch, parts=f"{out}.parts") for s in stmts]
        jobs.append((str(scratch), str(out), sql, str(canary)))
    results = pool.map(sandbox_probe.probe, jobs, chunksize=1)
    tally: Counter[str] = Counter()
    for (name, _), (scratch, out, sql, _), res in zip(probes, jobs, results, strict=True):
        assert res["error"] is None, f"{name}: {res['error']}"
        assert res["status"] == "complete" and res["steps"] == 12, f"{name}: the run did not complete: {res}"
        assert res["changed"] == [], f"{name}: settings changed: {res['changed']}"
        assert files_under(Path(scratch)) == {}, f"{name}: wrote {sorted(files_under(Path(scratch)))}"
        # The recording is its file and its parts folder (the live sidecar went with the run), and
        # the folder holds the parts the file lists and the planted links, nothing written by SQL.
        assert sorted(os.listdir(Path(out).parent)) == ["live.duckdb", "live.duckdb.parts"], (
            f"{name}: {os.listdir(Path(out).parent)}"
        )
        parts = Path(f"{out}.parts")
        in_folder = sorted(
            str(q.relative_to(parts)) for q in parts.rglob("*") if q.is_file() or q.is_symlink()
        )
        planted = {q for q in in_folder if q.endswith(("/link.csv", "/link.parquet"))}
        assert len(planted) == 2 and res["listed"], f"{name}: {in_folder}"
        assert [q for q in in_folder if q not in planted] == res["listed"], f"{name}: {in_folder}"
        for stmt, (kind, text), (e_kind, e_text) in zip(sql, res["outcomes"], res["engine"], strict=True):
            assert secret not in text, f"{name}: {stmt} read the canary: {text[:200]}"
            assert secret not in e_text, (
                f"{name}: {stmt} read the canary past DuckDB's sandbox: {e_text[:200]}"
            )
            tally["tried"] += 1
            if kind == "refused":
                tally["refused"] += 1
                tally["by the check" if text.startswith("refused") else "by DuckDB"] += 1
            else:
                tally["ran harmlessly"] += 1
            tally["engine refused" if e_kind == "refused" else "engine ran"] += 1
    assert files_under(canary_dir) == canary_before
    # The generated set is large: every table function and pragma, every setting, every text function.
    assert tally["tried"] > 1000
    print(
        f"\nattacks tried {tally['tried']}, refused {tally['refused']} "
        f"({tally['by the check']} by the statement check, {tally['by DuckDB']} by DuckDB), "
        f"ran without reaching a file or setting {tally['ran harmlessly']}; "
        f"with the statement-type check alone: DuckDB refused {tally['engine refused']}, "
        f"{tally['engine ran']} ran without reaching a file or setting; {len(probes)} probe processes"
    )


# ---------------------------------------------------------------------- the database itself
def test_writer_database_is_sandboxed_and_still_checkpoints(tmp_path: Path, small_scenario: Any) -> None:
    from scenarios.runner import Session

    spec, text = small_scenario
    out = tmp_path / "w.duckdb"
    s = Session(spec, text, out, flush_interval_s=0.05)
    try:
        cur = s.writer.cursor()
        got = dict(
            cur.sql(
                "SELECT name, value FROM duckdb_settings() WHERE name IN ('enable_external_access', "
                "'autoinstall_known_extensions', 'autoload_known_extensions', 'allow_community_extensions', "
                "'allow_unsigned_extensions', 'lock_configuration')"
            ).fetchall()
        )
        assert got == {
            "enable_external_access": "false",
            "autoinstall_known_extensions": "false",
            "autoload_known_extensions": "false",
            "allow_community_extensions": "false",
            "allow_unsigned_extensions": "false",
            "lock_configuration": "true",
        }
        with pytest.raises(duckdb.Error, match="locked"):
            cur.execute("SET enable_external_access = true")
        cur.close()
        # Arrow batches still go in (registered in-memory tables), and the WAL is checkpointed.
        s.advance(200)
        s.writer.flush()
        assert s.writer.rows_written > 0
    finally:
        s.close()
    assert not Path(str(out) + ".wal").exists()
    con = open_run_file(out)
    try:
        assert con.sql("SELECT count(*) FROM factory_ts").fetchall() == [(200,)]
        assert con.sql("SELECT status FROM runs").fetchall() == [("complete",)]
    finally:
        con.close()


def test_console_limits_time_and_memory(tmp_path: Path, small_scenario: Any) -> None:
    from scenarios.runner import Session

    spec, text = small_scenario
    limits = Limits(timeout_s=0.5, memory_bytes=parse_memory("64MB"))
    s = Session(spec, text, tmp_path / "l.duckdb", sql_limits=limits)
    try:
        s.advance(10)
        us = s.writer.user_sql
        assert us.limits.text() == "limits 0.5 s · 64 MB"
        with pytest.raises(QueryError, match=r"stopped at its 0\.5 s time limit"):
            us.run("SELECT count(*) FROM range(1000000000000)")
        with pytest.raises(QueryError, match="more memory than its 64 MB limit"):
            us.run("SELECT list(range) FROM range(100000000)")
        with pytest.raises(QueryError, match="more memory than its 64 MB limit"):
            us.run("SELECT max(x) FROM (SELECT range AS x FROM range(30000000) ORDER BY random())")
        # ... and the console and the writer keep working.
        assert us.run("SELECT count(*) AS n FROM factory_ts").table.column("n").to_pylist()[0] >= 0
        s.advance(10)
        s.writer.flush()
        assert us.run("SELECT count(*) AS n FROM factory_ts").table.column("n").to_pylist() == [20]
    finally:
        s.close()


def test_replay_and_twin_sql_share_the_sandbox(small_run: Path) -> None:
    con = open_run_file(small_run)
    try:
        for sql in ("SELECT * FROM read_text('/etc/hostname')", "SET threads = 1", "INSTALL httpfs"):
            with pytest.raises(QueryError):
                user_query(con, sql)
        assert con.sql("SELECT current_setting('lock_configuration')").fetchall() == [(True,)]
    finally:
        con.close()


# ---------------------------------------------------------------------- twin sql
def test_twin_sql_limits_and_messages(small_run: Path) -> None:
    r = subprocess.run(
        [TWIN, "sql", str(small_run), "--timeout", "0.3", "SELECT count(*) FROM range(1000000000000)"],
        capture_output=True,
        text=True,
    )
    assert (
        r.returncode == 2 and r.stderr.strip() == "twin: error: the query was stopped at its 0.3 s time limit"
    )
    r = subprocess.run(
        [TWIN, "sql", str(small_run), "--memory-limit", "64MB", "SELECT list(range) FROM range(100000000)"],
        capture_output=True,
        text=True,
    )
    assert (
        r.returncode == 2
        and "more memory than its 64 MB limit" in r.stderr
        and len(r.stderr.splitlines()) == 1
    )
    for args, key in ((["--timeout", "-1"], "--timeout"), (["--memory-limit", "lots"], "--memory-limit")):
        r = subprocess.run([TWIN, "sql", str(small_run), *args, "SELECT 1"], capture_output=True, text=True)
        assert (
            r.returncode == 2
            and r.stderr.startswith(f"twin: error: {key}")
            and len(r.stderr.splitlines()) == 1
        )
    help_ = subprocess.run([TWIN, "sql", "--help"], capture_output=True, text=True).stdout
    assert "[default: 60.0]" in help_ and "[default: 2GB]" in help_


def test_twin_sql_ctrl_c_ends_a_query_with_one_line(small_run: Path) -> None:
    env = dict(os.environ, TWIN_STOP_AT="sql:running")
    p = subprocess.Popen(
        [TWIN, "sql", str(small_run), "--timeout", "600", "SELECT count(*) FROM range(1000000000000)"],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    _, st = os.waitpid(p.pid, os.WUNTRACED)  # stopped just before the query runs
    assert os.WIFSTOPPED(st)
    os.kill(p.pid, signal.SIGINT)
    os.kill(p.pid, signal.SIGCONT)
    _, err = p.communicate(timeout=120)
    assert p.returncode == 130
    assert err.strip() == "twin: query cancelled (Ctrl-C)"


# ---------------------------------------------------------------------- the console, end to end
async def test_live_console_shows_its_limits_and_stops_at_them(tmp_path: Path, small_scenario: Any) -> None:
    """Through the app (F6, ctrl+r): the status line shows the limits; a query past the time limit
    ends with a message saying so; a file read is refused; the console and the run carry on."""
    import time

    from textual.widgets import TextArea

    from scenarios.runner import Session
    from tui.app import TwinApp
    from tui.widgets.arrowtable import ArrowTable

    spec, text = small_scenario
    s = Session(spec, text, tmp_path / "c.duckdb", sql_limits=Limits(timeout_s=0.5))
    app = TwinApp(session=s, config_dir=tmp_path / "cfg")

    async def wait(pilot: Any, cond: Any) -> None:
        deadline = time.monotonic() + 60
        while not cond():
            assert time.monotonic() < deadline, "condition not reached"
            await pilot.pause(0.05)

    def status() -> str:
        return str(app.screen.query_one("#sql-status").render())

    try:
        async with app.run_test(size=(100, 30)) as pilot:
            await wait(pilot, lambda: app.core.t is not None)
            await pilot.press("f6")
            assert "limits 0.5 s · 2 GB" in status()
            ed = app.screen.query_one("#editor", TextArea)
            for sql, want in (
                ("SELECT count(*) FROM range(1000000000000)", "stopped at its 0.5 s time limit"),
                ("SELECT * FROM read_text('/etc/hostname')", "refused"),
                ("SELECT * FROM checkpoint()", "refused"),
            ):
                ed.text = sql
                await pilot.press("ctrl+r")
                await wait(pilot, lambda: not app.screen.running)
                assert want in status(), (sql, status())
            ed.text = "SELECT count(*) AS n FROM factory_ts"
            await pilot.press("ctrl+r")
            await wait(pilot, lambda: not app.screen.running)
            assert app.screen.query_one("#result", ArrowTable).row_count == 1
    finally:
        s.close("stopped")
    con = open_run_file(tmp_path / "c.duckdb")
    try:
        assert con.sql("SELECT status FROM runs").fetchall() == [("stopped",)]
    finally:
        con.close()


async def test_sigterm_ends_a_live_session(tmp_path: Path, small_scenario: Any) -> None:
    import time

    from scenarios.runner import Session
    from tui.app import TwinApp

    spec, text = small_scenario
    s = Session(spec, text, tmp_path / "t.duckdb")
    app = TwinApp(session=s, config_dir=tmp_path / "cfg")
    try:
        async with app.run_test(size=(100, 30)) as pilot:
            deadline = time.monotonic() + 60
            while app.core.t is None:
                assert time.monotonic() < deadline
                await pilot.pause(0.05)
            # The app's loop handles SIGTERM (never the default action, which would end pytest).
            assert signal.getsignal(signal.SIGTERM) not in (signal.SIG_DFL, signal.SIG_IGN, None)
            os.kill(os.getpid(), signal.SIGTERM)
            while app.is_running and time.monotonic() < deadline:
                await pilot.pause(0.05)
            assert app.terminated and not app.is_running
    finally:
        s.close("stopped")


def test_twin_sql_reaches_the_recordings_parts_and_nothing_else(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A finished recording's connection may read FILE.parts (its views do): user SQL through
    ``twin sql`` still reads no file outside it (an absolute path, ``..``, a link planted inside
    it, a folder of a run's name in the working directory) and writes nothing into it."""
    from click.testing import CliRunner

    from storage.parts import parts_dir
    from storage.writer import TelemetryWriter
    from tests.test_writepath_rows import frame
    from tui.cli import main

    secret = secrets.token_hex(16)
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.csv").write_text(f"a\n{secret}\n")
    f = tmp_path / "rec" / "rec.duckdb"
    f.parent.mkdir()
    w = TelemetryWriter(f, {"run_id": "r1", "dt_s": 60})
    w.write({"factory_ts": frame("factory_ts", 5, seed=1)}, 300)
    w.close()
    parts = parts_dir(f)
    (parts / "run_id=r1" / "link.csv").symlink_to(outside / "secret.csv")
    (parts / "run_id=r1" / "table=factory_ts" / "link.parquet").symlink_to(outside / "secret.csv")
    (parts / "run_id=r9").symlink_to(outside, target_is_directory=True)  # a run folder that is a link
    # The working directory holds a folder of the run's name (DuckDB checks a relative name against
    # the working directory before it looks in the parts folder).
    decoy = tmp_path / "cwd"
    (decoy / "run_id=r1" / "table=factory_ts").mkdir(parents=True)
    (decoy / "run_id=r1" / "secret.csv").write_text(f"a\n{secret}\n")
    (decoy / "secret.csv").write_text(f"a\n{secret}\n")
    monkeypatch.chdir(decoy)
    before = files_under(parts, outside, decoy)

    def twin_sql(q: str) -> tuple[int, str]:
        r = CliRunner().invoke(main, ["sql", str(f), q], catch_exceptions=False)
        return r.exit_code, r.stdout + r.stderr

    code, out = twin_sql("SELECT count(*) AS n FROM factory_ts")
    assert code == 0 and "5" in out, out  # the views read the parts
    code, out = twin_sql(
        f"SELECT count(*) AS n FROM read_parquet('{parts}/*/table=factory_ts/part-*.parquet')"
    )
    assert code == 0 and "5" in out, out  # and so may user SQL, by the folder's absolute name
    for q in (
        "SELECT * FROM read_csv('/etc/passwd')",
        f"SELECT * FROM read_csv('{outside}/secret.csv')",
        "SELECT * FROM read_csv('../outside/secret.csv')",
        "SELECT * FROM read_csv('../../outside/secret.csv')",
        f"SELECT * FROM read_csv('{parts}/../outside/secret.csv')",
        f"SELECT * FROM read_csv('{parts}/run_id=r1/../../../outside/secret.csv')",
        "SELECT * FROM read_csv('run_id=r1/link.csv')",
        f"SELECT * FROM read_csv('{parts}/run_id=r1/link.csv')",
        "SELECT * FROM read_csv('run_id=r1/table=factory_ts/link.parquet')",
        f"SELECT * FROM read_csv('{parts}/run_id=r9/secret.csv')",
        "SELECT * FROM read_csv('run_id=r9/secret.csv')",
        "SELECT * FROM read_csv('run_id=r1/secret.csv')",
        "SELECT * FROM read_csv('secret.csv')",
        f"SELECT * FROM read_csv('{decoy}/run_id=r1/secret.csv')",
    ):
        code, out = twin_sql(q)
        assert code == 2 and secret not in out, (q, out)
        assert "Permission" in out or "disabled" in out, (q, out)
    for q in (
        f"COPY (SELECT 1) TO '{parts}/w.csv'",
        f"COPY factory_ts TO '{parts}/run_id=r1/table=factory_ts/part-000000099-0.parquet'",
        "COPY (SELECT 1) TO 'run_id=r1/w.csv'",
        f"EXPORT DATABASE '{parts}/x'",
    ):
        code, out = twin_sql(q)
        assert code == 2 and "refused" in out, (q, out)
    assert files_under(parts, outside, decoy) == before
