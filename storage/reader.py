"""Reading telemetry files: safe opening, read-only user SQL, and the queries the product uses.

Files open read-only in the sandbox of ``storage.sandbox`` (no file system access beyond the file,
no extensions, configuration locked, a memory limit). User SQL runs through
``storage.sandbox.UserSql`` (only statements that read, a time limit); errors become ``QueryError``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import duckdb
import pyarrow as pa

from storage.sandbox import Limits, UserSql, connect
from storage.writer import StorageError
from twin.telemetry import SCHEMA_VERSION

READ_ONLY_TYPES = {"SELECT", "EXPLAIN", "PRAGMA"}


class QueryError(Exception):
    """A user query was refused or failed."""


def open_run_file(path: str | Path, limits: Limits | None = None) -> duckdb.DuckDBPyConnection:
    """Open a telemetry file read-only, sandboxed, with the memory limit of ``limits``; raise
    ``StorageError`` with a clear reason if it is missing, not a DuckDB file, not a twin run, or
    from an incompatible version."""
    p = Path(path)
    if not p.exists():
        raise StorageError(f"{p}: no such file")
    if p.is_dir():
        raise StorageError(f"{p}: is a directory, not a telemetry file")
    try:
        con, _ = connect(p, read_only=True, limits=limits or Limits())
    except duckdb.IOException as e:
        msg = str(e)
        if "lock" in msg.lower():
            raise StorageError(
                f"{p}: the file is open for writing by another process (a run in progress)"
            ) from e
        raise StorageError(f"{p}: not a DuckDB telemetry file ({msg.splitlines()[0]})") from e
    except duckdb.Error as e:
        raise StorageError(f"{p}: cannot open: {str(e).splitlines()[0]}") from e
    try:
        row = next(iter(con.sql("SELECT value FROM twin_meta WHERE key = 'schema_version'").fetchall()), None)
    except duckdb.Error:
        con.close()
        raise StorageError(
            f"{p}: a DuckDB file, but not an AI Factory Twin run (no twin_meta table)"
        ) from None
    if row is None:
        con.close()
        raise StorageError(f"{p}: not an AI Factory Twin run (no schema version recorded)")
    if int(row[0]) != SCHEMA_VERSION:
        con.close()
        raise StorageError(
            f"{p}: telemetry schema v{row[0]}, this version of twin reads v{SCHEMA_VERSION}; "
            "re-run the scenario with this version"
        )
    return con


def statement_types(con: duckdb.DuckDBPyConnection, sql: str) -> list[str]:
    try:
        return [s.type.name for s in con.extract_statements(sql)]
    except duckdb.Error as e:
        raise QueryError(str(e).strip()) from e


def reading_statements(con: duckdb.DuckDBPyConnection, sql: str) -> tuple[list[str], list[str]]:
    """(statement types, statement texts) of user SQL; ``QueryError`` unless every statement only
    reads (SELECT, EXPLAIN, PRAGMA; DESCRIBE, SHOW and SUMMARIZE parse as SELECT)."""
    types = statement_types(con, sql)
    if not types:
        raise QueryError("empty query")
    bad = [t for t in types if t not in READ_ONLY_TYPES]
    if bad:
        raise QueryError(
            f"refused: {bad[0]} statements are not allowed; telemetry SQL is read-only "
            "(SELECT, EXPLAIN, DESCRIBE, SHOW, SUMMARIZE and PRAGMA are)"
        )
    try:
        return types, [s.query for s in con.extract_statements(sql)]
    except duckdb.Error as e:
        raise QueryError(str(e).strip()) from e


def user_query(con: duckdb.DuckDBPyConnection, sql: str, limits: Limits | None = None) -> pa.Table:
    """Run user SQL on a file opened by ``open_run_file`` (the last statement's result is
    returned) inside ``limits``; refuse anything that writes."""
    return UserSql(con, limits or Limits(), strict=False).run(sql).table


def runs(con: duckdb.DuckDBPyConnection) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = con.sql("SELECT * FROM runs ORDER BY started_at").to_arrow_table().to_pylist()
    return rows


def latest_run_id(con: duckdb.DuckDBPyConnection) -> str:
    row = next(iter(con.sql("SELECT run_id FROM runs ORDER BY started_at DESC LIMIT 1").fetchall()), None)
    if row is None:
        raise StorageError("the file holds no run")
    return str(row[0])


def kpi_summary(con: duckdb.DuckDBPyConnection, run_id: str) -> dict[str, Any]:
    """Whole-run KPIs from factory_ts (energies from per-step energy, so any dt works)."""
    q = """
    SELECT count(*) AS steps,
           coalesce(max(time_s), 0) AS last_time_s,
           sum(energy_j) / 3.6e9 AS facility_mwh,
           sum(energy_j * it_power_w / facility_power_w) / 3.6e9 AS it_mwh,
           sum(energy_j * cooling_power_w / facility_power_w) / 3.6e9 AS cooling_mwh,
           sum(energy_j * power_loss_w / facility_power_w) / 3.6e9 AS loss_mwh,
           max(facility_power_w) AS peak_facility_w,
           avg(chips_busy::DOUBLE / chips_total) AS busy_fraction,
           sum(cost_usd) AS cost_usd,
           sum(co2_kg) / 1000 AS co2_t,
           sum(tokens_per_s * (energy_j / facility_power_w)) AS tokens,
           sum(training_flops * (energy_j / facility_power_w)) AS training_flop,
           sum(requests_dropped_per_s * (energy_j / facility_power_w)) AS requests_dropped,
           avg(queue_jobs) AS mean_queue,
           max(max_chip_temp_c) AS max_chip_temp_c
    FROM factory_ts WHERE run_id = ?
    """
    row = con.sql(q, params=[run_id]).to_arrow_table().to_pylist()[0]
    it = row["it_mwh"] or 0.0
    row["pue"] = (row["facility_mwh"] / it) if it else None
    # CUE = CO2 of the facility's energy / IT energy [kg/kWh] (The Green Grid; t/MWh = kg/kWh).
    row["cue_kg_per_kwh"] = (row["co2_t"] / it) if it else None
    row.update(workload_kpis(con, run_id))
    out: dict[str, Any] = row
    return out


_WORKLOAD_Q = {
    # Batch jobs: queue waits over the jobs that started (all of their time queued, re-queues
    # after interruptions included); goodput = progress kept / chip time held, chip-weighted.
    "jobs": """
    SELECT count(*) AS jobs_submitted,
           count(*) FILTER (WHERE state = 'done') AS jobs_done,
           avg(wait_s) FILTER (WHERE first_start_time_s >= 0) AS wait_mean_s,
           quantile_cont(wait_s, 0.5) FILTER (WHERE first_start_time_s >= 0) AS wait_p50_s,
           quantile_cont(wait_s, 0.9) FILTER (WHERE first_start_time_s >= 0) AS wait_p90_s,
           quantile_cont(wait_s, 0.99) FILTER (WHERE first_start_time_s >= 0) AS wait_p99_s,
           sum(effective_s * chips) FILTER (WHERE kind IN ('pretrain', 'finetune'))
             / nullif(sum(run_s * chips) FILTER (WHERE kind IN ('pretrain', 'finetune')), 0) AS goodput,
           sum(effective_s * chips) FILTER (WHERE kind IN ('pretrain', 'finetune')) / 3600 AS effective_training_chip_h,
           sum(lost_flop) AS lost_flop,
           sum(lost_flop) / nullif(sum(done_flop + lost_flop), 0) AS lost_fraction,
           sum(restarts) AS restarts
    FROM jobs WHERE run_id = ? AND kind <> 'inference'
    """,
    "failures": """
    SELECT count(*) FILTER (WHERE source = 'model') AS failures,
           count(*) FILTER (WHERE source <> 'model') AS failures_injected
    FROM failures WHERE run_id = ?
    """,
    "interruptions": """
    SELECT count(*) FILTER (WHERE reason = 'preemption') AS preemptions,
           count(*) AS interruptions
    FROM interruptions WHERE run_id = ?
    """,
    # Latency percentiles over the run: the served-weighted mean of the per-step percentiles.
    "services": """
    SELECT sum(requests_arrived) AS requests,
           sum(requests_served) AS requests_served,
           sum(requests_dropped) AS requests_dropped_total,
           sum(slo_met) / nullif(sum(requests_served + requests_dropped), 0) AS slo_attainment,
           sum(ttft_p50_s * requests_served) FILTER (WHERE requests_served > 0)
             / nullif(sum(requests_served), 0) AS ttft_p50_s,
           sum(ttft_p99_s * requests_served) FILTER (WHERE requests_served > 0)
             / nullif(sum(requests_served), 0) AS ttft_p99_s,
           sum(tpot_p50_s * requests_served) FILTER (WHERE requests_served > 0)
             / nullif(sum(requests_served), 0) AS tpot_p50_s,
           sum(tpot_p99_s * requests_served) FILTER (WHERE requests_served > 0)
             / nullif(sum(requests_served), 0) AS tpot_p99_s
    FROM service_ts WHERE run_id = ?
    """,
    # Energy and cost of inference: the facility power attributed to replicas, per step.
    "energy": """
    WITH f AS (SELECT *, energy_j / facility_power_w AS dt FROM factory_ts WHERE run_id = ?)
    SELECT sum(tokens_per_s * dt) / nullif(sum(dt) / 86400, 0) AS tokens_per_day,
           sum(inference_power_w * dt) / nullif(sum(tokens_per_s * dt), 0) AS j_per_token,
           sum(inference_power_w * dt / 3.6e9 * price_usd_per_mwh) * 1e6
             / nullif(sum(tokens_per_s * dt), 0) AS usd_per_mtok,
           sum(job_flops * dt) AS job_flop,
           avg(fragmentation) AS mean_fragmentation
    FROM f
    """,
}


def workload_kpis(con: duckdb.DuckDBPyConnection, run_id: str) -> dict[str, Any]:
    """Whole-run KPIs of the work: queue waits, goodput, failures and preemptions, requests and
    SLO attainment, tokens per day, energy and electricity cost per token."""
    out: dict[str, Any] = {}
    for q in _WORKLOAD_Q.values():
        out.update(con.sql(q, params=[run_id]).to_arrow_table().to_pylist()[0])
    return out
