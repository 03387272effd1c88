"""No run is lost or misreported: kills during startup, a second run on a live file, SIGTERM, a
full disk and comparison scenarios with a bad variant.

Kills are exact: ``TWIN_CRASH_AT=<point>`` makes the process SIGKILL itself at a named point of
file creation or of a flush, and ``TWIN_STOP_AT=<point>`` makes it SIGSTOP itself there, so the
test acts at that moment (waiting on the stop, never on a clock) and then continues it."""

from __future__ import annotations

import gc
import multiprocessing
import os
import signal
import subprocess
import sys
from pathlib import Path

import duckdb
import pytest

from scenarios.runner import Session, run
from scenarios.spec import parse
from storage.errors import StorageError
from storage.parts import parts_dir
from storage.reader import open_run_file

TWIN = str(Path(sys.executable).parent / "twin")

TOML = """
name = "tiny"
seed = 5
dt_s = 300
duration_h = 12

[hall]
system = "trn3-gen2"
ultraservers = 1
ultraservers_per_row = 1
"""

# Every crash point of a run's start and first flushes, in order.
POINTS = (
    "session:writer",
    "create:start",
    "create:connected",
    "create:schema",
    "create:checkpointed",
    "create:closed",
    "create:old_wal_removed",
    "create:renamed",
    "writer:open",
    "flush:begin",
    "flush:parts",  # the parts written, the transaction that lists them not begun
    "flush:inserted",
    "flush:committed",
)


def _run_child(out: str, point: str, overwrite: bool) -> None:
    os.environ["TWIN_CRASH_AT"] = point
    spec = parse(TOML, "tiny.toml")
    run(spec, TOML, out, overwrite=overwrite, duration_s=3600)


def _state(path: Path) -> tuple[str, str, int, int] | None:
    """(run_id, status, sim_time_s, end of the last step in the tables) of a valid twin file."""
    if not path.exists():
        return None
    con = open_run_file(path)  # raises unless it is a valid twin run
    try:
        ((run_id, status, sim_t, dt),) = con.sql(
            "SELECT run_id, status, sim_time_s, dt_s FROM runs"
        ).fetchall()
        ((last,),) = con.sql("SELECT coalesce(max(time_s) + ?, 0) FROM factory_ts", params=[dt]).fetchall()
    finally:
        con.close()
    return run_id, status, sim_t, last


def _parts_beside(path: Path) -> tuple[set[str], set[str], set[str]]:
    """(files in FILE.parts, parts the file lists, run folders the file's runs may have) of a
    valid twin file; every path relative to FILE.parts."""
    d = parts_dir(path)
    on_disk = {str(f.relative_to(d)) for f in d.rglob("*") if not f.is_dir()} if d.exists() else set()
    con = open_run_file(path)
    try:
        listed = {str(r[0]) for r in con.sql("SELECT path FROM twin_parts").fetchall()}
        runs = {f"run_id={r[0]}" for r in con.sql("SELECT run_id FROM runs").fetchall()}
    finally:
        con.close()
    return on_disk, listed, runs


def _complete(out: Path, overwrite: bool) -> None:
    spec = parse(TOML, "tiny.toml")
    res = run(spec, TOML, out, overwrite=overwrite, duration_s=3600)
    assert res.status == "complete" and res.steps == 12


