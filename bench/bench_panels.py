"""How fast the replay console's panels answer on a recording (figures only, no pass/fail).

Opens FILE as ``twin replay`` does (``storage.liveread.open_for_reading``, the file's own sandbox) and
runs every panel query of the console (``storage.queries.TEMPLATES``, the SQL the replay sends to
the file; ``jobs`` and ``alarms`` with their default options) at several times spread over the run,
for the UltraServer and hall in the middle of the site, each query ``--rounds`` times. Prints per
panel the median and the worst answer time [ms] over all times and rounds, the rows returned, and
the share of panels whose median is under ``--target`` ms.

    python bench/bench_panels.py FILE [--times 5] [--rounds 3] [--target 200]

A 30-day campus recording to try it on:

    twin run ultracluster --days 30 -o uc30.duckdb
    python bench/bench_panels.py uc30.duckdb
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("file", help="a telemetry file (.duckdb)")
    ap.add_argument("--times", type=int, default=5, help="times spread over the run (default 5)")
    ap.add_argument("--rounds", type=int, default=3, help="runs of each query at each time (default 3)")
    ap.add_argument("--target", type=float, default=200.0, help="answer time to compare against [ms]")
    a = ap.parse_args()
    if a.times < 1 or a.rounds < 1:
        ap.error("--times and --rounds: expected at least 1")

    from storage import queries as Q
    from storage.liveread import open_for_reading
    from storage.reader import latest_run_id
    from tui.console.feed import PanelReq
    from tui.console.meta import DEFAULT_WINDOW_S, params_for
    from tui.console.replay import ReplayFeed

    reading = open_for_reading(a.file, snapshot=True)
    con = reading.con
    run_id = latest_run_id(con)
    feed = ReplayFeed(con, run_id, a.file)
    meta = feed.meta
    halls = max(1, meta.halls)
    hall = halls // 2
    lo, hi = meta.hall_span(hall) if meta.halls > 1 else (0, meta.ultraservers - 1)
    us = (lo + hi) // 2
    times = [
        feed.time_at(feed.t_first + (feed.t_last - feed.t_first) * (k + 1) / a.times) for k in range(a.times)
    ]
    us_rows = int(con.sql("SELECT count(*) FROM ultraserver_ts").fetchall()[0][0])
    print(
        f"{a.file}: {feed.n:,} steps of {meta.dt_s} s ({(feed.t_last - feed.t_first) / 86400:.1f} days), "
        f"{meta.ultraservers:,} UltraServers in {halls} hall(s), {us_rows:,} ultraserver_ts rows"
    )
    print(f"panels at {a.times} times x {a.rounds} rounds; UltraServer {us}, hall {hall}")
    extra: dict[str, Any] = {"us": us, "window_s": DEFAULT_WINDOW_S, "job": 0, "service_id": 0}
    if meta.halls > 1:
        extra["hall"] = hall
    results: list[tuple[str, float, float, int]] = []
    for name in ("jobs", *Q.TEMPLATES):
        if name in ("hall_floor", "hall_rows") and meta.halls <= 1:
            continue
        samples: list[float] = []
        n_rows = 0
        for t in times:
            req = PanelReq(name, name, params_for(meta, t, **extra))
            for _ in range(a.rounds):
                t0 = time.perf_counter()
                tb = con.sql(req.sql).to_arrow_table()
                samples.append((time.perf_counter() - t0) * 1e3)
                n_rows = tb.num_rows
        results.append((name, statistics.median(samples), max(samples), n_rows))
    print(f"{'panel':<16} {'median ms':>10} {'worst ms':>9} {'rows':>7}")
    for name, med, worst, n in results:
        flag = "" if med < a.target else f"  > {a.target:g} ms"
        print(f"{name:<16} {med:10.1f} {worst:9.1f} {n:7d}{flag}")
    under = sum(1 for r in results if r[1] < a.target)
    print(
        f"{under}/{len(results)} panels answer under {a.target:g} ms (median); "
        f"slowest median {max(r[1] for r in results):.1f} ms ({max(results, key=lambda r: r[1])[0]})"
    )
    con.close()


if __name__ == "__main__":
    main()
