"""Whole-run KPIs: the one definition, used by the run summary (``twin run``, ``--json``), the
``run_summary`` view, ``twin compare`` and whoever else needs a run's totals.

The outputs' KPI names and units are one table, ``storage.kpi_table.KPI_TABLE``; the grid
connection's KPIs are ``storage.gridkpis``.

Energies come from per-step energy so any step size works: a step lasts
``dt = energy_j / facility_power_w``, and every rate is integrated over it. Ratios are defined
once (``RATIOS``) and rendered both as Python (``whole_run``) and as SQL (the view).

* PUE = facility energy / IT energy (The Green Grid).
* WUE = site water / IT energy [L/kWh] (The Green Grid).
* CUE = CO2 of the facility's energy / IT energy [kg/kWh] (The Green Grid; t/MWh = kg/kWh).
* J per token = facility power attributed to inference replicas, integrated, / output tokens.
* $ per M tokens = the same energy at each step's price / output tokens x 1e6.
* Cost of ownership (``twin.spec.tco``): capital recovery (systems and spares, scale-out network,
  storage, less the systems' resale; building and plant per W of nameplate IT, grid connection,
  interest during construction), maintenance and staff, and water are recorded per step;
  total = electricity + capital + maintenance/staff + water. The split:
  capital / energy (IT and power-chain losses at each step's price) / cooling (the plant's power
  at each step's price) / other (maintenance, staff, water).
* $ per chip-hour = total cost / chip-hours of the hall (idle chips cost too).
* $ per M tokens all-in = inference's electricity + the fixed costs (capital, maintenance, staff,
  water) in proportion to the chips its replicas hold, / output tokens x 1e6 (on a mixed floor,
  each system's own fixed costs by the share of its chips the replicas hold).
* kWh per EFLOP = facility energy not attributed to inference / FLOP delivered to all batch jobs.
* Input and output tokens are counted apart (``input_tokens``: prompt tokens prefilled; ``tokens``:
  output tokens). $ per M input tokens / $ per M output tokens: inference's all-in cost split by
  the replica time each phase takes, step by step (``prefill_time_share``: the warm replicas'
  time prefilling, chip-weighted), / input tokens and / output tokens x 1e6; the two costs add
  up to the all-in inference cost.
* $ per EFLOP = the rest of the total (batch work's share) / FLOP delivered to all batch jobs x 1e18;
  $ per pre-training job (``usd_per_pretrain_job``) = $ per EFLOP x the mean work of a finished
  pre-training job: the batch share of the total cost of ownership that one pre-training job's
  work bears in this run (not the cost of pre-training a model to completion).
* goodput = training progress kept / chip time held (chip-weighted), pre-training + fine-tuning.
* waits over the batch jobs that started (every wait, re-queues after interruptions included);
  the jobs that never started show apart: how many are still queued at the end and the longest
  wait among them so far (a job starved behind smaller ones leaves the started jobs' waits short).
* SLO attainment = requests served within both SLOs / requests decided (served + dropped).
* cap-hit share = time with busy chips below full clock (a power cap binding, or heat) / run time.
* thermal trips = UltraServers powered off by thermal protection (``thermal_trip`` events);
  tripped UltraServer-hours = UltraServers held off by it, integrated over the steps.
* Per system (mixed floors, ``per_system``): the same definitions over the system's rows of
  ``system_ts`` (its IT and work; the plant's and power chain's power and cost shared in
  proportion to IT power), and its share of the floor's batch FLOP and tokens.
"""

from __future__ import annotations

from typing import Any

import duckdb

from twin.spec.catalog import SYSTEMS

_DT = "(energy_j / facility_power_w)"

# A step under a facility cap (NaN or NULL: none).
_CAPPED = "(facility_cap_w IS NOT NULL AND NOT isnan(facility_cap_w))"
# A step draws more than its cap beyond this share when the cap cannot hold (a step's power is
# measured after its clocks were set, so a holding cap may be passed by rounding).
CAP_SLACK = 0.01

# What a run records of its ``--set`` overrides: the effective scenario text starts with these
# comment lines (``scenarios.overrides.effective_text`` writes them, ``recorded_overrides`` reads).
OVERRIDES_HEAD = "# Effective scenario: "
OVERRIDE_LINE = "# --set "