def test_kill_at_every_point_of_startup_leaves_no_file_or_a_valid_running_run(tmp_path: Path) -> None:
    ctx = multiprocessing.get_context("forkserver")
    ctx.set_forkserver_preload(["duckdb", "numpy", "pyarrow", "scenarios.runner", "scenarios.spec"])
    cases: list[tuple[str, bool, Path, tuple[str, str, int, int] | None]] = []
    for replace in (False, True):
        for i, point in enumerate(POINTS):
            if replace and not point.startswith(("session:", "create:")):
                continue  # after the rename, replacing and creating are the same
            out = tmp_path / f"{'replace' if replace else 'new'}-{i}.duckdb"
            if replace:
                _complete(out, overwrite=False)
            cases.append((point, replace, out, _state(out)))
    for k in range(0, len(cases), 4):  # a few killed runs at a time
        procs = [
            ctx.Process(target=_run_child, args=(str(out), point, replace))
            for point, replace, out, _ in cases[k : k + 4]
        ]
        for p in procs:
            p.start()
        for p, (point, *_) in zip(procs, cases[k : k + 4], strict=True):
            p.join()
            assert p.exitcode == -signal.SIGKILL, point
    valid = absent = 0
    for point, replace, out, old in cases:
        state = _state(out)  # a valid twin file, or none
        if state is None:
            absent += 1
            assert not replace, f"{point}: --overwrite lost the old file"
        else:
            valid += 1
            _, status, sim_t, last = state
            if state != old:  # the new run: recorded as running, up to what it committed
                assert status == "running" and sim_t == last, (point, state)
            with pytest.raises(StorageError, match="already exists"):
                Session(parse(TOML, "tiny.toml"), TOML, out)
            on_disk, listed, _ = _parts_beside(out)
            assert listed <= on_disk, f"{point}: a listed part is missing"  # (open_run_file checks)
            if point == "flush:parts":  # killed between writing the parts and listing them
                assert on_disk - listed, f"{point}: the unlisted parts should be there to clean up"
        # The next run is not blocked by anything the killed one left, and cleans up after it:
        # beside the file only its parts folder, holding exactly the parts it lists, in the
        # folder of its one run.
        _complete(out, overwrite=True)
        left = sorted(
            q.name
            for q in tmp_path.iterdir()
            if q.name.startswith(f".{out.name}") or q.name.startswith(f"{out.name}.")
        )
        assert left == [f"{out.name}.parts"], f"{point}: left {left}"
        on_disk, listed, runs = _parts_beside(out)
        assert on_disk == listed and len(runs) == 1, (point, on_disk - listed)
        assert {q.name for q in parts_dir(out).iterdir()} == runs, point
    assert len(cases) == len(POINTS) + sum(p.startswith(("session:", "create:")) for p in POINTS)
    assert valid + absent == len(cases)
    print(f"\nkills tried {len(cases)}, files valid {valid}, no file {absent}, invalid 0")


@pytest.fixture(autouse=True)
def _scenario_file(tmp_path: Path) -> None:
    (tmp_path / "x.toml").write_text(TOML)


