"""The alarms in SQL: the one definition of each alarm condition over the recorded state.

``ALARM_FLAGS`` flags every condition at every recorded step; the panel queries over it
(``ALARM_TEMPLATES``: the alarms at a time, their episodes over a run, the grid ramp) are rendered
by ``storage.queries.panel_sql`` like every panel's. The queue alarm over a whole run
(``queue_wait_episodes``) and the run's grid ramp limit (``ramp_limit``) are read here too.
"""

from __future__ import annotations

import tomllib
from typing import Any

import duckdb

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


# The panel queries over ALARM_FLAGS (``$alarm_flags``; ``$jobs_base``: ``storage.jobstate.JOBS_BASE``).
ALARM_TEMPLATES: dict[str, str] = {
    "grid_ramp": """-- Steps after $lo up to $t whose ramp at the grid connection exceeds $ramp_limit_mw_per_min MW/min
-- (the 'grid ramp limit' condition of ALARM_FLAGS) and the largest step ramp [MW/min]
WITH """
    + "$alarm_flags"
    + """
SELECT count(*) FILTER (WHERE active) AS breach_steps, max(value) AS ramp_max_mw_per_min
FROM flags WHERE alarm = 'grid ramp limit'""",
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
