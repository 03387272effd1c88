"""Where the TUI's numbers come from: a live session held in memory, or a recorded run.

Every panel of the console is one named query (``storage.queries``). In a replay the panel shows
the result of that SQL on the file. Live, the hot panels (KPIs, plots, floor, chips, events, energy)
are computed from the simulation's latest step kept in memory by ``LiveFeed`` — the same columns
the SQL would return on the file — and the slower tables (jobs, histories of one UltraServer) run
their SQL on the live file through the writer's database. No Textual imports here.
"""

from __future__ import annotations

import math
import queue
import threading
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from storage import queries as Q
from twin.physics.design import Design, derive
from twin.spec.telemetry import TABLES

HOUR_S = 3600
DAY_S = 86400
WINDOWS_S = (HOUR_S, 6 * HOUR_S, DAY_S, 7 * DAY_S)  # plot windows, ``w`` cycles
DEFAULT_WINDOW_S = DAY_S
MAX_HISTORY_ROWS = 20_000  # live plot history is cut to this many steps (7 days at dt = 60 s)
DEFAULT_THROTTLE_C = 90.0
EVENT_ROWS = ("time_s", "kind", "target", "detail", "source")

# Panel queries computed in memory in a live session (the others run their SQL on the live file).
LIVE_PANELS = frozenset(
    {
        "kpis",
        *Q.SERIES,
        "events",
        "events_notable",
        "floor",
        "rows",
        "chips",
        "us_jobs",
        "us_history",
        "us_events",
        "power_chain",
        "cooling_plant",
        "site_grid",
        "halls",
        "hall_floor",
        "hall_rows",
    }
)
MAX_US_HISTORY_CELLS = 500_000  # live per-UltraServer history: steps x UltraServers kept
US_HIST_COLS = ("power_w", "max_chip_temp_c", "coolant_return_c", "activity", "clock")
HARDWARE_EVENTS = 2000  # live events about chips, servers, UltraServers and rows kept

# Factory columns the live history keeps (the KPI and plot columns), plus derived ones.
_KPI_COLS = (
    "it_power_w",
    "facility_power_w",
    "pue",
    "busy_share",
    "tokens_per_s",
    "energy_per_token_j",
    "usd_per_mtok",
    "queue_jobs",
    "max_chip_temp_c",
    "chips_failed",
    "cost_usd",
    "co2_kg",
    "cost_so_far_usd",
    "co2_so_far_kg",
    "slo_attainment",
)
_RAW_HIST = (
    "time_s",
    "it_power_w",
    "facility_power_w",
    "pue",
    "chips_busy",
    "chips_total",
    "activity",
    "tokens_per_s",
    "energy_per_token_j",
    "price_usd_per_mwh",
    "queue_jobs",
    "running_jobs",
    "max_chip_temp_c",
    "chips_failed",
)
HIST_KEYS = tuple(dict.fromkeys((*_RAW_HIST, *(c for cols in Q.SERIES.values() for c in cols), *_KPI_COLS)))
# The floor queries' columns (time_s: the ultraserver_ts sample's, older than the step between samples).
US_COLS = tuple(c.name for c in TABLES["ultraserver_ts"] if c.name not in ("run_id", "cdu_flow_fraction"))
# The campus level's columns (the "halls" query over hall_ts; ``tripped`` is its ultraservers_tripped).
HALL_COLS = tuple(
    "tripped" if c.name == "ultraservers_tripped" else c.name
    for c in TABLES["hall_ts"]
    if c.name not in ("run_id", "time_s")
)

Array = npt.NDArray[Any]
Cols = dict[str, Array]