def _stopped_run(tmp_path: Path, out: Path, point: str, *extra: str) -> subprocess.Popen[str]:
    env = dict(os.environ, TWIN_STOP_AT=point)
    p = subprocess.Popen(
        [TWIN, "run", str(tmp_path / "x.toml"), "--out", str(out), *extra],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    _, st = os.waitpid(p.pid, os.WUNTRACED)
    assert os.WIFSTOPPED(st), "the run did not reach its stop point"
    return p


def test_overwrite_never_deletes_a_file_a_live_run_is_writing(tmp_path: Path) -> None:
    out = tmp_path / "live.duckdb"
    first = _stopped_run(tmp_path, out, "flush:committed")  # holding its lock, one flush committed
    try:
        for extra, why in (
            (["--overwrite"], f"another run (process {first.pid}) is writing this file"),
            ([], "already exists"),
        ):
            r = subprocess.run(
                [TWIN, "run", str(tmp_path / "x.toml"), "--out", str(out), *extra],
                capture_output=True,
                text=True,
            )
            assert r.returncode == 2 and len(r.stderr.strip().splitlines()) == 1, r.stderr
            assert why in r.stderr
        with pytest.raises(StorageError, match="another run"):
            Session(parse(TOML, "tiny.toml"), TOML, out, overwrite=True)
    finally:
        os.kill(first.pid, signal.SIGCONT)
    _, err = first.communicate(timeout=300)
    assert first.returncode == 0, err
    _, status, sim_t, last = _state(out) or ("", "", 0, 0)
    assert status == "complete" and sim_t == last == 12 * 3600
    con = open_run_file(out)
    try:
        assert con.sql("SELECT count(*) FROM factory_ts").fetchall() == [(144,)]
    finally:
        con.close()
    assert not (tmp_path / "live.duckdb.lock").exists()


def test_sigterm_stops_a_run_like_ctrl_c(tmp_path: Path) -> None:
    out = tmp_path / "term.duckdb"
    p = _stopped_run(tmp_path, out, "flush:committed", "--days", "3650")
    os.kill(p.pid, signal.SIGTERM)
    os.kill(p.pid, signal.SIGCONT)
    _, err = p.communicate(timeout=300)
    assert p.returncode == 143
    assert err.strip() == f"twin: terminated (SIGTERM); telemetry so far is in {out} (status 'stopped')"
    _, status, sim_t, last = _state(out) or ("", "", 0, 0)
    assert status == "stopped" and 0 < sim_t == last < 3650 * 86400


def test_a_signal_while_a_run_closes_waits_for_the_close(tmp_path: Path) -> None:
    out = tmp_path / "closing.duckdb"
    p = _stopped_run(tmp_path, out, "close:begin")  # every step simulated, the file not closed yet
    os.kill(p.pid, signal.SIGTERM)
    os.kill(p.pid, signal.SIGCONT)
    _, err = p.communicate(timeout=300)
    assert p.returncode == 143
    assert err.strip() == f"twin: terminated (SIGTERM); telemetry so far is in {out} (status 'complete')"
    _, status, sim_t, last = _state(out) or ("", "", 0, 0)
    assert status == "complete" and sim_t == last == 12 * 3600
    assert not (tmp_path / "closing.duckdb.lock").exists()


def test_a_failed_write_records_what_was_committed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A write failing in the third flush (as on a full disk): the run is 'failed' and its
    sim_time_s is the end of the last step actually in the tables."""
    _fail_at(monkeypatch, 3, OSError(28, "No space left on device"))
    s = Session(parse(TOML, "tiny.toml"), TOML, tmp_path / "f.duckdb", flush_interval_s=3600)
    s.advance(10)
    s.writer.flush()
    s.advance(10)
    s.writer.flush()
    s.advance(10)
    with pytest.raises(StorageError, match="No space left"):
        s.writer.flush()
    with pytest.raises(StorageError, match="telemetry write failed"):
        s.close("complete")
    _, status, sim_t, last = _state(tmp_path / "f.duckdb") or ("", "", 0, 0)
    assert status == "failed" and sim_t == last == 20 * 300


def _fail_at(monkeypatch: pytest.MonkeyPatch, flush: int, error: BaseException) -> None:
    """Raise ``error`` once, in the ``flush``-th flush, after its parts are stored and its
    transaction holds its rows, before it commits."""
    import storage.writer as W

    real = W.crash_point
    seen = {"n": 0}

    def failing(name: str) -> None:
        real(name)
        if name == "flush:inserted":
            seen["n"] += 1
            if seen["n"] == flush:
                raise error

    monkeypatch.setattr(W, "crash_point", failing)


def test_a_failed_flush_that_merged_parts_keeps_every_listed_part(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The 16th flush merges the 16 single parts of a table into one before its transaction;
    when that transaction fails, the 16 parts are still the ones the file lists: they stay, the
    merged part goes, and the failed run reads back the 15 flushes committed (15 steps)."""
    from storage.live import FANOUT

    _fail_at(monkeypatch, FANOUT, OSError(28, "No space left on device"))
    out = tmp_path / "m.duckdb"
    s = Session(parse(TOML, "tiny.toml"), TOML, out, flush_interval_s=3600)
    for _ in range(FANOUT - 1):
        s.advance(1)
        s.writer.flush()
    s.advance(1)
    with pytest.raises(StorageError, match="No space left"):
        s.writer.flush()
    with pytest.raises(StorageError, match="telemetry write failed"):
        s.close("complete")
    _, status, sim_t, last = _state(out) or ("", "", 0, 0)
    assert status == "failed" and sim_t == last == (FANOUT - 1) * 300
    on_disk, listed, _ = _parts_beside(out)
    assert on_disk == listed, sorted(on_disk ^ listed)
    con = open_run_file(out)
    try:
        assert con.sql("SELECT count(*) FROM factory_ts").fetchall() == [(FANOUT - 1,)]
    finally:
        con.close()


def test_a_flush_retried_after_running_out_of_memory_stores_its_rows_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The writer retries a flush whose transaction ran out of memory (a console query may have
    held it); the parts stored for the first try are dropped with it, so every step's row is in
    the file once: 12 steps, 12 rows of factory_ts, 12 distinct times."""
    _fail_at(monkeypatch, 2, duckdb.OutOfMemoryException("Out of Memory Error: test"))
    out = tmp_path / "o.duckdb"
    s = Session(parse(TOML, "tiny.toml"), TOML, out, flush_interval_s=3600)
    for _ in range(3):
        s.advance(4)
        s.writer.flush()
    s.close("complete")
    con = open_run_file(out)
    try:
        assert con.sql("SELECT count(*), count(DISTINCT time_s) FROM factory_ts").fetchall() == [(12, 12)]
    finally:
        con.close()
    on_disk, listed, _ = _parts_beside(out)
    assert on_disk == listed, sorted(on_disk ^ listed)


def test_full_disk_leaves_a_truthful_failed_run(tmp_path: Path) -> None:
    """A real full disk (a 4 MB tmpfs): flushes of 100 steps until one fails; the run is 'failed'
    and its sim_time_s is the end of the last step the tables hold, which is at least every flush
    that went through."""
    disk = tmp_path / "disk"
    disk.mkdir()
    if (
        os.geteuid() != 0
        or subprocess.run(
            ["mount", "-t", "tmpfs", "-o", "size=4m", "tmpfs", str(disk)], capture_output=True
        ).returncode
        != 0
    ):
        pytest.skip("needs to mount a small tmpfs (root)")
    try:
        out = disk / "full.duckdb"
        s = Session(parse(TOML, "tiny.toml"), TOML, out, duration_s=3650 * 86400, flush_interval_s=3600)
        committed = 0
        with pytest.raises(StorageError, match="No space left on device"):
            for _ in range(2000):
                s.advance(100)
                s.writer.flush()
                committed = s.sim.t_s
        with pytest.raises(StorageError, match="telemetry write failed"):
            s.close("complete")
        _, status, sim_t, last = _state(out) or ("", "", 0, 0)
        assert status == "failed" and sim_t == last and committed <= sim_t < s.sim.t_s
        assert committed > 0, "the disk should hold a few flushes before it fills"
        assert not (disk / "full.duckdb.lock").exists()
        # No part cut short by the full disk, nor one the failed transaction never listed.
        on_disk, listed, _ = _parts_beside(out)
        assert on_disk == listed, sorted(on_disk - listed)
    finally:
        # A handle a background thread still holds makes a plain umount fail with EBUSY, and a
        # mount left behind breaks pytest's clean-up of old temporary folders: detach it lazily.
        gc.collect()
        if subprocess.run(["umount", str(disk)], capture_output=True).returncode != 0:
            subprocess.run(["umount", "-l", str(disk)], capture_output=True, check=False)


def test_comparison_checks_every_variant_before_writing(tmp_path: Path) -> None:
    toml = TOML + '\n[[variants]]\nname = "a"\n\n[[variants]]\nname = "b"\n'
    (tmp_path / "cmp.toml").write_text(toml)
    (tmp_path / "cmp-b.duckdb").write_text("in the way")
    r = subprocess.run(
        [TWIN, "run", str(tmp_path / "cmp.toml"), "--out", str(tmp_path / "cmp.duckdb")],
        capture_output=True,
        text=True,
    )
    assert r.returncode == 2 and "cmp-b.duckdb: already exists" in r.stderr
    assert not (tmp_path / "cmp-a.duckdb").exists()
    bad = TOML + '\n[[variants]]\nname = "a"\n\n[[variants]]\nname = "b"\nhardware = { chips = 143 }\n'
    (tmp_path / "bad.toml").write_text(bad)
    r = subprocess.run(
        [TWIN, "run", str(tmp_path / "bad.toml"), "--out", str(tmp_path / "bad.duckdb")],
        capture_output=True,
        text=True,
    )
    assert r.returncode == 2 and len(r.stderr.strip().splitlines()) == 1 and "b" in r.stderr, r.stderr
    assert sorted(p.name for p in tmp_path.iterdir() if p.name.startswith("bad")) == ["bad.toml"]


def test_stale_lock_file_of_a_killed_run_does_not_block(tmp_path: Path) -> None:
    out = tmp_path / "s.duckdb"
    (tmp_path / "s.duckdb.lock").write_text("12345\n")  # left by a run killed with SIGKILL
    _complete(out, overwrite=False)
    assert not (tmp_path / "s.duckdb.lock").exists()


def test_writer_tolerates_extra_run_columns(tmp_path: Path) -> None:
    from storage.writer import TelemetryWriter

    w = TelemetryWriter(tmp_path / "e.duckdb", {"run_id": "r", "not_a_column": 1, "seed": 3})
    w.close()
    con = duckdb.connect(str(tmp_path / "e.duckdb"), read_only=True)
    try:
        assert con.sql("SELECT run_id, seed, status FROM runs").fetchall() == [("r", 3, "complete")]
    finally:
        con.close()
