"""Stress: a flood of idle connections to ``twin run --metrics-port`` while the run proceeds.

Starts ``twin run SCENARIO --metrics-port 0`` in a child process (its open-file limit set to
``--nofile``, 1,024 by default as on most desktops), opens ``--connections`` idle TCP connections
to the metrics port over loopback and holds them, scrapes ``/metrics`` every ``--scrape-every``
seconds meanwhile, and prints what the child went through: its peak open descriptors and threads,
how many idle connections the endpoint closed, the scrapes answered and refused, the run's exit
code and the ``runs.status`` it recorded. Bounded: the connections are opened once, the run has a
fixed simulated duration and the whole bench a wall-clock limit (``--limit-s``).

    python bench/bench_metrics_flood.py [--connections 2000] [--rate 400] [--days 3] [--nofile 1024]
"""

from __future__ import annotations

import argparse
import os
import re
import resource
import select
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def _count(pid: int) -> tuple[int, int]:
    """Open descriptors and threads of ``pid`` (0, 0 once it has gone)."""
    try:
        fds = len(os.listdir(f"/proc/{pid}/fd"))
        status = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return 0, 0
    m = re.search(r"^Threads:\s+(\d+)", status, re.M)
    return fds, int(m.group(1)) if m else 0


def _scrape(port: int) -> float | None:
    """Seconds a scrape took, or None when it failed (refused, reset or timed out)."""
    t = time.perf_counter()
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as r:
            r.read()
    except OSError:
        return None
    return time.perf_counter() - t


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--connections", type=int, default=2000)
    ap.add_argument("--scenario", default="default")
    ap.add_argument("--days", type=float, default=3.0)
    ap.add_argument("--nofile", type=int, default=1024, help="open-file limit of the run (soft)")
    ap.add_argument("--rate", type=float, default=400.0, help="connections started per second")
    ap.add_argument("--scrape-every", type=float, default=0.25)
    ap.add_argument("--limit-s", type=float, default=300.0)
    args = ap.parse_args()
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    want = args.connections + 64
    if soft < want:  # this process holds every connection
        resource.setrlimit(resource.RLIMIT_NOFILE, (min(want, hard), hard))

    def child_limits() -> None:
        resource.setrlimit(resource.RLIMIT_NOFILE, (args.nofile, hard))

    with tempfile.TemporaryDirectory() as d:
        out = Path(d) / "flood.duckdb"
        env = dict(os.environ, PYTHONPATH=str(ROOT))
        cmd = [sys.executable, "-m", "tui.cli", "run", args.scenario, "--days", str(args.days)]
        cmd += ["--metrics-port", "0", "--out", str(out)]
        t0 = time.monotonic()
        proc = subprocess.Popen(
            cmd, cwd=ROOT, env=env, stderr=subprocess.PIPE, stdout=subprocess.PIPE, preexec_fn=child_limits
        )
        assert proc.stderr is not None
        line = proc.stderr.readline().decode()
        m = re.search(r"127\.0\.0\.1:(\d+)/metrics", line)
        if not m:
            proc.kill()
            sys.exit(f"no metrics port announced: {line!r}")
        port = int(m.group(1))
        base_fds, base_threads = _count(proc.pid)
        # Connections are started at ``--rate`` a second (non-blocking), as a client that keeps
        # opening them would; the kernel completes each as the endpoint's listen backlog drains.
        socks: list[socket.socket] = []

        def start(k: int) -> None:
            for _ in range(min(k, args.connections - len(socks))):
                s = socket.socket()
                s.setblocking(False)
                s.connect_ex(("127.0.0.1", port))
                socks.append(s)
                pending.add(s)

        pending: set[socket.socket] = set()
        established: set[socket.socket] = set()
        closed: set[socket.socket] = set()
        peak_fds, peak_threads = base_fds, base_threads
        ok: list[float] = []
        failed = 0
        while proc.poll() is None and time.monotonic() - t0 < args.limit_s:
            start(max(1, int(args.rate * args.scrape_every)))
            poller = select.poll()
            for sk in pending:
                poller.register(sk, select.POLLOUT)
            for sk in established - closed:
                poller.register(sk, select.POLLIN)
            by_fd = {sk.fileno(): sk for sk in socks}
            for fd, ev in poller.poll(0):
                sk = by_fd[fd]
                if sk in pending:
                    pending.discard(sk)
                    err = sk.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR)
                    (closed if err or ev & (select.POLLERR | select.POLLHUP) else established).add(sk)
                else:  # anything an idle client receives is a refusal (503), an EOF or a reset
                    closed.add(sk)
            fds, threads = _count(proc.pid)
            peak_fds, peak_threads = max(peak_fds, fds), max(peak_threads, threads)
            r = _scrape(port)
            if r is None:
                failed += 1
            else:
                ok.append(r)
            time.sleep(args.scrape_every)
        if proc.poll() is None:
            proc.kill()
        _, err = proc.communicate()
        wall = time.monotonic() - t0
        for s in socks:
            s.close()
        status = "?"
        if out.exists():
            import duckdb

            con = duckdb.connect(str(out), read_only=True)
            status = ",".join(r[0] for r in con.sql("SELECT status FROM runs").fetchall())
            con.close()
        print(f"{args.scenario} --days {args.days:g}, run's open-file limit {args.nofile}")
        print(f"  idle connections            {args.connections:,} started, {len(established):,} established")
        print(f"  closed by the endpoint      {len(closed):,} (evicted, refused or timed out)")
        print(f"  run's descriptors           {base_fds} before, peak {peak_fds}")
        print(f"  run's threads               {base_threads} before, peak {peak_threads}")
        lat = f", median {sorted(ok)[len(ok) // 2] * 1000:.1f} ms" if ok else ""
        print(f"  scrapes meanwhile           {len(ok)} answered, {failed} failed{lat}")
        print(
            f"  run                         exit {proc.returncode}, runs.status {status}, {wall:.1f} s wall"
        )
        tail = [x for x in err.decode().splitlines() if x.strip()][-3:]
        for x in tail:
            print(f"  stderr: {x[:160]}")


if __name__ == "__main__":
    main()
