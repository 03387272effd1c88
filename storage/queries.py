"""The SQL behind every panel of the TUI.

Each panel of the console is one read-only query over the telemetry tables. ``panel_sql`` renders
it with literal values (run id, time, UltraServer, window, …), so the text a user opens in the SQL
editor is exactly the text the panel ran in a replay; ``run_sql`` executes such text and returns
plain columns. Queries only read (SELECT); nothing here writes. No Textual imports.
"""

from __future__ import annotations

import re
import tomllib
from collections.abc import Mapping
from typing import Any

import duckdb
import numpy as np
import numpy.typing as npt

from storage.kpis import FACTORY_AGGREGATES
from twin.spec.telemetry import PLANT_UNIT_COLUMNS

Cols = dict[str, npt.NDArray[Any]]
Params = Mapping[str, Any]

# Events that are routine (hidden by the "notable" event filters).
ROUTINE_EVENT_KINDS = ("job_start", "job_end")
EVENT_LIMIT = 200
US_EVENT_LIMIT = 100
JOB_EVENT_KINDS = ("job_start", "job_interrupted", "job_preempted", "job_end")


# Derived columns the panels use, as SQL expressions.
_EXPR = {"busy_share": "chips_busy / chips_total AS busy_share"}

# Time-series plots: query name -> (title, factory_ts columns).
SERIES: dict[str, tuple[str, ...]] = {
    "plot_power": ("facility_power_w", "it_power_w"),
    "plot_pue": ("pue",),
    "plot_activity": ("activity", "busy_share"),
    "plot_tokens": ("tokens_per_s",),
    "plot_queue": ("queue_jobs", "running_jobs"),
    "plot_temp": ("max_chip_temp_c", "coolant_return_c"),
    "plot_cooling": ("cooling_power_w", "power_loss_w"),
    "plot_free": ("free_cooling_fraction",),
    "plot_weather": ("outdoor_temp_c", "outdoor_wetbulb_c"),
    "plot_loops": ("coolant_return_c", "facility_water_supply_c"),
    "plot_price": ("price_usd_per_mwh",),
    "plot_carbon": ("carbon_g_per_kwh",),
}

# Energy panels: one factory_ts row at $t.
ROW_PANELS: dict[str, tuple[str, ...]] = {
    "power_chain": (
        "facility_power_w",
        "transformer_loss_w",
        "ups_loss_w",
        "pdu_loss_w",
        "it_power_w",
        "psu_loss_w",
        "chip_power_w",
        "cooling_power_w",
        "chiller_power_w",
        "pump_power_w",
        "fan_power_w",
        "power_loss_w",
        "facility_cap_w",
        "throttled_chips",
        "mean_clock",
    ),
    "cooling_plant": (
        "coolant_supply_c",
        "coolant_return_c",
        "facility_water_supply_c",
        "free_cooling_fraction",
        "chiller_cop",
        "chiller_power_w",
        "pump_power_w",
        "fan_power_w",
        "water_l",
        "unmet_heat_w",
        "max_chip_temp_c",
        *PLANT_UNIT_COLUMNS,
    ),
    "site_grid": (
        "outdoor_temp_c",
        "outdoor_wetbulb_c",
        "outdoor_rh",
        "price_usd_per_mwh",
        "carbon_g_per_kwh",
        "cost_usd",
        "co2_kg",
        "energy_j",
    ),
}


TITLES: dict[str, str] = {
    "plot_power": "Power plot (facility and IT)",
    "plot_pue": "PUE plot",
    "plot_activity": "Activity plot",
    "plot_tokens": "Tokens/s plot",
    "plot_queue": "Queue plot (waiting and running batch jobs)",
    "plot_temp": "Temperature plot (hottest chip, loop return)",
    "plot_cooling": "Cooling power and losses plot",
    "plot_free": "Free cooling plot (share of heat rejected without the chillers)",
    "plot_weather": "Weather plot (dry and wet bulb)",
    "plot_loops": "Loop temperatures plot",
    "plot_price": "Electricity price plot",
    "plot_carbon": "Grid carbon plot",
    "power_chain": "Power chain",
    "cooling_plant": "Cooling plant",
    "site_grid": "Site and grid",
}


def _series(name: str, cols: tuple[str, ...]) -> str:
    sel = ", ".join(("time_s", *(_EXPR.get(c, c) for c in cols)))
    return (
        f"-- {TITLES[name]}: the last $window_s s up to $t\n"
        f"SELECT {sel}\nFROM factory_ts\n"
        "WHERE run_id = $run_id AND time_s > $t - $window_s AND time_s <= $t\nORDER BY time_s"
    )


def _row(name: str, cols: tuple[str, ...]) -> str:
    return (
        f"-- {TITLES[name]} at $t\n"
        f"SELECT {', '.join(('time_s', *cols))}\nFROM factory_ts\n"
        "WHERE run_id = $run_id AND time_s = $t"
    )


_NEAREST_CHIP_SAMPLE = """nearest AS (  -- the chip_ts sample nearest to $t
    SELECT time_s FROM (
        SELECT max(time_s) AS time_s FROM chip_ts WHERE run_id = $run_id AND time_s <= $t
        UNION ALL
        SELECT min(time_s) FROM chip_ts WHERE run_id = $run_id AND time_s > $t)
    WHERE time_s IS NOT NULL
    ORDER BY abs(time_s - $t), time_s
    LIMIT 1)"""

