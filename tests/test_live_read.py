"""Reading a run while it is written: the live sidecar of committed Parquet parts, its sandbox, and
twin sql / compare / export on a file another process holds."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import duckdb
import pyarrow.parquet as pq
import pytest

import storage.live as live
from scenarios.runner import Session
from storage.live import live_dir
from storage.liveread import open_for_reading, open_live
from storage.manifest import MANIFEST
from storage.reader import open_run_file
from storage.schema import batch_schema
from tests.conftest import SMALL_TOML
from twin.spec.telemetry import TABLES

NUMERIC = ("int8", "int32", "int64", "float32", "float64")


def _stats(con: duckdb.DuckDBPyConnection, table: str) -> list[object]:
    nums = [c.name for c in TABLES[table] if c.dtype in NUMERIC and c.name != "sim_time_s"]
    aggs = ", ".join(f"count({n}), coalesce(sum({n}), 0)" for n in nums)
    return list(con.sql(f"SELECT count(*), {aggs} FROM {table}").fetchall()[0])


def test_the_live_view_holds_exactly_what_is_committed(
    tmp_path: Path,
    small_scenario,  # type: ignore[no-untyped-def]
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(live, "FANOUT", 4)  # merge early: parts of three levels in 40 commits
    spec, text = small_scenario
    path = tmp_path / "run.duckdb"
    s = Session(spec, text, path)
    for _ in range(40):
        s.advance(9)
        s.writer.flush()  # one commit each
    # The run's parts are the recording's own, in its folder of FILE.parts; the manifest names it.
    run_parts = tmp_path / "run.duckdb.parts" / f"run_id={s.writer.run_id}"
    manifest = json.loads((live_dir(path) / MANIFEST).read_text())
    assert manifest["dir"] == f"run.duckdb.parts/run_id={s.writer.run_id}"
    assert sorted(q.name for q in live_dir(path).iterdir()) == [MANIFEST]
    files = {t: len(list((run_parts / f"table={t}").glob("*.parquet"))) for t in ("factory_ts",)}
    r = open_live(path)
    try:
        assert r.in_progress and r.committed_s == 40 * 9 * spec.dt_s
        assert "run in progress" in r.note and "t=21,600 s" in r.note
        got = {t: _stats(r.con, t) for t in TABLES if t != "runs"}
        ((status,),) = r.con.sql("SELECT status FROM runs").fetchall()
        assert status == "running"
        ((dupes,),) = r.con.sql("SELECT count(*) - count(DISTINCT job_id) FROM jobs").fetchall()
        assert dupes == 0
        listed = manifest["tables"]["factory_ts"]
        assert len(listed) <= 3 * (4 - 1) + 1  # 40 commits in base 4: at most 3 parts per level
        # A merged part gathers its commits into row groups of up to ROW_GROUP_BYTES: these small
        # commits make one row group, not one per commit (a footer that grows with the run).
        merged = [n for n in listed if not n.endswith("-0.parquet")]
        assert merged
        for n in merged:
            assert pq.ParquetFile(run_parts / n).num_row_groups == 1, n
    finally:
        r.close()
    assert files["factory_ts"] >= len(listed)  # merged-away parts wait out their grace period
    snap = open_live(path, snapshot=True)  # the replay's copy outlives the sidecar
    s.close()
    assert not live_dir(path).exists()  # removed when the run closes
    # The parts the manifest listed stay as the recording's; those merged away are deleted.
    assert sorted(f"table=factory_ts/{q.name}" for q in (run_parts / "table=factory_ts").iterdir()) == sorted(
        listed
    )
    try:
        for t, want in got.items():
            assert _stats(snap.con, t) == pytest.approx(want, rel=1e-12), t
    finally:
        snap.close()
    con = open_run_file(path)
    try:
        for t, want in got.items():
            assert _stats(con, t) == pytest.approx(want, rel=1e-12), t
    finally:
        con.close()


def test_the_live_view_is_sandboxed_to_its_runs_parts(tmp_path: Path, small_scenario) -> None:  # type: ignore[no-untyped-def]
    """The live view reads the run's folder of FILE.parts and nothing else: not a file beside it,
    not the recording itself, not another run's folder, not through a link planted in its own."""
    from storage.errors import QueryError
    from storage.reader import user_query

    spec, text = small_scenario
    path = tmp_path / "run.duckdb"
    secret = tmp_path / "secret.csv"
    secret.write_text("a\n1\n")
    s = Session(spec, text, path)
    s.advance(30)
    s.writer.flush()
    run_parts = tmp_path / "run.duckdb.parts" / f"run_id={s.writer.run_id}"
    other = tmp_path / "run.duckdb.parts" / "run_id=other"  # another run's folder
    other.mkdir()
    (other / "x.csv").write_text("a\n2\n")
    (run_parts / "link.csv").symlink_to(secret)
    r = open_live(path)
    try:
        for q in (
            f"SELECT * FROM read_csv('{secret}')",
            "SELECT * FROM read_text('/etc/passwd')",
            f"SELECT * FROM read_csv('{run_parts}/../../secret.csv')",
            f"SELECT * FROM read_csv('{other}/x.csv')",
            f"SELECT * FROM read_csv('{run_parts}/link.csv')",
            f"SELECT * FROM read_blob('{path}')",
            "SELECT * FROM read_csv('../secret.csv')",
        ):
            with pytest.raises(QueryError, match=r"Permission|disabled"):
                user_query(r.con, q)
        for q in (
            "SET enable_external_access = true",
            f"ATTACH '{tmp_path / 'x.duckdb'}'",
            "CREATE TABLE t AS SELECT 1",
            f"COPY (SELECT 1) TO '{run_parts}/w.csv'",
        ):
            with pytest.raises(QueryError):
                user_query(r.con, q)
        # External tools read the parts directly.
        n = user_query(
            r.con, f"SELECT count(*) AS n FROM read_parquet('{run_parts}/table=factory_ts/*.parquet')"
        )
        assert n.to_pylist() == [{"n": 30}]
    finally:
        r.close()
        s.close()
    assert not (run_parts / "w.csv").exists()


