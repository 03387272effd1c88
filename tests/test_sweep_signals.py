"""A sweep owns its processes: a killed sweep takes its workers with it, SIGTERM stops the runs in
flight and records them, on the process pool and on Ray. Each test waits on conditions (a run file
appears, a process ends), never on a clock; the timeouts are guards against a hang only."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from bench.bench_sweep import alive, descendants
from scenarios import execution
from tests.conftest import SMALL_TOML

ROOT = Path(__file__).resolve().parents[1]
TWIN = str(Path(sys.executable).parent / "twin")
GUARD_S = 300  # a guard against a hang only: every wait below ends on a condition


def make_sweep(tmp_path: Path, points: int) -> Path:
    """A sweep whose runs last long (2,000 h each): they are in flight when the signal comes."""
    (tmp_path / "small.toml").write_text(SMALL_TOML)
    f = tmp_path / "sweep.toml"
    values = ", ".join(str(i) for i in range(1, points + 1))
    f.write_text(
        f'[sweep]\nscenario = "small.toml"\nhours = 2000\nseeds = [1]\n[sweep.grid]\n"hall.ultraservers" = [{values}]\n'
    )
    return f


def start(f: Path, out: Path, *args: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [TWIN, "sweep", str(f), "--out", str(out), *args],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,  # the test can always end everything it started
        cwd=ROOT,
    )


def wait_for_runs(proc: subprocess.Popen[str], out: Path, n: int) -> None:
    """Until n runs are past their start: each run file has its write-ahead log, which appears with
    the writer's first commit of steps (the run is in its loop of steps by then)."""
    end = time.monotonic() + GUARD_S
    while time.monotonic() < end and proc.poll() is None:
        if len(list((out / "runs").glob("*.duckdb.wal"))) >= n:
            return
        time.sleep(0.05)
    raise AssertionError(
        f"the sweep did not start {n} runs (exit {proc.poll()}): {proc.stderr.read() if proc.stderr else ''}"
    )


def wait_gone(procs: dict[int, str]) -> list[int]:
    end = time.monotonic() + GUARD_S
    while alive(procs) and time.monotonic() < end:
        time.sleep(0.02)
    return alive(procs)


def run_status(path: Path) -> str:
    """The status the run file records for its run (``running`` until the run closes it)."""
    from storage.reader import open_run_file

    con = open_run_file(path)
    try:
        return str(con.sql("SELECT status FROM runs").fetchall()[-1][0])
    finally:
        con.close()


def cleanup(proc: subprocess.Popen[str], procs: dict[int, str]) -> None:
    if proc.poll() is None:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
    for p in alive(procs):
        os.kill(p, signal.SIGKILL)
    if proc.stderr is not None:
        proc.stderr.close()


def test_kill_9_of_the_sweep_takes_its_workers_with_it(tmp_path: Path) -> None:
    f, out = make_sweep(tmp_path, 2), tmp_path / "out"
    proc = start(f, out, "-j", "2")
    procs: dict[int, str] = {}
    try:
        wait_for_runs(proc, out, 2)
        procs = descendants(proc.pid)
        assert len(procs) >= 2, procs  # two workers (and multiprocessing's resource tracker)
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        left = wait_gone(procs)
        assert not left, f"processes of the killed sweep still running: {left}"
    finally:
        cleanup(proc, procs)
    # Each worker got SIGTERM as the sweep died and closed its run as stopped: readable, marked.
    files = sorted((out / "runs").glob("*.duckdb"))
    assert len(files) == 2 and [run_status(p) for p in files] == ["stopped", "stopped"]
    assert not list((out / "points").glob("*.json"))  # nothing finished, nothing recorded


def test_sigterm_stops_the_runs_in_flight_and_records_them(tmp_path: Path) -> None:
    f, out = make_sweep(tmp_path, 3), tmp_path / "out"
    proc = start(f, out, "-j", "2")
    procs: dict[int, str] = {}
    try:
        wait_for_runs(proc, out, 2)
        procs = descendants(proc.pid)
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=GUARD_S)
        left = wait_gone(procs)
    finally:
        cleanup(proc, procs)
    assert proc.returncode == 143, err
    assert "terminated (SIGTERM)" in err and "2 stopped in flight" in err and "Traceback" not in err
    assert not left
    rows = pq.read_table(out / "results.parquet").to_pylist()
    # Two runs were in flight and stopped; the third was never handed out.
    assert sorted(r["status"] for r in rows) == ["pending", "stopped", "stopped"]
    for r in rows:
        if r["status"] == "stopped":
            assert run_status(Path(r["run_file"])) == "stopped"
    assert len(list((out / "points").glob("*.json"))) == 2
    assert not (out / "sweep.lock").exists()  # the folder's lock is given back


def test_sigterm_on_ray_stops_cleanly(tmp_path: Path) -> None:
    if execution.ray_missing():
        pytest.skip("ray is not installed (pip install -e '.[ray]')")
    f, out = make_sweep(tmp_path, 2), tmp_path / "out"
    proc = start(f, out, "-j", "2", "--backend", "ray")
    procs: dict[int, str] = {}
    try:
        wait_for_runs(proc, out, 2)
        procs = descendants(proc.pid)
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=GUARD_S)
        left = wait_gone(procs)
    finally:
        cleanup(proc, procs)
    # Ray's own SIGTERM handler would exit at once (or abort, 134, with a native stack dump).
    assert proc.returncode == 143, err
    assert "terminated (SIGTERM)" in err and "Aborted" not in err and "*** " not in err
    assert not left, f"Ray processes still running after the sweep ended: {left}"
    rows = pq.read_table(out / "results.parquet").to_pylist()
    assert [r["status"] for r in rows] == ["stopped", "stopped"]
    assert [run_status(Path(r["run_file"])) for r in rows] == ["stopped", "stopped"]