# ultraserver_ts may be recorded every few steps (``telemetry.ultraserver_interval_s``, a campus):
# the panels over it read its latest sample up to $t.
_LATEST_US_SAMPLE = "SELECT max(time_s) FROM ultraserver_ts WHERE run_id = $run_id AND time_s <= $t"

# The cost panel: the run summary's aggregates (``storage.kpis``, one definition) up to $t and over
# the day of $t so far; the KPIs follow from them as in the run summary (``kpis.COST_SUMS``, ``RATIOS``).
COST_AGGREGATES = (
    "days",
    "chip_hours",
    "tokens",
    "job_flop",
    "cost_usd",
    "capex_usd",
    "fixed_opex_usd",
    "water_cost_usd",
    "cooling_cost_usd",
    "inference_cost_usd",
    "inference_fixed_usd",
)


def _cost_sql() -> str:
    aggs = ",\n       ".join(f"{FACTORY_AGGREGATES[k]} AS {k}" for k in COST_AGGREGATES)
    day = ", ".join(
        f"{FACTORY_AGGREGATES[k]} AS day_{k}"
        for k in COST_AGGREGATES
        if k.endswith("_usd") and not k.startswith("inference")
    )
    return (
        "-- Cost of ownership up to $t (the run summary's definitions), the day of $t so far, and the\n"
        "-- mean work of the pre-training jobs finished by $t\n"
        f"WITH run AS (\nSELECT {aggs}\nFROM factory_ts WHERE run_id = $run_id AND time_s <= $t),\n"
        f"today AS (\nSELECT {FACTORY_AGGREGATES['days']} AS day_days, {day}\n"
        "FROM factory_ts WHERE run_id = $run_id AND time_s <= $t AND time_s >= $t // 86400 * 86400),\n"
        "jobs AS (\nSELECT avg(done_flop) AS pretrain_job_flop, count(*) AS pretrain_jobs_done FROM jobs\n"
        "WHERE run_id = $run_id AND kind = 'pretrain' AND state = 'done' AND end_time_s <= $t)\n"
        "SELECT * FROM run, today, jobs"
    )


