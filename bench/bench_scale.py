"""Benchmark: the model at UltraCluster scale, with full telemetry recorded.

Five cases (all Trn3 Gen2 UltraServers; the first four the reference factory's workload mix scaled
with size, the last the built-in campus as it ships):

    us1000    1,000 UltraServers (144,000 chips), 24 h at dt 15 s
    million   6,944 UltraServers (999,936 chips), 24 h at dt 60 s
    ref30d    the reference factory (64 UltraServers, 9,216 chips), 30 days at dt 60 s
    dt1       9,216 chips, 24 h at dt 1 s
    campus    `ultracluster`: 16 halls, 6,945 UltraServers (1,000,080 chips), 24 h at dt 60 s
    campus-grid  the same with the grid connection and halls recorded every second
                 (``telemetry.grid_interval_s = 1``, table ``grid_ts``): its cost against ``campus``

For each case it prints CPU seconds, wall seconds, peak RSS, nanoseconds of CPU per chip-step,
and the writer ratio: the twin's write path (frames -> Arrow -> committed DuckDB transaction
through ``TelemetryWriter``) against a raw DuckDB Arrow insert of the same batches (1.0 = as fast
as raw). Every case runs in a child process of its own, so CPU and peak RSS are that run's alone
(``os.wait4`` rusage of the child); the writer ratio is measured in another child afterwards.

    python bench/bench_scale.py [--cases us1000,ref30d] [--scale 0.1] [--rev 3a97e44]

``--scale`` shrinks every duration (0.1 = a tenth of the simulated time; the sizes stay).
``--rev REV`` also runs the same cases against another git revision (checked out with
``git worktree`` into a temporary folder) and prints both side by side.
``--profile CASE`` prints a cProfile of one case and the time per model phase instead.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent

# name -> (UltraServers, dt_s, hours, label)
CASES: dict[str, tuple[int, int, float, str]] = {
    "us1000": (1000, 15, 24.0, "1,000 UltraServers (144,000 chips), 24 h, dt 15 s"),
    "million": (
        6944,
        60,
        24.0,
        "6,944 UltraServers (999,936 chips: a hall holds at most 1,000,000), 24 h, dt 60 s",
    ),
    "ref30d": (64, 60, 720.0, "reference factory (9,216 chips), 30 days, dt 60 s"),
    "dt1": (64, 1, 24.0, "9,216 chips, 24 h, dt 1 s"),
    "campus": (
        6945,
        60,
        24.0,
        "the built-in ultracluster campus: 16 halls, 6,945 UltraServers (1,000,080 chips), 24 h, dt 60 s",
    ),
    "campus-grid": (
        6945,
        60,
        24.0,
        "the ultracluster campus with 1 s grid recording (grid_ts), 24 h, dt 60 s",
    ),
}


# ---------------------------------------------------------------------------------------- child
def _scenario(case: str, scale: float) -> tuple[Any, str, int]:
    """The reference scenario resized for ``case``: arrivals and service replicas grow with the
    number of UltraServers so the hall stays as busy as the reference factory."""
    import tomllib

    from scenarios.facts import MAX_ARRIVALS_PER_DAY
    from scenarios.spec import load, validate

    nus, dt, hours, _ = CASES[case]
    if case in ("campus", "campus-grid"):  # the built-in scenario as it ships (its own intervals)
        _, text, _ = load("ultracluster")
        data = tomllib.loads(text)
        data.pop("warmup_h", None)  # the recorded run only, as every revision measures it
        if case == "campus-grid":  # and the grid connection's view at 1 s (twin.grid)
            data.setdefault("telemetry", {})["grid_interval_s"] = 1
        duration_s = max(dt, int(round(hours * 3600 * scale / dt)) * dt)
        data["duration_h"] = duration_s / 3600
        return validate(data, f"bench case {case}"), text, duration_s
    _, text, _ = load("reference")
    data = tomllib.loads(text)
    data.pop("warmup_h", None)  # the recorded run only, as every revision measures it
    k = nus / data["hall"]["ultraservers"]
    data["name"] = f"scale-{case}"
    data["hall"]["ultraservers"] = nus
    data["dt_s"] = dt
    # At most the scenario limit (the million-chip case asks ~130,000 a day; it gets the limit).
    data["training"]["arrivals_per_day"] = min(data["training"]["arrivals_per_day"] * k, MAX_ARRIVALS_PER_DAY)
    for s in data.get("services", []):
        s["replicas"] = max(1, int(round(s["replicas"] * k)))
        s["mean_requests_per_s"] = s["mean_requests_per_s"] * k
    duration_s = max(dt, int(round(hours * 3600 * scale / dt)) * dt)
    data["duration_h"] = duration_s / 3600
    return validate(data, f"bench case {case}"), text, duration_s


def _writer_ratio(
    frames_list: list[dict[str, dict[str, Any]]], d: Path, reps: int = 3
) -> tuple[float, float]:
    """Rows/s through ``TelemetryWriter`` / rows/s of a raw Arrow insert of the same batches.

    Raw: ``INSERT INTO t SELECT * FROM arrow_table``, the Arrow tables built beforehand (not timed),
    one transaction per batch, into a plain DuckDB file. Twin: frames in, committed out (Arrow
    conversion, the writer thread, its sandboxed database and its memory limit included). The two
    alternate ``reps`` times and each side's fastest is taken, so a busy machine slows both alike."""
    import duckdb

    from storage.schema import migrations
    from storage.writer import TelemetryWriter, to_arrow

    rows = sum(len(next(iter(c.values()))) for fr in frames_list for c in fr.values() if c)
    arrow = [{t: to_arrow(t, "bench", c) for t, c in fr.items()} for fr in frames_list]
    raw_s, twin_s, raw_cpu = float("inf"), float("inf"), float("inf")
    for rep in range(reps):
        con = duckdb.connect(str(d / f"raw{rep}.duckdb"))
        for stmts in migrations():
            for s in stmts:
                con.execute(s)
        t0, c0 = time.perf_counter(), time.process_time()
        for tables in arrow:
            con.execute("BEGIN")
            for name, tb in tables.items():
                if tb.num_rows == 0:
                    continue
                con.register("_b", tb)
                con.execute(f"INSERT INTO {name} SELECT * FROM _b")
                con.unregister("_b")
            con.execute("COMMIT")
        raw_s = min(raw_s, time.perf_counter() - t0)
        con.close()  # its last checkpoint (compression) is part of the cost
        raw_cpu = min(raw_cpu, time.process_time() - c0)
        run_row = {"run_id": "bench", "scenario_name": "bench", "seed": 0, "dt_s": 60}
        w = TelemetryWriter(d / f"twin{rep}.duckdb", run_row, if_exists="replace")
        t0 = time.perf_counter()
        for i, fr in enumerate(frames_list):
            w.write(fr, i)
        w.flush()
        twin_s = min(twin_s, time.perf_counter() - t0)
        w.close()
    return (rows / twin_s) / (rows / raw_s), raw_cpu


