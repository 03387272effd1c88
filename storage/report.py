"""A self-contained HTML report of one or more recordings: plots, KPIs and events.

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
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import duckdb

from storage.kpis import COMPARE_ROWS, run_kpis

MAX_POINTS = 800
MAX_EVENTS = 300


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
    events: list[dict[str, Any]]
    events_total: int


def _cols() -> list[str]:
    return list(dict.fromkeys(c for p in PLOTS for c, _ in p.series))


def load_run(con: duckdb.DuckDBPyConnection, run_id: str, path: str, note: str = "") -> RunData:
    """Bucketed series, KPIs and events of one run (all in SQL; at most ``MAX_POINTS`` buckets)."""
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
    events_total = con.sql("SELECT count(*) FROM events WHERE run_id = ?", params=[run_id]).fetchall()[0][0]
    events = (
        con.sql(
            "SELECT time_s, ts, kind, target, detail, source FROM events WHERE run_id = ? "
            f"ORDER BY (source = 'model'), time_s LIMIT {MAX_EVENTS}",
            params=[run_id],
        )
        .to_arrow_table()
        .to_pylist()
    )
    events.sort(key=lambda e: e["time_s"])
    return RunData(
        label=f"{meta['scenario_name']} ({Path(path).name})",
        path=path,
        meta=meta,
        note=note,
        time_s=[int(r[0]) for r in rows],
        series=series,
        kpis=run_kpis(con, run_id),
        events=events,
        events_total=int(events_total),
    )


def _range(values: list[float | None], pick: Any) -> float | None:
    vals = [v for v in values if v is not None and math.isfinite(v)]
    return float(pick(vals)) if vals else None


def series_range(run: RunData, col: str) -> dict[str, float | None]:
    s = run.series[col]
    return {"min": _range(s["min"], min), "max": _range(s["max"], max)}


def _figure(run: RunData, plot: PlotSpec) -> Any:
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
.events td{text-align:left}.note{color:#a40}
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
            + (f'<p class="note">{e(r.note)}</p>' if r.note else "")
            + "</div>"
        )
    out.append("</div>")
    for plot in PLOTS:
        out.append(f'<h2>{e(plot.title)}</h2><div class="cols"{grid}>')
        for i, r in enumerate(runs):
            fig = _figure(r, plot)
            ranges = {c: series_range(r, c) for c, _ in plot.series}
            if png_dir is not None:
                fig.savefig(png_dir / f"{i + 1:02d}-{Path(r.path).stem}-{plot.key}.png", dpi=120)
            out.append(
                f'<figure data-plot="{plot.key}" data-file="{e(r.path)}" data-unit="{e(plot.unit)}" '
                f'data-scale="{plot.scale:g}" data-series="{e(json.dumps(ranges))}">{_svg(fig, f"{i}-{plot.key}")}'
                "</figure>"
            )
        out.append("</div>")
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
    out.append(f'<h2>Events</h2><div class="cols"{grid}>')
    for r in runs:
        rows = "".join(
            f"<tr><td>{ev['time_s'] / 3600:,.2f} h</td><td>{e(str(ev['kind']))}</td><td>{e(str(ev['target']))}</td>"
            f"<td>{e(str(ev['detail']))}</td><td>{e(str(ev['source']))}</td></tr>"
            for ev in r.events
        )
        more = r.events_total - len(r.events)
        out.append(
            f'<div><table class="events" data-file="{e(r.path)}" data-events="{r.events_total}">'
            "<tr><th>time</th><th>kind</th><th>target</th><th>detail</th><th>source</th></tr>"
            f"{rows}</table>"
            + (
                f'<p>{more:,} more events: <code>twin sql {e(r.path)} "SELECT * FROM events"</code></p>'
                if more > 0
                else ""
            )
            + "</div>"
        )
    out.append("</div></body></html>")
    return "\n".join(out)
