"""Running a sweep's tasks: one task in a worker, and the backends (here, local processes, Ray).

A ``Task`` is plain data that crosses processes; ``run_task`` turns it into one result row, and
``execute`` runs many of them on a backend, reporting each row as it comes and stopping cleanly on
a signal. ``scenarios.sweep`` builds the tasks from a sweep file and keeps the rows on disk.
"""

from __future__ import annotations

import contextlib
import itertools
import os
import shutil
import signal
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from scenarios import overrides, spec
from scenarios.spec import ScenarioError

BACKENDS = ("local", "ray")


def kpi_keys() -> list[str]:
    """The KPIs of a row: those ``twin compare`` shows, in its order."""
    from storage.kpi_table import COMPARE_ROWS

    return [k for k, _, _ in COMPARE_ROWS]


@dataclass(frozen=True)
class Task:
    """What a worker needs to run one point with one seed (plain data: it crosses processes)."""

    point: int
    point_id: str
    seed: int | None
    params: tuple[tuple[str, Any], ...]
    overrides: tuple[tuple[str, Any], ...]
    base_text: str
    origin: str
    base_dir: str | None
    duration_s: int | None
    run_file: str | None

    @property
    def key(self) -> str:
        return f"{self.point_id}-s{'default' if self.seed is None else self.seed}"


# ---------------------------------------------------------------------- one task
def _one_line(e: BaseException) -> str:
    msg = str(e).strip().splitlines()
    text = f"{type(e).__name__}: {msg[0] if msg else ''}".rstrip(": ")
    return text[:500]


def empty_row(t: Task) -> dict[str, Any]:
    row: dict[str, Any] = {
        "point": t.point,
        "point_id": t.point_id,
        "seed": t.seed,
        "hours": None if t.duration_s is None else t.duration_s / 3600,
        "status": "pending",
        "error": None,
        "wall_s": None,
        "cpu_s": None,
        "run_file": None,
        "run_id": None,
    }
    row.update(dict(t.params))
    row.update({k: None for k in kpi_keys()})
    return row


def run_task(t: Task) -> dict[str, Any]:
    """Run one point with one seed; never raises for the point's own failure (the row says)."""
    from scenarios.runner import run
    from storage.kpis import run_kpis
    from storage.reader import open_run_file

    t0, c0 = time.perf_counter(), time.process_time()
    row = empty_row(t)
    tmp: str | None = None
    try:
        ovs = [overrides.make(k, v) for k, v in t.overrides]
        text = overrides.effective_text(t.base_text, ovs, t.origin)
        scen = spec.parse(text, t.origin, t.base_dir)
        if t.run_file is None:
            tmp = tempfile.mkdtemp(prefix="twin-sweep-")
            out = Path(tmp) / f"{t.key}.duckdb"
        else:
            out = Path(t.run_file)
        # Nobody reads a sweep's run while it runs: no live sidecar next to the file.
        result = run(
            scen, text, out, seed=t.seed, duration_s=t.duration_s, overwrite=True, publish_live=False
        )
        con = open_run_file(out)
        try:
            kpis = run_kpis(con, result.run_id)
            seed = con.sql("SELECT seed FROM runs WHERE run_id = ?", params=[result.run_id]).fetchall()[0][0]
        finally:
            con.close()
        row.update({k: kpis.get(k) for k in kpi_keys()})
        row.update(
            seed=int(seed),
            hours=result.sim_s / 3600,
            status=result.status,
            run_id=result.run_id,
            run_file=None if t.run_file is None else str(out),
        )
    except Exception as e:
        row.update(status="failed", error=_one_line(e))
    except KeyboardInterrupt:  # SIGINT/SIGTERM: the runner closed the run file as ``stopped``
        row = stopped_row(t)
    finally:
        if tmp is not None:
            shutil.rmtree(tmp, ignore_errors=True)
    row["wall_s"] = time.perf_counter() - t0
    row["cpu_s"] = time.process_time() - c0  # every thread of the process: model, writer, DuckDB
    return row