TEMPLATES: dict[str, str] = {
    "cost": _cost_sql(),
    **{name: _series(name, cols) for name, cols in SERIES.items()},
    **{name: _row(name, cols) for name, cols in ROW_PANELS.items()},
    "kpis": """-- KPI tiles: the step at $t (first row) and the step an hour earlier (trend arrows)
WITH f AS (
    SELECT time_s, it_power_w, facility_power_w, pue,
           chips_busy / chips_total AS busy_share,
           tokens_per_s, energy_per_token_j,
           energy_per_token_j * price_usd_per_mwh / 3600 AS usd_per_mtok,  -- J/token x $/MWh -> $/M tokens
           queue_jobs, max_chip_temp_c, chips_failed, cost_usd, co2_kg,
           sum(cost_usd) OVER (ORDER BY time_s) AS cost_so_far_usd,
           sum(co2_kg) OVER (ORDER BY time_s) AS co2_so_far_kg
    FROM factory_ts WHERE run_id = $run_id AND time_s <= $t),
slo AS (
    SELECT time_s, sum(slo_met) / nullif(sum(requests_served + requests_dropped), 0) AS slo_attainment
    FROM service_ts WHERE run_id = $run_id AND time_s <= $t
    GROUP BY time_s)
SELECT f.*, slo.slo_attainment
FROM f LEFT JOIN slo USING (time_s)
WHERE f.time_s IN ((SELECT max(time_s) FROM f), (SELECT max(time_s) FROM f WHERE time_s <= $t - 3600))
ORDER BY f.time_s DESC""",
    "events": """-- Events log: the latest events up to $t
SELECT time_s, kind, target, detail, source, count(*) OVER () AS total
FROM events
WHERE run_id = $run_id AND time_s <= $t
ORDER BY time_s DESC, rowid DESC
LIMIT 200""",
    "events_notable": """-- Events log (notable): the latest events up to $t without routine job starts and ends
SELECT time_s, kind, target, detail, source, count(*) OVER () AS total
FROM events
WHERE run_id = $run_id AND time_s <= $t AND kind NOT IN ('job_start', 'job_end')
ORDER BY time_s DESC, rowid DESC
LIMIT 200""",
    "floor": f"""-- Floor: every UltraServer at the latest ultraserver_ts sample up to $t (time_s: the sample's)
SELECT time_s, ultraserver_id, row_id, power_w, chips_busy, chips_failed, tripped, activity,
       max_chip_temp_c, coolant_return_c, clock
FROM ultraserver_ts
WHERE run_id = $run_id AND time_s = ({_LATEST_US_SAMPLE})
ORDER BY ultraserver_id""",
    "rows": f"""-- Rows (one CDU each) at the latest ultraserver_ts sample up to $t (time_s: the sample's)
SELECT max(time_s) AS time_s, row_id, count(*) AS ultraservers, count_if(tripped) AS tripped, sum(chips_failed) AS chips_failed,
       sum(power_w) AS power_w, sum(chips_busy) AS chips_busy, avg(activity) AS activity,
       max(max_chip_temp_c) AS max_chip_temp_c, avg(coolant_return_c) AS coolant_return_c
FROM ultraserver_ts
WHERE run_id = $run_id AND time_s = ({_LATEST_US_SAMPLE})
GROUP BY row_id
ORDER BY row_id""",
    "halls": """-- Campus: every hall at the latest hall_ts sample up to $t
SELECT hall_id, ultraservers, power_w, chips_busy, chips_failed, ultraservers_tripped AS tripped, activity,
       max_chip_temp_c, coolant_return_c, clock
FROM hall_ts
WHERE run_id = $run_id
  AND time_s = (SELECT max(time_s) FROM hall_ts WHERE run_id = $run_id AND time_s <= $t)
ORDER BY hall_id""",
    "hall_floor": f"""-- Floor of hall $hall: its UltraServers $us_lo..$us_hi at the latest ultraserver_ts sample up to $t
-- (time_s: the sample's)
SELECT time_s, ultraserver_id, row_id, power_w, chips_busy, chips_failed, tripped, activity,
       max_chip_temp_c, coolant_return_c, clock
FROM ultraserver_ts
WHERE run_id = $run_id AND ultraserver_id BETWEEN $us_lo AND $us_hi AND time_s = ({_LATEST_US_SAMPLE})
ORDER BY ultraserver_id""",
    "hall_rows": f"""-- Rows (one CDU each) of hall $hall at the latest ultraserver_ts sample up to $t
-- (time_s: the sample's)
SELECT $hall AS hall, max(time_s) AS time_s, row_id, count(*) AS ultraservers, count_if(tripped) AS tripped,
       sum(chips_failed) AS chips_failed, sum(power_w) AS power_w, sum(chips_busy) AS chips_busy,
       avg(activity) AS activity, max(max_chip_temp_c) AS max_chip_temp_c, avg(coolant_return_c) AS coolant_return_c
FROM ultraserver_ts
WHERE run_id = $run_id AND ultraserver_id BETWEEN $us_lo AND $us_hi AND time_s = ({_LATEST_US_SAMPLE})
GROUP BY row_id
ORDER BY row_id""",
    "chips": f"""-- Chips of UltraServer $us at the chip_ts sample nearest to $t
WITH {_NEAREST_CHIP_SAMPLE}
SELECT c.time_s, c.chip_id, c.job_id, c.neuroncore_utilization, c.chip_power_w, c.t_junction_c, c.failed
FROM chip_ts c JOIN nearest USING (time_s)
WHERE c.run_id = $run_id AND c.ultraserver_id = $us
ORDER BY c.chip_id""",
    "us_jobs": f"""-- Jobs on UltraServer $us at the chip_ts sample nearest to $t
WITH {_NEAREST_CHIP_SAMPLE},
here AS (
    SELECT c.job_id, count(*) AS chips_here
    FROM chip_ts c JOIN nearest USING (time_s)
    WHERE c.run_id = $run_id AND c.ultraserver_id = $us AND c.job_id >= 0
    GROUP BY c.job_id)
SELECT h.job_id, j.kind, j.name AS model, j.chips, h.chips_here, j.ultraservers
FROM here h JOIN jobs j ON j.run_id = $run_id AND j.job_id = h.job_id
ORDER BY h.chips_here DESC, h.job_id""",
    "us_history": """-- UltraServer $us: power and temperatures over the last $window_s s up to $t
SELECT time_s, power_w, max_chip_temp_c, coolant_return_c, activity, clock
FROM ultraserver_ts
WHERE run_id = $run_id AND ultraserver_id = $us AND time_s > $t - $window_s AND time_s <= $t
ORDER BY time_s""",
    "us_events": """-- Events of UltraServer $us (its chips, servers and row $row) up to $t
SELECT time_s, kind, target, detail, source
FROM events
WHERE run_id = $run_id AND time_s <= $t AND (
      target = 'ultraserver:' || $us
   OR target = 'row:' || $row
   OR (target LIKE 'server:%' AND TRY_CAST(split_part(target, ':', 2) AS INTEGER) // $servers_per_us = $us)
   OR (target LIKE 'chip:%' AND TRY_CAST(split_part(target, ':', 2) AS INTEGER) // $chips_per_us = $us))
ORDER BY time_s DESC, rowid DESC
LIMIT 100""",
    "job_timeline": """-- Timeline of job $job up to $t: submitted, starts, interruptions (with the work lost), end
SELECT submit_time_s AS time_s, 'submitted' AS what,
       kind || ' ' || name || ' on ' || chips || ' chips, estimate ' || round(estimate_s / 3600, 2) || ' h' AS detail
FROM jobs WHERE run_id = $run_id AND job_id = $job AND submit_time_s <= $t
UNION ALL
SELECT time_s, kind, detail FROM events
WHERE run_id = $run_id AND target = 'job:' || $job AND kind <> 'job_interrupted' AND kind <> 'job_preempted'
  AND time_s <= $t
UNION ALL
SELECT time_s, reason, cause || ', lost ' || round(lost_s / 60, 1) || ' min of progress, '
       || printf('%.3g', lost_flop) || ' FLOP'
FROM interruptions WHERE run_id = $run_id AND job_id = $job AND time_s <= $t
-- within a minute, cause before effect: submitted, interruption, (re)start, end
ORDER BY time_s, CASE what WHEN 'submitted' THEN 0 WHEN 'job_start' THEN 2 WHEN 'job_end' THEN 3 ELSE 1 END""",
}

# Operator's views: inference services, alarms, why PUE moved, the plant's units.
QUEUE_WAIT_ALARM_S = 6 * 3600  # a batch job waiting longer than this raises the queue alarm
ALARM_LOOKBACK_S = 7 * 86400  # "since" is searched this far back (older: "since before")