# Fixed costs (capital, maintenance and staff, water) of one row borne by inference: the share of
# the row's chips its replicas hold.
_INFERENCE_FIXED_ROW = (
    "(capex_usd + fixed_opex_usd + water_cost_usd) * inference_chips / nullif(chips_total, 0)"
)

# Inference's all-in cost of one row: its electricity at the step's price plus its fixed share.
_INFERENCE_STEP_USD = (
    f"(inference_power_w * {_DT} / 3.6e9 * price_usd_per_mwh + coalesce({_INFERENCE_FIXED_ROW}, 0))"
)

# Sums and extremes over factory_ts, one SQL aggregate each.
FACTORY_AGGREGATES: dict[str, str] = {
    "steps": "count(*)",
    "last_time_s": "coalesce(max(time_s), 0)",
    "facility_mwh": "sum(energy_j) / 3.6e9",
    "it_mwh": f"sum(it_power_w * {_DT}) / 3.6e9",
    "cooling_mwh": f"sum(cooling_power_w * {_DT}) / 3.6e9",
    "loss_mwh": f"sum(power_loss_w * {_DT}) / 3.6e9",
    "water_l": "sum(water_l)",
    "cost_usd": "sum(cost_usd)",
    "co2_t": "sum(co2_kg) / 1000",
    "tokens": f"sum(tokens_per_s * {_DT})",
    "input_tokens": f"sum(input_tokens_per_s * {_DT})",
    "inference_j": f"sum(inference_power_w * {_DT})",
    "batch_j": f"sum(energy_j - inference_power_w * {_DT})",
    "inference_cost_usd": f"sum(inference_power_w * {_DT} / 3.6e9 * price_usd_per_mwh)",
    "training_flop": f"sum(training_flops * {_DT})",
    "job_flop": f"sum(job_flops * {_DT})",
    "requests_dropped": f"sum(requests_dropped_per_s * {_DT})",
    "throttled_hours": f"sum(CASE WHEN throttled_chips > 0 THEN {_DT} ELSE 0 END) / 3600",
    "throttled_chip_hours": f"sum(throttled_chips * {_DT}) / 3600",
    # The facility cap (standing or a power_cap event; NaN: none): the lowest in force, the hours
    # it was in force, the hours it bound (busy chips below full clock while it held) and the
    # hours the hall drew more than it (a cap below what the hall draws at its lowest clock).
    "cap_min_w": f"min(facility_cap_w) FILTER (WHERE {_CAPPED})",
    "cap_hours": f"coalesce(sum({_DT}) FILTER (WHERE {_CAPPED}), 0) / 3600",
    "cap_bound_hours": f"coalesce(sum({_DT}) FILTER (WHERE {_CAPPED} AND throttled_chips > 0), 0) / 3600",
    "cap_exceeded_hours": (
        f"coalesce(sum({_DT}) FILTER (WHERE {_CAPPED} AND facility_power_w > facility_cap_w * {1 + CAP_SLACK}), 0)"
        " / 3600"
    ),
    "unmet_heat_mwh": f"sum(unmet_heat_w * {_DT}) / 3.6e9",
    "tripped_ultraserver_h": f"sum(ultraservers_tripped * {_DT}) / 3600",
    "peak_facility_w": "max(facility_power_w)",
    "busy_fraction": "avg(chips_busy::DOUBLE / chips_total)",
    "mean_queue": "avg(queue_jobs)",
    "mean_fragmentation": "avg(fragmentation)",
    "max_chip_temp_c": "max(max_chip_temp_c)",
    "days": f"sum({_DT}) / 86400",
    "chips": "any_value(chips_total)",
    "chip_hours": f"sum(chips_total * {_DT}) / 3600",
    "capex_usd": "coalesce(sum(capex_usd), 0)",
    "fixed_opex_usd": "coalesce(sum(fixed_opex_usd), 0)",
    "water_cost_usd": "coalesce(sum(water_cost_usd), 0)",
    "cooling_cost_usd": f"sum(cooling_power_w * {_DT} / 3.6e9 * price_usd_per_mwh)",
    "inference_fixed_usd": f"coalesce(sum({_INFERENCE_FIXED_ROW}), 0)",
    # Inference's all-in cost of each step (electricity + fixed share), and its prefill part.
    "inference_step_usd": f"sum({_INFERENCE_STEP_USD})",
    "inference_prefill_usd": f"sum({_INFERENCE_STEP_USD} * prefill_time_share)",
}

