"""Whole-run KPIs: the one definition, used by the run summary (``twin run``, ``--json``), the
``run_summary`` view, ``twin compare`` and whoever else needs a run's totals.

Energies come from per-step energy so any step size works: a step lasts
``dt = energy_j / facility_power_w``, and every rate is integrated over it. Ratios are defined
once (``RATIOS``) and rendered both as Python (``whole_run``) and as SQL (the view).

* PUE = facility energy / IT energy (The Green Grid).
* WUE = site water / IT energy [L/kWh] (The Green Grid).
* CUE = CO2 of the facility's energy / IT energy [kg/kWh] (The Green Grid; t/MWh = kg/kWh).
* J per token = facility power attributed to inference replicas, integrated, / output tokens.
* $ per M tokens = the same energy at each step's price / output tokens x 1e6.
* Cost of ownership (``twin.tco``): capital recovery, maintenance and staff, and water are
  recorded per step; total = electricity + capital + maintenance/staff + water. The split:
  capital / energy (IT and power-chain losses at each step's price) / cooling (the plant's power
  at each step's price) / other (maintenance, staff, water).
* $ per chip-hour = total cost / chip-hours of the hall (idle chips cost too).
* $ per M tokens all-in = inference's electricity + the fixed costs (capital, maintenance, staff,
  water) in proportion to the chips its replicas hold, / output tokens x 1e6 (on a mixed floor,
  each system's own fixed costs by the share of its chips the replicas hold).
* kWh per EFLOP = facility energy not attributed to inference / FLOP delivered to all batch jobs.
* $ per EFLOP = the rest of the total (batch work's share) / FLOP delivered to all batch jobs x 1e18;
  $ per pre-training job = $ per EFLOP x the mean work of a finished pre-training job.
* goodput = training progress kept / chip time held (chip-weighted), pre-training + fine-tuning.
* waits over the batch jobs that started (every wait, re-queues after interruptions included).
* SLO attainment = requests served within both SLOs / requests decided (served + dropped).
* Per system (mixed floors, ``per_system``): the same definitions over the system's rows of
  ``system_ts`` (its IT and work; the plant's and power chain's power and cost shared in
  proportion to IT power), and its share of the floor's batch FLOP and tokens.
"""

from __future__ import annotations

from typing import Any

import duckdb

from twin.catalog import SYSTEMS

_DT = "(energy_j / facility_power_w)"

