"""Check that a recording opens with a DuckDB 1.x reader (the newest 1.x on the package registry).

Records a short run of the built-in ``default`` scenario (or uses FILE), installs ``duckdb<2`` into a
temporary virtualenv (or uses ``--python`` with one already installed), and reads every table's
row count and a column comment there, comparing them with what this DuckDB reads.

    python bench/check_duckdb1.py [FILE] [--python /path/to/python-with-duckdb-1.x]

Exit 0 when the 1.x reader agrees, 1 when it does not, 2 when no 1.x reader could be set up.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import venv
from pathlib import Path

import duckdb

_READER = r"""
import json, sys, duckdb
con = duckdb.connect(sys.argv[1], read_only=True)
tables = [r[0] for r in con.sql(
    "SELECT table_name FROM duckdb_tables() WHERE database_name = current_database() UNION ALL "
    "SELECT view_name FROM duckdb_views() WHERE database_name = current_database() AND NOT internal "
    "ORDER BY 1").fetchall()]
out = {"version": duckdb.__version__,
       "rows": {t: con.sql(f"SELECT count(*) FROM {t}").fetchall()[0][0] for t in tables},
       "comment": con.sql("SELECT comment FROM duckdb_columns() WHERE table_name = 'factory_ts' "
                          "AND column_name = 'it_power_w'").fetchall()[0][0],
       "pue": con.sql("SELECT pue FROM run_summary").fetchall()[0][0]}
print(json.dumps(out))
"""


def duckdb1_python(tmp: Path) -> Path:
    env = tmp / "duckdb1"
    venv.create(env, with_pip=True)
    py = env / "bin" / "python"
    subprocess.run([str(py), "-m", "pip", "install", "-q", "duckdb<2"], check=True, timeout=600)
    return py


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("file", nargs="?", help="recording to check (default: record a 2-hour run)")
    ap.add_argument("--python", help="a Python interpreter that has duckdb 1.x installed")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as d:
        tmp = Path(d)
        if args.file:
            path = Path(args.file)
        else:
            from scenarios.runner import run
            from scenarios.spec import load

            spec, text, _ = load("default")
            path = tmp / "check.duckdb"
            run(spec, text, path, duration_s=2 * 3600)
        try:
            py = Path(args.python) if args.python else duckdb1_python(tmp)
        except (subprocess.SubprocessError, OSError) as e:
            print(f"could not set up a DuckDB 1.x reader: {e}", file=sys.stderr)
            return 2
        proc = subprocess.run(
            [str(py), "-c", _READER, str(path)], capture_output=True, text=True, timeout=600
        )
        if proc.returncode != 0:
            print(f"DuckDB 1.x could not read {path}:\n{proc.stderr.strip()}")
            return 1
        got = json.loads(proc.stdout)
        con = duckdb.connect(str(path), read_only=True)
        try:
            want = {t: con.sql(f"SELECT count(*) FROM {t}").fetchall()[0][0] for t in got["rows"]}
            pue = con.sql("SELECT pue FROM run_summary").fetchall()[0][0]
        finally:
            con.close()
        ok = got["rows"] == want and got["comment"] and abs(got["pue"] - pue) <= 1e-12 * abs(pue)
        print(
            f"DuckDB {got['version']} read {path.name}: {sum(got['rows'].values()):,} rows in "
            f"{len(got['rows'])} tables and views (the time series: views over FILE.parts), comment {got['comment']!r}, PUE {got['pue']:.4f} "
            f"(DuckDB {duckdb.__version__}: {pue:.4f}) -> {'ok' if ok else 'MISMATCH'}"
        )
        return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