# Alarms: the one definition of each condition, over the model's own recorded state, one row per
# recorded step from $lo (exclusive) up to $t. A condition is active exactly at the steps it holds:
# raised at the first step it holds, cleared at the first step it no longer does. Used by the
# alarms at the time shown (live and replay, ``alarms``) and by the report (``alarm_episodes``).
SLO_ALARM = 0.99  # an SLO breach: fewer than this share of a step's decided requests within the SLO
ALARM_FLAGS = """f AS (
    SELECT time_s, ultraservers_tripped, throttled_chips, chips_failed, facility_cap_w, unmet_heat_w,
           chillers_failed, economizers_failed
    FROM factory_ts WHERE run_id = $run_id AND time_s > $lo AND time_s <= $t),
cdu_lost AS (  -- a row's CDU short of flow: the least coolant flow of its UltraServers' loops
    SELECT time_s, row_id, min(cdu_flow_fraction) AS flow
    FROM ultraserver_ts WHERE run_id = $run_id AND time_s > $lo AND time_s <= $t AND cdu_flow_fraction < 1
    GROUP BY time_s, row_id),
cdu AS (  -- every ultraserver_ts sample of the rows that lost flow (1 = full flow), not every row's
    SELECT s.time_s, r.row_id, coalesce(l.flow, 1.0) AS flow
    FROM (SELECT DISTINCT time_s FROM ultraserver_ts
          WHERE run_id = $run_id AND time_s > $lo AND time_s <= $t) s
    CROSS JOIN (SELECT DISTINCT row_id FROM cdu_lost) r
    LEFT JOIN cdu_lost l USING (time_s, row_id)),
s AS (
    SELECT time_s, service, slo_attainment
    FROM service_ts WHERE run_id = $run_id AND time_s > $lo AND time_s <= $t),
gm AS (  -- the connection's one-minute means from grid_ts (recorded with [telemetry] grid_interval_s)
    SELECT time_s // 60 * 60 AS m, avg(p_w) AS p_w, count(*) AS n
    FROM grid_ts WHERE $ramp_limit_mw_per_min > 0 AND run_id = $run_id AND hall_id = -1
      AND time_s >= $lo - 3660 AND time_s <= $t + 3600  -- a step of the longest dt_s either side
    GROUP BY m),
gr AS (  -- each whole minute's ramp from the minute before [MW/min], booked to its step
    SELECT m // (SELECT dt_s FROM runs WHERE run_id = $run_id) * (SELECT dt_s FROM runs WHERE run_id = $run_id)
           AS time_s,
           abs(p_w - lag(p_w) OVER w) / 1e6 AS ramp, m - lag(m) OVER w = 60 AS adjacent
    FROM gm WHERE n = (SELECT max(n) FROM gm)
    WINDOW w AS (ORDER BY m)),
fr AS (  -- without grid_ts: the change of facility power from the step before, per minute [MW/min]
    SELECT time_s, abs(facility_power_w - lag(facility_power_w) OVER w) / (time_s - lag(time_s) OVER w)
           * 60 / 1e6 AS ramp
    FROM factory_ts WHERE $ramp_limit_mw_per_min > 0 AND run_id = $run_id AND time_s > $lo - 3600 AND time_s <= $t
    WINDOW w AS (ORDER BY time_s)),
ramp AS (
    SELECT time_s, CASE WHEN EXISTS (SELECT 1 FROM gm) THEN (SELECT max(ramp) FROM gr WHERE gr.time_s = fr.time_s
                        AND adjacent) ELSE ramp END AS ramp
    FROM fr WHERE time_s > $lo),
flags AS (
    SELECT time_s, 'thermal trip' AS alarm, 'factory' AS target, ultraservers_tripped > 0 AS active,
           CAST(ultraservers_tripped AS DOUBLE) AS value FROM f
    UNION ALL SELECT time_s, 'CDU pumps lost', 'row:' || row_id, flow < 1, flow FROM cdu
    UNION ALL SELECT time_s, 'chiller loss', 'plant', chillers_failed > 0, chillers_failed FROM f
    UNION ALL SELECT time_s, 'cooling tower loss', 'plant', economizers_failed > 0, economizers_failed FROM f
    UNION ALL SELECT time_s, 'plant short of capacity', 'factory', unmet_heat_w > 0, unmet_heat_w FROM f
    UNION ALL SELECT time_s, 'power cap', 'factory', coalesce(NOT isnan(facility_cap_w), false), facility_cap_w
        FROM f
    UNION ALL SELECT time_s, 'throttling', 'factory', throttled_chips > 0, throttled_chips FROM f
    UNION ALL SELECT time_s, 'failed hardware', 'factory', chips_failed > 0, chips_failed FROM f
    UNION ALL SELECT time_s, 'SLO breach', 'service:' || service, coalesce(slo_attainment < $slo_alarm, false),
        slo_attainment FROM s
    UNION ALL SELECT time_s, 'grid ramp limit', 'grid', coalesce(ramp > $ramp_limit_mw_per_min, false), ramp
        FROM ramp)"""


