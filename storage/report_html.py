"""The report as a page: ``render_html`` lays out what ``storage.report.load_run`` read of each
recording (header, incident timeline, plots as inline SVG, KPI tables, job events).
"""

from __future__ import annotations

import datetime as _dt
import html
import io
import json
import math
from collections.abc import Callable
from pathlib import Path
from typing import Any

from storage.gridkpis import GRID_ROWS
from storage.kpi_table import COMPARE_ROWS
from storage.report import PLOTS, PlotSpec, RunData


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
    grid = f' style="grid-template-columns:repeat({len(runs)},minmax(0,1fr))"'
    out = [
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8">',
        f"<title>AI Factory Twin report: {e(', '.join(r.label for r in runs))}</title>",
        f"<style>{_CSS}</style></head><body>",
        "<h1>AI Factory Twin report</h1>",
        f'<div class="cols"{grid}>',
    ]
    out.extend(_run_header(r) for r in runs)
    out.append("</div>")
    out.append(f'<h2>Incident timeline</h2><div class="cols"{grid}>')
    for r in runs:
        out.append(_timeline_table(r))
    out.append("</div>")
    for plot in PLOTS:
        out.extend(_plot_section(runs, plot, grid, png_dir))
    out.extend(_kpi_table(runs, "KPIs", COMPARE_ROWS, lambda r: r.kpis))
    if any(r.grid for r in runs):
        out.extend(_kpi_table(runs, "Grid connection", GRID_ROWS, lambda r: r.grid))
    if any(r.events for r in runs):
        out.append(f'<h2>Job events</h2><div class="cols"{grid}>')
        for r in runs:
            out.append(_events_table(r.events, r.events_total, r.path, "data-events"))
        out.append("</div>")
    out.append("</body></html>")
    return "\n".join(out)


def _run_header(r: RunData) -> str:
    """One recording's heading: its run, floor, span, overrides, cap and note."""
    e = html.escape
    m = r.meta
    start = m["start"].isoformat() if isinstance(m.get("start"), _dt.datetime) else "–"
    return (
        f'<div class="run" data-file="{e(r.path)}"><h2>{e(r.label)}</h2><p>run <code>{e(str(m["run_id"]))}'
        f"</code>, {e(str(m['status']))}<br>{m['chips_total']:,} chips ({e(str(m['system']))}), dt {m['dt_s']} s, "
        f"{(m['sim_time_s'] or 0) / 86400:,.2f} simulated days from {e(start)}</p>"
        + _overrides_html(r.kpis.get("overrides") or [], str(m["scenario_name"]))
        + f'<p class="cap">{e(_cap_sentence(r.kpis))}</p>'
        + (f'<p class="note">{e(r.note)}</p>' if r.note else "")
        + "</div>"
    )


def _kpi_table(
    runs: list[RunData],
    title: str,
    rows: list[tuple[str, str, str]],
    values: Callable[[RunData], dict[str, Any]],
) -> list[str]:
    """A table of KPIs (``rows``: key, label, format), one column per recording."""
    e = html.escape
    out = [
        f"<h2>{e(title)}</h2><table><tr><th>KPI</th>"
        + "".join(f"<th>{e(r.label)}</th>" for r in runs)
        + "</tr>"
    ]
    for key, label, form in rows:
        out.append(
            f'<tr data-kpi="{e(key)}"><td>{e(label)}</td>'
            + "".join(f"<td>{e(_fmt(values(r).get(key), form))}</td>" for r in runs)
            + "</tr>"
        )
    out.append("</table>")
    return out


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
