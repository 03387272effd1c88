"""Jobs at a time, in SQL: each batch job's state from its events, each service's replicas from
its counts. One definition for the Jobs panel (``storage.queries.jobs_sql``) and the queue alarm
(``storage.alarms``).
"""

# Jobs: a batch job's state at $t from its latest start / interruption / end event up to $t (the
# jobs table keeps only a job's latest state and placement); a running job's placement is the one
# its latest start up to $t recorded ("[3,4]" in the event's detail; a file from before that: the
# jobs table's latest); progress of a running job ~ time on its current placement / estimate. Inference replicas are not logged one by one when the autoscaler requests
# or stops them, so they are shown per service from the model's own counts at $t (service_ts):
# running (serving or loading), queued (wanted, waiting for chips) and stopped (idle slots); their
# job id is the service's first replica slot's (the jobs table's, stable over the run).
JOBS_BASE = """-- Jobs at $t: batch jobs from their latest start / interrupt / end event up to $t;
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