def failed_row(t: Task, e: BaseException) -> dict[str, Any]:
    row = empty_row(t)
    row.update(status="failed", error=_one_line(e))
    return row


def stopped_row(t: Task) -> dict[str, Any]:
    """A run stopped by a signal before it finished: its file (when kept) is closed ``stopped``."""
    row = empty_row(t)
    kept = t.run_file is not None and Path(t.run_file).exists()
    row.update(
        status="stopped",
        error="stopped by a signal before the run finished (it runs again when the sweep resumes)",
        run_file=t.run_file if kept else None,
    )
    return row


# ---------------------------------------------------------------------- backends
# ASM: a stopped run ends at its next step and closes its file (a flush of at most a second of
# steps and its status) well within this; a worker still there after it is killed.
GRACE_S = 20.0
_POLL_S = 0.2  # how often the driver looks at a stop request while it waits for results


def default_jobs() -> int:
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # pragma: no cover - not Linux
        return max(1, os.cpu_count() or 1)


OnResult = Callable[[Task, dict[str, Any]], None]


class Stop:
    """A stop asked for by SIGINT or SIGTERM: no more work is handed out, the runs in flight are
    stopped and recorded; ``execute`` then raises ``exception()`` (SIGTERM: ``Terminated``)."""

    # A signal this long after the first asks again (stop at once); sooner it is the same request
    # delivered twice (e.g. to the process and to its group, as `timeout` does).
    AGAIN_S = 1.0

    def __init__(self) -> None:
        self.signum: int | None = None
        self.count = 0  # requests; from 2 on: stop at once
        self.at = 0.0
        self.raise_now = False  # a run is in this very process: interrupt it at once

    @property
    def requested(self) -> bool:
        return self.signum is not None

    def request(self, signum: int) -> None:
        if self.signum is None:
            self.signum, self.at, self.count = signum, time.monotonic(), 1
        elif time.monotonic() - self.at >= self.AGAIN_S:
            self.count += 1
        if self.raise_now:
            self.raise_now = False
            raise self.exception()

    def exception(self) -> KeyboardInterrupt:
        from scenarios.runner import Terminated

        return Terminated() if self.signum == signal.SIGTERM else KeyboardInterrupt()