TEMPLATES.update(
    {
        "grid_power": """-- Power at the grid connection over the last $window_s s up to $t: grid_ts (every grid_interval_s,
-- after the connection's storage) when recorded, else factory_ts facility power per step
WITH g AS (
    SELECT time_s, p_w FROM grid_ts
    WHERE run_id = $run_id AND hall_id = -1 AND time_s > $t - $window_s AND time_s < $t + $dt_s)
SELECT time_s, p_w, 'grid_ts' AS source FROM g
UNION ALL
SELECT time_s, facility_power_w, 'factory_ts' FROM factory_ts
WHERE NOT EXISTS (SELECT 1 FROM g) AND run_id = $run_id AND time_s > $t - $window_s AND time_s <= $t
ORDER BY time_s""",
        "grid_ramp": """-- Steps after $lo up to $t whose ramp at the grid connection exceeds $ramp_limit_mw_per_min MW/min
-- (the 'grid ramp limit' condition of ALARM_FLAGS) and the largest step ramp [MW/min]
WITH """
        + "$alarm_flags"
        + """
SELECT count(*) FILTER (WHERE active) AS breach_steps, max(value) AS ramp_max_mw_per_min
FROM flags WHERE alarm = 'grid ramp limit'""",
        "services": """-- Services at $t: replicas, demand, latency percentiles (against the SLO), KV cache, J/token
SELECT service_id, service, replicas_running, replicas_starting, replicas_target,
       request_rate_per_s, requests_served / $dt_s AS served_per_s, requests_dropped / $dt_s AS dropped_per_s,
       requests_queued, ttft_p50_s, ttft_p99_s, tpot_p50_s, tpot_p99_s, slo_attainment, kv_cache_fraction,
       utilization, tokens_per_s, input_tokens_per_s, power_w,
       power_w / nullif(tokens_per_s, 0) AS energy_per_token_j  -- W / (output token/s) = J per output token
FROM service_ts
WHERE run_id = $run_id AND time_s = $t
ORDER BY service_id""",
        "svc_series": """-- Service $service_id over the last $window_s s up to $t
SELECT time_s, ttft_p50_s, ttft_p99_s, tpot_p50_s, tpot_p99_s, request_rate_per_s,
       requests_dropped / $dt_s AS dropped_per_s, replicas_running + replicas_starting AS replicas_up,
       replicas_target, kv_cache_fraction, requests_queued
FROM service_ts
WHERE run_id = $run_id AND service_id = $service_id AND time_s > $t - $window_s AND time_s <= $t
ORDER BY time_s""",
        "pue_why": """-- Why PUE moved: the cooling and loss breakdown at $t, an hour and a day earlier
SELECT 'now' AS at, * FROM (
    SELECT time_s, pue, it_power_w, facility_power_w, cooling_power_w, chiller_power_w, pump_power_w,
           fan_power_w, power_loss_w, ups_loss_w, pdu_loss_w, transformer_loss_w, free_cooling_fraction,
           outdoor_temp_c, outdoor_wetbulb_c, chiller_cop,
           chiller_power_w * chiller_cop AS chiller_load_w  -- heat the chillers remove = power x COP
    FROM factory_ts WHERE run_id = $run_id AND time_s <= $t ORDER BY time_s DESC LIMIT 1)
UNION ALL
SELECT '1 h earlier', * FROM (
    SELECT time_s, pue, it_power_w, facility_power_w, cooling_power_w, chiller_power_w, pump_power_w,
           fan_power_w, power_loss_w, ups_loss_w, pdu_loss_w, transformer_loss_w, free_cooling_fraction,
           outdoor_temp_c, outdoor_wetbulb_c, chiller_cop, chiller_power_w * chiller_cop
    FROM factory_ts WHERE run_id = $run_id AND time_s <= $t - 3600 ORDER BY time_s DESC LIMIT 1)
UNION ALL
SELECT '1 d earlier', * FROM (
    SELECT time_s, pue, it_power_w, facility_power_w, cooling_power_w, chiller_power_w, pump_power_w,
           fan_power_w, power_loss_w, ups_loss_w, pdu_loss_w, transformer_loss_w, free_cooling_fraction,
           outdoor_temp_c, outdoor_wetbulb_c, chiller_cop, chiller_power_w * chiller_cop
    FROM factory_ts WHERE run_id = $run_id AND time_s <= $t - 86400 ORDER BY time_s DESC LIMIT 1)""",
        "plant_units": """-- The plant's units at $t: each CDU (one per row) with its heat load and loop return
-- temperature, and the heat-rejection stage (chillers / economizer / towers) from the site totals
SELECT 'CDU ' || row_id AS unit, 'cdu' AS kind, count(*) AS ultraservers, sum(power_w) AS load_w,
       avg(coolant_return_c) AS return_c, max(max_chip_temp_c) AS hottest_chip_c,
       CAST(sum(chips_failed) AS BIGINT) AS chips_failed, min(cdu_flow_fraction) AS flow
FROM ultraserver_ts
WHERE run_id = $run_id AND time_s = $t
GROUP BY row_id
ORDER BY row_id""",
        "alarms": """-- Alarms at $t: each condition active at the latest recorded step up to $t and since the
-- first step of its current episode (searched back 7 days); the conditions are ALARM_FLAGS
WITH """
        + "$alarm_flags"
        + """,
marked AS (
    SELECT *, max(CASE WHEN NOT active THEN time_s END) OVER (PARTITION BY alarm, target) AS last_clear
    FROM flags),
now AS (
    SELECT alarm, target, arg_max(active, time_s) AS active, arg_max(value, time_s) AS value,
           min(time_s) FILTER (WHERE last_clear IS NULL OR time_s > last_clear) AS since_s
    FROM marked GROUP BY alarm, target),
conditions AS (SELECT alarm, target, since_s, value FROM now WHERE active),
waits AS (  -- the batch job waiting longest, if over the threshold
    SELECT 'queue wait' AS alarm, 'job:' || job_id AS target, $t - waiting_s + $queue_wait_s AS since_s,
           CAST(waiting_s AS DOUBLE) AS value
    FROM ("""
        + "$jobs_base"
        + """) WHERE state = 'queued' AND waiting_s > $queue_wait_s
    ORDER BY waiting_s DESC LIMIT 1)
SELECT alarm, target, since_s, value FROM conditions
UNION ALL SELECT * FROM waits
ORDER BY since_s, alarm, target""",
        "alarm_episodes": """-- Alarms raised and cleared after $lo up to $t: each episode of a condition of ALARM_FLAGS,
-- from the first step it holds (raised_s) to the first step it no longer does (cleared_s; NULL:
-- still active at the last step), with its value when raised
WITH """
        + "$alarm_flags"
        + """,
edged AS (
    SELECT *, active <> coalesce(lag(active) OVER w, false) AS edge FROM flags
    WINDOW w AS (PARTITION BY alarm, target ORDER BY time_s)),
numbered AS (
    SELECT *, sum(edge::INTEGER) OVER (PARTITION BY alarm, target ORDER BY time_s) AS episode FROM edged),
episodes AS (
    SELECT alarm, target, episode, bool_or(active) AS active, min(time_s) AS raised_s, arg_min(value, time_s) AS value
    FROM numbered GROUP BY alarm, target, episode)
SELECT alarm, target, raised_s,
       lead(raised_s) OVER (PARTITION BY alarm, target ORDER BY episode) AS cleared_s, value
FROM episodes
QUALIFY active
ORDER BY raised_s, alarm, target""",
    }
)