# Cost sums from the aggregates [USD], in order: name -> (terms added, terms subtracted).
COST_SUMS: dict[str, tuple[tuple[str, ...], tuple[str, ...]]] = {
    "total_cost_usd": (("cost_usd", "capex_usd", "fixed_opex_usd", "water_cost_usd"), ()),
    "energy_cost_usd": (("cost_usd",), ("cooling_cost_usd",)),
    "other_cost_usd": (("fixed_opex_usd", "water_cost_usd"), ()),
    "inference_total_usd": (("inference_cost_usd", "inference_fixed_usd"), ()),
    "batch_cost_usd": (("total_cost_usd",), ("inference_total_usd",)),
}

# name: (numerator, denominator, scale) over FACTORY_AGGREGATES; NULL when the denominator is 0.
RATIOS: dict[str, tuple[str, str, float]] = {
    "pue": ("facility_mwh", "it_mwh", 1.0),
    "wue_l_per_kwh": ("water_l", "it_mwh", 1e-3),
    "cue_kg_per_kwh": ("co2_t", "it_mwh", 1.0),
    "j_per_token": ("inference_j", "tokens", 1.0),
    "usd_per_mtok": ("inference_cost_usd", "tokens", 1e6),
    "tokens_per_day": ("tokens", "days", 1.0),
    "usd_per_chip_hour": ("total_cost_usd", "chip_hours", 1.0),
    "usd_per_mtok_all_in": ("inference_total_usd", "tokens", 1e6),
    "usd_per_m_input_tokens": ("inference_input_usd", "input_tokens", 1e6),
    "usd_per_m_output_tokens": ("inference_output_usd", "tokens", 1e6),
    "input_tokens_per_day": ("input_tokens", "days", 1.0),
    "usd_per_eflop": ("batch_cost_usd", "job_flop", 1e18),
    "kwh_per_eflop": ("batch_j", "job_flop", 1e18 / 3.6e6),
    # Cap-hit probability: the share of the run's time in which a power cap (facility, IT feed or
    # row: the ratings of an oversubscribed chain, ``twin.physics.power.tier_rating_w``) holds busy chips
    # below full clock. Heat throttling counts too (the clocks do not tell the two apart).
    "cap_hit_share": ("throttled_hours", "days", 1.0 / 24.0),
}

