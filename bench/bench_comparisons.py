"""How busy each system of a built-in comparison runs, and whether its queue stays bounded.

    .venv/bin/python bench/bench_comparisons.py [--hours 48] [NAME ...] [--set KEY=VALUE ...]

For every comparison scenario (default: every built-in with [[variants]] or [[hall.rows]]) runs
each variant for ``--hours`` and prints, per variant and system, the mean share of its chips that
were busy and allocated, and the job queue (mean over the first and the last quarter of the run,
and at the end): a queue whose last quarter is far above its first is growing without bound.
Prints figures only; the fast structural checks live in tests/test_carry_over.py.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
from pathlib import Path

import duckdb

from scenarios import spec


def comparisons() -> list[str]:
    out = []
    for name in spec.builtin_names():
        s, _, _ = spec.load(name)
        if s.variants or any(len(h.rows) > 1 for h in s.hall_sections()):
            out.append(name)
    return out


def measure(name: str, hours: float, sets: list[str], tmp: Path) -> None:
    out = tmp / f"{name}.duckdb"
    cmd = [sys.executable, "-m", "tui.cli", "run", name, "--hours", str(hours), "--out", str(out)]
    cmd += ["--overwrite", *(a for s in sets for a in ("--set", s))]
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
    files = sorted(tmp.glob(f"{name}-*.duckdb")) or [out]
    for f in files:
        variant = f.stem.removeprefix(name).lstrip("-") or "-"
        con = duckdb.connect(str(f), read_only=True)
        try:
            q = con.sql("SELECT max(time_s) FROM factory_ts").fetchall()[0][0] / 4
            rows = con.sql(
                "SELECT system, avg(chips_busy::DOUBLE / chips_total), avg(chips_allocated::DOUBLE / chips_total)"
                " FROM system_ts GROUP BY ALL ORDER BY 1"
            ).fetchall()
            queue = con.sql(
                "SELECT avg(queue_jobs) FILTER (WHERE time_s <= $q),"
                " avg(queue_jobs) FILTER (WHERE time_s >= 3 * $q),"
                " arg_max(queue_jobs, time_s), avg(requests_dropped_per_s)"
                " FROM factory_ts",
                params={"q": q},
            ).fetchall()[0]
        finally:
            con.close()
        for system, busy, alloc in rows:
            print(f"{name:20} {variant:10} {system:14} busy {busy:6.1%}  allocated {alloc:6.1%}")
        print(
            f"{name:20} {variant:10} {'queue':14} first quarter {queue[0]:8.1f}  last quarter "
            f"{queue[1]:8.1f}  end {queue[2]:6d}  dropped req/s {queue[3]:.2f}"
        )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("names", nargs="*")
    ap.add_argument("--hours", type=float, default=48.0)
    ap.add_argument("--set", dest="sets", action="append", default=[])
    a = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="twin-bench-cmp-") as d:
        for name in a.names or comparisons():
            measure(name, a.hours, a.sets, Path(d))


if __name__ == "__main__":
    main()
