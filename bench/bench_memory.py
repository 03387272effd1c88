"""Benchmark: memory over a long run (default scenario, 365 simulated days, telemetry written).

Prints the process's resident memory (RSS) at 10 % and at 100 % of the run, and the job table's
size against the jobs the run has had: memory stays flat because finished jobs leave the model
once they are written to the ``jobs`` table.

    python bench/bench_memory.py [--days 365] [--scenario default] [--samples 10] [--model-only]
                                 [--no-live] [--tracemalloc]
    python bench/bench_memory.py --upserts 1500 [--jobs 8000]

``--model-only`` runs the simulation without writing a file (the model's own memory); without it
the run writes its telemetry file and publishes its live view as ``twin live`` does, so the figure
includes DuckDB's block cache (bounded by the run database's own memory limit,
``storage.sandbox.WRITER_MEMORY``) and the live publisher. Each sample waits until what is queued
is written. The last line gives the growth from 10 % to 100 % and its slope per 30 simulated days
(a shorter ``--days`` run measures the slope quickly). RSS is read from /proc/self/status (Linux);
elsewhere the peak RSS from ``resource``.

``--upserts N``: the jobs table's part alone, without the model: N commits of a file's writer, each
rewriting ``--jobs`` waiting and running jobs (8,000: the default scenario's) and adding 60, as a
long ``twin run`` does (it commits every second of wall time), with a delete and an insert, then
as the writer does (DuckDB's INSERT OR REPLACE); RSS every N/5 commits and the slope per thousand
commits of each; the third way reopens the database every ``storage.writer.RECYCLE_COMMITS``
commits, as the writer does. ``--way delete|replace|reopen``: one of them (run each in a process of its own: what the
allocator holds after the first carries over to the second).
"""

from __future__ import annotations

import argparse
import math
import resource
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from scenarios.runner import Session
from scenarios.spec import load
from storage.sandbox import parse_memory
from twin.compose.hall import Hall
from twin.compose.sim import steps_for


def rss_mb() -> float:
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024.0
    except OSError:
        pass
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss  # KiB on Linux, bytes on macOS
    return peak / (1024.0 * 1024.0 if sys.platform == "darwin" else 1024.0)


def malloc_mb() -> tuple[float, float]:
    """glibc's heap: bytes in use and bytes free but held (fragmentation) [MB]; NaN elsewhere."""
    import ctypes
    import ctypes.util

    class MallInfo2(ctypes.Structure):
        _fields_ = [
            (n, ctypes.c_size_t)
            for n in (
                "arena",
                "ordblks",
                "smblks",
                "hblks",
                "hblkhd",
                "usmblks",
                "fsmblks",
                "uordblks",
                "fordblks",
                "keepcost",
            )
        ]

    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c"))
        libc.mallinfo2.restype = MallInfo2
        m = libc.mallinfo2()
    except (OSError, AttributeError):
        return math.nan, math.nan
    return (m.uordblks + m.hblkhd) / 2**20, m.fordblks / 2**20


def arrow_mb() -> float:
    """Bytes held by Arrow's memory pool [MB]."""
    import pyarrow as pa

    return pa.total_allocated_bytes() / 2**20


