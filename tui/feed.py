"""What the TUI shows, as plain data: ``Snapshot`` and the two sources that produce it.

``LiveFeed`` wraps a running ``scenarios.runner.Session`` (its ``advance`` is called from the
simulation worker thread only); ``ReplayFeed`` reads a recorded run from a DuckDB connection. Both
produce the same immutable ``Snapshot`` (copied arrays, no references into the simulation), so the
screens do not care where the data came from. No Textual imports here.
"""

from __future__ import annotations

import queue
from collections import deque
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import numpy.typing as npt

HOUR_S = 3600
DAY_S = 86400
PLOT_WINDOW_S = 24 * HOUR_S  # the plots show the last simulated day
EVENT_TAIL = 200  # events kept for the log
ROUTINE_KINDS = frozenset({"job_start", "job_end"})  # hidden by the log's "notable" filter
QUEUE_ROWS = 50  # queued jobs shown
DEFAULT_THROTTLE_C = 90.0
PLOT_KEYS = ("time_s", "facility_power_w", "it_power_w", "pue", "tokens_per_s", "outdoor_temp_c")
US_KEYS = ("power_w", "chips_busy", "chips_failed", "activity", "max_chip_temp_c")

EventRow = tuple[int, str, str, str, str]  # time_s, kind, target, detail, source
QueueRow = tuple[int, str, int, int]  # job_id, name, chips, wait_s
Array = npt.NDArray[Any]


@dataclass(frozen=True)
class Meta:
    """Fixed facts about the run on screen."""

    mode: str  # "live" | "replay"
    scenario: str
    path: str
    run_id: str
    dt_s: int
    ultraservers: int
    chips_total: int
    throttle_c: float = 90.0


@dataclass(frozen=True)
class Snapshot:
    """Everything the Overview needs for one point in simulated time (plain values only)."""

    t_s: int  # time_s of the factory row shown
    row: dict[str, float]  # that factory_ts row
    prev: dict[str, float] | None  # the row about one simulated hour earlier (trend arrows)
    hist: dict[str, Array]  # PLOT_KEYS over the last PLOT_WINDOW_S, oldest first
    cost_usd: float  # electricity cost up to and including this row
    co2_kg: float
    queue: list[QueueRow]
    queue_len: int
    events: list[EventRow]  # newest last, at most EVENT_TAIL
    events_total: int  # events up to this time (the tail is the last len(events) of them)
    notable: list[EventRow] = field(default_factory=list)  # the same without ROUTINE_KINDS
    notable_total: int = 0
    us: dict[str, Array] = field(default_factory=dict)  # per-UltraServer values at t_s


def _row(cols: dict[str, Array], i: int) -> dict[str, float]:
    return {k: float(v[i]) for k, v in cols.items()}


def _build(cols: dict[str, Array], i: int, **rest: Any) -> Snapshot:
    """Snapshot at row ``i`` of ``cols`` (time-ordered factory columns, at least up to ``i``)."""
    times = cols["time_s"]
    t = int(times[i])
    j = int(np.searchsorted(times[: i + 1], t - HOUR_S, side="right")) - 1
    k = int(np.searchsorted(times[: i + 1], t - PLOT_WINDOW_S, side="right"))
    return Snapshot(
        t_s=t,
        row=_row(cols, i),
        prev=_row(cols, j) if j >= 0 else None,
        hist={key: np.array(cols[key][k : i + 1], dtype=np.float64) for key in PLOT_KEYS},
        **rest,
    )


class History:
    """Rolling window of the latest factory rows (all columns), amortised O(1) append."""

    def __init__(self, capacity: int) -> None:
        self.cap = max(2, capacity)
        self.buf: dict[str, Array] = {}
        self.n = 0

    def extend(self, cols: dict[str, Array]) -> None:
        k = len(cols["time_s"])
        if not self.buf:
            self.buf = {key: np.empty(2 * self.cap, dtype=np.float64) for key in cols}
        if k >= self.cap:
            for key, v in cols.items():
                self.buf[key][: self.cap] = v[-self.cap :]
            self.n = self.cap
            return
        if self.n + k > 2 * self.cap:
            keep = min(self.n, self.cap)
            for v in self.buf.values():
                v[:keep] = v[self.n - keep : self.n]
            self.n = keep
        for key, v in cols.items():
            self.buf[key][self.n : self.n + k] = v
        self.n += k

    def view(self) -> dict[str, Array]:
        lo = max(0, self.n - self.cap)
        return {key: v[lo : self.n] for key, v in self.buf.items()}


