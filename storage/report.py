"""A self-contained HTML report of one or more recordings: the incident timeline, plots, KPIs and
(on request) the routine job events.

The report leads with the incident: the timeline lists the scenario's and the operator's events,
what the model did (thermal trips and recoveries, failures and repairs, throttling, caps, plant
units lost and back) and every alarm raised and cleared (``storage.alarms.ALARM_FLAGS``, the
definition the console's alarms use); routine job events (``job_start``, ``job_end``, …) only when
asked for (``job_events``). Every plot marks the timeline's events with a vertical line and a short
label, and when several recordings are compared each plot has one y-axis range across them.

Plots (``storage.report_html``) are matplotlib figures (Agg, no display) embedded as inline SVG, so the page needs no network
and no other file. Each series is reduced in SQL to at most ``MAX_POINTS`` buckets of mean, min and
max: the line is the mean, the band the min-max envelope, so the plot spans exactly the range of
the recorded data. Every ``<figure>`` carries that range as ``data-series`` (JSON: column ->
{min, max} in the column's own unit) for anyone checking the picture against the file. Several
recordings are laid out side by side, one column each. KPIs come from ``storage.kpis`` (the same
definitions as ``twin compare``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import duckdb

from storage.alarms import queue_wait_episodes, ramp_limit
from storage.gridkpis import grid_kpis
from storage.kpis import run_kpis
from storage.queries import panel_sql

MAX_POINTS = 800
MAX_EVENTS = 300
MAX_MARKERS = 24  # event markers per plot (the scenario's and operator's first)
# Routine job events: in the report only on request. Everything else is part of the incident.
ROUTINE_KINDS_SQL = "starts_with(kind, 'job_')"


@dataclass(frozen=True)
class PlotSpec:
    key: str
    title: str
    unit: str  # unit on the axis
    scale: float  # axis value = column value x scale
    series: tuple[tuple[str, str], ...]  # (column, label)


PLOTS: tuple[PlotSpec, ...] = (
    PlotSpec(
        "power",
        "Power",
        "MW",
        1e-6,
        (
            ("facility_power_w", "facility"),
            ("it_power_w", "IT"),
            ("cooling_power_w", "cooling"),
            ("power_loss_w", "power-chain losses"),
        ),
    ),
    PlotSpec("pue", "PUE", "-", 1.0, (("pue", "PUE"),)),
    PlotSpec(
        "cooling",
        "Cooling plant",
        "kW",
        1e-3,
        (("chiller_power_w", "chiller"), ("pump_power_w", "pumps"), ("fan_power_w", "fans")),
    ),
    PlotSpec(
        "utilisation",
        "Utilisation",
        "%",
        100.0,
        (("busy_share", "busy chips"), ("activity", "mean activity")),
    ),
    PlotSpec(
        "temperatures",
        "Temperatures",
        "°C",
        1.0,
        (
            ("max_chip_temp_c", "hottest chip"),
            ("coolant_return_c", "loop return"),
            ("coolant_supply_c", "loop supply"),
            ("outdoor_temp_c", "outdoor"),
        ),
    ),
    PlotSpec("queue", "Batch queue", "jobs", 1.0, (("queue_jobs", "queued"), ("running_jobs", "running"))),
    PlotSpec("tokens", "Inference output", "tokens/s", 1.0, (("tokens_per_s", "tokens/s"),)),
    PlotSpec("cost", "Electricity cost, cumulative", "USD", 1.0, (("cost_usd_cum", "cost"),)),
    PlotSpec("co2", "CO2, cumulative", "t", 1e-3, (("co2_kg_cum", "CO2"),)),
)
# Derived series (not stored columns): the share of chips busy and running totals.
_DERIVED = {
    "busy_share": "chips_busy::DOUBLE / nullif(chips_total, 0)",
    "cost_usd_cum": "sum(cost_usd) OVER (ORDER BY time_s ROWS UNBOUNDED PRECEDING)",
    "co2_kg_cum": "sum(co2_kg) OVER (ORDER BY time_s ROWS UNBOUNDED PRECEDING)",
}


@dataclass
class RunData:
    """What the report shows of one recording."""

    label: str
    path: str
    meta: dict[str, Any]
    note: str
    time_s: list[int]
    series: dict[str, dict[str, list[float | None]]]  # column -> mean/min/max per bucket
    kpis: dict[str, Any]
    events: list[dict[str, Any]]  # routine job events, when asked for (else empty)
    events_total: int  # routine job events in the run
    timeline: list[dict[str, Any]]  # time_s, kind, target, detail, source (alarms: source 'alarm')
    timeline_total: int
    markers: list[tuple[int, str]]  # (time_s, short label) drawn on every plot
    grid: dict[str, Any] = field(default_factory=dict)  # the grid connection's KPIs (with grid_ts)


def _cols() -> list[str]:
    return list(dict.fromkeys(c for p in PLOTS for c, _ in p.series))


def load_run(
    con: duckdb.DuckDBPyConnection, run_id: str, path: str, note: str = "", job_events: bool = False
) -> RunData:
    """Bucketed series, KPIs, the incident timeline and its markers of one run (all in SQL; at most
    ``MAX_POINTS`` buckets); with ``job_events``, the routine job events too."""
    meta = (
        con.sql(
            "SELECT scenario_name, run_id, status, start, dt_s, sim_time_s, chips_total, system FROM runs "
            "WHERE run_id = ?",
            params=[run_id],
        )
        .to_arrow_table()
        .to_pylist()[0]
    )
    ((t0, t1),) = con.sql(
        "SELECT min(time_s), max(time_s) FROM factory_ts WHERE run_id = ?", params=[run_id]
    ).fetchall()
    dt = int(meta["dt_s"] or 1)
    span = (t1 - t0 + dt) if t0 is not None else dt
    bucket = max(dt, math.ceil(span / MAX_POINTS / dt) * dt)
    time_s, series = _bucketed_series(con, run_id, bucket)
    events_total = con.sql(
        f"SELECT count(*) FROM events WHERE run_id = ? AND {ROUTINE_KINDS_SQL}", params=[run_id]
    ).fetchall()[0][0]
    events: list[dict[str, Any]] = []
    if job_events:
        events = (
            con.sql(
                "SELECT time_s, ts, kind, target, detail, source FROM events "
                f"WHERE run_id = ? AND {ROUTINE_KINDS_SQL} ORDER BY time_s, rowid LIMIT {MAX_EVENTS}",
                params=[run_id],
            )
            .to_arrow_table()
            .to_pylist()
        )
    timeline = incident_timeline(con, run_id)
    kpis = run_kpis(con, run_id)
    modified = ", modified" if kpis.get("overrides") else ""
    return RunData(
        label=f"{meta['scenario_name']} ({Path(path).name}{modified})",
        path=path,
        meta=meta,
        note=note,
        time_s=time_s,
        series=series,
        kpis=kpis,
        events=events,
        events_total=int(events_total),
        timeline=timeline[:MAX_EVENTS],
        timeline_total=len(timeline),
        markers=markers(timeline, span),
        grid=grid_report(con, run_id),
    )


def grid_report(con: duckdb.DuckDBPyConnection, run_id: str) -> dict[str, Any]:
    """The grid connection's KPIs (``grid_kpis``; with grid_ts) and, when the scenario sets a
    ramp limit, the steps over it and the largest step ramp (``grid_ramp``: the alarm's own
    condition over the whole run)."""
    out = grid_kpis(con, run_id)
    limit = ramp_limit(con, run_id)
    if limit > 0:
        params = {"run_id": run_id, "lo": -1, "t": 2**62, "ramp_limit_mw_per_min": limit}
        ((steps, top),) = con.sql(panel_sql("grid_ramp", params)).fetchall()
        out |= {
            "grid_ramp_limit_mw_per_min": limit,
            "grid_ramp_breach_steps": steps,
            "grid_ramp_step_max_mw_per_min": top,
        }
    return out


def _bucketed_series(
    con: duckdb.DuckDBPyConnection, run_id: str, bucket: int
) -> tuple[list[int], dict[str, dict[str, list[float | None]]]]:
    """The start time of each ``bucket``-second bucket of the run's factory series and, per
    column, the mean, min and max in each bucket (one SQL query)."""
    cols = _cols()
    inner = ", ".join(f"{_DERIVED.get(c, c)} AS {c}" for c in cols)
    aggs = ", ".join(f"avg({c}), min({c}), max({c})" for c in cols)
    q = (
        f"WITH f AS (SELECT time_s, {inner} FROM factory_ts WHERE run_id = ?) "
        f"SELECT min(time_s), {aggs} FROM f GROUP BY time_s // {bucket} ORDER BY 1"
    )
    rows = con.sql(q, params=[run_id]).fetchall()
    series = {
        c: {
            "mean": [r[1 + 3 * i] for r in rows],
            "min": [r[2 + 3 * i] for r in rows],
            "max": [r[3 + 3 * i] for r in rows],
        }
        for i, c in enumerate(cols)
    }
    return [int(r[0]) for r in rows], series


def incident_timeline(con: duckdb.DuckDBPyConnection, run_id: str) -> list[dict[str, Any]]:
    """Every event of the run but the routine job events, and every alarm raised and cleared
    (``alarm_episodes``; the queue alarm: ``queue_wait_episodes``), in time order (an alarm raised
    after the events of its step)."""
    events = (
        con.sql(
            "SELECT time_s, kind, target, detail, source FROM events "
            f"WHERE run_id = ? AND NOT ({ROUTINE_KINDS_SQL}) ORDER BY time_s, rowid",
            params=[run_id],
        )
        .to_arrow_table()
        .to_pylist()
    )
    params = {"run_id": run_id, "lo": -1, "t": 2**62, "ramp_limit_mw_per_min": ramp_limit(con, run_id)}
    episodes = con.sql(panel_sql("alarm_episodes", params)).fetchall()
    alarms: list[dict[str, Any]] = []
    for alarm, target, raised, cleared, n, active_s in merge_episodes(episodes):
        detail = alarm if n == 1 else f"{alarm} (intermittent: {n} episodes, {active_s / 3600:,.2f} h active)"
        alarms += _alarm_lines(int(raised), cleared, {"target": target, "detail": detail, "source": "alarm"})
    end = con.sql("SELECT sim_time_s FROM runs WHERE run_id = ?", params=[run_id]).fetchall()
    for raised, cleared, job, n, longest in queue_wait_episodes(con, run_id, int(end[0][0]) if end else 0):
        detail = (
            "queue wait"
            if n == 1
            else f"queue wait ({n} jobs over the threshold, longest {longest / 3600:,.1f} h)"
        )
        alarms += _alarm_lines(
            int(raised), cleared, {"target": f"job:{job}", "detail": detail, "source": "alarm"}
        )
    rank = {"alarm raised": 1, "alarm cleared": 1}
    out: list[dict[str, Any]] = [*events, *alarms]
    out.sort(key=lambda e: (e["time_s"], rank.get(e["kind"], 0)))
    return out


def _alarm_lines(raised: int, cleared: int | None, row: dict[str, Any]) -> list[dict[str, Any]]:
    """An alarm's timeline lines. One raised in the warm-up (a job waiting since before the
    recording: time < 0, never recorded) opens at the recording's start and says so."""
    if raised < 0:
        row = {**row, "detail": f"{row['detail']} (already raised when the recording starts, in the warm-up)"}
    out = [{"time_s": max(raised, 0), "kind": "alarm raised", **row}]
    if cleared is not None:
        out.append({"time_s": int(cleared), "kind": "alarm cleared", **row})
    return out


