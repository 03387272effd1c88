"""A self-contained HTML report of one or more recordings: the incident timeline, plots, KPIs and
(on request) the routine job events.

The report leads with the incident: the timeline lists the scenario's and the operator's events,
what the model did (thermal trips and recoveries, failures and repairs, throttling, caps, plant
units lost and back) and every alarm raised and cleared (``storage.alarms.ALARM_FLAGS``, the
definition the console's alarms use); routine job events (``job_start``, ``job_end``, …) only when
asked for (``job_events``). Every plot marks the timeline's events with a vertical line and a short
label, and when several recordings are compared each plot has one y-axis range across them.

Plots are matplotlib figures (Agg, no display) embedded as inline SVG, so the page needs no network
and no other file. Each series is reduced in SQL to at most ``MAX_POINTS`` buckets of mean, min and
max: the line is the mean, the band the min-max envelope, so the plot spans exactly the range of
the recorded data. Every ``<figure>`` carries that range as ``data-series`` (JSON: column ->
{min, max} in the column's own unit) for anyone checking the picture against the file. Several
recordings are laid out side by side, one column each. KPIs come from ``storage.kpis`` (the same
definitions as ``twin compare``).
"""

from __future__ import annotations

import datetime as _dt
import html
import io
import json
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import duckdb

from storage.alarms import queue_wait_episodes, ramp_limit
from storage.gridkpis import GRID_ROWS, grid_kpis
from storage.kpi_table import COMPARE_ROWS
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


def _overrides_html(sets: list[str], name: str) -> str:
    """The ``--set`` overrides a run was started with: its scenario as named no longer describes
    it ('' for a scenario run as written)."""
    if not sets:
        return ""
    items = "".join(f"<li><code>--set {html.escape(o)}</code></li>" for o in sets)
    return (
        f'<p class="overrides"><b>Modified:</b> scenario {html.escape(name)!s} with {len(sets)} '
        f'override{"s" if len(sets) > 1 else ""} (its own keys replaced):</p><ul class="overrides">{items}</ul>'
    )