class LiveFeed:
    """The live session as snapshots. ``advance`` runs in the simulation worker thread only;
    ``request_inject`` may be called from any thread (it is applied before the next advance)."""

    def __init__(self, session: Any) -> None:
        self.session = session
        sim = session.sim
        self.meta = Meta(
            mode="live",
            scenario=session.scenario.name,
            path=str(session.out),
            run_id=session.run_id,
            dt_s=sim.dt_s,
            ultraservers=sim.topo.ultraservers,
            chips_total=sim.topo.chips,
            throttle_c=_throttle_c(session.params),
        )
        self.history = History(-(-(PLOT_WINDOW_S + HOUR_S) // sim.dt_s) + 1)
        self.events: deque[EventRow] = deque(maxlen=EVENT_TAIL)
        self.events_total = 0
        self.notable: deque[EventRow] = deque(maxlen=EVENT_TAIL)
        self.notable_total = 0
        self.cost_usd = 0.0
        self.co2_kg = 0.0
        self._inject: queue.SimpleQueue[tuple[str, str, float, int]] = queue.SimpleQueue()
        self.steps_done = 0
        self.total_steps = int(session.total_steps)

    @property
    def remaining(self) -> int:
        """Steps left in the session's duration (the live CLI asks for ten years)."""
        return max(0, self.total_steps - self.steps_done)

    def request_inject(self, kind: str, target: str, value: float = 0.0, duration_s: int = 0) -> None:
        self._inject.put((kind, target, value, duration_s))

    def advance(self, steps: int) -> Snapshot:
        sim = self.session.sim
        while True:
            try:
                kind, target, value, duration_s = self._inject.get_nowait()
            except queue.Empty:
                break
            sim.inject(kind, target, value, duration_s)
        frames = self.session.advance(steps)
        self.steps_done += steps
        f = frames["factory_ts"]
        self.history.extend(f)
        self.cost_usd += float(np.sum(f["cost_usd"]))
        self.co2_kg += float(np.sum(f["co2_kg"]))
        ev = frames["events"]
        new = list(zip(ev["time_s"].tolist(), ev["kind"], ev["target"], ev["detail"], ev["source"], strict=True))
        self.events.extend(new)
        self.events_total += len(new)
        notable = [e for e in new if e[1] not in ROUTINE_KINDS]
        self.notable.extend(notable)
        self.notable_total += len(notable)
        nus = self.meta.ultraservers
        u = frames["ultraserver_ts"]
        us = {key: np.array(u[key][-nus:], dtype=np.float64) for key in US_KEYS}
        view = self.history.view()
        t = int(sim.t_s - sim.dt_s)  # time_s of the last row
        queue_rows = [(j, name, chips, max(0, wait - (sim.t_s - t))) for j, name, chips, wait in sim.queue_view(QUEUE_ROWS)]
        return _build(
            view, len(view["time_s"]) - 1,
            cost_usd=self.cost_usd, co2_kg=self.co2_kg,
            queue=queue_rows, queue_len=len(sim.queue),
            events=list(self.events), events_total=self.events_total,
            notable=list(self.notable), notable_total=self.notable_total, us=us,
        )


def _throttle_c(params: Any) -> float:
    """Junction temperature where clocks start throttling (hall-strip warning colour)."""
    return float(getattr(getattr(params, "cooling", None), "throttle_temp_c", DEFAULT_THROTTLE_C))


def _throttle_from_toml(text: str | None) -> float:
    try:
        from scenarios.spec import parse

        return _throttle_c(parse(text or "", "run").to_params())
    except Exception:  # an old or foreign scenario text: fall back to the default
        return DEFAULT_THROTTLE_C


class ReplayFeed:
    """A recorded run held in memory (factory rows, events, jobs); UltraServer rows are read for
    the time on screen only."""

    def __init__(self, con: Any, run_id: str, path: str) -> None:
        self.con = con
        self.run_id = run_id
        runs = con.sql("SELECT * FROM runs WHERE run_id = ?", params=[run_id]).to_arrow_table().to_pylist()
        if not runs:
            raise ValueError(f"{path}: no run {run_id!r}")
        run = runs[0]
        self.status = str(run["status"])
        self.meta = Meta(
            mode="replay",
            scenario=str(run["scenario_name"]),
            path=str(path),
            run_id=run_id,
            dt_s=int(run["dt_s"]),
            ultraservers=int(run["ultraservers"]),
            chips_total=int(run["chips_total"]),
            throttle_c=_throttle_from_toml(run["scenario_toml"]),
        )
        tb = con.sql(
            "SELECT * EXCLUDE (run_id) FROM factory_ts WHERE run_id = ? ORDER BY time_s", params=[run_id]
        ).to_arrow_table()
        self.cols: dict[str, Array] = {
            name: tb.column(name).to_numpy().astype(np.float64) for name in tb.column_names
        }
        self.times = tb.column("time_s").to_numpy().astype(np.int64)
        self.n = len(self.times)
        self.cum_cost = np.cumsum(self.cols["cost_usd"]) if self.n else np.zeros(0)
        self.cum_co2 = np.cumsum(self.cols["co2_kg"]) if self.n else np.zeros(0)
        ev = con.sql(
            "SELECT time_s, kind, target, detail, source FROM events WHERE run_id = ? ORDER BY time_s, rowid",
            params=[run_id],
        ).to_arrow_table()
        ev_t = ev.column("time_s").to_numpy().astype(np.int64)
        order = np.argsort(ev_t, kind="stable")  # already in (time, file) order; kept explicit
        self.ev_time = ev_t[order]
        cols = [ev.column(c).to_pylist() for c in ("kind", "target", "detail", "source")]
        self.ev_rows: list[EventRow] = [
            (int(ev_t[o]), cols[0][o], cols[1][o], cols[2][o], cols[3][o]) for o in order.tolist()
        ]
        kinds = np.array(cols[0], dtype=object)[order] if len(order) else np.zeros(0, dtype=object)
        nb = np.flatnonzero(~np.isin(kinds, list(ROUTINE_KINDS)))
        self.nb_time = self.ev_time[nb]
        self.nb_rows = [self.ev_rows[i] for i in nb.tolist()]
        targets = np.array(cols[1], dtype=object)[order] if len(order) else np.zeros(0, dtype=object)
        js = np.flatnonzero((kinds == "job_start") | (kinds == "job_interrupted"))
        self.js_time = self.ev_time[js]
        self.js_job = np.array([int(str(x).rsplit(":", 1)[-1]) for x in targets[js]], dtype=np.int64)
        self.js_start = kinds[js] == "job_start"
        jobs = con.sql(
            "SELECT job_id, name, chips, submit_time_s, start_time_s FROM jobs WHERE run_id = ? "
            "ORDER BY submit_time_s, job_id",
            params=[run_id],
        ).to_arrow_table()
        self.job_id = jobs.column("job_id").to_numpy().astype(np.int64)
        self.job_name: list[str] = jobs.column("name").to_pylist()
        self.job_chips = jobs.column("chips").to_numpy().astype(np.int64)
        self.job_submit = jobs.column("submit_time_s").to_numpy().astype(np.int64)
        self.job_start = jobs.column("start_time_s").to_numpy().astype(np.int64)

    @property
    def t_first(self) -> int:
        return int(self.times[0]) if self.n else 0

    @property
    def t_last(self) -> int:
        return int(self.times[-1]) if self.n else 0

    def index_at(self, t_s: float) -> int:
        """Index of the last row at or before ``t_s`` (clamped to the run)."""
        i = int(np.searchsorted(self.times, t_s, side="right")) - 1
        return max(0, min(self.n - 1, i))

    def queue_at(self, t: int) -> tuple[list[QueueRow], int]:
        """Jobs waiting at ``t``: submitted by then and not running or done. The jobs table keeps
        only each job's latest placement, so whether a job was placed at ``t`` comes from its last
        job_start / job_interrupted event at or before ``t``."""
        n = int(np.searchsorted(self.js_time, t, side="right"))
        placed = np.zeros(0, dtype=np.int64)
        if n:
            jobs, starts = self.js_job[:n][::-1], self.js_start[:n][::-1]
            ids, last = np.unique(jobs, return_index=True)  # last event of each job up to t
            placed = ids[starts[last]]
        idx = np.flatnonzero((self.job_submit <= t) & ~np.isin(self.job_id, placed))
        rows = [
            (int(self.job_id[j]), self.job_name[j], int(self.job_chips[j]), int(t - self.job_submit[j]))
            for j in idx[:QUEUE_ROWS].tolist()
        ]
        return rows, len(idx)

    def us_at(self, t: int) -> dict[str, Array]:
        tb = self.con.sql(
            f"SELECT {', '.join(US_KEYS)} FROM ultraserver_ts WHERE run_id = ? AND time_s = ? "
            "ORDER BY ultraserver_id",
            params=[self.run_id, t],
        ).to_arrow_table()
        return {k: tb.column(k).to_numpy().astype(np.float64) for k in US_KEYS}

    def snapshot(self, i: int) -> Snapshot | None:
        if not self.n:
            return None
        i = max(0, min(self.n - 1, i))
        t = int(self.times[i])
        q, qlen = self.queue_at(t)
        n_ev = int(np.searchsorted(self.ev_time, t, side="right"))
        n_nb = int(np.searchsorted(self.nb_time, t, side="right"))
        return _build(
            self.cols, i,
            cost_usd=float(self.cum_cost[i]), co2_kg=float(self.cum_co2[i]),
            queue=q, queue_len=qlen,
            events=self.ev_rows[max(0, n_ev - EVENT_TAIL) : n_ev], events_total=n_ev,
            notable=self.nb_rows[max(0, n_nb - EVENT_TAIL) : n_nb], notable_total=n_nb,
            us=self.us_at(t),
        )