def sample_time(cols: Cols | None) -> int | None:
    """Time of the ultraserver_ts sample a floor or rows query's columns are of (None: no rows)."""
    t = cols.get("time_s") if cols else None
    return int(t[0]) if t is not None and len(t) else None


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
    chips_per_us: int
    servers_per_us: int
    us_row: tuple[int, ...]  # row (CDU) of each UltraServer
    throttle_c: float = DEFAULT_THROTTLE_C
    us_power_w: float = 0.0  # full-load IT power of one UltraServer (colour scale), 0 unknown
    slos: tuple[tuple[str, float, float], ...] = ()  # per service: (name, TTFT SLO s, TPOT SLO s)
    chillers: int = 0  # the plant's chiller units (0 unknown)
    economizers: int = 0  # its cooling towers or dry coolers
    plant: str = "tower"  # "tower" | "dry" | "hybrid"
    us_hall: tuple[int, ...] = ()  # hall of each UltraServer on a campus (empty: one hall)
    ramp_limit_mw_per_min: float = 0.0  # the grid connection's ramp limit (0: none)
    battery_power_w: float = 0.0  # the site battery's ratings at the connection (0: none)
    battery_energy_j: float = 0.0
    battery_efficiency: float = 0.0

    @property
    def rows(self) -> int:
        return max(self.us_row) + 1 if self.us_row else 1

    @property
    def halls(self) -> int:
        return max(self.us_hall) + 1 if self.us_hall else 1

    def hall_span(self, hall: int) -> tuple[int, int]:
        """First and last UltraServer of ``hall`` (ids are campus-wide, hall by hall)."""
        if not self.us_hall:
            return 0, self.ultraservers - 1
        lo = self.us_hall.index(hall)
        return lo, lo + self.us_hall.count(hall) - 1

    def hall_of(self, us: int) -> int:
        return self.us_hall[us] if self.us_hall else 0

    @property
    def chips_per_server(self) -> int:
        return max(1, self.chips_per_us // max(1, self.servers_per_us))


def params_for(meta: Meta, t: int | None, **extra: Any) -> dict[str, Any]:
    """Parameters of the panel queries at time ``t``."""
    p: dict[str, Any] = {
        "run_id": meta.run_id,
        "t": int(t or 0),
        "chips_per_us": meta.chips_per_us,
        "servers_per_us": meta.servers_per_us,
        "window_s": DEFAULT_WINDOW_S,
        "dt_s": meta.dt_s,
        "ramp_limit_mw_per_min": meta.ramp_limit_mw_per_min,
    }
    p.update(extra)
    if "us" in p:
        p["row"] = meta.us_row[int(p["us"])] if meta.us_row else 0
    if "hall" in p:
        p["us_lo"], p["us_hi"] = meta.hall_span(int(p["hall"]))
    return p


def us_halls(params: Any, ultraservers: int) -> tuple[int, ...]:
    """The hall of each UltraServer of a campus from its scenario's ``[[halls]]`` (UltraServers are
    numbered hall by hall); empty for one hall, or when the halls do not add up to ``ultraservers``."""
    try:
        counts = [sum(int(r.ultraservers) for r in h.pools()) for h in params.halls]
    except (AttributeError, TypeError, ValueError):
        return ()
    if len(counts) < 2 or sum(counts) != ultraservers:
        return ()
    return tuple(int(h) for h in np.repeat(np.arange(len(counts)), counts))


def _nominal_us_power(design: Design | None) -> float:
    """Full-load IT power of one UltraServer (chips at TDP, hosts, switches, rectifier losses)
    from the run's Design; 0 unknown."""
    return float(design.us_full_load_it_w) if design is not None else 0.0


def _throttle_c(design: Design | None) -> float:
    return float(design.throttle_temp_c) if design is not None else DEFAULT_THROTTLE_C


def _run_design(run: dict[str, Any]) -> Design | None:
    """The Design recorded with the run; for a file written before Designs were recorded, the
    one its scenario text gives."""
    text = run.get("design_json")
    if text:
        try:
            return Design.from_json(str(text))
        except (ValueError, TypeError):
            pass
    params = _params_from_toml(run.get("scenario_toml"))
    try:
        return derive(params) if params is not None else None
    except Exception:  # parameters of an unexpected shape
        return None


def _service_slos(params: Any) -> tuple[tuple[str, float, float], ...]:
    """Each inference service's latency SLO (p99 TTFT and TPOT) from the scenario."""
    try:
        return tuple((str(sp.name), float(sp.ttft_slo_s), float(sp.tpot_slo_s)) for sp in params.services)
    except (AttributeError, TypeError):
        return ()


def _plant_units(params: Any) -> dict[str, Any]:
    """The plant's unit counts and kind from the scenario (none known: empty)."""
    try:
        cp = params.cooling
        return {
            "chillers": int(cp.chiller_units),
            "economizers": int(cp.economizer_units),
            "plant": str(cp.plant),
        }
    except (AttributeError, TypeError, ValueError):
        return {}


def _grid_facts(params: Any) -> dict[str, Any]:
    """The grid connection's ramp limit and site battery ratings from the scenario (none: empty)."""
    try:
        gp = params.grid
        return {
            "ramp_limit_mw_per_min": float(gp.ramp_limit_mw_per_min),
            "battery_power_w": float(gp.battery_power_w),
            "battery_energy_j": float(gp.battery_energy_j),
            "battery_efficiency": float(gp.battery_efficiency),
        }
    except (AttributeError, TypeError, ValueError):
        return {}


def _params_from_toml(text: str | None) -> Any:
    try:
        from scenarios.spec import parse

        return parse(text or "", "run").to_params()
    except Exception:  # an old or foreign scenario text: the defaults will do
        return None


class History:
    """Rolling window of the latest rows (a fixed set of columns), amortised O(1) append."""

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


class UsHistory:
    """Rolling window of per-UltraServer columns: [steps, ultraservers] arrays."""

    def __init__(self, capacity: int, n_us: int) -> None:
        self.cap = max(2, capacity)
        self.n_us = n_us
        self.t = np.empty(2 * self.cap, dtype=np.int64)
        # The file's types: power float64, the rest float32 (so live equals the recording).
        self.buf = {
            k: np.empty((2 * self.cap, n_us), dtype=np.float64 if k == "power_w" else np.float32)
            for k in US_HIST_COLS
        }
        self.n = 0

    def extend(self, times: Array, u: dict[str, Any]) -> None:
        k = len(times)
        cols = {c: np.asarray(u[c], dtype=self.buf[c].dtype).reshape(k, self.n_us) for c in US_HIST_COLS}
        if k >= self.cap:
            self.t[: self.cap] = times[-self.cap :]
            for c, v in cols.items():
                self.buf[c][: self.cap] = v[-self.cap :]
            self.n = self.cap
            return
        if self.n + k > 2 * self.cap:
            keep = min(self.n, self.cap)
            self.t[:keep] = self.t[self.n - keep : self.n]
            for v in self.buf.values():
                v[:keep] = v[self.n - keep : self.n]
            self.n = keep
        self.t[self.n : self.n + k] = times
        for c, v in cols.items():
            self.buf[c][self.n : self.n + k] = v
        self.n += k

    def series(self, us: int, window_s: float) -> Cols:
        lo = max(0, self.n - self.cap)
        t = self.t[lo : self.n]
        a = lo + int(np.searchsorted(t, (t[-1] if len(t) else 0) - window_s, side="right"))
        out: Cols = {"time_s": self.t[a : self.n].copy()}
        for c in US_HIST_COLS:
            out[c] = self.buf[c][a : self.n, us].copy()
        return out


def _hardware_target(target: str) -> bool:
    return target.split(":", 1)[0] in ("ultraserver", "server", "chip", "row")


def _event_cols(rows: list[tuple[Any, ...]], total: int) -> Cols:
    """Event rows (oldest first) as the events query returns them: newest first, with the total."""
    rows = rows[::-1]
    out: Cols = {
        "time_s": np.array([r[0] for r in rows], dtype=np.int64),
        **{k: np.array([r[i] for r in rows], dtype=object) for i, k in enumerate(EVENT_ROWS[1:], 1)},
    }
    out["total"] = np.full(len(rows), total, dtype=np.int64)
    return out


def scenario_label(name: str, scenario_toml: str | None, width: int = 60) -> str:
    """The scenario's name for the status line, with the ``--set`` overrides its recorded text
    names (``default (modified: site.climate=hot)``), shortened to about ``width`` characters."""
    from storage.kpis import recorded_overrides

    sets = recorded_overrides(scenario_toml)
    if not sets:
        return name
    shown: list[str] = []
    for i, o in enumerate(sets):
        rest = len(sets) - i
        if shown and len(name) + sum(len(x) + 2 for x in shown) + len(o) > width:
            shown.append(f"+{rest} more")
            break
        shown.append(o if len(o) <= width else o[: width - 1] + "…")
    return f"{name} (modified: {', '.join(shown)})"


class LiveFeed:
    """The live session. ``advance`` runs in the simulation worker thread only and updates the
    in-memory state under ``lock``; ``panel`` (UI thread) reads it; ``request_inject`` may be called
    from any thread (applied before the next advance, so recorded at the next step)."""

    def __init__(self, session: Any) -> None:
        self.session = session
        sim = session.sim
        topo = sim.topo
        self.meta = Meta(
            mode="live",
            scenario=scenario_label(session.scenario.name, getattr(session, "scenario_text", None)),
            path=str(session.out),
            run_id=session.run_id,
            dt_s=sim.dt_s,
            ultraservers=topo.ultraservers,
            chips_total=topo.chips,
            chips_per_us=topo.chips_per_us,
            servers_per_us=topo.servers_per_us,
            us_row=tuple(int(r) for r in topo.us_row),
            throttle_c=_throttle_c(sim.design),
            us_power_w=_nominal_us_power(sim.design),
            slos=_service_slos(session.params),
            us_hall=tuple(int(h) for h in getattr(sim, "hall_us", ())),
            **_plant_units(session.params),
            **_grid_facts(session.params),
        )
        self.lock = threading.Lock()
        cap = min(MAX_HISTORY_ROWS, math.ceil((max(WINDOWS_S) + HOUR_S) / sim.dt_s) + 1)
        self.history = History(cap)
        self.us_history = UsHistory(
            min(cap, MAX_US_HISTORY_CELLS // max(1, topo.ultraservers)), topo.ultraservers
        )
        self.hw_events: deque[tuple[Any, ...]] = deque(maxlen=HARDWARE_EVENTS)
        self.t: int | None = None  # time_s of the last step
        self.row: dict[str, float] = {}  # every factory column at t
        self.us_now: Cols = {}
        self.halls_now: Cols = {}
        self.chips_now: Cols = {}
        self.job_facts: dict[int, tuple[str, str, int]] = {}
        self.events: deque[tuple[Any, ...]] = deque(maxlen=Q.EVENT_LIMIT)
        self.notable: deque[tuple[Any, ...]] = deque(maxlen=Q.EVENT_LIMIT)
        self.events_total = 0
        self.notable_total = 0
        self.cost_usd = 0.0
        self.co2_kg = 0.0
        self._inject: queue.SimpleQueue[tuple[str, str, float, int]] = queue.SimpleQueue()
        self.steps_done = 0
        self.last_steps = 0
        self.total_steps = int(session.total_steps)
        self.injected: list[tuple[str, str, float, int]] = []
        self.injected_at: list[int] = []  # simulated time each what-if was applied at

    @property
    def remaining(self) -> int:
        """Steps left in the session's duration (the live CLI asks for ten years)."""
        return max(0, self.total_steps - self.steps_done)

    def request_inject(self, kind: str, target: str, value: float = 0.0, duration_s: int = 0) -> None:
        self._inject.put((kind, str(target), float(value), int(duration_s)))

    # ------------------------------------------------------------------ worker thread
    def inject_pending(self) -> bool:
        return not self._inject.empty()

    def advance(self, steps: int, stop: Callable[[], bool] | None = None) -> int:
        """Apply pending what-ifs, run up to ``steps`` steps one at a time — stopping after the
        step during which ``stop()`` became true (pause, speed change, what-if, quit) — and update
        the in-memory state; returns the time of the last step (``last_steps``: how many ran).
        The writer gets large batches: steps are held and committed ``chunk_steps`` at a time."""
        sim = self.session.sim
        while True:
            try:
                item = self._inject.get_nowait()
            except queue.Empty:
                break
            sim.inject(*item)
            self.injected.append(item)
            self.injected_at.append(int(sim.t_s))
        # One advance for the whole slice (its fixed cost paid once), asking ``stop`` after each step.
        frames = self.session.advance(max(1, steps), hold_steps=int(self.session.chunk_steps), stop=stop)
        ran = len(frames["factory_ts"]["time_s"])
        self.last_steps = ran
        self.steps_done += ran
        return self._update(frames)

    def commit(self) -> None:
        """Hand the steps held for the writer over now (paused, or a second has passed)."""
        self.session.commit()

    def _update(self, frames: dict[str, Any]) -> int:
        """Take in the frames of the steps just run (simulation thread): history, latest samples,
        chips and their jobs, events; the state the UI reads is swapped under ``lock``."""
        sim = self.session.sim
        f = frames["factory_ts"]
        cols = self._history_columns(frames)
        self.cost_usd = float(cols["cost_so_far_usd"][-1])
        self.co2_kg = float(cols["co2_so_far_kg"][-1])
        ev = frames["events"]
        new = list(
            zip(ev["time_s"].tolist(), ev["kind"], ev["target"], ev["detail"], ev["source"], strict=True)
        )
        notable = [e for e in new if e[1] not in Q.ROUTINE_EVENT_KINDS]
        hardware = [e for e in notable if _hardware_target(e[2])]
        nus = self.meta.ultraservers
        u = frames["ultraserver_ts"]
        # The per-UltraServer tier may be recorded every few steps (a campus): the latest sample stays
        # (with its time_s: the Floor says how old it is).
        us_rows = len(u["time_s"])
        us_now = {k: np.array(u[k][-nus:]) for k in US_COLS} if us_rows >= nus else None
        h = frames.get("hall_ts")
        nh = self.meta.halls
        halls_now = None
        if h is not None and len(h["time_s"]) >= nh:
            halls_now = {
                k: np.array(h["ultraservers_tripped" if k == "tripped" else k][-nh:]) for k in HALL_COLS
            }
        chips, facts = self._chips_and_jobs(sim)
        with self.lock:
            self.history.extend(cols)
            if us_rows:
                self.us_history.extend(np.asarray(u["time_s"][::nus], dtype=np.int64), u)
            self.hw_events.extend(hardware)
            self.t = int(f["time_s"][-1])
            self.row = {k: float(v[-1]) for k, v in f.items()}
            if us_now is not None:
                self.us_now = us_now
            if halls_now is not None:
                self.halls_now = halls_now
            self.chips_now = chips
            self.job_facts = facts
            self.events.extend(new)
            self.events_total += len(new)
            self.notable.extend(notable)
            self.notable_total += len(notable)
        return self.t

    def _history_columns(self, frames: dict[str, Any]) -> dict[str, Array]:
        """The history columns of the steps just run: the factory series, the derived shares and
        prices, cost and CO2 so far (carried on from the steps before) and SLO attainment."""
        f = frames["factory_ts"]
        n = len(f["time_s"])
        cols: dict[str, Array] = {k: np.asarray(f[k], dtype=np.float64) for k in _RAW_HIST}
        for k in HIST_KEYS:
            if k not in cols and k in f:
                cols[k] = np.asarray(f[k], dtype=np.float64)
        cols["busy_share"] = cols["chips_busy"] / cols["chips_total"]
        cols["usd_per_mtok"] = cols["energy_per_token_j"] * cols["price_usd_per_mwh"] / 3600.0
        cols["cost_so_far_usd"] = self.cost_usd + np.cumsum(f["cost_usd"])
        cols["co2_so_far_kg"] = self.co2_kg + np.cumsum(f["co2_kg"])
        cols["slo_attainment"] = self._slo(frames.get("service_ts"), n)
        return cols

    @staticmethod
    def _chips_and_jobs(sim: Any) -> tuple[Cols, dict[int, tuple[str, str, int]]]:
        """The state of every chip now and the facts of the jobs on chips (kind, name, gang size),
        read here in the simulation thread."""
        # Copies (np.array): the UI reads these while the simulation moves on.
        chips = {
            "job_id": sim.chip_job_ids(),
            "neuroncore_utilization": np.array(sim.chip_activity, dtype=np.float32),
            "chip_power_w": np.array(sim.chip_power, dtype=np.float32),
            "t_junction_c": np.array(sim.chip_tj, dtype=np.float32),
            "failed": np.array(sim.chip_hw_failed, dtype=bool),
            "clock": np.array(sim.chip_clock, dtype=np.float32),
        }
        # Chips name jobs by id; the job table holds them in slots (finished ones leave it).
        from twin.spec.params import KIND_NAMES
        from twin.work.jobs import FREE

        jobs = sim.jobs
        a, names = jobs.a, jobs.names
        held = a["id"][: jobs.n]
        ids = np.unique(chips["job_id"][chips["job_id"] >= 0])
        slots = np.flatnonzero((a["state"][: jobs.n] != FREE) & np.isin(held, ids))
        facts = {
            int(held[k]): (KIND_NAMES[int(a["kind"][k])], names[k], int(a["chips"][k]))
            for k in slots.tolist()
        }
        return chips, facts

    @staticmethod
    def _slo(svc: dict[str, Any] | None, n: int) -> Array:
        """SLO attainment per step over all services (NaN where nothing was decided)."""
        if not svc or not len(svc["time_s"]):
            return np.full(n, np.nan)
        k = len(svc["time_s"]) // n
        met = np.asarray(svc["slo_met"], dtype=np.float64).reshape(n, k).sum(axis=1)
        dec = (
            (
                np.asarray(svc["requests_served"], dtype=np.float64)
                + np.asarray(svc["requests_dropped"], dtype=np.float64)
            )
            .reshape(n, k)
            .sum(axis=1)
        )
        out = np.full(n, np.nan)
        np.divide(met, dec, out=out, where=dec > 0)
        return out

    # ------------------------------------------------------------------ UI thread
    def panel(self, name: str, p: dict[str, Any]) -> Cols | None:
        """The columns panel query ``name`` would return on the file, from memory (None before the
        first step). Only for ``LIVE_PANELS``."""
        with self.lock:
            if self.t is None:
                return None
            if name == "kpis":
                return self._kpis()
            if name in Q.SERIES:
                return self._series(Q.SERIES[name], float(p.get("window_s", DEFAULT_WINDOW_S)))
            if name == "events":
                return _event_cols(list(self.events), self.events_total)
            if name == "events_notable":
                return _event_cols(list(self.notable), self.notable_total)
            if name == "floor":
                return dict(self.us_now) if self.us_now else None
            if name == "rows":
                return self._rows(self.us_now) if self.us_now else None
            if name == "halls":
                return dict(self.halls_now) if self.halls_now else None
            if name in ("hall_floor", "hall_rows"):
                if not self.us_now:
                    return None
                lo, hi = int(p["us_lo"]), int(p["us_hi"])
                part = {k: v[lo : hi + 1] for k, v in self.us_now.items()}
                if name == "hall_floor":
                    return part
                return {
                    "hall": np.full(len(np.unique(part["row_id"])), int(p["hall"]), dtype=np.int32),
                    **self._rows(part),
                }
            if name in ("power_chain", "cooling_plant", "site_grid"):
                keys = Q.ROW_PANELS[name]
                return {"time_s": np.array([self.t]), **{k: np.array([self.row[k]]) for k in keys}}
            if name == "us_history":
                return self.us_history.series(int(p["us"]), float(p.get("window_s", DEFAULT_WINDOW_S)))
            if name == "us_events":
                return self._us_events(int(p["us"]))
            if name in ("chips", "us_jobs"):
                chips = self.chips_now
                facts = self.job_facts
                t = self.t
        us = int(p["us"])
        c = self.meta.chips_per_us
        if name == "chips":
            sl = slice(us * c, (us + 1) * c)
            return {
                "time_s": np.full(c, t, dtype=np.int64),
                "chip_id": np.arange(sl.start, sl.stop, dtype=np.int32),
                **{k: v[sl] for k, v in chips.items()},
            }
        return self._us_jobs(us, chips["job_id"], facts)

    def _us_events(self, us: int) -> Cols:
        """Events of UltraServer ``us``: itself, its servers and chips, its row (newest first)."""
        m = self.meta
        mine = []
        for e in self.hw_events:
            level, _, idx = e[2].partition(":")
            try:
                i = int(idx)
            except ValueError:
                continue
            if (
                (level == "ultraserver" and i == us)
                or (level == "server" and i // m.servers_per_us == us)
                or (level == "chip" and i // m.chips_per_us == us)
                or (level == "row" and i == m.us_row[us])
            ):
                mine.append(e)
        cols = _event_cols(mine[-Q.US_EVENT_LIMIT :], len(mine))
        del cols["total"]
        return cols

    def _kpis(self) -> Cols:
        h = self.history.view()
        times = h["time_s"]
        now = len(times) - 1
        prev = int(np.searchsorted(times, times[now] - HOUR_S, side="right")) - 1
        idx = [now] + ([prev] if prev >= 0 else [])
        out: Cols = {"time_s": times[idx].astype(np.int64)}
        for k in _KPI_COLS:
            out[k] = h[k][idx].copy()
        return out

    def _series(self, cols: tuple[str, ...], window_s: float) -> Cols:
        h = self.history.view()
        times = h["time_s"]
        lo = int(np.searchsorted(times, times[-1] - window_s, side="right"))
        out: Cols = {"time_s": times[lo:].astype(np.int64)}
        for k in cols:
            out[k] = h[k][lo:].copy()
        return out

    @staticmethod
    def _rows(u: Cols) -> Cols:
        """The rows query's columns from the UltraServers ``u`` (one row per row id present)."""
        ids, r = np.unique(u["row_id"].astype(np.int64), return_inverse=True)
        nr = len(ids)
        cnt = np.bincount(r, minlength=nr)
        out: Cols = {
            "time_s": np.full(nr, int(u["time_s"][0]) if nr else 0, dtype=np.int64),
            "row_id": ids,
            "ultraservers": cnt,
            "tripped": np.bincount(r, weights=u["tripped"].astype(np.float64), minlength=nr),
        }
        for k in ("chips_failed", "power_w", "chips_busy"):
            out[k] = np.bincount(r, weights=u[k], minlength=nr)
        out["activity"] = np.bincount(r, weights=u["activity"], minlength=nr) / np.maximum(cnt, 1)
        tmax = np.full(nr, -np.inf)
        np.maximum.at(tmax, r, u["max_chip_temp_c"].astype(np.float64))
        out["max_chip_temp_c"] = tmax
        out["coolant_return_c"] = np.bincount(r, weights=u["coolant_return_c"], minlength=nr) / np.maximum(
            cnt, 1
        )
        return out

    def _us_jobs(self, us: int, owner: Array, facts: dict[int, tuple[str, str, int]]) -> Cols:
        """Jobs holding chips of UltraServer ``us`` (from the chip owners of the last step and the
        facts of those jobs taken with them: the UI thread never reads the simulation's arrays)."""
        c = self.meta.chips_per_us
        here = owner[us * c : (us + 1) * c]
        ids, counts = np.unique(here[here >= 0], return_counts=True)
        order = np.lexsort((ids, -counts))
        ids, counts = ids[order], counts[order]
        on = np.isin(owner, ids)
        pairs = np.unique(owner[on].astype(np.int64) * self.meta.ultraservers + np.flatnonzero(on) // c)
        spans: dict[int, list[str]] = {}
        for pair in pairs.tolist():
            spans.setdefault(pair // self.meta.ultraservers, []).append(str(pair % self.meta.ultraservers))
        idl = ids.tolist()
        return {
            "job_id": ids.astype(np.int64),
            "kind": np.array([facts[j][0] for j in idl], dtype=object),
            "model": np.array([facts[j][1] for j in idl], dtype=object),
            "chips": np.array([facts[j][2] for j in idl], dtype=np.int64),
            "chips_here": counts.astype(np.int64),
            "ultraservers": np.array([",".join(spans.get(j, [])) for j in idl], dtype=object),
        }


class ReplayFeed:
    """A recorded run: its facts and its time axis; panels run their SQL on the file."""

    def __init__(self, con: Any, run_id: str, path: str) -> None:
        from storage.errors import StorageError

        self.con = con
        self.run_id = run_id
        try:
            runs = (
                con.sql("SELECT * FROM runs WHERE run_id = ?", params=[run_id]).to_arrow_table().to_pylist()
            )
            if not runs:
                raise StorageError(f"{path}: no run {run_id!r}")
            run = runs[0]
            self.times = (
                con.sql("SELECT time_s FROM factory_ts WHERE run_id = ? ORDER BY time_s", params=[run_id])
                .to_arrow_table()
                .column(0)
                .to_numpy()
                .astype(np.int64)
            )
            first = int(self.times[0]) if len(self.times) else 0
            rows = (
                con.sql(
                    "SELECT row_id FROM ultraserver_ts WHERE run_id = ? AND time_s = ? ORDER BY ultraserver_id",
                    params=[run_id, first],
                )
                .to_arrow_table()
                .column(0)
                .to_pylist()
            )
        except StorageError:
            raise
        except Exception as e:  # a twin file whose tables are not what this version expects
            raise StorageError(f"{path}: cannot read the run ({str(e).splitlines()[0]})") from None
        self.status = str(run["status"])
        design = _run_design(run)
        nus = int(run["ultraservers"])
        params = _params_from_toml(run.get("scenario_toml"))
        chips_per_us = design.chips_per_us if design is not None else int(run["chips_total"]) // max(1, nus)
        servers = design.servers_per_us if design is not None else chips_per_us
        self.meta = Meta(
            mode="replay",
            scenario=scenario_label(str(run["scenario_name"]), run.get("scenario_toml")),
            path=str(path),
            run_id=run_id,
            dt_s=int(run["dt_s"]),
            ultraservers=nus,
            chips_total=int(run["chips_total"]),
            chips_per_us=chips_per_us,
            servers_per_us=int(servers),
            us_row=tuple(int(r) for r in rows) if len(rows) == nus else tuple(range(nus)),
            throttle_c=_throttle_c(design),
            us_power_w=_nominal_us_power(design),
            slos=_service_slos(params),
            us_hall=us_halls(params, nus),
            **_plant_units(params),
            **_grid_facts(params),
        )
        self.n = len(self.times)

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

    def time_at(self, t_s: float) -> int:
        return int(self.times[self.index_at(t_s)]) if self.n else 0


@dataclass(frozen=True)
class PanelReq:
    """One panel's data: the widget it feeds, its query and the query's parameters."""

    panel: str
    query: str
    params: dict[str, Any]
    options: tuple[tuple[str, Any], ...] = ()

    @property
    def sql(self) -> str:
        return Q.panel_sql(self.query, self.params, **dict(self.options))