@contextlib.contextmanager
def stop_on_signals(stop: Stop) -> Iterator[Stop]:
    """SIGINT and SIGTERM ask ``stop`` to stop (main thread only: elsewhere, nothing changes).
    Installed after the backend is up, so Ray's own SIGTERM handler does not replace it."""
    if threading.current_thread() is not threading.main_thread():
        yield stop
        return
    old = {sig: signal.signal(sig, lambda n, f: stop.request(n)) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield stop
    finally:
        for sig, handler in old.items():
            signal.signal(sig, handler)


def execute(
    todo: list[Task],
    on_result: OnResult,
    backend: str = "local",
    jobs: int | None = None,
    ray_address: str | None = None,
) -> None:
    """Run tasks on a backend, calling ``on_result(task, row)`` in the caller's process as each ends.
    On SIGINT/SIGTERM: no new tasks, the ones in flight stopped and passed to ``on_result`` as
    ``stopped`` rows, then ``KeyboardInterrupt`` (SIGTERM: ``scenarios.runner.Terminated``)."""
    check_backend(backend, jobs)
    if not todo:
        return
    if backend == "ray":
        with backend_session("ray", jobs, ray_address), stop_on_signals(Stop()) as stop:
            _run_on_ray(todo, on_result, jobs, stop)
    else:
        with stop_on_signals(Stop()) as stop:
            if (jobs or default_jobs()) == 1 or len(todo) == 1:
                _execute_here(todo, on_result, stop)
            else:
                _execute_local(todo, on_result, min(jobs or default_jobs(), len(todo)), stop)
    if stop.requested:
        raise stop.exception()


def check_backend(backend: str, jobs: int | None) -> None:
    if backend not in BACKENDS:
        raise ScenarioError(f"--backend: unknown backend {backend!r}; known: {', '.join(BACKENDS)}")
    if jobs is not None and not 1 <= jobs <= 4096:
        raise ScenarioError(f"-j: expected a number of parallel runs in 1..4096 (got {jobs})")
    if backend == "ray" and ray_missing():
        raise ScenarioError(f"--backend ray: {ray_missing()}")


def _execute_here(todo: list[Task], on_result: OnResult, stop: Stop) -> None:
    """One run at a time in this process (a signal interrupts the run at once)."""
    for t in todo:
        if stop.requested:
            return
        row: dict[str, Any] | None = None
        try:
            stop.raise_now = True
            row = run_task(t)
            stop.raise_now = False
        except KeyboardInterrupt:
            stop.raise_now = False
            if row is None:
                row = stopped_row(t)
        on_result(t, row)


# -- the local pool: worker processes the sweep starts, feeds one task at a time and owns
_busy = False  # in a worker: a task is running


def _die_with_parent(parent: int) -> None:
    """In a worker: be sent SIGTERM when the sweep's process dies, however it dies (Linux:
    PR_SET_PDEATHSIG; elsewhere a thread that watches the parent)."""
    if sys.platform.startswith("linux"):
        import ctypes

        try:
            libc = ctypes.CDLL(None, use_errno=True)
            libc.prctl(1, signal.SIGTERM, 0, 0, 0)  # 1 = PR_SET_PDEATHSIG (linux/prctl.h)
        except (OSError, AttributeError):  # pragma: no cover - no prctl
            pass
    else:  # pragma: no cover - not Linux

        def watch() -> None:
            while os.getppid() == parent:
                time.sleep(1.0)
            os.kill(os.getpid(), signal.SIGTERM)

        threading.Thread(target=watch, daemon=True).start()
    if os.getppid() != parent:  # the sweep died before the line above
        os._exit(1)


def _worker_term(signum: int, frame: Any) -> None:
    """SIGTERM in a worker (the sweep stops, or died): stop the run in flight (its file is closed
    ``stopped``) or, idle, leave; either way gone within ``GRACE_S``."""
    timer = threading.Timer(GRACE_S, os._exit, (1,))
    timer.daemon = True
    timer.start()
    if _busy:
        from scenarios.runner import Terminated

        raise Terminated()
    os._exit(0)


def _worker_main(conn: Any, parent: int) -> None:
    """A worker's life: run the tasks the sweep sends, one at a time, send back each row."""
    global _busy
    _die_with_parent(parent)
    # Ctrl-C at a terminal reaches the whole process group: the sweep decides what stops.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, _worker_term)
    while True:
        try:
            t = conn.recv()
        except (EOFError, OSError):
            return
        if t is None:
            return
        try:
            _busy = True
            try:
                row = run_task(t)
            finally:
                _busy = False
        except KeyboardInterrupt:
            row = stopped_row(t)
        try:
            conn.send(row)
        except OSError:  # the sweep is gone
            return


@dataclass
class _Worker:
    proc: Any
    conn: Any
    task: Task | None = None
    signalled: bool = False


def _execute_local(todo: list[Task], on_result: OnResult, jobs: int, stop: Stop) -> None:
    import multiprocessing
    from multiprocessing.connection import wait

    # spawn: a clean process (no inherited threads or open files) and a child of this one, so
    # that the kernel's parent-death signal reaches it.
    ctx = multiprocessing.get_context("spawn")
    queue = iter(todo)
    workers: list[_Worker] = []

    def start() -> _Worker:
        mine, theirs = ctx.Pipe()
        p = ctx.Process(target=_worker_main, args=(theirs, os.getpid()), daemon=True, name="twin-sweep")
        p.start()
        theirs.close()
        w = _Worker(p, mine)
        workers.append(w)
        return w

    def feed(w: _Worker) -> None:
        t = None if stop.requested else next(queue, None)
        w.task = t
        with contextlib.suppress(OSError):
            w.conn.send(t)  # None: leave

    def finish(w: _Worker, row: dict[str, Any]) -> None:
        t, w.task = w.task, None
        assert t is not None
        on_result(t, row)

    deadline: float | None = None
    try:
        for _ in range(jobs):
            feed(start())
        while True:
            busy = [w for w in workers if w.task is not None]
            if not busy:
                return
            if stop.requested:
                if deadline is None:
                    deadline = time.monotonic() + GRACE_S
                for w in busy:
                    if not w.signalled:
                        w.signalled = True
                        with contextlib.suppress(OSError):
                            os.kill(w.proc.pid, signal.SIGTERM)
                if stop.count > 1 or time.monotonic() > deadline:  # asked twice, or too slow
                    for w in busy:
                        w.proc.kill()
                        w.proc.join()
                        finish(w, stopped_row(w.task))  # type: ignore[arg-type]
                    return
            ready = wait([w.conn for w in busy] + [w.proc.sentinel for w in busy], timeout=_POLL_S)
            for w in busy:
                if w.conn not in ready and w.proc.sentinel not in ready:
                    continue
                try:
                    row = w.conn.recv() if w.conn.poll() else None
                except (EOFError, OSError):
                    row = None
                if row is not None:
                    finish(w, row)
                    feed(w)
                    continue
                # The worker died (e.g. out of memory, or killed): its task failed; a new worker
                # takes over.
                w.proc.join()
                t = w.task
                assert t is not None
                workers.remove(w)
                w.conn.close()
                if stop.requested:
                    finish(w, stopped_row(t))
                else:
                    finish(
                        w, failed_row(t, RuntimeError(f"worker process died (exit code {w.proc.exitcode})"))
                    )
                    feed(start())
    finally:
        for w in workers:
            if w.task is not None and w.proc.is_alive() and not w.signalled:
                with contextlib.suppress(OSError):
                    os.kill(w.proc.pid, signal.SIGTERM)  # a result handler raised: stop its run
            with contextlib.suppress(OSError):
                w.conn.send(None)
        end = time.monotonic() + GRACE_S
        for w in workers:
            w.proc.join(max(0.0, end - time.monotonic()))
            if w.proc.is_alive():
                w.proc.kill()
                w.proc.join()
            w.conn.close()


def ray_missing() -> str | None:
    import importlib.util

    if importlib.util.find_spec("ray") is None:
        return "the ray backend needs Ray: pip install 'ai-factory-twin[ray]'"
    return None


RAY_CONNECT_TIMEOUT_S = 5.0  # ASM: a reachable head answers a TCP connect within milliseconds
# Ray's own settings for connecting to a cluster: a 5 s connect timeout, tried twice (Ray's
# defaults: 30 s, 20 times), so a wrong address fails within about half a minute.
RAY_CONNECT_ENV = {
    "RAY_py_gcs_connect_timeout_s": "5",
    "RAY_gcs_rpc_server_connect_timeout_s": "5",
    "RAY_NUM_REDIS_GET_RETRIES": "2",
}


def _host_port(address: str) -> tuple[str, str]:
    """HOST and PORT of ``[ray://]HOST:PORT`` (PORT empty when missing)."""
    hostport = (address.split("://", 1)[1] if "://" in address else address).rstrip("/")
    host, sep, port = hostport.rpartition(":")
    return (host.strip("[]"), port) if sep else (hostport, "")


def _loopback(address: str) -> bool:
    host = _host_port(address)[0]
    return host == "localhost" or host == "::1" or host.startswith("127.")


def check_ray_address(address: str, timeout_s: float = RAY_CONNECT_TIMEOUT_S) -> None:
    """``ScenarioError`` naming the address unless a TCP connection to it opens within
    ``timeout_s`` (``auto`` and ``local`` are Ray's to resolve: not checked here)."""
    import socket

    if address in ("auto", "local"):
        return
    where = f"--ray-address {address}"
    host, port_s = _host_port(address)
    if not host or not port_s.isdigit() or not 0 < int(port_s) < 65536:
        raise ScenarioError(f"{where}: expected HOST:PORT (e.g. 10.0.0.5:6379) or auto")
    try:
        with socket.create_connection((host, int(port_s)), timeout=timeout_s):
            pass
    except TimeoutError:
        raise ScenarioError(f"{where}: no answer from {host}:{port_s} within {timeout_s:g} s") from None
    except OSError as e:
        raise ScenarioError(f"{where}: cannot reach {host}:{port_s}: {e.strerror or e}") from None


@contextlib.contextmanager
def backend_session(backend: str, jobs: int | None = None, address: str | None = None) -> Iterator[None]:
    """Keep a backend up across several ``execute`` calls: for Ray, connect to ``address`` or start a
    local Ray with ``jobs`` CPUs (unless Ray is up already), and shut down what was started."""
    check_backend(backend, jobs)
    if backend != "ray":
        yield
        return
    if not address or _loopback(address):
        # A Ray started for one sweep serves this machine only: Ray's own switch keeps its
        # processes on the loopback address instead of the machine's network address. For a
        # loopback --ray-address, the same switch keeps Ray from connecting to the machine's
        # network address instead of the one given.
        os.environ.setdefault("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER", "0")
    if address:
        # Ray retries a port that answers but is not Ray's for many minutes: bounded here
        # (ASM: a live head answers within seconds). Ray reads these as it is imported.
        for k, v in RAY_CONNECT_ENV.items():
            os.environ.setdefault(k, v)
    import logging

    import ray

    started = False
    if not ray.is_initialized():
        if address:
            check_ray_address(address)
        kw: dict[str, Any] = {"log_to_driver": False, "logging_level": logging.ERROR}
        # ray.init replaces the SIGTERM handler with its own (sys.exit): the caller's is put back.
        before = (
            signal.getsignal(signal.SIGTERM)
            if threading.current_thread() is threading.main_thread()
            else None
        )
        try:
            if address:
                ray.init(address=address, **kw)
            else:
                # "local": a new Ray of the sweep's own, never a cluster left running on this
                # machine (ray.init's default would connect to the last one started).
                ray.init(address="local", num_cpus=jobs or default_jobs(), include_dashboard=False, **kw)
        except (ConnectionError, RuntimeError, ValueError) as e:
            where = f"--ray-address {address}" if address else "--backend ray"
            raise ScenarioError(f"{where}: cannot start or reach Ray: {_one_line(e)}") from None
        finally:
            if before is not None:
                signal.signal(signal.SIGTERM, before)
        started = True
    try:
        yield
    finally:
        if started:
            ray.shutdown()


def _run_on_ray(todo: list[Task], on_result: OnResult, jobs: int | None, stop: Stop) -> None:
    import ray
    from ray.exceptions import TaskCancelledError

    remote = ray.remote(num_cpus=1, max_retries=0)(run_task)
    resources: Any = ray.cluster_resources
    cpus = int(resources().get("CPU", jobs or 1))
    queue = iter(todo)
    refs: dict[Any, Task] = {}

    def submit(n: int) -> None:
        if stop.requested:
            return
        for t in itertools.islice(queue, n):
            refs[remote.remote(t)] = t

    deadline: float | None = None
    try:
        # One task per CPU in flight: each starts at once (a stop finds no task queued, only
        # running ones) and the driver's memory stays flat.
        submit(max(cpus, 1))
        while refs:
            if stop.requested:
                if deadline is None:
                    deadline = time.monotonic() + GRACE_S
                    for r in refs:  # a KeyboardInterrupt in the task: its run file closes ``stopped``
                        with contextlib.suppress(Exception):
                            ray.cancel(r)
                if stop.count > 1 or time.monotonic() > deadline:
                    for r, t in list(refs.items()):
                        with contextlib.suppress(Exception):
                            ray.cancel(r, force=True)
                        on_result(t, stopped_row(t))
                    refs.clear()
                    return
            ready, _ = ray.wait(list(refs), num_returns=1, timeout=_POLL_S)
            for r in ready:
                t = refs.pop(r)
                try:
                    row = ray.get(r)
                except TaskCancelledError:
                    row = stopped_row(t)
                except Exception as e:  # the worker died or the task could not run
                    row = stopped_row(t) if stop.requested else failed_row(t, e)
                on_result(t, row)
            submit(len(ready))
    finally:
        for r in refs:
            with contextlib.suppress(Exception):
                ray.cancel(r, force=True)