def test_a_publishing_failure_does_not_fail_the_run(tmp_path: Path, small_scenario) -> None:  # type: ignore[no-untyped-def]
    import shutil

    spec, text = small_scenario
    path = tmp_path / "run.duckdb"
    s = Session(spec, text, path)
    s.advance(10)
    s.writer.flush()
    shutil.rmtree(live_dir(path))
    (live_dir(path)).write_text("in the way")  # the sidecar cannot be recreated
    s.advance(10)
    s.writer.flush()
    assert s.publisher is not None and s.publisher.error is not None
    s.close()
    con = open_run_file(path)
    try:
        assert con.sql(
            "SELECT count(*), any_value(status) FROM factory_ts JOIN runs USING (run_id)"
        ).fetchall() == [(20, "complete")]
    finally:
        con.close()


def _wait_for(cond, what: str, proc: subprocess.Popen[str]) -> None:  # type: ignore[no-untyped-def]
    while not cond():
        if proc.poll() is not None:
            raise AssertionError(f"the run ended before {what}: {proc.stderr.read() if proc.stderr else ''}")
        time.sleep(0.05)


def _invoke(*args: str) -> tuple[int, str, str]:
    from click.testing import CliRunner

    from tui.cli import main

    r = CliRunner().invoke(main, list(args), catch_exceptions=False)
    return r.exit_code, r.stdout, r.stderr


def test_twin_sql_compare_and_export_read_a_file_another_process_is_writing(tmp_path: Path) -> None:
    (tmp_path / "small.toml").write_text(SMALL_TOML)
    path = tmp_path / "long.duckdb"
    root = Path(__file__).resolve().parents[1]
    proc = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "from tui.cli import main; main()",
            "run",
            "small.toml",
            "--days",
            "3650",
            "--out",
            str(path),
        ],
        cwd=tmp_path,
        env={**os.environ, "PYTHONPATH": str(root)},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        manifest = live_dir(path) / MANIFEST

        def committed() -> int:
            try:
                return int(json.loads(manifest.read_text())["committed_s"] or 0)
            except (OSError, ValueError):
                return 0

        _wait_for(lambda: committed() > 0, "its first commit", proc)
        # The file itself is held by the writer.
        with pytest.raises(duckdb.Error):
            duckdb.connect(str(path), read_only=True).close()
        code, out, err = _invoke(
            "sql", str(path), "SELECT count(*) AS n, max(time_s) AS t FROM factory_ts", "--format", "json"
        )
        assert code == 0, err
        assert "run in progress" in err and "committed up to t=" in err
        ((row,),) = [json.loads(out)]
        # Whole steps from t = 0, none beyond the committed time.
        assert row["n"] == row["t"] // 60 + 1 and row["t"] < committed() + 1
        code, out, err = _invoke("compare", str(path), str(path))
        assert code == 0 and "run in progress" in err and "facility energy" in out
        code, out, err = _invoke("export", str(path), str(tmp_path / "pq"), "--tables", "factory_ts")
        assert code == 0 and "run in progress" in err
        assert proc.poll() is None  # still running all along
    finally:
        proc.kill()  # like kill -9: the sidecar stays behind, the file is readable again
        proc.communicate(timeout=60)
    r = open_for_reading(path)
    try:
        assert not r.in_progress  # the file itself, not the stale sidecar
        ((status,),) = r.con.sql("SELECT status FROM runs").fetchall()
        assert status == "running"
    finally:
        r.close()