# Jobs: a batch job's state at $t from its latest start / interruption / end event up to $t (the
# jobs table keeps only a job's latest state and placement); a running job's placement is the one
# its latest start up to $t recorded ("[3,4]" in the event's detail; a file from before that: the
# jobs table's latest); progress of a running job ~ time on its current placement / estimate. Inference replicas are not logged one by one when the autoscaler requests
# or stops them, so they are shown per service from the model's own counts at $t (service_ts):
# running (serving or loading), queued (wanted, waiting for chips) and stopped (idle slots); their
# job id is the service's first replica slot's (the jobs table's, stable over the run).
_JOBS_BASE = """-- Jobs at $t: batch jobs from their latest start / interrupt / end event up to $t;
-- inference replicas per service from service_ts at $t (running, queued for chips, stopped slots)
WITH ev_recorded AS (
    SELECT CAST(split_part(target, ':', 2) AS INTEGER) AS job_id,
           arg_max(kind, {'t': time_s, 'r': rowid}) AS last_event, max(time_s) AS since_s,
           count(*) FILTER (WHERE kind IN ('job_interrupted', 'job_preempted')) AS restarts,
           arg_max(detail, {'t': time_s, 'r': rowid}) FILTER (WHERE kind = 'job_start') AS start_detail
    FROM events
    WHERE run_id = $run_id AND time_s <= $t
      AND kind IN ('job_start', 'job_interrupted', 'job_preempted', 'job_end')
    GROUP BY target),
-- A job that started (or ended) in the warm-up has no event before the recording began: without
-- an event up to $t, its first start (and its end, when before $t) say where it is. -1 = never.
ev AS (
    SELECT j.job_id,
           coalesce(r.last_event,
                    CASE WHEN j.end_time_s <> -1 AND j.end_time_s <= $t THEN 'job_end'
                         WHEN j.first_start_time_s <> -1 AND j.first_start_time_s <= $t THEN 'job_start' END)
               AS last_event,
           coalesce(r.since_s,
                    CASE WHEN j.end_time_s <> -1 AND j.end_time_s <= $t THEN j.end_time_s
                         WHEN j.first_start_time_s <> -1 AND j.first_start_time_s <= $t
                         THEN j.first_start_time_s END) AS since_s,
           r.restarts, r.start_detail
    FROM jobs j LEFT JOIN ev_recorded r USING (job_id)
    WHERE j.run_id = $run_id AND j.kind <> 'inference'),
batch AS (
    SELECT j.job_id,
           CASE WHEN ev.last_event = 'job_end' THEN 'done'
                WHEN ev.last_event = 'job_start' THEN 'running'
                ELSE 'queued' END AS state,
           j.kind, j.name AS model, j.chips, CAST(NULL AS INTEGER) AS replicas,
           CASE WHEN ev.last_event IS NULL OR ev.last_event IN ('job_interrupted', 'job_preempted')
                THEN $t - coalesce(ev.since_s, j.submit_time_s) END AS waiting_s,
           CASE WHEN ev.last_event = 'job_end' THEN 1.0
                WHEN ev.last_event = 'job_start'
                THEN least(0.99, ($t - ev.since_s) / nullif(j.estimate_s, 0)) END AS progress,
           coalesce(ev.restarts, 0) AS restarts,
           CASE WHEN ev.last_event = 'job_start'
                THEN coalesce(nullif(regexp_extract(ev.start_detail, '\\[([0-9,]+)\\]', 1), ''), j.ultraservers)
                ELSE '' END AS placement,
           j.priority, j.submit_time_s,
           CASE WHEN ev.last_event IS NOT NULL THEN j.mfu END AS mfu,  -- none before its first start
           j.wait_s AS total_wait_s
    FROM jobs j LEFT JOIN ev USING (job_id)
    WHERE j.run_id = $run_id AND j.submit_time_s <= $t AND j.kind <> 'inference'),
slots AS (
    SELECT name AS service, count(*) AS slots, max(chips) AS chips, max(priority) AS priority,
           min(job_id) AS first_job_id
    FROM jobs WHERE run_id = $run_id AND kind = 'inference'
    GROUP BY name),
svc AS (
    SELECT s.service, s.replicas_running + s.replicas_starting AS up, s.replicas_starting AS loading,
           s.replicas_target - s.replicas_running - s.replicas_starting AS waiting,
           slots.slots - s.replicas_target AS idle, slots.chips, slots.priority, slots.first_job_id
    FROM service_ts s JOIN slots USING (service)
    WHERE s.run_id = $run_id AND s.time_s = $t),
replicas AS (
    SELECT svc.first_job_id AS job_id, st.state, 'inference' AS kind, svc.service AS model,
           st.n * svc.chips AS chips, CAST(st.n AS INTEGER) AS replicas,
           CAST(NULL AS BIGINT) AS waiting_s, CAST(NULL AS DOUBLE) AS progress, CAST(NULL AS BIGINT) AS restarts,
           CASE WHEN st.state = 'running' AND svc.loading > 0 THEN svc.loading || ' loading' ELSE '' END
               AS placement,
           svc.priority, CAST(NULL AS BIGINT) AS submit_time_s, CAST(NULL AS DOUBLE) AS mfu,
           CAST(NULL AS DOUBLE) AS total_wait_s
    FROM svc, LATERAL (VALUES ('running', svc.up), ('queued', svc.waiting), ('stopped', svc.idle)) st(state, n)
    WHERE st.n > 0),
j AS (SELECT * FROM batch UNION ALL BY NAME SELECT * FROM replicas)
SELECT * FROM j"""