def duckdb_cache_mb(s: Session) -> float:
    """Memory the run's database holds (its block cache and buffers), from ``duckdb_memory()``."""
    cur = s.writer.cursor()
    try:
        return (
            float(cur.sql("SELECT sum(memory_usage_bytes) FROM duckdb_memory()").fetchall()[0][0] or 0)
            / 2**20
        )
    finally:
        cur.close()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--days", type=float, default=365.0)
    ap.add_argument("--scenario", default="default")
    ap.add_argument("--model-only", action="store_true", help="simulate without writing a file")
    ap.add_argument("--samples", type=int, default=10, help="RSS samples over the run (10 = every 10 %%)")
    ap.add_argument("--no-live", action="store_true", help="do not publish the live Parquet view")
    ap.add_argument(
        "--tracemalloc",
        action="store_true",
        help="also print the Python allocations that grew between the first sample and the end",
    )
    ap.add_argument("--upserts", type=int, default=0, metavar="N", help="the jobs table's commits alone")
    ap.add_argument("--jobs", type=int, default=8000, help="jobs rewritten per commit (--upserts)")
    ap.add_argument(
        "--way",
        choices=("delete", "replace", "reopen"),
        default=None,
        help="--upserts one way only (each in a process of its own: the allocator's state carries over)",
    )
    args = ap.parse_args()
    if args.upserts:
        ways = {
            "delete": ("delete and insert",),
            "replace": ("INSERT OR REPLACE",),
            "reopen": ("INSERT OR REPLACE, reopened",),
        }
        upserts(args.upserts, args.jobs, *([ways[args.way]] if args.way else []))
        return
    if not (args.days > 0 and args.days <= 3660 and 1 <= args.samples <= 1000):
        ap.error("--days: expected 0 < days <= 3660; --samples: 1 … 1000")
    spec, text, _ = load(args.scenario)
    if args.model_only:
        model_only(spec, args.days)
        return
    if args.tracemalloc:
        import tracemalloc

        tracemalloc.start(1)
    with tempfile.TemporaryDirectory() as d:
        s = Session(
            spec,
            text,
            Path(d) / "long.duckdb",
            duration_s=int(args.days * 86400),
            publish_live=not args.no_live,
        )
        total = s.total_steps
        marks = sorted({max(1, total * k // args.samples) for k in range(1, args.samples + 1)})
        print(
            f"{args.scenario}: {args.days:g} days = {total:,} steps of {s.params.dt_s} s, full telemetry"
            f"{'' if args.no_live else ' and the live view'}; RSS at start {rss_mb():.0f} MB"
        )
        done, t0 = 0, time.perf_counter()
        seen: list[tuple[float, float]] = []  # (days, RSS MB)
        snap = None
        try:
            for mark in marks:
                while done < mark:
                    n = min(s.chunk_steps, mark - done)
                    s.advance(n)
                    done += n
                s.writer.flush()  # what is queued is written: the sample holds no backlog
                jobs = s.sim.jobs
                days, rss = done * s.params.dt_s / 86400, rss_mb()
                seen.append((days, rss))
                print(
                    f"  {100 * done / total:5.0f} % ({days:6.1f} days, {time.perf_counter() - t0:6.0f} s wall): "
                    f"RSS {rss:6.0f} MB   DuckDB {duckdb_cache_mb(s):4.0f} MB   Arrow {arrow_mb():4.0f} MB   "
                    "malloc in use {:4.0f} MB, free {:4.0f} MB   ".format(*malloc_mb())
                    + f"job slots {jobs.n:,} for {jobs.next_id:,} jobs so far",
                    flush=True,
                )
                if args.tracemalloc and snap is None:
                    import tracemalloc

                    snap = tracemalloc.take_snapshot()
        finally:
            s.close()
        if args.tracemalloc and snap is not None:
            import tracemalloc

            print("  Python allocations grown since the first sample (top 10):")
            for st in tracemalloc.take_snapshot().compare_to(snap, "lineno")[:10]:
                print(f"    {st.size_diff / 2**20:+7.2f} MB {st.count_diff:+8d} blocks  {st.traceback[0]}")
    first = next(((dd, r) for dd, r in seen if dd >= seen[-1][0] / 10 - 1e-9), seen[0])
    last = seen[-1]
    if last[0] > first[0]:
        slope = (last[1] - first[1]) / (last[0] - first[0]) * 30
        print(
            f"  RSS {first[1]:.0f} MB at {first[0]:.1f} days, {last[1]:.0f} MB at {last[0]:.1f} days: "
            f"{last[1] - first[1]:+.0f} MB ({slope:+.1f} MB per 30 simulated days)"
        )


def upserts(
    commits: int,
    live: int,
    ways: tuple[str, ...] = ("delete and insert", "INSERT OR REPLACE", "INSERT OR REPLACE, reopened"),
) -> None:
    """RSS over ``commits`` commits rewriting ``live`` jobs each (module doc), each of ``ways``."""
    import numpy as np
    import pyarrow as pa

    from storage.database import init_schema as _init
    from storage.database import open_database, upsert_run
    from storage.sandbox import WRITER_MEMORY, Limits
    from storage.writer import _WITH_RUN_ID, RECYCLE_COMMITS
    from twin.spec.telemetry import TABLES

    for how in ways:
        with tempfile.TemporaryDirectory() as d:
            path, limits = Path(d) / "u.duckdb", Limits(memory_bytes=parse_memory(WRITER_MEMORY))
            con, _ = open_database(path, limits)
            _init(con)
            upsert_run(
                con, {c: None for c in (x.name for x in TABLES["runs"])} | {"run_id": "u", "start": None}
            )
            names = [c.name for c in TABLES["jobs"][1:]]
            lo, seen = 0, []
            for k in range(1, commits + 1):
                ids = np.arange(lo, lo + live, dtype=np.int64)
                tb = pa.table({n: ids if n == "job_id" else pa.nulls(live) for n in names})
                con.execute("BEGIN")
                for at in range(0, live, 4096):
                    con.register("_batch", tb.slice(at, 4096))
                    if how.startswith("INSERT OR REPLACE"):
                        con.execute(f"INSERT OR REPLACE INTO jobs BY NAME {_WITH_RUN_ID}", ["u"])
                    else:
                        con.execute(
                            "DELETE FROM jobs WHERE run_id = $1 AND EXISTS "
                            "(SELECT 1 FROM _batch WHERE jobs.job_id = _batch.job_id)",
                            ["u"],
                        )
                        con.execute(f"INSERT INTO jobs BY NAME {_WITH_RUN_ID}", ["u"])
                    con.unregister("_batch")
                con.execute("COMMIT")
                if how.endswith("reopened") and k % RECYCLE_COMMITS == 0:  # as the writer does
                    con.execute("CHECKPOINT")
                    con.close()
                    con, _ = open_database(path, limits)
                lo += 60
                if k % max(1, commits // 5) == 0:
                    seen.append((k, rss_mb()))
                    print(f"  {how}: {k:6,} commits  RSS {seen[-1][1]:6.0f} MB", flush=True)
            con.close()
        (k0, r0), (k1, r1) = seen[0], seen[-1]
        print(f"  {how}: {(r1 - r0) / max(k1 - k0, 1) * 1000:+.1f} MB per 1,000 commits")


def model_only(spec: Any, days: float) -> None:
    params = spec.to_params()
    sim = Hall(params)
    total = steps_for(int(days * 86400), params.dt_s)
    chunk = max(1, min(1440, 40_000 // params.hall.ultraservers))
    print(f"{spec.name} (model only): {days:g} days = {total:,} steps; RSS at start {rss_mb():.0f} MB")
    done, t0 = 0, time.perf_counter()
    for mark, label in ((max(1, total // 10), "10 %"), (total, "100 %")):
        while done < mark:
            n = min(chunk, mark - done)
            sim.advance(n)
            done += n
        print(
            f"  {label:>5} ({done * params.dt_s / 86400:6.1f} days, {time.perf_counter() - t0:6.0f} s wall): "
            f"RSS {rss_mb():6.0f} MB   job slots {sim.jobs.n:,} for {sim.jobs.next_id:,} jobs so far"
        )


if __name__ == "__main__":
    main()