def test_merged_job_parts_keep_each_jobs_newest_row(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A waiting or running job is published again at every commit that writes it. Sixteen
    commits of the same 50 jobs (done_flop = the commit's number), merged four at a time: every
    merged part holds each job once, with the newest of its commits' rows."""
    import pyarrow as pa

    from storage.live import LivePublisher
    from storage.schema import arrow_schema

    monkeypatch.setattr(live, "FANOUT", 4)
    pub = LivePublisher(tmp_path / "run.duckdb")
    schema = arrow_schema("jobs")
    for k in range(1, 17):
        cols = {f.name: pa.nulls(50, f.type) for f in schema}
        cols["run_id"] = pa.array(["r"] * 50)
        cols["job_id"] = pa.array(range(50), pa.int32())
        cols["done_flop"] = pa.array([float(k)] * 50)
        pub.on_commit({"jobs": pa.table(cols, schema=schema)}, {"run_id": "r"})
    assert pub.error is None
    parts = json.loads((live_dir(tmp_path / "run.duckdb") / MANIFEST).read_text())["tables"]["jobs"]
    assert parts and not any(n.endswith("-0.parquet") for n in parts)  # 16 commits: all merged
    for n in parts:
        tb = pq.read_table(live_dir(tmp_path / "run.duckdb") / n, columns=["job_id", "done_flop"])
        assert sorted(tb.column("job_id").to_pylist()) == list(range(50)), n
    last = pq.read_table(live_dir(tmp_path / "run.duckdb") / sorted(parts)[-1], columns=["done_flop"])
    assert set(last.column(0).to_pylist()) == {16.0}
    pub.close()


def test_a_commits_part_as_large_as_a_merged_row_group_is_never_merged(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Small commits merge four at a time (FANOUT 4 here); a commit whose part holds at least
    ROW_GROUP_BYTES stays as it was written (a merge would only copy its row groups into another
    file), and the small parts after it merge among themselves. Every committed row is listed
    exactly once, whatever merged."""
    import pyarrow as pa

    from storage.live import LivePublisher
    from storage.schema import arrow_schema

    schema = arrow_schema("factory_ts")
    t0 = 0

    def batch(n: int) -> pa.Table:
        nonlocal t0
        cols = {f.name: pa.nulls(n, f.type) for f in schema}
        cols["run_id"] = pa.array(["r"] * n)
        cols["time_s"] = pa.array(range(t0, t0 + n), pa.int64())
        t0 += n
        return pa.table(cols, schema=schema)

    monkeypatch.setattr(live, "FANOUT", 4)
    # "Large": the stored columns of a 100-row batch, whatever their width.
    monkeypatch.setattr(live, "ROW_GROUP_BYTES", batch(100).select(batch_schema("factory_ts").names).nbytes)
    t0 = 0
    pub = LivePublisher(tmp_path / "run.duckdb")
    sizes = [10, 10, 10, 10, 200, 10, 10, 10, 100, 10, 10, 10, 10, 300, 150]
    for n in sizes:
        pub.on_commit({"factory_ts": batch(n)}, {"run_id": "r"})
    assert pub.error is None
    listed = json.loads((live_dir(tmp_path / "run.duckdb") / MANIFEST).read_text())["tables"]["factory_ts"]
    # By commit (1-based): 1-4 merged (level 1, seq 4); 5 large; 6-8 small, stranded before the
    # large 9; 10-13 merged (seq 13); 14 and 15 large.
    want = ["part-000000004-1", "part-000000005-0"]
    want += [f"part-{k:09d}-0" for k in (6, 7, 8, 9)]
    want += ["part-000000013-1", "part-000000014-0", "part-000000015-0"]
    assert [n.split("/")[-1].removesuffix(".parquet") for n in listed] == want
    d = live_dir(tmp_path / "run.duckdb")
    got = sorted(t for n in listed for t in pq.read_table(d / n, columns=["time_s"]).column(0).to_pylist())
    assert got == list(range(sum(sizes)))
    pub.close()