MERGE_GAP_S = 1800  # the timeline joins episodes of one alarm less than this apart (flapping)


def merge_episodes(episodes: list[tuple[Any, ...]]) -> list[tuple[str, str, int, int | None, int, int]]:
    """Episodes (alarm, target, raised_s, cleared_s, value) in raise order as timeline lines:
    an alarm that clears and is raised again within ``MERGE_GAP_S`` stays one line, from its first
    raise to its last clear. Returns (alarm, target, raised_s, cleared_s, episodes, seconds active)."""
    out: list[list[Any]] = []
    open_: dict[tuple[str, str], list[Any]] = {}
    for alarm, target, raised, cleared, *_ in episodes:
        cur = open_.get((alarm, target))
        if cur is not None and cur[3] is not None and raised - cur[3] < MERGE_GAP_S:
            cur[3] = cleared
            cur[4] += 1
            cur[5] += (cleared if cleared is not None else raised) - raised
            continue
        line = [alarm, target, raised, cleared, 1, (cleared if cleared is not None else raised) - raised]
        open_[(alarm, target)] = line
        out.append(line)
    return [tuple(x) for x in out]


MARKER_LABEL_CHARS = 36
# Kinds named last in a marker's label (what follows an incident rather than the incident).
QUIET_KINDS = frozenset({"throttle", "chip_repaired", "cooling_restore", "thermal_recover"})