# Work KPIs from the jobs, failures, interruptions and service tables.
_WORK_Q = {
    "jobs": """
    SELECT count(*) AS jobs_submitted,
           count(*) FILTER (WHERE state = 'done') AS jobs_done,
           avg(wait_s) FILTER (WHERE first_start_time_s >= 0) AS wait_mean_s,
           quantile_cont(wait_s, 0.5) FILTER (WHERE first_start_time_s >= 0) AS wait_p50_s,
           quantile_cont(wait_s, 0.9) FILTER (WHERE first_start_time_s >= 0) AS wait_p90_s,
           quantile_cont(wait_s, 0.99) FILTER (WHERE first_start_time_s >= 0) AS wait_p99_s,
           count(*) FILTER (WHERE state = 'queued') AS jobs_queued_at_end,
           max(wait_s) FILTER (WHERE state = 'queued') / 3600 AS oldest_queued_wait_h,
           sum(effective_s * chips) FILTER (WHERE kind IN ('pretrain', 'finetune'))
             / nullif(sum(run_s * chips) FILTER (WHERE kind IN ('pretrain', 'finetune')), 0) AS goodput,
           sum(effective_s * chips) FILTER (WHERE kind IN ('pretrain', 'finetune')) / 3600 AS effective_training_chip_h,
           sum(lost_flop) AS lost_flop,
           sum(lost_flop) / nullif(sum(done_flop + lost_flop), 0) AS lost_fraction,
           sum(restarts) AS restarts,
           avg(done_flop) FILTER (WHERE kind = 'pretrain' AND state = 'done') AS pretrain_job_flop
    FROM jobs WHERE run_id = ? AND kind <> 'inference'
    """,
    "failures": """
    SELECT count(*) FILTER (WHERE source = 'model') AS failures,
           count(*) FILTER (WHERE source <> 'model') AS failures_injected
    FROM failures WHERE run_id = ?
    """,
    # Thermal protection: each UltraServer powered off by it counts once (``thermal_trip`` events).
    "thermal": """
    SELECT count(*) AS thermal_trips FROM events WHERE run_id = ? AND kind = 'thermal_trip'
    """,
    # Jobs that never entered the queue (larger than every hall, or for no system on the floor):
    # how many, and the first one's reason (the ``job_rejected`` events).
    "rejected": """
    SELECT count(*) AS jobs_rejected, arg_min(detail, time_s) AS jobs_rejected_reason
    FROM events WHERE run_id = ? AND kind = 'job_rejected'
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
}


def ratio(row: dict[str, Any], name: str) -> float | None:
    num, den, scale = RATIOS[name]
    n, d = row.get(num), row.get(den)
    return n / d * scale if d and n is not None else None


def whole_run(con: duckdb.DuckDBPyConnection, run_id: str) -> dict[str, Any]:
    """Every whole-run KPI of ``run_id`` (energies, PUE, WUE, CUE, J/token, $/M tokens, goodput,
    waits, SLO, ...), one flat dict."""
    sel = ",\n       ".join(f"{expr} AS {name}" for name, expr in FACTORY_AGGREGATES.items())
    row: dict[str, Any] = (
        con.sql(f"SELECT {sel}\nFROM factory_ts WHERE run_id = ?", params=[run_id])
        .to_arrow_table()
        .to_pylist()[0]
    )
    systems = per_system(con, run_id)
    if len(systems) > 1 or any(r["halls"] > 1 for r in systems):
        # A mixed floor or a campus: inference holds chips of one system in one hall, whose own
        # fixed costs it bears.
        row["inference_fixed_usd"] = sum(r["inference_fixed_usd"] or 0.0 for r in systems)
    row["systems"] = {r["system"]: r for r in systems}
    for name, (plus, minus) in COST_SUMS.items():
        row[name] = sum(row[k] or 0.0 for k in plus) - sum(row[k] or 0.0 for k in minus)
    row.update(input_output_split(row))
    for name in RATIOS:
        row[name] = ratio(row, name)
    for q in _WORK_Q.values():
        row.update(con.sql(q, params=[run_id]).to_arrow_table().to_pylist()[0])
    eflop, per_job = row["usd_per_eflop"], row["pretrain_job_flop"]
    row["usd_per_pretrain_job"] = eflop * per_job / 1e18 if eflop is not None and per_job else None
    return row


def input_output_split(row: dict[str, Any]) -> dict[str, float | None]:
    """Inference's all-in cost split between input and output tokens by the replica time each
    phase takes (the prefill share of the steps' inference cost; None in a file without it)."""
    step, prefill = row.get("inference_step_usd"), row.get("inference_prefill_usd")
    if not step or prefill is None:
        return {"inference_input_usd": None, "inference_output_usd": None}
    share = prefill / step
    total = row["inference_total_usd"]
    return {"inference_input_usd": total * share, "inference_output_usd": total * (1.0 - share)}


def cost_by_day_view_sql() -> str:
    """The ``cost_by_day`` view: each run's cost split per simulated day [USD], from the same
    columns as the whole-run split."""
    return (
        "CREATE OR REPLACE VIEW cost_by_day AS SELECT run_id, (time_s // 86400)::BIGINT AS day, "
        "sum(capex_usd) AS capex_usd, "
        f"sum(cost_usd) - sum(cooling_power_w * {_DT} / 3.6e9 * price_usd_per_mwh) AS energy_cost_usd, "
        f"sum(cooling_power_w * {_DT} / 3.6e9 * price_usd_per_mwh) AS cooling_cost_usd, "
        "sum(fixed_opex_usd) + sum(water_cost_usd) AS other_cost_usd, "
        "sum(cost_usd) + sum(capex_usd) + sum(fixed_opex_usd) + sum(water_cost_usd) AS total_cost_usd "
        "FROM factory_ts GROUP BY run_id, day"
    )


def system_summary_view_sql() -> str:
    """The ``system_summary`` view: per run and system of the floor, its energy, work and cost
    split, from the same definitions as ``per_system``."""
    names = ("it_mwh", "facility_mwh", "job_flop", "tokens", "capex_usd", "cooling_cost_usd")
    cols = [f"{_system_aggregate(n)} AS {n}" for n in names]
    cols.append(f"sum(cost_usd) - {FACTORY_AGGREGATES['cooling_cost_usd']} AS energy_cost_usd")
    cols.append("sum(fixed_opex_usd) + sum(water_cost_usd) AS other_cost_usd")
    cols.append(
        "sum(cost_usd) + sum(capex_usd) + sum(fixed_opex_usd) + sum(water_cost_usd) AS total_cost_usd"
    )
    return (
        "CREATE OR REPLACE VIEW system_summary AS SELECT run_id, min(system_id) AS system_id, system, "
        + ", ".join(cols)
        + f" FROM ({_system_rows_sql('', 'run_id, ')})"
        " JOIN (SELECT run_id, time_s, price_usd_per_mwh FROM factory_ts) USING (run_id, time_s)"
        " GROUP BY run_id, system"
    )


def run_summary_view_sql() -> str:
    """The ``run_summary`` view: the factory KPIs of every run in the file, from the same
    definitions as ``whole_run``."""
    cols = [f"{FACTORY_AGGREGATES[n]} AS {n}" for n in ("steps", "last_time_s", "facility_mwh", "it_mwh")]
    for name, (num, den, scale) in RATIOS.items():
        if name in ("pue", "wue_l_per_kwh", "cue_kg_per_kwh"):
            s = f" * {scale!r}" if scale != 1.0 else ""
            cols.append(f"({FACTORY_AGGREGATES[num]}) / nullif({FACTORY_AGGREGATES[den]}, 0){s} AS {name}")
    cols += [f"{FACTORY_AGGREGATES[n]} AS {n}" for n in ("cost_usd", "co2_t", "busy_fraction")]
    return (
        "CREATE OR REPLACE VIEW run_summary AS SELECT run_id, "
        + ", ".join(cols)
        + " FROM factory_ts GROUP BY run_id"
    )


# Aggregates that also hold for one system's rows (``system_ts``: the factory_ts columns of its
# share; the price comes from factory_ts), with the same definitions.
SYSTEM_AGGREGATES = (
    "facility_mwh",
    "it_mwh",
    "cooling_mwh",
    "loss_mwh",
    "water_l",
    "cost_usd",
    "co2_t",
    "tokens",
    "inference_j",
    "batch_j",
    "inference_cost_usd",
    "training_flop",
    "job_flop",
    "busy_fraction",
    "days",
    "chips",
    "chip_hours",
    "capex_usd",
    "fixed_opex_usd",
    "water_cost_usd",
    "cooling_cost_usd",
    "inference_fixed_usd",
)


# The system_ts columns the per-system aggregates read; all add up over a campus's halls.
_SYSTEM_SUMS = (
    "energy_j",
    "facility_power_w",
    "it_power_w",
    "cooling_power_w",
    "power_loss_w",
    "water_l",
    "cost_usd",
    "co2_kg",
    "tokens_per_s",
    "inference_power_w",
    "training_flops",
    "job_flops",
    "chips_busy",
    "chips_total",
    "capex_usd",
    "fixed_opex_usd",
    "water_cost_usd",
    "inference_chips",
)


def _system_rows_sql(where: str, keys: str = "") -> str:
    """One row per system and step: a campus records each system once per hall (``hall_id``),
    and a system's KPIs are over all its halls, so the halls' rows are added up first. The
    fixed costs that inference bears are taken per hall row (each hall's own chips), then
    added (``inference_fixed_row``)."""
    sums = ", ".join(f"sum({c}) AS {c}" for c in _SYSTEM_SUMS)
    return (
        f"SELECT {keys}time_s, system, min(system_id) AS system_id, count(*) AS halls, {sums}, "
        f"sum({_INFERENCE_FIXED_ROW}) AS inference_fixed_row "
        f"FROM system_ts {where} GROUP BY {keys}time_s, system"
    )


def _system_aggregate(name: str) -> str:
    """The per-system aggregate of ``name``: the factory's definition over the summed rows, but
    inference's fixed costs from the per-hall-row sums."""
    if name == "inference_fixed_usd":
        return "coalesce(sum(inference_fixed_row), 0)"
    return FACTORY_AGGREGATES[name]


def per_system(con: duckdb.DuckDBPyConnection, run_id: str) -> list[dict[str, Any]]:
    """The whole-run KPIs of each system on the floor (``system_ts``; one for a one-system hall,
    none in a file from before schema v5), with its share of the floor's work: ``job_share``
    (batch FLOP) and ``token_share`` (output tokens)."""
    have = con.sql(
        "SELECT count(*) FROM information_schema.tables WHERE table_name = 'system_ts'"
    ).fetchall()[0][0]
    if not have:
        return []
    sel = ",\n       ".join(f"{_system_aggregate(n)} AS {n}" for n in SYSTEM_AGGREGATES)
    q = (
        f"SELECT min(system_id) AS system_id, system, max(halls) AS halls,\n       {sel}\n"
        f"FROM ({_system_rows_sql('WHERE run_id = ?')})\n"
        "JOIN (SELECT time_s, price_usd_per_mwh FROM factory_ts WHERE run_id = ?) USING (time_s)\n"
        "GROUP BY system ORDER BY system_id"
    )
    rows: list[dict[str, Any]] = con.sql(q, params=[run_id, run_id]).to_arrow_table().to_pylist()
    flop = sum(r["job_flop"] or 0.0 for r in rows)
    tokens = sum(r["tokens"] or 0.0 for r in rows)
    for r in rows:
        for name, (plus, minus) in COST_SUMS.items():
            r[name] = sum(r[k] or 0.0 for k in plus) - sum(r[k] or 0.0 for k in minus)
        for name, (num, den, _) in RATIOS.items():
            if num in r and den in r:
                r[name] = ratio(r, name)
        r["job_share"] = (r["job_flop"] or 0.0) / flop if flop else None
        r["token_share"] = (r["tokens"] or 0.0) / tokens if tokens else None
        r["job_eflop"] = (r["job_flop"] or 0.0) / 1e18
    return rows


def run_kpis(con: duckdb.DuckDBPyConnection, run_id: str) -> dict[str, Any]:
    """``whole_run`` (with ``systems``: system -> its KPIs, ``per_system``) plus the display
    units of the comparison rows."""
    row = whole_run(con, run_id)
    row["training_eflop"] = (row["training_flop"] or 0.0) / 1e18
    row["job_eflop"] = (row["job_flop"] or 0.0) / 1e18
    row["peak_facility_mw"] = (row["peak_facility_w"] or 0.0) / 1e6
    row["facility_cap_mw"] = row["cap_min_w"] / 1e6 if row.get("cap_min_w") is not None else None
    sysrow = con.sql(
        "SELECT any_value(system), any_value(scenario_toml) FROM runs WHERE run_id = ?", params=[run_id]
    ).fetchall()
    row["overrides"] = recorded_overrides(sysrow[0][1] if sysrow else None)
    sysm = SYSTEMS.get(sysrow[0][0]) if sysrow and sysrow[0][0] else None
    row["cloud_usd_per_chip_hour"] = sysm.cloud_usd_per_chip_hour or None if sysm else None
    for key in ("wait_mean_s", "wait_p50_s", "wait_p90_s", "wait_p99_s"):
        row[key[:-2] + "_min"] = row[key] / 60.0 if row.get(key) is not None else None
    row["lost_eflop"] = row["lost_flop"] / 1e18 if row.get("lost_flop") is not None else None
    return row


def recorded_overrides(scenario_toml: str | None) -> list[str]:
    """The ``--set`` overrides a run was started with (``KEY=VALUE`` each, as typed), read from
    the comment lines its recorded scenario text starts with; [] for a scenario run as written."""
    lines = (scenario_toml or "").splitlines()
    if not lines or not lines[0].startswith(OVERRIDES_HEAD):
        return []
    out = []
    for line in lines[1:]:
        if not line.startswith(OVERRIDE_LINE):
            break
        out.append(line[len(OVERRIDE_LINE) :])
    return out