# Fixed costs (capital, maintenance and staff, water) of one row borne by inference: the share of
# the row's chips its replicas hold.
_INFERENCE_FIXED_ROW = (
    "(capex_usd + fixed_opex_usd + water_cost_usd) * inference_chips / nullif(chips_total, 0)"
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
    "inference_j": f"sum(inference_power_w * {_DT})",
    "batch_j": f"sum(energy_j - inference_power_w * {_DT})",
    "inference_cost_usd": f"sum(inference_power_w * {_DT} / 3.6e9 * price_usd_per_mwh)",
    "training_flop": f"sum(training_flops * {_DT})",
    "job_flop": f"sum(job_flops * {_DT})",
    "requests_dropped": f"sum(requests_dropped_per_s * {_DT})",
    "throttled_hours": f"sum(CASE WHEN throttled_chips > 0 THEN {_DT} ELSE 0 END) / 3600",
    "throttled_chip_hours": f"sum(throttled_chips * {_DT}) / 3600",
    "unmet_heat_mwh": f"sum(unmet_heat_w * {_DT}) / 3.6e9",
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
    "usd_per_eflop": ("batch_cost_usd", "job_flop", 1e18),
    "kwh_per_eflop": ("batch_j", "job_flop", 1e18 / 3.6e6),
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
    d = row.get(den)
    return row[num] / d * scale if d else None


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
    for name in RATIOS:
        row[name] = ratio(row, name)
    for q in _WORK_Q.values():
        row.update(con.sql(q, params=[run_id]).to_arrow_table().to_pylist()[0])
    eflop, per_job = row["usd_per_eflop"], row["pretrain_job_flop"]
    row["usd_per_pretrain_job"] = eflop * per_job / 1e18 if eflop is not None and per_job else None
    return row


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


# (key, label, format) in display order for ``twin compare``.
COMPARE_ROWS: list[tuple[str, str, str]] = [
    ("chips", "chips", "{:,.0f}"),
    ("days", "simulated days", "{:,.2f}"),
    ("facility_mwh", "facility energy [MWh]", "{:,.1f}"),
    ("it_mwh", "IT energy [MWh]", "{:,.1f}"),
    ("cooling_mwh", "cooling energy [MWh]", "{:,.1f}"),
    ("loss_mwh", "power-chain losses [MWh]", "{:,.1f}"),
    ("peak_facility_mw", "peak facility power [MW]", "{:,.3f}"),
    ("pue", "PUE", "{:.3f}"),
    ("wue_l_per_kwh", "WUE [L/kWh IT]", "{:.3f}"),
    ("cue_kg_per_kwh", "CUE [kg CO2/kWh IT]", "{:.3f}"),
    ("cost_usd", "electricity cost [$]", "{:,.0f}"),
    ("total_cost_usd", "total cost of ownership [$]", "{:,.0f}"),
    ("capex_usd", "  capital (recovery) [$]", "{:,.0f}"),
    ("energy_cost_usd", "  energy (IT + losses) [$]", "{:,.0f}"),
    ("cooling_cost_usd", "  cooling energy [$]", "{:,.0f}"),
    ("other_cost_usd", "  maintenance, staff, water [$]", "{:,.0f}"),
    ("usd_per_chip_hour", "TCO per chip-hour [$]", "{:.3f}"),
    ("cloud_usd_per_chip_hour", "cloud on-demand per chip-hour [$] (ASM)", "{:.2f}"),
    ("co2_t", "CO2 [t]", "{:,.1f}"),
    # Inference: the work delivered, its service level, then per unit of work.
    ("tokens", "tokens served", "{:.4g}"),
    ("requests_dropped", "requests dropped", "{:.4g}"),
    ("slo_attainment", "inference SLO attainment [-]", "{:.3f}"),
    ("j_per_token", "energy per token [J]", "{:.3f}"),
    ("usd_per_mtok", "electricity cost per M tokens [$]", "{:.4f}"),
    ("usd_per_mtok_all_in", "TCO per M tokens (all-in) [$]", "{:.4f}"),
    # Batch work: the work delivered, then per unit of work.
    ("training_eflop", "training delivered [EFLOP]", "{:,.4g}"),
    ("job_eflop", "batch work delivered [EFLOP]", "{:,.4g}"),
    ("jobs_done", "batch jobs done", "{:,.0f}"),
    ("kwh_per_eflop", "batch energy per EFLOP [kWh]", "{:,.3f}"),
    ("usd_per_eflop", "batch TCO per EFLOP [$]", "{:,.2f}"),
    ("usd_per_pretrain_job", "batch TCO per pre-training job's work [$]", "{:,.0f}"),
    ("wait_mean_min", "mean wait of started jobs [min]", "{:,.1f}"),
    ("wait_p90_min", "p90 wait of started jobs [min]", "{:,.1f}"),
    ("goodput", "training goodput [-]", "{:.3f}"),
    ("failures", "failures", "{:,.0f}"),
    ("preemptions", "preemptions", "{:,.0f}"),
    ("busy_fraction", "busy chips [-]", "{:.3f}"),
    ("throttled_hours", "hours with throttling", "{:,.2f}"),
    ("throttled_chip_hours", "throttled chip-hours", "{:,.0f}"),
    ("unmet_heat_mwh", "unrejected heat [MWh]", "{:,.2f}"),
    ("max_chip_temp_c", "hottest chip [°C]", "{:.1f}"),
]


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


# (key, label, format) of each system's rows in ``twin compare`` (mixed floors).
SYSTEM_ROWS: list[tuple[str, str, str]] = [
    ("chips", "chips", "{:,.0f}"),
    ("job_share", "share of batch work [-]", "{:.3f}"),
    ("job_eflop", "batch work [EFLOP]", "{:,.4g}"),
    ("token_share", "share of tokens [-]", "{:.3f}"),
    ("tokens", "tokens served", "{:.4g}"),
    ("busy_fraction", "busy chips [-]", "{:.3f}"),
    ("it_mwh", "IT energy [MWh]", "{:,.1f}"),
    ("total_cost_usd", "total cost of ownership [$]", "{:,.0f}"),
    ("capex_usd", "  capital (recovery) [$]", "{:,.0f}"),
    ("energy_cost_usd", "  energy (IT + losses) [$]", "{:,.0f}"),
    ("cooling_cost_usd", "  cooling energy [$]", "{:,.0f}"),
    ("other_cost_usd", "  maintenance, staff, water [$]", "{:,.0f}"),
    ("usd_per_eflop", "batch TCO per EFLOP [$]", "{:,.2f}"),
    ("kwh_per_eflop", "batch energy per EFLOP [kWh]", "{:,.3f}"),
    ("usd_per_mtok_all_in", "TCO per M tokens (all-in) [$]", "{:.4f}"),
    ("j_per_token", "energy per token [J]", "{:.3f}"),
]


def run_kpis(con: duckdb.DuckDBPyConnection, run_id: str) -> dict[str, Any]:
    """``whole_run`` (with ``systems``: system -> its KPIs, ``per_system``) plus the display
    units of the comparison rows."""
    row = whole_run(con, run_id)
    row["training_eflop"] = (row["training_flop"] or 0.0) / 1e18
    row["job_eflop"] = (row["job_flop"] or 0.0) / 1e18
    row["peak_facility_mw"] = (row["peak_facility_w"] or 0.0) / 1e6
    sysrow = con.sql("SELECT any_value(system) FROM runs WHERE run_id = ?", params=[run_id]).fetchall()
    sysm = SYSTEMS.get(sysrow[0][0]) if sysrow and sysrow[0][0] else None
    row["cloud_usd_per_chip_hour"] = sysm.cloud_usd_per_chip_hour or None if sysm else None
    for key in ("wait_mean_s", "wait_p90_s"):
        row[key[:-2] + "_min"] = row[key] / 60.0 if row.get(key) is not None else None
    return row