def markers(timeline: list[dict[str, Any]], span_s: int) -> list[tuple[int, str]]:
    """The timeline's events as plot markers: events close together (each within 1 % of the run
    of the one before) are one marker at the first, labelled with their kinds and counts
    ("cdu pump failure, thermal trip ×4, …": the scenario's and operator's kinds first, what follows
    an incident — recoveries, repairs, throttling — last); alarms are not marked (their causes
    are). At most ``MAX_MARKERS``: those with the scenario's and operator's events first."""
    gap = max(1, span_s // 100)
    groups: list[dict[str, Any]] = []
    for ev in timeline:
        if ev["source"] == "alarm":
            continue
        t = int(ev["time_s"])
        if groups and t - groups[-1]["end"] <= gap:
            g = groups[-1]
        else:
            g = {"t": t, "kinds": {}, "injected": False, "injected_kinds": set()}
            groups.append(g)
        g["end"] = t
        g["kinds"][str(ev["kind"])] = g["kinds"].get(str(ev["kind"]), 0) + 1
        if ev["source"] in ("scenario", "operator"):
            g["injected"] = True
            g["injected_kinds"].add(str(ev["kind"]))
    groups.sort(key=lambda g: (not g["injected"], g["t"]))
    kept = sorted(groups[:MAX_MARKERS], key=lambda g: g["t"])
    out = []
    for g in kept:
        kinds = sorted(
            g["kinds"].items(), key=lambda kn: (kn[0] not in g["injected_kinds"], kn[0] in QUIET_KINDS)
        )
        label = ", ".join(kind_label(k) + (f" ×{n}" if n > 1 else "") for k, n in kinds)
        if len(label) > MARKER_LABEL_CHARS:
            label = label[: MARKER_LABEL_CHARS - 1].rstrip(", ") + "…"
        out.append((int(g["t"]), label))
    return out


def kind_label(kind: str) -> str:
    return kind.replace("_", " ")