def _cap_sentence(k: dict[str, Any]) -> str:
    """The facility cap of a run, the hours it was in force and bound, and any it did not hold."""
    cap = k.get("cap_min_w")
    throttled = f"chips throttled (cap or heat) {k.get('throttled_hours') or 0.0:,.2f} h"
    if cap is None:
        return f"No facility power cap; {throttled}."
    over = k.get("cap_exceeded_hours") or 0.0
    return (
        f"Facility power cap {cap / 1e6:,.3f} MW (lowest): in force {k.get('cap_hours') or 0.0:,.2f} h, "
        f"bound {k.get('cap_bound_hours') or 0.0:,.2f} h; {throttled}"
        + (f"; NOT HELD for {over:,.2f} h (the hall drew more than the cap)." if over > 0 else ".")
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


def _range(values: list[float | None], pick: Any) -> float | None:
    vals = [v for v in values if v is not None and math.isfinite(v)]
    return float(pick(vals)) if vals else None


def series_range(run: RunData, col: str) -> dict[str, float | None]:
    s = run.series[col]
    return {"min": _range(s["min"], min), "max": _range(s["max"], max)}


def plot_ylim(runs: list[RunData], plot: PlotSpec) -> tuple[float, float] | None:
    """One y-axis range for ``plot`` across the runs compared (in the axis unit, with a margin),
    so side-by-side plots read alike; None for a single run (matplotlib's own)."""
    if len(runs) < 2:
        return None
    lo = [series_range(r, c)["min"] for r in runs for c, _ in plot.series]
    hi = [series_range(r, c)["max"] for r in runs for c, _ in plot.series]
    los = [v * plot.scale for v in lo if v is not None]
    his = [v * plot.scale for v in hi if v is not None]
    if not los or not his:
        return None
    a, b = min(min(los), min(his)), max(max(los), max(his))
    pad = 0.05 * (b - a) if b > a else max(abs(a) * 0.05, 0.5)
    return a - pad, b + pad


def _figure(run: RunData, plot: PlotSpec, ylim: tuple[float, float] | None = None) -> Any:
    import matplotlib

    matplotlib.use("Agg")
    import numpy as np
    from matplotlib.figure import Figure

    fig = Figure(figsize=(6.4, 2.6), dpi=100, layout="constrained")
    ax = fig.add_subplot()
    start = run.meta.get("start")
    if isinstance(start, _dt.datetime):
        base = np.datetime64(start.astimezone(_dt.UTC).replace(tzinfo=None), "s")
        x: Any = base + np.asarray(run.time_s, dtype="timedelta64[s]")
        ax.set_xlabel("UTC")
    else:
        x = np.asarray(run.time_s, dtype=float) / 3600.0
        ax.set_xlabel("hours since start")
    for col, label in plot.series:
        s = run.series[col]
        mean = np.array([np.nan if v is None else v for v in s["mean"]], dtype=float) * plot.scale
        lo = np.array([np.nan if v is None else v for v in s["min"]], dtype=float) * plot.scale
        hi = np.array([np.nan if v is None else v for v in s["max"]], dtype=float) * plot.scale
        (line,) = ax.plot(x, mean, linewidth=1.2, label=label)
        if np.any(hi > lo):
            ax.fill_between(x, lo, hi, color=line.get_color(), alpha=0.2, linewidth=0)
    if ylim is not None:
        ax.set_ylim(*ylim)
    for t, label in run.markers:
        xm: Any = base + np.timedelta64(t, "s") if isinstance(start, _dt.datetime) else t / 3600.0
        ax.axvline(xm, color="#b03030", linewidth=0.8, alpha=0.7, linestyle="--")
        ax.annotate(
            label,
            (xm, 1.0),
            xycoords=("data", "axes fraction"),
            xytext=(2, -2),
            textcoords="offset points",
            rotation=90,
            va="top",
            ha="left",
            fontsize=6,
            color="#802020",
        )
    ax.set_ylabel(plot.unit)
    ax.set_title(plot.title, fontsize=10, loc="left")
    ax.grid(True, alpha=0.3)
    if len(plot.series) > 1:
        ax.legend(fontsize=7, loc="best")
    fig.autofmt_xdate() if isinstance(start, _dt.datetime) else None
    return fig


def _svg(fig: Any, salt: str) -> str:
    import matplotlib

    with matplotlib.rc_context({"svg.fonttype": "none", "svg.hashsalt": salt}):
        buf = io.StringIO()
        fig.savefig(buf, format="svg")
    text = buf.getvalue()
    return text[text.index("<svg") :]  # drop the XML prolog and doctype for inline use


def _fmt(v: Any, form: str) -> str:
    if v is None or (isinstance(v, float) and not math.isfinite(v)):
        return "–"
    try:
        return form.format(v)
    except (TypeError, ValueError):
        return str(v)


_CSS = """
body{font-family:system-ui,sans-serif;margin:1.5em;color:#222}
h1{font-size:1.4em}h2{font-size:1.1em;margin-top:1.6em}
.cols{display:grid;gap:1em}
figure{margin:0}figure svg{width:100%;height:auto}
table{border-collapse:collapse;font-size:0.85em}
td,th{border-bottom:1px solid #ddd;padding:2px 8px;text-align:right}
td:first-child,th:first-child{text-align:left}
.events td,.events th{text-align:left}.note{color:#a40}
tr.scenario td,tr.operator td{font-weight:600}tr.alarm td{color:#805}
"""


def render_html(runs: list[RunData], png_dir: Path | None = None) -> str:
    """The report page; with ``png_dir``, each plot is also written there as PNG."""
    e = html.escape
    n = len(runs)
    grid = f' style="grid-template-columns:repeat({n},minmax(0,1fr))"'
    out = [
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8">',
        f"<title>AI Factory Twin report: {e(', '.join(r.label for r in runs))}</title>",
        f"<style>{_CSS}</style></head><body>",
        "<h1>AI Factory Twin report</h1>",
        f'<div class="cols"{grid}>',
    ]
    for r in runs:
        m = r.meta
        start = m["start"].isoformat() if isinstance(m.get("start"), _dt.datetime) else "–"
        out.append(
            f'<div class="run" data-file="{e(r.path)}"><h2>{e(r.label)}</h2><p>run <code>{e(str(m["run_id"]))}'
            f"</code>, {e(str(m['status']))}<br>{m['chips_total']:,} chips ({e(str(m['system']))}), dt {m['dt_s']} s, "
            f"{(m['sim_time_s'] or 0) / 86400:,.2f} simulated days from {e(start)}</p>"
            + _overrides_html(r.kpis.get("overrides") or [], str(m["scenario_name"]))
            + f'<p class="cap">{e(_cap_sentence(r.kpis))}</p>'
            + (f'<p class="note">{e(r.note)}</p>' if r.note else "")
            + "</div>"
        )
    out.append("</div>")
    out.append(f'<h2>Incident timeline</h2><div class="cols"{grid}>')
    for r in runs:
        out.append(_timeline_table(r))
    out.append("</div>")
    for plot in PLOTS:
        out.extend(_plot_section(runs, plot, grid, png_dir))
    out.append(
        "<h2>KPIs</h2><table><tr><th>KPI</th>" + "".join(f"<th>{e(r.label)}</th>" for r in runs) + "</tr>"
    )
    for key, label, form in COMPARE_ROWS:
        out.append(
            f'<tr data-kpi="{e(key)}"><td>{e(label)}</td>'
            + "".join(f"<td>{e(_fmt(r.kpis.get(key), form))}</td>" for r in runs)
            + "</tr>"
        )
    out.append("</table>")
    if any(r.grid for r in runs):
        out.append(
            "<h2>Grid connection</h2><table><tr><th>KPI</th>"
            + "".join(f"<th>{e(r.label)}</th>" for r in runs)
            + "</tr>"
        )
        for key, label, form in GRID_ROWS:
            out.append(
                f'<tr data-kpi="{e(key)}"><td>{e(label)}</td>'
                + "".join(f"<td>{e(_fmt(r.grid.get(key), form))}</td>" for r in runs)
                + "</tr>"
            )
        out.append("</table>")
    if any(r.events for r in runs):
        out.append(f'<h2>Job events</h2><div class="cols"{grid}>')
        for r in runs:
            out.append(_events_table(r.events, r.events_total, r.path, "data-events"))
        out.append("</div>")
    out.append("</body></html>")
    return "\n".join(out)


def _plot_section(runs: list[RunData], plot: PlotSpec, grid: str, png_dir: Path | None) -> list[str]:
    """The HTML of one plot: its heading and a figure per run (on a shared y range where the
    plot has one); with ``png_dir``, each figure is also written there as PNG."""
    e = html.escape
    ylim = plot_ylim(runs, plot)
    shared = f' data-ylim="{e(json.dumps(list(ylim)))}"' if ylim is not None else ""
    out = [f'<h2>{e(plot.title)}</h2><div class="cols"{grid}>']
    for i, r in enumerate(runs):
        fig = _figure(r, plot, ylim)
        ranges = {c: series_range(r, c) for c, _ in plot.series}
        if png_dir is not None:
            fig.savefig(png_dir / f"{i + 1:02d}-{Path(r.path).stem}-{plot.key}.png", dpi=120)
        out.append(
            f'<figure data-plot="{plot.key}" data-file="{e(r.path)}" data-unit="{e(plot.unit)}" '
            f'data-scale="{plot.scale:g}" data-series="{e(json.dumps(ranges))}"{shared} '
            f'data-markers="{e(json.dumps([t for t, _ in r.markers]))}">{_svg(fig, f"{i}-{plot.key}")}'
            "</figure>"
        )
    out.append("</div>")
    return out


def _events_table(events: list[dict[str, Any]], total: int, path: str, attr: str) -> str:
    e = html.escape
    rows = "".join(
        f'<tr class="{e(str(ev["source"]))}"><td>{_clock(int(ev["time_s"]))}</td><td>{e(str(ev["kind"]))}</td>'
        f"<td>{e(str(ev['target']))}</td><td>{e(str(ev['detail']))}</td><td>{e(str(ev['source']))}</td></tr>"
        for ev in events
    )
    more = total - len(events)
    return (
        f'<div><table class="events" data-file="{e(path)}" {attr}="{total}">'
        "<tr><th>time</th><th>kind</th><th>target</th><th>detail</th><th>source</th></tr>"
        f"{rows}</table>"
        + (
            f'<p>{more:,} more: <code>twin sql {e(path)} "SELECT * FROM events"</code></p>'
            if more > 0
            else ""
        )
        + "</div>"
    )


def _timeline_table(r: RunData) -> str:
    note = (
        f"<p>{r.events_total:,} routine job events (job_start, job_end, …) not listed: "
        "<code>twin report --job-events</code> adds them.</p>"
        if r.events_total and not r.events
        else ""
    )
    if not r.timeline:
        return f'<div data-file="{html.escape(r.path)}" data-timeline="0"><p>No incident: no event but routine job events, no alarm.</p>{note}</div>'
    return _events_table(r.timeline, r.timeline_total, r.path, "data-timeline").replace(
        "</div>", note + "</div>"
    )


def _clock(t: int) -> str:
    """Simulated time as day and time of day (d1 10:00:00, as the console) and hours since the start."""
    d, rem = divmod(t, 86400)
    return f"d{d + 1} {rem // 3600:02d}:{rem % 3600 // 60:02d}:{rem % 60:02d} ({t / 3600:,.2f} h)"
