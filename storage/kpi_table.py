"""The outputs' KPI names and units: one table, ``KPI_TABLE``.

``twin run --json`` and ``twin compare --json`` give its whole-run KPIs (``kpi_record``),
``twin compare``'s rows, ``twin plan``'s constraints and ``twin sweep``'s results.parquet columns
are its ``COMPARE_ROWS``; each system of a mixed floor gets its ``SYSTEM_KEYS``. What each KPI is
(its definition and SQL) is ``storage.kpis``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Kpi:
    """One KPI of a run's outputs: its one name (``key``) and unit, its label and number format in
    ``twin compare``'s table (``compare``: a row of it), and whether it is a whole-run KPI
    (``factory``; the others are per system only)."""

    key: str
    unit: str
    label: str
    fmt: str
    compare: bool = True
    factory: bool = True


# Every KPI that ``twin run --json``, ``twin compare`` (table and ``--json``), ``twin plan`` and
# ``twin sweep`` (results.parquet columns) give, each under this one name and in this one unit;
# the comparison table's rows in display order first.
KPI_TABLE: tuple[Kpi, ...] = (
    Kpi("chips", "chips", "chips", "{:,.0f}"),
    Kpi("days", "d", "simulated days", "{:,.2f}"),
    Kpi("facility_mwh", "MWh", "facility energy [MWh]", "{:,.1f}"),
    Kpi("it_mwh", "MWh", "IT energy [MWh]", "{:,.1f}"),
    Kpi("cooling_mwh", "MWh", "cooling energy [MWh]", "{:,.1f}"),
    Kpi("loss_mwh", "MWh", "power-chain losses [MWh]", "{:,.1f}"),
    Kpi("peak_facility_mw", "MW", "peak facility power [MW]", "{:,.3f}"),
    Kpi("pue", "-", "PUE", "{:.3f}"),
    Kpi("wue_l_per_kwh", "L/kWh", "WUE [L/kWh IT]", "{:.3f}"),
    Kpi("cue_kg_per_kwh", "kg/kWh", "CUE [kg CO2/kWh IT]", "{:.3f}"),
    Kpi("cost_usd", "USD", "electricity cost [$]", "{:,.0f}"),
    Kpi("total_cost_usd", "USD", "total cost of ownership [$]", "{:,.0f}"),
    Kpi("capex_usd", "USD", "  capital (recovery) [$]", "{:,.0f}"),
    Kpi("energy_cost_usd", "USD", "  energy (IT + losses) [$]", "{:,.0f}"),
    Kpi("cooling_cost_usd", "USD", "  cooling energy [$]", "{:,.0f}"),
    Kpi("other_cost_usd", "USD", "  maintenance, staff, water [$]", "{:,.0f}"),
    Kpi("usd_per_chip_hour", "USD/chip-h", "TCO per chip-hour [$]", "{:.3f}"),
    Kpi("cloud_usd_per_chip_hour", "USD/chip-h", "cloud on-demand per chip-hour [$] (ASM)", "{:.2f}"),
    Kpi("co2_t", "t", "CO2 [t]", "{:,.1f}"),
    Kpi("tokens", "tokens", "output tokens served", "{:.4g}"),
    Kpi("requests_dropped", "requests", "requests dropped", "{:.4g}"),
    Kpi("slo_attainment", "-", "inference SLO attainment [-]", "{:.3f}"),
    Kpi("j_per_token", "J/token", "energy per output token [J]", "{:.3f}"),
    Kpi("usd_per_mtok", "USD/M tokens", "electricity per M output tokens [$]", "{:.4f}"),
    Kpi("usd_per_mtok_all_in", "USD/M tokens", "TCO per M output tokens, all-in [$]", "{:.4f}"),
    Kpi("input_tokens", "tokens", "input (prompt) tokens served", "{:.4g}"),
    Kpi("usd_per_m_input_tokens", "USD/M tokens", "TCO per M input tokens (prefill time) [$]", "{:.4f}"),
    Kpi("usd_per_m_output_tokens", "USD/M tokens", "TCO per M output tokens (decode time) [$]", "{:.4f}"),
    Kpi("training_eflop", "EFLOP", "training delivered [EFLOP]", "{:,.4g}"),
    Kpi("job_eflop", "EFLOP", "batch work delivered [EFLOP]", "{:,.4g}"),
    Kpi("jobs_done", "jobs", "batch jobs done", "{:,.0f}"),
    Kpi("kwh_per_eflop", "kWh/EFLOP", "batch energy per EFLOP [kWh]", "{:,.3f}"),
    Kpi("usd_per_eflop", "USD/EFLOP", "batch TCO per EFLOP [$]", "{:,.2f}"),
    Kpi("usd_per_pretrain_job", "USD/job", "batch TCO per pre-training job's work [$]", "{:,.0f}"),
    Kpi("wait_mean_min", "min", "mean wait of started jobs [min]", "{:,.1f}"),
    Kpi("wait_p90_min", "min", "p90 wait of started jobs [min]", "{:,.1f}"),
    Kpi("jobs_queued_at_end", "jobs", "batch jobs still queued at the end", "{:,.0f}"),
    Kpi("oldest_queued_wait_h", "h", "longest wait of a job still queued [h]", "{:,.1f}"),
    Kpi("goodput", "-", "training goodput [-]", "{:.3f}"),
    Kpi("failures", "failures", "failures", "{:,.0f}"),
    Kpi("preemptions", "preemptions", "preemptions", "{:,.0f}"),
    Kpi("busy_fraction", "-", "busy chips [-]", "{:.3f}"),
    Kpi("throttled_hours", "h", "hours with throttling", "{:,.2f}"),
    Kpi("throttled_chip_hours", "chip-h", "throttled chip-hours", "{:,.0f}"),
    Kpi("cap_hit_share", "-", "cap-hit share of time (cap or heat) [-]", "{:.4f}"),
    Kpi("facility_cap_mw", "MW", "lowest facility power cap [MW]", "{:,.3f}"),
    Kpi("cap_hours", "h", "hours under a facility cap", "{:,.2f}"),
    Kpi("cap_bound_hours", "h", "hours the facility cap slowed chips", "{:,.2f}"),
    Kpi("cap_exceeded_hours", "h", "hours over the facility cap (not held)", "{:,.2f}"),
    Kpi("thermal_trips", "UltraServers", "thermal trips (UltraServers powered off)", "{:,.0f}"),
    Kpi("tripped_ultraserver_h", "UltraServer-h", "tripped UltraServer-hours", "{:,.2f}"),
    Kpi("unmet_heat_mwh", "MWh", "unrejected heat [MWh]", "{:,.2f}"),
    Kpi("max_chip_temp_c", "°C", "hottest chip [°C]", "{:.1f}"),
    # Beyond the comparison table (``twin run --json``, ``twin compare --json``).
    Kpi("steps", "steps", "steps", "{:,.0f}", compare=False),
    Kpi("water_l", "L", "site water [L]", "{:,.0f}", compare=False),
    Kpi("fixed_opex_usd", "USD", "maintenance and staff [$]", "{:,.0f}", compare=False),
    Kpi("water_cost_usd", "USD", "water [$]", "{:,.0f}", compare=False),
    Kpi("inference_cost_usd", "USD", "inference electricity cost [$]", "{:,.0f}", compare=False),
    Kpi("inference_total_usd", "USD", "inference TCO [$]", "{:,.0f}", compare=False),
    Kpi("batch_cost_usd", "USD", "batch TCO [$]", "{:,.0f}", compare=False),
    Kpi("chip_hours", "chip-h", "chip-hours", "{:,.0f}", compare=False),
    Kpi("mean_queue", "jobs", "mean queue [jobs]", "{:,.1f}", compare=False),
    Kpi("mean_fragmentation", "-", "mean fragmentation [-]", "{:.3f}", compare=False),
    Kpi("tokens_per_day", "tokens/d", "tokens per day", "{:.4g}", compare=False),
    Kpi("input_tokens_per_day", "tokens/d", "input tokens per day", "{:.4g}", compare=False),
    Kpi("requests", "requests", "requests arrived", "{:.4g}", compare=False),
    Kpi("requests_served", "requests", "requests served", "{:.4g}", compare=False),
    Kpi("ttft_p50_s", "s", "TTFT p50 [s]", "{:.3f}", compare=False),
    Kpi("ttft_p99_s", "s", "TTFT p99 [s]", "{:.3f}", compare=False),
    Kpi("tpot_p50_s", "s", "TPOT p50 [s]", "{:.4f}", compare=False),
    Kpi("tpot_p99_s", "s", "TPOT p99 [s]", "{:.4f}", compare=False),
    Kpi("jobs_submitted", "jobs", "batch jobs submitted", "{:,.0f}", compare=False),
    Kpi("wait_p50_min", "min", "p50 wait of started jobs [min]", "{:,.1f}", compare=False),
    Kpi("wait_p99_min", "min", "p99 wait of started jobs [min]", "{:,.1f}", compare=False),
    Kpi("effective_training_chip_h", "chip-h", "training chip-hours kept [chip-h]", "{:,.0f}", compare=False),
    Kpi("lost_eflop", "EFLOP", "work lost to interruptions [EFLOP]", "{:,.4g}", compare=False),
    Kpi("lost_fraction", "-", "share of work lost [-]", "{:.3f}", compare=False),
    Kpi("restarts", "restarts", "restarts", "{:,.0f}", compare=False),
    Kpi("interruptions", "interruptions", "interruptions", "{:,.0f}", compare=False),
    Kpi("failures_injected", "failures", "failures injected", "{:,.0f}", compare=False),
    # Per system of a mixed floor only (``systems``).
    Kpi("job_share", "-", "share of batch work [-]", "{:.3f}", compare=False, factory=False),
    Kpi("token_share", "-", "share of tokens [-]", "{:.3f}", compare=False, factory=False),
)
KPIS_BY_KEY: dict[str, Kpi] = {k.key: k for k in KPI_TABLE}
# The whole-run KPIs (``kpi_record``): ``twin run --json`` and ``twin compare --json``.
RUN_KEYS: tuple[str, ...] = tuple(k.key for k in KPI_TABLE if k.factory)

# (key, label, format) in display order for ``twin compare`` (and the KPIs of a sweep's rows).
COMPARE_ROWS: list[tuple[str, str, str]] = [(k.key, k.label, k.fmt) for k in KPI_TABLE if k.compare]

# The KPIs of each system of a mixed floor, in display order (``twin compare``, ``systems``).
SYSTEM_KEYS: tuple[str, ...] = (
    "chips",
    "job_share",
    "job_eflop",
    "token_share",
    "tokens",
    "busy_fraction",
    "it_mwh",
    "total_cost_usd",
    "capex_usd",
    "energy_cost_usd",
    "cooling_cost_usd",
    "other_cost_usd",
    "usd_per_eflop",
    "kwh_per_eflop",
    "usd_per_mtok_all_in",
    "j_per_token",
)
# (key, label, format) of each system's rows in ``twin compare`` (mixed floors).
SYSTEM_ROWS: list[tuple[str, str, str]] = [(k, KPIS_BY_KEY[k].label, KPIS_BY_KEY[k].fmt) for k in SYSTEM_KEYS]


def kpi_record(row: dict[str, Any]) -> dict[str, Any]:
    """The KPIs of ``run_kpis``'s row as the outputs give them: the ``--set`` overrides the run was
    started with (``overrides``), the whole-run KPIs of ``KPI_TABLE`` (``RUN_KEYS``), then
    ``systems``: each system's ``SYSTEM_KEYS``."""
    out: dict[str, Any] = {"overrides": row.get("overrides") or []}
    out.update({k: row.get(k) for k in RUN_KEYS})
    out["systems"] = {
        name: {k: r.get(k) for k in SYSTEM_KEYS} for name, r in (row.get("systems") or {}).items()
    }
    return out
