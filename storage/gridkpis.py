"""The grid connection's KPIs: from ``grid_ts`` (a run recorded with sub-step grid samples) and
the grid screen's window, with their rows in ``twin report``.
"""

from __future__ import annotations

from typing import Any

import duckdb
import numpy as np
import numpy.typing as npt

from twin.compose import grid


def grid_kpis(con: duckdb.DuckDBPyConnection, run_id: str) -> dict[str, Any]:
    """The grid connection's KPIs from ``grid_ts`` (empty without a sub-step recording): peak,
    peak-to-average, swing, largest ramps [MW/s, MW/min], the variance in each of the utility's
    frequency bands [MW^2] (``twin.compose.grid.metrics``), and what the connection's storage and the
    power floor cost: energy drawn beyond the step model's facility energy [MWh] at the run's
    mean price [$]."""
    try:
        conn = con.sql(
            "SELECT time_s, p_w FROM grid_ts WHERE run_id = ? AND hall_id = -1 ORDER BY time_s",
            params=[run_id],
        ).fetchall()
    except duckdb.CatalogException:  # a file from before schema v10, read as it is
        return {}
    if len(conn) < 2:
        return {}
    t = [r[0] for r in conn]
    p = np.array([r[1] for r in conn], dtype=np.float64)
    tau = float(t[1] - t[0])
    fac = con.sql(
        "SELECT sum(facility_power_w * ?), sum(facility_power_w * ? * price_usd_per_mwh) "
        "FROM factory_ts WHERE run_id = ?",
        params=[_dt_of(con, run_id), _dt_of(con, run_id), run_id],
    ).fetchall()[0]
    fac_j = float(fac[0] or 0.0)
    extra_j = float(p.sum()) * tau - fac_j
    price = float(fac[1]) / fac_j if fac_j > 0 and fac[1] is not None else 0.0  # $/MWh per J
    return {
        **grid_figures(p, tau),
        "grid_mitigation_mwh": extra_j / 3.6e9,
        "grid_mitigation_usd": extra_j / 3.6e9 * price,
    }


def grid_figures(p_w: npt.NDArray[np.float64], tau: float) -> dict[str, Any]:
    """Peak [MW], mean [MW], peak-to-average, swing [MW], largest ramps [MW/s, MW/min] and the
    variance in each frequency band [MW^2] of the connection's power sampled every ``tau``
    seconds (``twin.compose.grid.metrics``): the run's KPIs and the grid screen's window."""
    m = grid.metrics(np.asarray(p_w, dtype=np.float64), tau)
    if not m:
        return {}
    mw = {k: (v / 1e6 if v is not None else None) for k, v in m.items()}
    out: dict[str, Any] = {
        "grid_interval_s": tau,
        "grid_peak_mw": mw["peak_w"],
        "grid_mean_mw": mw["mean_w"],
        "grid_peak_to_average": m["peak_to_average"],
        "grid_swing_mw": mw["swing_w"],
        "grid_ramp_mw_per_s": mw["ramp_w_per_s"],
        "grid_ramp_mw_per_min": mw["ramp_w_per_min"],
    }
    for name in grid.BAND_NAMES:
        v = m["band_" + name + "_w2"]
        out["grid_band_" + name + "_mw2"] = v / 1e12 if v is not None else None
    return out


# (key, label, format) of the grid connection's KPIs in ``twin report`` (a run with grid_ts).
GRID_ROWS: list[tuple[str, str, str]] = [
    ("grid_interval_s", "Sub-step interval [s]", "{:.0f}"),
    ("grid_peak_mw", "Peak at the connection [MW]", "{:.2f}"),
    ("grid_peak_to_average", "Peak to average [-]", "{:.4f}"),
    ("grid_swing_mw", "Swing (max - min) [MW]", "{:.2f}"),
    ("grid_ramp_mw_per_s", "Largest ramp [MW/s]", "{:.3f}"),
    ("grid_ramp_mw_per_min", "Largest ramp of minute means [MW/min]", "{:.3f}"),
    *(
        ("grid_band_" + n + "_mw2", f"Variance {lo:g}-{hi:g} Hz [MW²]", "{:.4g}")
        for n, (lo, hi) in zip(grid.BAND_NAMES, grid.BANDS_HZ, strict=True)
    ),
    ("grid_ramp_limit_mw_per_min", "Ramp limit [MW/min] (0: none)", "{:.3f}"),
    ("grid_ramp_breach_steps", "Steps over the ramp limit", "{:,.0f}"),
    ("grid_ramp_step_max_mw_per_min", "Largest step ramp against the limit [MW/min]", "{:.3f}"),
    ("grid_mitigation_mwh", "Mitigation energy [MWh]", "{:.3f}"),
    ("grid_mitigation_usd", "Mitigation energy cost [$]", "{:,.0f}"),
]


def _dt_of(con: duckdb.DuckDBPyConnection, run_id: str) -> float:
    """The run's step [s] (from two consecutive factory_ts rows; 60 for a run of one step)."""
    r = con.sql(
        "SELECT min(time_s), max(time_s), count(*) FROM factory_ts WHERE run_id = ?", params=[run_id]
    ).fetchall()[0]
    return float((r[1] - r[0]) / (r[2] - 1)) if r[2] and r[2] > 1 else 60.0
