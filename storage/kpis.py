"""Whole-run KPIs for side-by-side comparison (``twin compare``).

Energies come from per-step energy so any step size works; rates are integrated over each step's
duration (energy_j / facility_power_w = dt). Money per token charges inference its share of the
facility energy at each step's price.
"""

from __future__ import annotations

from typing import Any

import duckdb

from storage.reader import kpi_summary

_Q = """
WITH f AS (SELECT *, energy_j / facility_power_w AS dt FROM factory_ts WHERE run_id = ?)
SELECT sum(energy_j) / 3.6e9                                         AS facility_mwh,
       sum(it_power_w * dt) / 3.6e9                                  AS it_mwh,
       sum(cooling_power_w * dt) / 3.6e9                             AS cooling_mwh,
       sum(power_loss_w * dt) / 3.6e9                                AS loss_mwh,
       sum(water_l)                                                  AS water_l,
       sum(cost_usd)                                                 AS cost_usd,
       sum(co2_kg) / 1000                                            AS co2_t,
       sum(tokens_per_s * dt)                                        AS tokens,
       sum(CASE WHEN tokens_per_s > 0 THEN energy_per_token_j * tokens_per_s * dt END) AS inference_j,
       sum(CASE WHEN tokens_per_s > 0 THEN energy_per_token_j * tokens_per_s * dt
                * price_usd_per_mwh / 3.6e9 END)                     AS inference_cost_usd,
       sum(training_flops * dt)                                      AS training_flop,
       sum(CASE WHEN throttled_chips > 0 THEN dt ELSE 0 END) / 3600  AS throttled_hours,
       sum(throttled_chips * dt) / 3600                              AS throttled_chip_hours,
       sum(unmet_heat_w * dt) / 3.6e9                                AS unmet_heat_mwh,
       max(facility_power_w)                                         AS peak_facility_w,
       avg(chips_busy::DOUBLE / chips_total)                         AS busy_fraction,
       max(max_chip_temp_c)                                          AS max_chip_temp_c,
       sum(dt) / 86400                                               AS days,
       any_value(chips_total)                                        AS chips
FROM f
"""

# (key, label, unit, format) in display order.
COMPARE_ROWS: list[tuple[str, str, str]] = [
    ("chips", "chips", "{:,.0f}"),
    ("days", "simulated days", "{:,.2f}"),
    ("facility_mwh", "facility energy [MWh]", "{:,.1f}"),
    ("it_mwh", "IT energy [MWh]", "{:,.1f}"),
    ("cooling_mwh", "cooling energy [MWh]", "{:,.1f}"),
    ("loss_mwh", "power-chain losses [MWh]", "{:,.1f}"),
    ("peak_facility_mw", "peak facility power [MW]", "{:,.3f}"),
    ("pue", "PUE", "{:.3f}"),
    ("wue", "WUE [L/kWh IT]", "{:.3f}"),
    ("cue", "CUE [kg CO2/kWh IT]", "{:.3f}"),
    ("cost_usd", "electricity cost [$]", "{:,.0f}"),
    ("co2_t", "CO2 [t]", "{:,.1f}"),
    ("tokens", "tokens served", "{:.4g}"),
    ("j_per_token", "energy per token [J]", "{:.3f}"),
    ("usd_per_mtok", "energy cost per M tokens [$]", "{:.4f}"),
    ("training_eflop", "training delivered [EFLOP]", "{:,.4g}"),
    ("jobs_done", "batch jobs done", "{:,.0f}"),
    ("wait_mean_min", "mean wait of started jobs [min]", "{:,.1f}"),
    ("wait_p90_min", "p90 wait of started jobs [min]", "{:,.1f}"),
    ("goodput", "training goodput [-]", "{:.3f}"),
    ("failures", "failures", "{:,.0f}"),
    ("preemptions", "preemptions", "{:,.0f}"),
    ("slo_attainment", "inference SLO attainment [-]", "{:.3f}"),
    ("busy_fraction", "busy chips [-]", "{:.3f}"),
    ("throttled_hours", "hours with throttling", "{:,.2f}"),
    ("throttled_chip_hours", "throttled chip-hours", "{:,.0f}"),
    ("unmet_heat_mwh", "unrejected heat [MWh]", "{:,.2f}"),
    ("max_chip_temp_c", "hottest chip [°C]", "{:.1f}"),
]


def run_kpis(con: duckdb.DuckDBPyConnection, run_id: str) -> dict[str, Any]:
    row: dict[str, Any] = con.sql(_Q, params=[run_id]).to_arrow_table().to_pylist()[0]
    it_kwh = (row["it_mwh"] or 0.0) * 1000.0
    row["pue"] = row["facility_mwh"] / row["it_mwh"] if row["it_mwh"] else None
    row["wue"] = row["water_l"] / it_kwh if it_kwh else None
    row["cue"] = row["co2_t"] * 1000.0 / it_kwh if it_kwh else None
    tokens = row["tokens"] or 0.0
    row["j_per_token"] = row["inference_j"] / tokens if tokens else None
    row["usd_per_mtok"] = row["inference_cost_usd"] / tokens * 1e6 if tokens else None
    row["training_eflop"] = (row["training_flop"] or 0.0) / 1e18
    row["peak_facility_mw"] = (row["peak_facility_w"] or 0.0) / 1e6
    jobs = row["jobs"] = kpi_summary(con, run_id)
    # Work KPIs (storage.reader.workload_kpis) at the top level, for the comparison rows.
    for key in ("jobs_done", "goodput", "failures", "preemptions", "slo_attainment"):
        row[key] = jobs.get(key)
    for key in ("wait_mean_s", "wait_p90_s"):
        row[key[:-2] + "_min"] = jobs[key] / 60.0 if jobs.get(key) is not None else None
    return row