JOB_VIEWS: dict[str, tuple[str, ...]] = {
    "active": ("queued", "running"),
    "queued": ("queued",),
    "running": ("running",),
    "done": ("done", "stopped"),
    "all": (),
}
JOB_SORTS: tuple[str, ...] = (
    "job_id",
    "state",
    "kind",
    "model",
    "chips",
    "replicas",
    "waiting_s",
    "progress",
    "restarts",
    "placement",
    "priority",
    "submit_time_s",
    "mfu",
    "total_wait_s",
)


# Rows the Jobs panel returns at most (its counts are of every matching job): a campus's queue may
# hold a hundred thousand jobs, and sending them all made the panel slow on a long run.
JOBS_LIMIT = 5000
# (Counts as window functions over the matching rows were far slower there: a CTE counts once.)
_JOBS_COUNTS = (
    "c AS (SELECT count(*) AS n_rows, count_if(state = 'queued') AS n_queued,\n"
    "             count_if(state = 'running') AS n_running FROM m)"
)


def jobs_sql(
    view: str = "active", text: str = "", sort: str = "job_id", desc: bool = False, limit: int = JOBS_LIMIT
) -> str:
    """The Jobs panel's query with its view (state filter), text filter and sort order: the first
    ``limit`` rows, each with the counts of all the rows that match (``n_rows``, ``n_queued``,
    ``n_running``)."""
    states = JOB_VIEWS[view]
    where: list[str] = []
    if states:
        where.append("state IN (" + ", ".join(_lit(s) for s in states) + ")")
    if text.strip():
        pat = _lit(f"%{text.strip()}%")
        where.append(
            f"(model ILIKE {pat} OR kind ILIKE {pat} OR CAST(job_id AS VARCHAR) = {_lit(text.strip())})"
        )
    if sort not in JOB_SORTS:
        raise ValueError(f"unknown sort column {sort!r}")
    order = f"{sort} {'DESC' if desc else 'ASC'} NULLS LAST"
    if sort != "job_id":
        order += ", job_id"
    assert _JOBS_BASE.endswith("\nSELECT * FROM j")
    base = _JOBS_BASE.removesuffix("\nSELECT * FROM j")
    cond = f" WHERE {' AND '.join(where)}" if where else ""
    return f"{base},\nm AS (SELECT * FROM j{cond}),\n{_JOBS_COUNTS}\nSELECT * FROM m, c\nORDER BY {order}\nLIMIT {int(limit)}"


def _lit(v: Any) -> str:
    """A SQL literal for a parameter value."""
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, int | np.integer):
        return str(int(v))
    if isinstance(v, float | np.floating):
        f = float(v)
        return str(int(f)) if f.is_integer() else repr(f)
    s = str(v)
    return "'" + s.replace("'", "''") + "'"


_PARAM = re.compile(r"\$([a-z_]+)\b")


def render(template: str, params: Params) -> str:
    """Substitute ``$name`` with literals (unknown names are left as they are)."""

    def sub(m: re.Match[str]) -> str:
        name = m.group(1)
        return _lit(params[name]) if name in params else m.group(0)

    return _PARAM.sub(sub, template)