def _size(params: Any) -> tuple[int, int]:
    """(chips, UltraServers) of a hall or of every hall of a campus."""
    halls = params.halls or (params.hall,)
    pools = [r for h in halls for r in h.pools()]
    return sum(r.ultraservers * r.system.chips for r in pools), sum(r.ultraservers for r in pools)


def child(case: str, scale: float, out: Path, mode: str) -> None:
    """``mode`` "run": the case recorded to a file; "ratio": the writer ratio on a few chunks of
    the case's own frames (its own process, so the run's CPU figure holds the run alone)."""
    from scenarios.runner import run
    from scenarios.spec import build_simulation

    spec, text, duration_s = _scenario(case, scale)
    params = spec.to_params()
    chips, nus = _size(params)
    steps = -(-duration_s // params.dt_s)
    res: dict[str, Any] = {"case": case, "steps": steps, "chips": chips, "ultraservers": nus}
    with tempfile.TemporaryDirectory() as d:
        if mode == "run":
            c0, w0 = time.process_time(), time.perf_counter()
            r = run(spec, text, Path(d) / "run.duckdb", duration_s=duration_s)
            res["cpu_s"], res["wall_s"] = time.process_time() - c0, time.perf_counter() - w0
            res["pue"], res["facility_mwh"] = r.summary.get("pue"), r.summary.get("facility_mwh")
            (Path(d) / "run.duckdb").unlink()
        else:
            _, sim = build_simulation(spec)
            chunk = max(1, min(1440, 40_000 // nus))
            n = max(2, min(10, steps // chunk))
            # The time series, every tier (jobs and runs are upserts of a few rows).
            ts = ("factory_ts", "ultraserver_ts", "row_ts", "hall_ts", "service_ts", "chip_ts", "system_ts")
            frames = [{t: c for t, c in sim.advance(chunk).items() if t in ts} for _ in range(n)]
            res["writer_ratio"], raw_cpu = _writer_ratio(frames, Path(d))
            # DuckDB's own CPU to insert and store this run's time-series rows (raw Arrow inserts,
            # all threads), scaled from the chunks to the whole run: a floor under the case's CPU.
            res["db_floor_cpu_s"] = raw_cpu * steps / (chunk * n)
    out.write_text(json.dumps(res))


# ---------------------------------------------------------------------------------------- parent
def run_case(case: str, scale: float, root: Path, ratio: bool) -> dict[str, Any]:
    res = _run_child(case, scale, root, "run")
    if ratio:
        r = _run_child(case, scale, root, "ratio")
        res["writer_ratio"], res["db_floor_cpu_s"] = r["writer_ratio"], r["db_floor_cpu_s"]
    return res


def _run_child(case: str, scale: float, root: Path, mode: str) -> dict[str, Any]:
    with tempfile.NamedTemporaryFile(suffix=".json", delete=False) as f:
        out = Path(f.name)
    env = dict(os.environ, PYTHONPATH=str(root))
    # This script (not the revision's copy) drives the child, importing the revision's code.
    cmd = [sys.executable, str(Path(__file__).resolve()), "--child", case, "--scale", str(scale)]
    cmd += ["--out", str(out), "--root", str(root), "--mode", mode]
    p = subprocess.Popen(cmd, cwd=root, env=env)
    _, status, ru = os.wait4(p.pid, 0)
    p.returncode = os.waitstatus_to_exitcode(status)
    if p.returncode != 0:
        out.unlink(missing_ok=True)
        raise SystemExit(f"bench_scale: case {case} failed at {root} (exit {p.returncode})")
    res: dict[str, Any] = json.loads(out.read_text())
    out.unlink()
    res["proc_cpu_s"] = ru.ru_utime + ru.ru_stime  # whole process: imports, writer thread, model
    res["peak_rss_gb"] = ru.ru_maxrss * 1024 / 1e9  # Linux: kB
    return res


def _fmt(r: dict[str, Any]) -> str:
    ns = r["cpu_s"] / (r["chips"] * r["steps"]) * 1e9  # the run itself, imports excluded
    wr = f"{r['writer_ratio']:5.2f} {r['db_floor_cpu_s']:6.1f}" if "writer_ratio" in r else "   -      - "
    return f"{r['proc_cpu_s']:8.1f} {r['wall_s']:7.1f} {r['peak_rss_gb']:6.2f} {ns:7.1f} {wr}"


def worktree(rev: str) -> Path:
    d = Path(tempfile.gettempdir()) / f"twin-bench-{rev}"
    if not d.exists():
        subprocess.run(
            ["git", "-C", str(ROOT), "worktree", "add", "--detach", str(d), rev],
            check=True,
            stdout=subprocess.DEVNULL,
        )
    return d


def profile(case: str, scale: float) -> None:
    """cProfile of the model alone (no telemetry file) for ``case``, top functions by own time."""
    import cProfile
    import pstats

    from scenarios.spec import build_simulation

    spec, _, duration_s = _scenario(case, scale)
    params = spec.to_params()
    _, sim = build_simulation(spec)
    chips, nus = _size(params)
    steps = -(-duration_s // params.dt_s)
    chunk = max(1, min(1440, 40_000 // nus))
    pr = cProfile.Profile()
    done = 0
    c0 = time.process_time()
    pr.enable()
    while done < steps:
        n = min(chunk, steps - done)
        sim.advance(n)
        done += n
    pr.disable()
    cpu = time.process_time() - c0
    print(
        f"{case}: {steps} steps, model only under cProfile {cpu:.1f} CPU-s, "
        f"{cpu / (steps * chips) * 1e9:.1f} ns/chip-step, {cpu / steps * 1e3:.2f} ms/step"
    )
    pstats.Stats(pr).sort_stats("tottime").print_stats(25)
    phases(sim, steps, chips, nus)
    pstats.Stats(pr).sort_stats("cumulative").print_stats(
        r"hall.py.*step|pool.py.*(work|after_physics|record|_record_work)|cluster.py.*step|facility.py.*(step|_power_and_heat|_it_power)|thermal.py.*loop_trips|capping|plant.py.*run"
    )


def phases(sim: Any, steps: int, chips: int, nus: int) -> None:
    """CPU time per model phase over ``steps`` more steps (timers around the phase functions)."""
    import collections

    cpu: dict[str, float] = collections.defaultdict(float)

    def timed(obj: Any, name: str, label: str) -> None:
        f = getattr(obj, name)

        def w(*a: Any, **k: Any) -> Any:
            c = time.process_time()
            try:
                return f(*a, **k)
            finally:
                cpu[label] += time.process_time() - c

        setattr(obj, name, w)

    from twin import capping, plant

    halls = getattr(sim, "halls", [sim])
    for h in halls:
        timed(h.site, "step", "3 site")
        for pl in h.pools:
            timed(pl.cluster, "step", "2 work (cluster.step)")
            timed(pl.facility, "step_it", "4 chips, loops (step_it)")
            timed(pl.facility, "_it_power", "4a   chip/IT power")
            timed(pl.facility, "finish_step", "4 next clocks (finish_step)")
            timed(pl, "record", "5 record (pool.record)")
            timed(pl, "_record_work", "5a   workload/service rows")
    timed(plant, "run", "4c plant")
    timed(capping, "next_clock", "4b   next clocks (capping)")
    chunk = max(1, min(1440, 40_000 // nus))
    c0 = time.process_time()
    done = 0
    while done < steps:
        n = min(chunk, steps - done)
        sim.advance(n)
        done += n
    total = time.process_time() - c0
    # Running jobs and replicas at the end (per job-step figures divide by these).
    jobs = int((sim.jobs.a["state"][: sim.jobs.n] == 1).sum()) if hasattr(sim.jobs, "n") else 0
    print(
        f"per-phase CPU over {steps} steps ({total:.2f} CPU-s, {total / steps * 1e3:.3f} ms/step), "
        f"{chips:,} chips, {nus:,} UltraServers, ~{jobs} running jobs at the end"
    )
    nj = max(jobs, 1)
    print(
        f"  {'phase':<30} {'ms/step':>8} {'ns/chip-step':>13} {'ns/US-step':>11} {'ns/job-step':>12} {'share':>6}"
    )
    for label in sorted(cpu):
        v = cpu[label]
        print(
            f"  {label:<30} {v / steps * 1e3:8.3f} {v / steps / chips * 1e9:13.1f} "
            f"{v / steps / nus * 1e9:11.0f} {v / steps / nj * 1e9:12.0f} {v / total:6.1%}"
        )
    rest = total - sum(v for k, v in cpu.items() if k[1] == " ")
    print(f"  {'events, advance, frames':<30} {rest / steps * 1e3:8.3f}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--cases", default=",".join(CASES), help="comma-separated: " + ", ".join(CASES))
    ap.add_argument("--scale", type=float, default=1.0, help="fraction of each case's duration (0 < x <= 1)")
    ap.add_argument("--rev", default="", help="also run against this git revision, side by side")
    ap.add_argument("--no-ratio", action="store_true", help="skip the writer ratio")
    ap.add_argument("--profile", default="", metavar="CASE", help="profile the model on one case")
    ap.add_argument("--child", default="", help=argparse.SUPPRESS)
    ap.add_argument("--out", default="", help=argparse.SUPPRESS)
    ap.add_argument("--root", default="", help=argparse.SUPPRESS)
    ap.add_argument("--mode", default="run", choices=("run", "ratio"), help=argparse.SUPPRESS)
    a = ap.parse_args()
    if not 0 < a.scale <= 1:
        ap.error(f"--scale: expected 0 < x <= 1, got {a.scale}")
    cases = [c.strip() for c in a.cases.split(",") if c.strip()]
    bad = [c for c in cases + ([a.profile] if a.profile else []) if c not in CASES]
    if bad:
        ap.error(f"--cases: unknown case {bad[0]!r}; expected one of {', '.join(CASES)}")
    if a.child:
        sys.path.insert(0, a.root)
        child(a.child, a.scale, Path(a.out), a.mode)
        return
    if a.profile:
        profile(a.profile, a.scale)
        return
    roots = [("this", ROOT)] + ([(a.rev, worktree(a.rev))] if a.rev else [])
    print(f"bench_scale: duration scale {a.scale:g}; CPU = whole process (model, writer thread, imports)")
    head = f"{'CPU-s':>8} {'wall-s':>7} {'RSS-GB':>6} {'ns/c-s':>7} {'wr':>5} {'db-s':>6}"
    print(f"{'case':<8} {'steps':>7} | " + " | ".join(f"{name[:10]:^44}" for name, _ in roots))
    print(f"{'':<8} {'':>7} | " + " | ".join(head for _ in roots))
    for c in cases:
        res = [run_case(c, a.scale, root, not a.no_ratio) for _, root in roots]
        line = f"{c:<8} {res[0]['steps']:>7} | " + " | ".join(_fmt(r) for r in res)
        if len(res) == 2:
            line += f" | x{res[1]['proc_cpu_s'] / res[0]['proc_cpu_s']:.2f} faster"
        print(line, flush=True)
    print("wr = twin writer rows/s / raw DuckDB Arrow insert rows/s on the same batches")
    print("db-s = CPU-s DuckDB alone needs to insert and store the run's time series (raw Arrow inserts)")


if __name__ == "__main__":
    main()
