"""The headless runner: a scenario's simulation wired to a telemetry file.

``Session`` is shared by ``twin run`` and the live TUI: it owns one ``Simulation`` and one
``TelemetryWriter``. Everything that can be wrong with the inputs is checked before the output file
is created, so a bad scenario leaves nothing behind. The writer creates the file atomically and
locks it for the run's life, so ``overwrite`` never replaces a file another live run is writing.
"""

from __future__ import annotations

import contextlib
import datetime as _dt
import itertools
import os
import signal
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from scenarios.spec import Scenario, ScenarioError, build_simulation, prepare
from storage.errors import StorageError
from storage.liveread import LiveUserSql
from storage.reader import kpi_summary
from storage.runlock import crash_point
from storage.sandbox import Limits
from storage.upsert import last_of_each
from storage.writer import TelemetryWriter
from twin import __version__
from twin.compose.sim import Frames, Simulation, steps_for
from twin.spec.params import ScheduledEvent

# Steps per advance: about this many rows of the per-UltraServer and per-chip tables per chunk
# (``Session.chunk_steps``). Each advance and each batch the writer converts has a fixed cost
# (the eleven tables' frames, however few their rows), so small chunks cost a large hall dearly:
# at 40,000 rows a 1 M-chip hall advances 5 steps at a time, at 400,000 57 (bench/bench_scale.py
# measures the difference). A chunk of 400,000 rows of ~16 columns is ~50 MB of buffers.
_ROWS_PER_CHUNK = 400_000
# A headless run hands its steps over (to the writer, and to ``on_chunk``: the metrics endpoint)
# at least this often in wall time, as the live console commits them (tui.console.simloop).
COMMIT_S = 1.0


_RUN_SEQ = itertools.count(1)