def panel_sql(name: str, params: Params, **options: Any) -> str:
    """The SQL text of panel query ``name`` with its parameters filled in."""
    if name.endswith("_search"):  # a panel query with a text filter (never computed in memory)
        name = name.removesuffix("_search")
    template = jobs_sql(**options) if name == "jobs" else TEMPLATES[name]
    if name in ("alarms", "alarm_episodes", "grid_ramp"):
        base = _JOBS_BASE.split("\n", 2)[2]  # without its two comment lines
        template = template.replace("$alarm_flags", ALARM_FLAGS).replace("$jobs_base", base)
        # Searched back ALARM_LOOKBACK_S from $t unless told where from ($lo: the report's whole run).
        lo = {"lo": params["t"] - ALARM_LOOKBACK_S} if params.get("t") is not None else {}
        # The connection's ramp limit is the run's scenario's (``ramp_limit``; 0: off).
        defaults = {"queue_wait_s": QUEUE_WAIT_ALARM_S, "slo_alarm": SLO_ALARM, "ramp_limit_mw_per_min": 0.0}
        params = {**defaults, **lo, **params}
    if name in ("events", "events_notable") and options.get("text"):
        template = template.replace(
            "WHERE run_id = $run_id AND time_s <= $t",
            "WHERE run_id = $run_id AND time_s <= $t\n  AND (kind ILIKE $pattern OR target "
            "ILIKE $pattern OR detail ILIKE $pattern OR source ILIKE $pattern)",
        )
        template = template.replace("-- Events log", "-- Events log matching $pattern", 1)
        params = {**params, "pattern": f"%{options['text']}%"}
    return render(template, params)


# The queue alarm over a whole run: each wait of a batch job (from its submission, or from an
# interruption or preemption, to its next start) that outlasts QUEUE_WAIT_ALARM_S holds the alarm
# from the threshold on (the console raises it for the job waiting longest at the time shown: the
# same condition). A start from before the recording (the warm-up) is the jobs table's first start.
_QUEUE_WAITS = """
WITH starts AS (
    SELECT CAST(split_part(target, ':', 2) AS INTEGER) AS job_id, time_s FROM events
    WHERE run_id = $1 AND kind = 'job_start'
    UNION
    SELECT job_id, first_start_time_s FROM jobs
    WHERE run_id = $1 AND kind <> 'inference' AND first_start_time_s <> -1),
waits AS (
    SELECT job_id, submit_time_s AS since_s FROM jobs WHERE run_id = $1 AND kind <> 'inference'
    UNION ALL
    SELECT CAST(split_part(target, ':', 2) AS INTEGER), time_s FROM events
    WHERE run_id = $1 AND kind IN ('job_interrupted', 'job_preempted'))
SELECT w.job_id, w.since_s + $2 AS raised_s, s.time_s AS started_s
FROM waits w ASOF LEFT JOIN starts s ON w.job_id = s.job_id AND s.time_s >= w.since_s
WHERE coalesce(s.time_s, $3) - w.since_s > $2
ORDER BY raised_s, w.job_id"""


def queue_wait_episodes(
    con: duckdb.DuckDBPyConnection, run_id: str, end_s: int, wait_s: int = QUEUE_WAIT_ALARM_S
) -> list[tuple[int, int | None, int, int, float]]:
    """The queue alarm's episodes of a run recorded up to ``end_s``: (raised_s, cleared_s or None
    while still active at the end, the job that raised it, jobs over the threshold in the
    episode, the longest wait in it [s]). An episode lasts while at least one wait is over (the
    alarm holds strictly after a wait passes the threshold and before the job starts)."""
    rows = con.sql(_QUEUE_WAITS, params=[run_id, wait_s, end_s]).fetchall()
    out: list[tuple[int, int | None, int, int, float]] = []
    cur: list[Any] | None = None  # raised, cleared (None: open), job, jobs, longest
    for job, raised, started in rows:
        waited = (end_s if started is None else started) - (raised - wait_s)
        if cur is not None and (cur[1] is None or raised < cur[1]):
            cur[1] = None if cur[1] is None or started is None else max(cur[1], started)
            cur[3] += 1
            cur[4] = max(cur[4], waited)
            continue
        if cur is not None:
            out.append((cur[0], cur[1], cur[2], cur[3], cur[4]))
        cur = [raised, started, job, 1, waited]
    if cur is not None:
        out.append((cur[0], cur[1], cur[2], cur[3], cur[4]))
    return out


def ramp_limit(con: duckdb.DuckDBPyConnection, run_id: str) -> float:
    """The run's ramp limit at the grid connection [MW/min] (``[grid] ramp_limit_mw_per_min`` of
    the scenario text it was made from; 0: none, or text that does not parse)."""
    rows = con.sql("SELECT scenario_toml FROM runs WHERE run_id = ?", params=[run_id]).fetchall()
    try:
        grid = tomllib.loads(str(rows[0][0] or "")).get("grid", {})
        return float(grid.get("ramp_limit_mw_per_min", 0.0))
    except (IndexError, tomllib.TOMLDecodeError, AttributeError, TypeError, ValueError):
        return 0.0


def to_cols(tb: Any) -> Cols:
    """An Arrow table as plain columns (numbers as float/int arrays, text as object arrays)."""
    out: Cols = {}
    for name in tb.column_names:
        col = tb.column(name)
        try:
            arr = col.to_numpy()
        except Exception:  # nulls in integer/bool columns, or nested types
            arr = np.array(col.to_pylist(), dtype=object)
        if arr.dtype.kind in "iub" and col.null_count:
            arr = np.array(col.to_pylist(), dtype=object)
        out[name] = arr
    return out


def run_sql(con: duckdb.DuckDBPyConnection, sql: str) -> Cols:
    """Run one of our own panel queries (read-only) and return its columns."""
    rel = con.sql(sql)
    if rel is None:
        return {}
    return to_cols(rel.to_arrow_table())
