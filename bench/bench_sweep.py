"""Sweep throughput: runs per minute with -j 1, -j 2 and Ray (2 CPUs) on this machine; with
--signals, how fast a sweep and every process it started are gone after SIGTERM or SIGKILL.

    .venv/bin/python bench/bench_sweep.py [--hours 24] [--points 8]
    .venv/bin/python bench/bench_sweep.py --signals [--no-ray]

The sweep is small on purpose (2-UltraServer halls, a day each, dt 60 s) so the figures show the
engines' overhead as well as the scaling. Ray's start-up is timed separately. Prints figures only;
nothing here asserts a speed.
"""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from scenarios import execution, sweep

SCENARIO = """
name = "bench-sweep"
seed = 7
dt_s = 60
duration_h = 24

[hall]
system = "trn3-gen2"
ultraservers = 2
ultraservers_per_row = 2

[training]
arrivals_per_day = 40

[[services]]
name = "chat"
model = "llama-3.1-70b"
replicas = 2
mean_requests_per_s = 20.0
"""


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--hours", type=float, default=24.0)
    ap.add_argument("--points", type=int, default=8, help="runs per backend (climates x seeds)")
    ap.add_argument("--no-ray", action="store_true")
    ap.add_argument("--signals", action="store_true", help="time SIGTERM and SIGKILL of a sweep instead")
    a = ap.parse_args()
    if a.signals:
        signals(a.no_ray)
        return
    tmp = Path(tempfile.mkdtemp(prefix="bench-sweep-"))
    (tmp / "bench.toml").write_text(SCENARIO)
    seeds = list(range(1, max(1, a.points // 2) + 1))
    (tmp / "sweep.toml").write_text(
        f'[sweep]\nscenario = "bench.toml"\nhours = {a.hours}\nseeds = {seeds}\n'
        '[sweep.grid]\n"site.climate" = ["temperate", "hot"]\n'
    )
    sw = sweep.load_sweep(tmp / "sweep.toml")
    n = len(sweep.tasks(sw, sweep.points(sw), None))
    print(
        f"{n} runs of {a.hours:g} h on 2 Trn3 Gen2 UltraServers (dt 60 s); {os.cpu_count()} CPUs; "
        f"load average {os.getloadavg()[0]:.1f}"
    )
    rows: list[tuple[str, float, float, float, float, float]] = []

    def go(label: str, backend: str, jobs: int, startup: float = 0.0) -> None:
        out = tmp / label.replace(" ", "-")
        t0 = time.perf_counter()
        res = sweep.run_sweep(sw, out, backend=backend, jobs=jobs, files=False)
        wall = time.perf_counter() - t0
        assert res.failed == 0 and res.results is not None, f"{label}: {res.failed} runs failed"
        # Runs in flight on average: the runs' own wall times over the sweep's.
        rs = sweep.read_results(res.results)[0]
        busy = sum(r["wall_s"] for r in rs) / wall
        # Cores the runs used: their processes' CPU time (model, writer and DuckDB threads) per second.
        cores = sum(r["cpu_s"] for r in rs) / wall
        rows.append((label, wall, startup, n / wall * 60, busy, cores))

    go("local -j 1", "local", 1)
    go("local -j 2", "local", 2)
    if not a.no_ray and execution.ray_missing() is None:
        t0 = time.perf_counter()
        with execution.backend_session("ray", 2):  # the local Ray a sweep starts, timed on its own
            go("ray 2 CPUs", "ray", 2, time.perf_counter() - t0)
    base = rows[0][1]
    print(
        f"{'backend':<12} {'wall s':>8} {'runs/min':>9} {'speed-up':>9} {'in flight':>10} {'cores used':>11}"
        f" {'start-up s':>11}"
    )
    for label, wall, startup, rate, busy, cores in rows:
        print(
            f"{label:<12} {wall:>8.1f} {rate:>9.1f} {base / wall:>9.2f} {busy:>10.2f} {cores:>11.2f} {startup:>11.1f}"
        )
    print(
        "(in flight: runs running at once on average; cores used: the runs' CPU seconds per wall\n"
        " second; Ray's runs/min exclude its start-up, paid once per sweep.)"
    )


def descendants(pid: int) -> dict[int, str]:
    """Every live process below ``pid`` (scanning /proc): pid -> its start time (to tell a reused
    pid apart)."""
    children: dict[int, list[int]] = {}
    start: dict[int, str] = {}
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            stat = Path(f"/proc/{d}/stat").read_text()
        except OSError:
            continue
        fields = stat[stat.rindex(")") + 2 :].split()
        if fields[0] == "Z":
            continue
        children.setdefault(int(fields[1]), []).append(int(d))
        start[int(d)] = fields[19]
    out: dict[int, str] = {}
    todo = [pid]
    while todo:
        for c in children.get(todo.pop(), []):
            out[c] = start[c]
            todo.append(c)
    return out


def alive(procs: dict[int, str]) -> list[int]:
    """Those of ``procs`` still running (not gone, not a zombie, not a new process on the pid)."""
    left = []
    for p, st in procs.items():
        try:
            stat = Path(f"/proc/{p}/stat").read_text()
        except OSError:
            continue
        fields = stat[stat.rindex(")") + 2 :].split()
        if fields[0] != "Z" and fields[19] == st:
            left.append(p)
    return left


def signals(no_ray: bool) -> None:
    """For each backend and signal: a 2-point sweep with 2 runs in flight gets the signal; the
    seconds until the sweep exits and until its last descendant is gone, and its runs' state."""
    tmp = Path(tempfile.mkdtemp(prefix="bench-sweep-sig-"))
    (tmp / "bench.toml").write_text(SCENARIO)
    (tmp / "sweep.toml").write_text(
        '[sweep]\nscenario = "bench.toml"\nhours = 2000\nseeds = [1]\n'
        '[sweep.grid]\n"site.climate" = ["temperate", "hot"]\n'
    )
    twin = str(Path(sys.executable).parent / "twin")
    backends = ["local"] + ([] if no_ray or execution.ray_missing() else ["ray"])
    print(
        f"{'backend':<8} {'signal':<8} {'exit code':>9} {'to exit s':>10} {'to last process gone s':>23}  runs"
    )
    for backend in backends:
        for sig in (signal.SIGTERM, signal.SIGKILL):
            out = tmp / f"{backend}-{sig.name}"
            cmd = [twin, "sweep", str(tmp / "sweep.toml"), "--out", str(out), "-j", "2", "--backend", backend]
            proc = subprocess.Popen(
                cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, start_new_session=True
            )
            try:
                while len(list((out / "runs").glob("*.duckdb"))) < 2 and proc.poll() is None:
                    time.sleep(0.05)
                time.sleep(1.0)  # both runs past their start
                procs = descendants(proc.pid)
                t0 = time.perf_counter()
                os.kill(proc.pid, sig)
                code = proc.wait()
                t_exit = time.perf_counter() - t0
                while alive(procs) and time.perf_counter() - t0 < 120:
                    time.sleep(0.02)
                t_gone = time.perf_counter() - t0
                left = alive(procs)
                for p in left:  # what the sweep left behind: this benchmark started it, it ends it
                    os.kill(p, signal.SIGKILL)
            finally:
                if proc.poll() is None:
                    os.killpg(proc.pid, signal.SIGKILL)
            status = []
            for f in sorted((out / "runs").glob("*.duckdb")):
                r = subprocess.run(
                    [twin, "sql", str(f), "SELECT status FROM runs", "--format", "csv"],
                    capture_output=True,
                    text=True,
                )
                status.append(r.stdout.strip().splitlines()[-1] if r.returncode == 0 else "unreadable")
            print(
                f"{backend:<8} {sig.name:<8} {code:>9} {t_exit:>10.2f} {t_gone:>23.2f}  "
                f"{len(procs)} processes, {len(left)} left; run files: {', '.join(status)}"
            )


if __name__ == "__main__":
    main()