class Session:
    def __init__(
        self,
        scenario: Scenario,
        text: str,
        out: str | Path,
        seed: int | None = None,
        duration_s: int | None = None,
        overwrite: bool = False,
        flush_interval_s: float = 1.0,
        extra_events: tuple[ScheduledEvent, ...] = (),
        sql_limits: Limits | None = None,
        publish_live: bool = True,
        on_chunk: Callable[[Frames], None] | None = None,
        warmup_progress: Callable[[int], None] | None = None,
        on_ready: Callable[[], None] | None = None,
    ) -> None:
        self.scenario = scenario
        self.scenario_text = text  # as recorded: the effective scenario (its --set overrides named)
        self.on_chunk = on_chunk  # called with each advance's frames (e.g. the metrics endpoint)
        # The same checks as `twin validate`, all before the output file is created.
        self.params, sim = build_simulation(scenario, seed, duration_s, tuple(extra_events))
        self.sim: Simulation = sim
        self.seed = self.params.seed
        self.duration_s = int(duration_s if duration_s is not None else round(scenario.duration_h * 3600))
        self.out = Path(out)
        check_output(self.out, overwrite)
        if self.out.parent and not self.out.parent.exists():
            try:
                self.out.parent.mkdir(parents=True, exist_ok=True)
            except OSError as e:
                raise StorageError(
                    f"{self.out.parent}: cannot create the folder: {e.strerror or e}"
                ) from None
        if on_ready is not None:  # every check passed and the model is built (e.g. a warning now)
            on_ready()
        # The warm-up (``warmup_h``): simulated before the file exists, nothing of it recorded.
        self.warm_up(warmup_progress)
        crash_point("session:writer")
        # Unique per run: a process (a sweep worker) starts several runs within one second.
        now = _dt.datetime.now(_dt.UTC)
        stamp = now.strftime("%Y%m%dT%H%M%S") + f".{now.microsecond // 1000:03d}Z"
        self.run_id = f"{scenario.name}-s{self.seed}-{stamp}-p{os.getpid()}-{next(_RUN_SEQ)}"
        # Other processes read the run while it is written through Parquet parts next to the file
        # (published from the writer's first commit on, once it holds the file).
        self.writer = TelemetryWriter(
            self.out,
            self._run_row(text),
            flush_interval_s=flush_interval_s,
            if_exists="replace" if overwrite else "error",
            limits=sql_limits,
            live=publish_live,
        )
        self.publisher = self.writer.publisher if publish_live else None
        if self.publisher is not None:
            # The console's queries get a sandbox of their own with the user's limits; the run's
            # database keeps its small one (storage.sandbox.WRITER_MEMORY).
            self.writer.user_sql = LiveUserSql(
                self.publisher, self.out, self.writer.limits, self.writer.user_sql
            )
        self._held: list[Frames] = []
        self._held_steps = 0
        self.closed = False

    def warm_up(self, progress: Callable[[int], None] | None = None) -> None:
        """Run the model's warm-up (its clock starts at ``-warmup_s``) up to the recording's start,
        dropping what it would record; the first recorded advance then writes the row of every
        job waiting or running, so the recording starts from the state the warm-up reached."""
        dt = self.params.dt_s
        while self.sim.t_s < 0:
            n = min(self.chunk_steps, -self.sim.t_s // dt)
            self.sim.advance(n)
            if progress:
                progress(n)
        self.sim.refresh_jobs()

    def _run_row(self, text: str) -> dict[str, Any]:
        """The run's row of the ``runs`` table as the writer starts it."""
        scenario = self.scenario
        return {
            "run_id": self.run_id,
            "scenario_name": scenario.name,
            "scenario_toml": text,
            "seed": self.seed,
            "dt_s": self.params.dt_s,
            "duration_s": self.duration_s,
            "version": __version__,
            "chips_total": self.sim.topo.chips,
            "ultraservers": self.sim.topo.ultraservers,
            "system": self.sim.design.system,  # "a+b" on a mixed floor
            "design_json": self.sim.design.to_json(),
            # Calendar time of time_s = 0 (the scenario key ``start``; older specs have none).
            "start": getattr(scenario, "start", None),
        }

    @property
    def total_steps(self) -> int:
        return steps_for(self.duration_s, self.params.dt_s)

    @property
    def chunk_steps(self) -> int:
        """Steps per advance: about ``_ROWS_PER_CHUNK`` rows of ``ultraserver_ts`` and ``chip_ts``
        (at most 1440). A chip sample is all the hall's chips at once, so a chunk holds at least the
        steps between two samples (one sample, whatever its size) but not many samples of a large
        hall: memory stays bounded by one sample plus the rows around it."""
        p, topo = self.params, self.sim.topo
        dt = p.dt_s
        us_rows = topo.ultraservers * min(1.0, dt / max(p.ultraserver_interval_s, 1))
        n = _ROWS_PER_CHUNK / max(us_rows, 1.0)
        iv = p.chip_sample_interval_s
        if iv > 0:
            every = max(1.0, iv / dt)  # steps from one chip sample to the next
            n = min(n, max(_ROWS_PER_CHUNK / (us_rows + topo.chips / every), every))
        return max(1, min(1440, int(n)))

    def advance(self, steps: int, *, hold_steps: int = 0, stop: Callable[[], bool] | None = None) -> Frames:
        """Run ``steps`` steps and hand their frames to the writer.

        ``hold_steps`` > 0 holds the frames of small advances until that many steps are held, then
        hands them over as one batch (the live console advances a few steps at a time and the
        writer still gets large batches); ``commit`` hands over what is held. ``stop`` is asked
        after each step; when true the advance ends there (fewer steps than asked may run: count
        the rows of ``factory_ts``)."""
        frames = self.sim.advance(steps, stop)
        if hold_steps <= 0:
            self.commit()
            self._hand_over(frames)
            return frames
        self._held.append(frames)
        self._held_steps += len(frames["factory_ts"]["time_s"])
        if self._held_steps >= hold_steps:
            self.commit()
        return frames

    @property
    def held_steps(self) -> int:
        """Steps simulated but not yet handed to the writer."""
        return self._held_steps

    def commit(self) -> None:
        """Hand the held frames to the writer (one batch)."""
        if self._held:
            held, self._held, self._held_steps = self._held, [], 0
            self._hand_over(concat_frames(held))

    def _hand_over(self, frames: Frames) -> None:
        self.writer.write(frames, self.sim.t_s)
        if self.on_chunk is not None:
            self.on_chunk(frames)

    def close(self, status: str = "complete", reason: str = "") -> None:
        if not self.closed:
            self.closed = True
            try:
                if status != "failed":
                    # Every job's last row (waiting and running jobs may be written only every
                    # ``jobs_interval_s``): an advance of no steps carries them.
                    self.sim.refresh_jobs()
                    self._held.append(self.sim.advance(0))
                    self.commit()
            finally:
                self.writer.close(status, reason)


def concat_frames(parts: list[Frames], only: tuple[str, ...] | None = None) -> Frames:
    """The frames of consecutive advances as one (rows in order; a job's rows reduced to its
    latest, as the writer keeps them). ``only``: just these tables."""
    if len(parts) == 1 and only is None:
        return parts[0]
    out: Frames = {}
    for table in dict.fromkeys(t for p in parts for t in p):  # chip_ts only in some advances
        if only is not None and table not in only:
            continue
        have = [p[table] for p in parts if table in p]
        if table == "jobs":
            out[table] = _latest_job_rows(have)
            continue
        cols: dict[str, Any] = {}
        for key, first in have[0].items():
            vals = [h[key] for h in have]
            cols[key] = (
                np.concatenate(vals) if isinstance(first, np.ndarray) else [x for v in vals for x in v]
            )
        out[table] = cols
    return out


def _latest_job_rows(have: list[dict[str, Any]]) -> dict[str, Any]:
    """Job rows of consecutive advances, one per job (its latest), in order of those rows; text
    columns are only built for the rows kept (every queued or running job has a row per advance)."""
    keep = last_of_each(np.concatenate([np.asarray(h["job_id"]) for h in have]))
    starts = np.cumsum([0] + [len(h["job_id"]) for h in have])
    part = np.searchsorted(starts, keep, side="right") - 1
    local = keep - starts[part]
    out: dict[str, Any] = {}
    for key, first in have[0].items():
        if isinstance(first, np.ndarray):
            out[key] = np.concatenate([h[key] for h in have])[keep]
        else:
            out[key] = [have[p][key][i] for p, i in zip(part.tolist(), local.tolist(), strict=True)]
    return out


class Terminated(KeyboardInterrupt):
    """SIGTERM arrived: handled like Ctrl-C (the run is recorded ``stopped``)."""


@contextlib.contextmanager
def sigterm_as_interrupt() -> Iterator[None]:
    """Within the block, SIGTERM raises ``Terminated`` (a ``KeyboardInterrupt``) in the main thread,
    so a run killed politely ends like one interrupted with Ctrl-C. Elsewhere than in the main
    thread, nothing changes."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def handler(signum: int, frame: Any) -> None:
        raise Terminated()

    old = signal.signal(signal.SIGTERM, handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, old)


@contextlib.contextmanager
def signals_deferred() -> Iterator[None]:
    """Hold Ctrl-C and SIGTERM until the block ends, then deliver them (main thread only: Python
    runs signal handlers there, whichever thread the signal reached)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    pending: list[int] = []

    def hold(signum: int, frame: Any) -> None:
        pending.append(signum)

    old = {sig: signal.signal(sig, hold) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield
    finally:
        for sig, handler in old.items():
            signal.signal(sig, handler)
        if pending:
            signal.raise_signal(pending[0])


def variant_outputs(
    scenario: Scenario, base: Path, seed: int | None, overwrite: bool, duration_s: int | None = None
) -> list[tuple[Scenario, Path]]:
    """Each variant of a comparison scenario with its output file, every one checked (the same
    checks as `twin validate`, and that its file can be written) before any file is written."""
    plan: list[tuple[Scenario, Path]] = []
    seen: set[Path] = set()
    for v in scenario.variants:
        path = base.with_name(f"{base.stem}-{v.name}{base.suffix or '.duckdb'}")
        prepare(v, seed, duration_s)
        if path.resolve() in seen:
            raise ScenarioError(f"scenario '{scenario.name}': two variants write {path}")
        seen.add(path.resolve())
        check_output(path, overwrite)
        plan.append((v, path))
    return plan


def check_output(path: str | Path, overwrite: bool) -> None:
    """``StorageError`` if a run could not write ``path``: ``storage.paths.check_run_output``
    refuses it (it exists without ``overwrite``, is a folder, has a sidecar's name or a foreign
    sidecar beside it), or another live run holds it. (The writer checks again under the lock.)"""
    from storage.paths import check_run_output
    from storage.runlock import LockedError, RunLock

    # Not a sidecar's name, and a sidecar already beside it provably a leftover of a run.
    p = check_run_output(path, overwrite=overwrite, what="")
    if p.parent.is_dir():
        try:
            RunLock(p).release()
        except LockedError as e:
            raise StorageError(
                f"{p}: another run (process {e}) is writing this file; choose another output"
            ) from None
        except OSError as e:
            raise StorageError(f"{p}: cannot write here: {e.strerror or e}") from e


def _past(due: float) -> Callable[[], bool]:
    """True once the monotonic clock has passed ``due`` (an advance's ``stop``)."""
    return lambda: time.monotonic() >= due


@dataclass
class RunResult:
    path: Path
    run_id: str
    status: str
    steps: int
    sim_s: int
    wall_s: float
    summary: dict[str, Any]


def run(
    scenario: Scenario,
    text: str,
    out: str | Path,
    seed: int | None = None,
    duration_s: int | None = None,
    overwrite: bool = False,
    progress: Callable[[int], None] | None = None,
    extra_events: tuple[ScheduledEvent, ...] = (),
    publish_live: bool = True,
    on_chunk: Callable[[Frames], None] | None = None,
    on_ready: Callable[[], None] | None = None,
) -> RunResult:
    """Run a scenario headless to completion; return its KPI summary. ``on_chunk`` gets the frames
    of each hand-over to the writer (at least every ``COMMIT_S`` of wall time, at most a chunk of
    steps; the closing one has no steps) after they are queued for writing."""
    t0 = time.perf_counter()
    done = 0
    status = "failed"
    reason = ""
    session = Session(
        scenario,
        text,
        out,
        seed=seed,
        duration_s=duration_s,
        overwrite=overwrite,
        extra_events=extra_events,
        publish_live=publish_live,
        on_chunk=on_chunk,
        warmup_progress=progress,
        on_ready=on_ready,
    )
    try:
        total = session.total_steps
        while done < total:
            due = time.monotonic() + COMMIT_S
            frames = session.advance(min(session.chunk_steps, total - done), stop=_past(due))
            n = len(frames["factory_ts"]["time_s"])
            done += n
            if progress:
                progress(n)
        status = "complete"
    except KeyboardInterrupt:
        status = "stopped"
        raise
    except Exception as e:  # recorded with the run (``failed``), then on to the caller
        reason = f"{type(e).__name__}: {str(e).strip()[:500]}"
        raise
    finally:
        with signals_deferred():  # a second Ctrl-C or SIGTERM must not cut the closing short
            session.close(status, reason)
    wall = time.perf_counter() - t0
    from storage.reader import open_run_file

    con = open_run_file(session.out)
    try:
        summary = kpi_summary(con, session.run_id)
    finally:
        con.close()
    return RunResult(session.out, session.run_id, status, done, session.sim.t_s, wall, summary)


@dataclass
class Recording:
    """What a re-run needs from a recorded run."""

    path: Path
    run_id: str
    scenario: Scenario
    text: str
    seed: int
    sim_time_s: int
    operator_events: tuple[ScheduledEvent, ...]


def read_recording(path: str | Path) -> Recording:
    """The scenario, seed, simulated time and operator what-ifs of a file's latest run."""
    from scenarios.spec import parse
    from storage.reader import latest_run_id, open_run_file

    con = open_run_file(path)
    try:
        run_id = latest_run_id(con)
        text, name, seed, sim_t = con.sql(
            "SELECT scenario_toml, scenario_name, seed, sim_time_s FROM runs WHERE run_id = ?",
            params=[run_id],
        ).fetchall()[0]
        rows = con.sql(
            "SELECT time_s, kind, arg, value, duration_s FROM events "
            "WHERE run_id = ? AND source = 'operator' ORDER BY time_s, rowid",
            params=[run_id],
        ).fetchall()
    finally:
        con.close()
    spec = parse(text, f"{path} (recorded scenario)", base_dir=Path(path).parent)
    for v in spec.variants:
        if v.name == name:
            spec = v
            break
    events = tuple(ScheduledEvent(int(t), k, a, float(v), int(d)) for t, k, a, v, d in rows)
    return Recording(Path(path), run_id, spec, text, int(seed), int(sim_t), events)


def rerun(
    path: str | Path,
    out: str | Path,
    overwrite: bool = False,
    progress: Callable[[int], None] | None = None,
) -> RunResult:
    """Re-run a recording headless: same scenario, seed and duration, with its operator what-ifs
    applied at the times they were recorded. The telemetry is identical to the original's."""
    rec = read_recording(path)
    if rec.sim_time_s <= 0:
        raise ScenarioError(f"{path}: the recorded run has no steps to re-run")
    return run(
        rec.scenario,
        rec.text,
        out,
        seed=rec.seed,
        duration_s=rec.sim_time_s,
        overwrite=overwrite,
        progress=progress,
        extra_events=rec.operator_events,
    )


def _same_column(a: Any, b: Any) -> bool:
    """Bit-for-bit equal, counting NaN (e.g. J/token while nothing is served) equal to NaN."""
    if a.dtype.kind == "f":
        return bool(np.array_equal(a, b, equal_nan=True))
    return bool(np.array_equal(a, b))


def same_telemetry(
    a: str | Path, b: str | Path, tables: tuple[str, ...] = ("factory_ts", "ultraserver_ts")
) -> list[str]:
    """Tables whose rows differ between two recordings (run ids aside); empty when identical."""
    from storage.reader import latest_run_id, open_run_file

    out: list[str] = []
    cons = [open_run_file(a), open_run_file(b)]
    try:
        ids = [latest_run_id(c) for c in cons]
        for t in tables:
            key = "time_s, ultraserver_id" if t == "ultraserver_ts" else "time_s"
            q = f"SELECT * EXCLUDE (run_id) FROM {t} WHERE run_id = ? ORDER BY {key}"
            x, y = (c.sql(q, params=[i]).to_arrow_table() for c, i in zip(cons, ids, strict=True))
            if (
                x.num_rows != y.num_rows
                or x.schema != y.schema
                or not all(
                    _same_column(x[n].to_numpy(zero_copy_only=False), y[n].to_numpy(zero_copy_only=False))
                    for n in x.column_names
                )
            ):
                out.append(t)
    finally:
        for c in cons:
            c.close()
    return out
