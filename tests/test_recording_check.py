"""Every recording is checked before use (``storage.recording``), and a run's live manifest before
any path in it is touched (``storage.manifest.check_manifest``).

Every command that reads a recording (export, report, compare, rerun, replay, sql) answers a file
that is not one (cut short, damaged, empty, random bytes, SQLite, Parquet, DuckDB without
``twin_meta``, a future or unreadable schema version, a table missing, a pipe, a device, missing)
with exit code 2 and one line naming the file; a pipe never blocks. A tampered
``FILE.live/manifest.json`` is refused the same way, and never leads outside its folder."""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import duckdb
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from storage.live import LivePublisher, live_dir
from storage.manifest import MANIFEST
from storage.parts import parts_dir
from storage.reader import open_run_file
from storage.recording import HEADERS_END, RecordingError, check_recording
from tests.test_outputs_safety import TOML, copy_recording, invoke
from twin.spec.telemetry import SCHEMA_VERSION


@pytest.fixture(scope="module")
def recording(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from scenarios.runner import run
    from scenarios.spec import parse

    out = tmp_path_factory.mktemp("rec") / "good.duckdb"
    run(parse(TOML, "tiny.toml"), TOML, out, duration_s=3600)
    return out


def _duckdb_edit(src: Path, dest: Path, *sql: str) -> Path:
    copy_recording(src, dest)
    con = duckdb.connect(str(dest))
    for s in sql:
        con.execute(s)
    con.close()
    return dest


def _bad_files(good: Path, d: Path) -> dict[str, tuple[Path, str]]:
    """Name -> (file, what the one line must say)."""
    raw = good.read_bytes()
    out: dict[str, tuple[Path, str]] = {}

    def put(name: str, data: bytes, expect: str) -> None:
        (d / name).write_bytes(data)
        out[name] = (d / name, expect)

    put("cut100.duckdb", raw[:100], "cut short")
    put("half.duckdb", raw[: len(raw) // 2], "cut short")
    put("empty.duckdb", b"", "empty")
    put("random.duckdb", os.urandom(40_000), "not a DuckDB file")
    # The database headers (4096..12288) overwritten: the header's block size is nonsense.
    put("header.duckdb", raw[:4096] + b"\xff" * 8192 + raw[HEADERS_END:], "damaged")
    sq = d / "sqlite.duckdb"
    s = sqlite3.connect(sq)
    s.execute("CREATE TABLE t (x)")
    s.commit()
    s.close()
    out["sqlite"] = (sq, "not a DuckDB file")
    pq.write_table(pa.table({"x": [1]}), d / "parquet.duckdb")
    out["parquet"] = (d / "parquet.duckdb", "not a DuckDB file")
    con = duckdb.connect(str(d / "plain.duckdb"))
    con.execute("CREATE TABLE t (x INT)")
    con.close()
    out["no twin_meta"] = (d / "plain.duckdb", "no twin_meta")
    future = "UPDATE twin_meta SET value = '99' WHERE key = 'schema_version'"
    out["future schema"] = (_duckdb_edit(good, d / "future.duckdb", future), "schema v99 is newer")
    garbled = "UPDATE twin_meta SET value = 'v8x' WHERE key = 'schema_version'"
    out["unreadable version"] = (_duckdb_edit(good, d / "garbled.duckdb", garbled), "not a version number")
    gone = "DELETE FROM twin_meta WHERE key = 'schema_version'"
    out["no version"] = (_duckdb_edit(good, d / "noversion.duckdb", gone), "no schema version")
    drop = [f"DROP VIEW IF EXISTS {v}" for v in ("run_summary", "system_summary", "cost_by_day")] + [
        "DROP VIEW factory_ts"  # a time series is a view over the file's parts
    ]
    out["table missing"] = (_duckdb_edit(good, d / "notable.duckdb", *drop), "without its table factory_ts")
    out["directory"] = (d, "directory")
    out["device"] = (Path("/dev/zero"), "device")
    out["missing"] = (d / "nope.duckdb", "no such file")
    return out


COMMANDS: dict[str, Callable[[Path, Path], list[object]]] = {
    "export": lambda f, tmp: ["export", f, tmp / "pq"],
    "report": lambda f, tmp: ["report", f, "--out", tmp / "r.html"],
    "compare": lambda f, tmp: ["compare", f, f],
    "rerun": lambda f, tmp: ["rerun", f, "--out", tmp / "rr.duckdb"],
    "replay": lambda f, tmp: ["replay", f],
    "sql": lambda f, tmp: ["sql", f, "SELECT 1"],
}


@pytest.mark.parametrize("command", list(COMMANDS))
def test_a_file_that_is_not_a_recording_is_refused_in_one_line(
    command: str, recording: Path, tmp_path: Path
) -> None:
    bad = tmp_path / "bad"
    bad.mkdir()
    out = tmp_path / "out"
    out.mkdir()
    for name, (f, expect) in _bad_files(recording, bad).items():
        code, _, err = invoke(*COMMANDS[command](f, out))
        assert code == 2, (name, err)
        assert len(err.strip().splitlines()) == 1 and err.startswith("twin: error: "), (name, err)
        if name != "directory":  # Click names a folder argument itself
            assert str(f) in err and expect in err, (name, err)
        assert list(out.iterdir()) == [], name  # nothing written


def test_a_missing_parts_folder_or_part_is_one_line_naming_the_file_and_the_part(
    recording: Path, tmp_path: Path
) -> None:
    """A recording is FILE and FILE.parts: a file copied without its parts folder, or with a part
    it lists deleted, is refused by every command in one line naming the file and the part it
    lacks (never an empty or partial answer)."""
    con = open_run_file(recording)
    try:
        listed = sorted(str(r[0]) for r in con.sql("SELECT path FROM twin_parts").fetchall())
    finally:
        con.close()
    assert listed and all((parts_dir(recording) / rel).is_file() for rel in listed)  # the premise
    alone = tmp_path / "alone" / "r.duckdb"  # the file without its folder
    alone.parent.mkdir()
    shutil.copy(recording, alone)
    (tmp_path / "short").mkdir()
    short = copy_recording(recording, tmp_path / "short" / "r.duckdb")  # one part deleted
    gone = listed[-1]
    (parts_dir(short) / gone).unlink()
    out = tmp_path / "out"
    out.mkdir()
    for f in (alone, short):
        for command, args in COMMANDS.items():
            code, _, err = invoke(*args(f, out))
            assert code == 2, (command, err)
            assert len(err.strip().splitlines()) == 1 and err.startswith("twin: error: "), (command, err)
            assert str(f) in err and "is missing" in err, (command, err)
            # Without the folder, any part it lists is missing; else the one deleted.
            assert any(rel in err for rel in (listed if f == alone else [gone])), (command, err)
        assert list(out.iterdir()) == [], command  # nothing written


def test_a_damaged_block_is_one_line_naming_the_file(recording: Path, tmp_path: Path) -> None:
    """Blocks overwritten after intact headers: DuckDB finds the checksums wrong when it reads
    them, at opening or in the middle of a command; either way one line naming the file."""
    f = tmp_path / "damaged.duckdb"
    raw = bytearray(recording.read_bytes())
    for at in range(HEADERS_END, len(raw), 64 << 10):
        raw[at : at + 4096] = b"\x5a" * 4096
    f.write_bytes(bytes(raw))
    check_recording(f)  # the header and the size are intact: only reading finds the damage
    for command, args in COMMANDS.items():
        code, _, err = invoke(*args(f, tmp_path))
        assert code == 2 and len(err.strip().splitlines()) == 1 and str(f) in err, (command, err)
        assert "Corrupt database file" in err or "checksum" in err or "not a readable" in err, err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["damaged.duckdb"]


def test_a_pipe_never_blocks_a_command(tmp_path: Path) -> None:
    """A FIFO given as a recording is refused from its ``stat``, never opened: every command
    returns at once. The commands run in a child process (one, for a single start-up) whose
    timeout only guards the test against the old behaviour, a hang."""
    fifo = tmp_path / "pipe.duckdb"
    os.mkfifo(fifo)
    os.mkfifo(tmp_path / "pipe.parquet")
    calls = [[str(a) for a in args(fifo, tmp_path)] for args in COMMANDS.values()]
    calls.append(["sql", str(tmp_path / "pipe.parquet"), "SELECT 1"])
    child = (
        "import json, sys\n"
        "from click.testing import CliRunner\n"
        "from tui.cli import main\n"
        "for args in json.loads(sys.argv[1]):\n"
        "    r = CliRunner().invoke(main, args)\n"
        "    print(json.dumps([args[0], r.exit_code, r.stderr]), flush=True)\n"
    )
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[1])}
    r = subprocess.run(
        [sys.executable, "-c", child, json.dumps(calls)],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
        stdin=subprocess.DEVNULL,
    )
    answers = [json.loads(line) for line in r.stdout.splitlines()]
    assert len(answers) == len(calls), r.stderr
    for command, code, err in answers:
        assert code == 2 and "pipe (FIFO)" in err and len(err.strip().splitlines()) == 1, (command, err)


def test_the_checks_in_the_library(recording: Path, tmp_path: Path) -> None:
    assert check_recording(recording) == recording
    open_run_file(recording).close()
    with pytest.raises(RecordingError, match="cut short"):
        short = tmp_path / "short.duckdb"
        short.write_bytes(recording.read_bytes()[:-1])
        open_run_file(short)
    # A table the command does not need may be missing when it says so.
    f = _duckdb_edit(recording, tmp_path / "nojobs.duckdb", "DROP TABLE jobs")
    with pytest.raises(RecordingError, match="without its table jobs"):
        open_run_file(f)
    open_run_file(f, tables=("runs", "factory_ts")).close()


# ---------------------------------------------------------------- the live manifest
@pytest.fixture
def live(recording: Path, tmp_path: Path) -> Path:
    """A sidecar as a running writer publishes it (the file itself absent): X.live/ with
    factory_ts parts and a manifest naming X."""
    con = open_run_file(recording)
    try:
        run = con.sql("SELECT * FROM runs").to_arrow_table().to_pylist()[0]
        factory = con.sql("SELECT * FROM factory_ts").to_arrow_table()
    finally:
        con.close()
    path = tmp_path / "x.duckdb"
    pub = LivePublisher(path)
    pub.on_commit({"factory_ts": factory}, run)
    assert pub.error is None
    return path


def _tamper(path: Path, change: Callable[[dict[str, Any]], object]) -> None:
    f = live_dir(path) / MANIFEST
    m = json.loads(f.read_text())
    new = change(m)
    f.write_text(new if isinstance(new, str) else json.dumps(m if new is None else new))


def _set(key: str, value: object) -> Callable[[dict[str, Any]], None]:
    return lambda m: m.__setitem__(key, value)


def _run(key: str, value: object) -> Callable[[dict[str, Any]], None]:
    return lambda m: m["run"].__setitem__(key, value)


def _part(value: object) -> Callable[[dict[str, Any]], None]:
    return lambda m: m["tables"].__setitem__("factory_ts", [value])


TAMPERED: dict[str, tuple[Callable[[dict[str, Any]], object], str]] = {
    "not JSON": (lambda m: "{oops", "unreadable live manifest"),
    "a JSON list": (lambda m: [m], "not an object"),
    "deeply nested": (lambda m: "[" * 100_000 + "]" * 100_000, "unreadable live manifest"),
    "unknown key": (_set("extra", 1), "unknown key 'extra'"),
    "no run": (lambda m: {k: v for k, v in m.items() if k != "run"}, "no 'run'"),
    "run not an object": (_set("run", 5), "run 5 is not an object"),
    "format": (_set("format", "something-else"), "not an AI Factory Twin live view"),
    "schema version true": (_set("schema_version", True), "schema_version True is not an integer"),
    "future schema": (_set("schema_version", SCHEMA_VERSION + 1), f"schema v{SCHEMA_VERSION + 1}"),
    "committed_s text": (_set("committed_s", "soon"), "committed_s 'soon' is not an integer or null"),
    "committed_s negative": (_set("committed_s", -5), "negative"),
    "run unknown column": (_run("evil", 1), "unknown column 'evil'"),
    "run wrong type": (_run("seed", "seven"), "run.seed 'seven'"),
    "run start not a date": (_run("start", "yesterday"), "not an ISO 8601"),
    "run seed too large": (_run("seed", 10**30), "out of the range of int64"),
    "tables not an object": (_set("tables", [1]), "tables [1] is not an object"),
    "unknown table": (lambda m: m["tables"].__setitem__("passwords", []), "unknown table 'passwords'"),
    "absolute part": (_part("/etc/passwd"), "not a part name"),
    "part with ..": (_part("table=factory_ts/../../../etc/passwd"), "not a part name"),
    "part not text": (_part(5), "not a part name"),
    "part missing": (_part("table=factory_ts/part-000000099-0.parquet"), "missing"),
}


@pytest.mark.parametrize("variant", list(TAMPERED))
def test_a_tampered_manifest_is_refused_before_any_path_in_it_is_used(live: Path, variant: str) -> None:
    code, out, err = invoke("sql", live, "SELECT count(*) AS n FROM factory_ts", "--format", "json")
    assert code == 0 and json.loads(out) == [{"n": 12}], err  # untampered: the published rows
    change, expect = TAMPERED[variant]
    _tamper(live, change)
    for args in (["sql", live, "SELECT 1"], ["compare", live, live], ["export", live, live.with_name("pq")]):
        code, _, err = invoke(*args)
        assert code == 2 and len(err.strip().splitlines()) == 1, (args, err)
        assert expect in err and "x.duckdb" in err, (args, err)
    assert not live.with_name("pq").exists()


def test_a_part_that_is_a_symbolic_link_is_refused(live: Path, tmp_path: Path) -> None:
    """Even a link to a real part: a link could lead anywhere."""
    d = live_dir(live)
    m = json.loads((d / MANIFEST).read_text())
    part = d / m["tables"]["factory_ts"][0]
    outside = tmp_path / "outside.parquet"
    shutil.move(part, outside)
    part.symlink_to(outside)
    code, _, err = invoke("sql", live, "SELECT count(*) FROM factory_ts")
    assert code == 2 and "not a plain file" in err and len(err.strip().splitlines()) == 1, err
    # A sidecar that is itself a link, and a manifest that is a pipe, are refused too (never read).
    part.unlink()
    shutil.move(outside, part)
    shutil.move(d, tmp_path / "elsewhere")
    d.symlink_to(tmp_path / "elsewhere")
    code, _, err = invoke("sql", live, "SELECT 1")
    assert code == 2 and len(err.strip().splitlines()) == 1, err
    d.unlink()
    shutil.move(tmp_path / "elsewhere", d)
    (d / MANIFEST).unlink()
    os.mkfifo(d / MANIFEST)
    from storage.errors import StorageError
    from storage.liveread import open_live

    with pytest.raises(StorageError, match="not a plain file"):
        open_live(live)


def test_free_blocks_cut_off_the_end_are_not_a_cut_file(tmp_path: Path) -> None:
    """A checkpoint after a large table is dropped cuts the freed blocks off the file's end but
    leaves the header's block count as it was (DuckDB 2.0: 82 blocks counted, 2 on disk). DuckDB
    reads such a file whole, so the check accepts it; the same file cut inside a block is still
    refused."""
    f = tmp_path / "trimmed.duckdb"
    con = duckdb.connect(str(f))
    con.execute("CREATE TABLE kept AS SELECT range AS x FROM range(100000)")
    con.execute("CHECKPOINT")
    con.execute("CREATE TABLE dropped AS SELECT range AS x, random() AS y FROM range(3000000)")
    con.execute("CHECKPOINT")
    con.execute("DROP TABLE dropped")
    con.execute("CHECKPOINT")
    con.close()
    raw = f.read_bytes()
    block_size, counted = 262144, None
    for off in (4096, 8192):  # the current database header: the higher iteration
        it, n, size = (int.from_bytes(raw[off + a : off + a + 8], "little") for a in (8, 32, 40))
        if counted is None or it > counted[0]:
            counted, block_size = (it, n), size
    assert counted is not None and (len(raw) - HEADERS_END) // block_size < counted[1]  # the premise
    assert check_recording(f) == f
    con = duckdb.connect(str(f), read_only=True)
    assert con.sql("SELECT count(*) FROM kept").fetchall() == [(100000,)]
    con.close()
    cut = tmp_path / "cut.duckdb"
    cut.write_bytes(raw[: len(raw) - block_size // 2])
    with pytest.raises(RecordingError, match="cut short"):
        check_recording(cut)
